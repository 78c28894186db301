"""RocketMQ 5's gRPC protocol on a broker (`broker serve --grpc-port PORT`): a RocketMQ
application's own producer (the official clients: Java, Go, Python, ...) sends to
floodgate unchanged.

    server = GrpcFront(broker, bind, port); await server.start(); ...; await server.stop()

Served: QueryRoute (this broker's queues of the topic, its gRPC endpoint as their
broker's), Heartbeat, Telemetry (the client's settings answered, as it waits for them
before it sends), SendMessage, ReceiveMessage, AckMessage and ChangeInvisibleDuration
(a SimpleConsumer's pop: grpc_front.pop), EndTransaction (grpc_front.transactions)
and NotifyClientTermination. Every other RPC
of the service answers UNIMPLEMENTED naming it, never a hang; bytes that are not the
RPC's message, INVALID_ARGUMENT.

A send goes through the broker's own SEND path (`SendOps.send`, the frame a native
producer sends, built here): the same checks, flow control, idempotence table,
replication wait and trace, so a gRPC send is answered when a native one would be.
Refusals map to RocketMQ's codes so its client retries as it does against RocketMQ
(flow control -> TOO_MANY_REQUESTS, no permission -> FORBIDDEN, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import zlib

import grpc
from google.protobuf import duration_pb2, timestamp_pb2

from broker_core import protocol as p
from broker_core.errors import BrokerError
from broker_core.grpc_front import dead_letters
from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.grpc_front.access import GrpcAccess
from broker_core.grpc_front.cluster_routes import ClusterRoutes
from broker_core.grpc_front.codes import CODES
from broker_core.grpc_front.handlers import Handlers, Malformed
from broker_core.grpc_front.pop import Pops
from broker_core.grpc_front.pop_messages import as_pb, tag_filter
from broker_core.grpc_front.server_options import server_options
from broker_core.grpc_front.tracing import GrpcTracer, born, client_of
from broker_core.grpc_front.transactions import GrpcTransactions, half_properties
from broker_core.protocol import Code
from broker_core.protocol.codecs import OutMessage, decode_send_answer, encode_send
from broker_core.protocol.delay import LEVELS_S
from broker_core.protocol.system_topics import RETRY_FIRST_LEVEL
from broker_core.protocol.transactions import tx_id
from broker_core.trace.records import PROP_TRACE

log = logging.getLogger("floodgate.grpc")

LONG_POLL_S = 20  # a PushConsumer's receive waits this long for a message (RocketMQ: 30)
ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


def ok(message: str = "OK") -> pb.Status:
    return pb.Status(code=pb.OK, message=message)


class GrpcFront:
    def __init__(self, broker, bind: str, port: int, routes_file: str | None = None,
                 tls=None) -> None:
        """`routes_file`: a cluster file whose groups' masters a route names
        (grpc_front.cluster_routes; None: this broker, at `bind`, or at this machine's
        name when bound to every address). `tls`: the broker's config, when its ports
        speak TLS (its certificate; clients' verified against its CA if it asks)."""
        self.broker, self.bind, self.port = broker, bind, port
        self.host = socket.gethostname() if bind in ("", "0.0.0.0") else bind
        self.server: grpc.aio.Server | None = None
        self._rid = 0
        self._turns: dict[str, int] = {}
        self.pops = broker.pops = Pops(broker)  # (the broker's tables carry it to replicas)
        self.routes = ClusterRoutes(routes_file) if routes_file else None
        self.tx = GrpcTransactions(broker)
        self.trace = GrpcTracer(broker, broker.config.grpc_trace_rate)
        self.pops.on_ack = self.trace.acked
        self.guard = GrpcAccess(broker.access)
        self.credentials = _server_credentials(tls) if tls is not None else None

    async def start(self) -> None:
        self.server = grpc.aio.server(options=server_options(
            self.broker.store.config.max_message_bytes))
        self.server.add_generic_rpc_handlers((Handlers(self),))
        addr = f"{self.bind}:{self.port}"
        bound = self.server.add_insecure_port(addr) if self.credentials is None else \
            self.server.add_secure_port(addr, self.credentials)
        if not bound:
            raise OSError(f"gRPC port {self.port} could not be bound on {self.bind}")
        await self.server.start()
        log.info("gRPC front end (RocketMQ 5 clients) on %s:%d%s", self.bind, self.port,
                 "" if self.credentials is None else ", TLS")

    async def stop(self) -> None:
        self.tx.close()
        if self.server is not None:
            await self.server.stop(grace=1.0)

    # -- the RPCs ------------------------------------------------------------------------
    async def query_route(self, req: pb.QueryRouteRequest, _ctx) -> pb.QueryRouteResponse:
        topic = req.topic.name
        if self.routes is not None:
            try:
                masters = await asyncio.get_running_loop().run_in_executor(
                    None, self.routes.route, topic)
            except BrokerError as exc:
                log.warning("gRPC route from the cluster file: %s", exc)
                masters = []
            if masters:
                return _route(req.topic, [(g, m.grpc, n) for g, m, n in masters])
        try:
            queues = self.broker.topics.get(topic, create=True)
        except ValueError as exc:
            return pb.QueryRouteResponse(status=pb.Status(code=pb.ILLEGAL_TOPIC,
                                                          message=str(exc)))
        if not queues:
            return pb.QueryRouteResponse(status=pb.Status(
                code=pb.TOPIC_NOT_FOUND, message=f"no topic {topic!r} on "
                f"{self.broker.config.name} (create it: floodgate topic create)"))
        return _route(req.topic, [(self.broker.config.name, f"{self.host}:{self.port}",
                                   queues)])

    async def query_assignment(self, req: pb.QueryAssignmentRequest, ctx
                               ) -> pb.QueryAssignmentResponse:
        """A PushConsumer's share: every queue of the topic's route. Pop lets consumers of
        a group read one queue together, so none is given to one consumer alone (as
        RocketMQ's proxy assigns in pop mode)."""
        route = await self.query_route(pb.QueryRouteRequest(topic=req.topic), ctx)
        return pb.QueryAssignmentResponse(status=route.status, assignments=[
            pb.Assignment(message_queue=q) for q in route.message_queues])

    async def forward_to_dlq(self, req: pb.ForwardMessageToDeadLetterQueueRequest, _ctx
                             ) -> pb.ForwardMessageToDeadLetterQueueResponse:
        return await dead_letters.forward(self, req)

    async def heartbeat(self, _req, _ctx) -> pb.HeartbeatResponse:
        return pb.HeartbeatResponse(status=ok())

    async def notify_termination(self, _req, _ctx) -> pb.NotifyClientTerminationResponse:
        return pb.NotifyClientTerminationResponse(status=ok())

    async def telemetry(self, requests, _ctx):
        """Each settings the client reports is answered with what this broker holds it
        to (its body limit); the client starts once the first answer arrives. A
        producer's stream also carries the checks of its topics' halves while it is
        open (grpc_front.transactions)."""
        async for answer in self.tx.stream(requests, self._settings):
            yield answer

    def _settings(self, cmd) -> pb.Settings | None:
        if isinstance(cmd, Malformed) or cmd.WhichOneof("command") != "settings":
            return None
        settings = pb.Settings()
        settings.CopyFrom(cmd.settings)
        if settings.WhichOneof("pub_sub") == "publishing":
            settings.publishing.max_body_size = self.broker.store.config.max_message_bytes
            settings.publishing.validate_message_type = True
        elif settings.WhichOneof("pub_sub") == "subscription":  # (a PushConsumer's receives
            sub = settings.subscription                          # long-poll this long)
            if not sub.HasField("long_polling_timeout"):
                sub.long_polling_timeout.seconds = LONG_POLL_S
            if not sub.HasField("receive_batch_size"):
                sub.receive_batch_size = 32
            # a failed message comes back as a native retry does (10 s, 30 s, 1 m, ...),
            # and past the deliveries allowed goes to the dead-letter queue (receive)
            settings.backoff_policy.max_attempts = self.broker.config.grpc_max_deliveries
            settings.backoff_policy.customized_backoff.next.extend(
                duration_pb2.Duration(seconds=int(s)) for s in LEVELS_S[RETRY_FIRST_LEVEL - 1:])
        return settings

    async def send_message(self, req: pb.SendMessageRequest, ctx) -> pb.SendMessageResponse:
        entries = [await self._send_one(m, ctx) for m in req.messages]
        worst = next((e.status for e in entries if e.status.code != pb.OK), ok())
        return pb.SendMessageResponse(status=worst, entries=entries)

    async def receive_message(self, req: pb.ReceiveMessageRequest, ctx):
        """Pop: the queue's messages not handed out (or whose invisibility ran out),
        invisible to the group for `invisible_duration`; waiting up to the long-polling
        timeout for one to arrive. The answer: a status, then the messages."""
        group, topic, qid = req.group.name, req.message_queue.topic.name, req.message_queue.id
        received = time.perf_counter()
        if not group:
            yield pb.ReceiveMessageResponse(status=pb.Status(
                code=pb.ILLEGAL_CONSUMER_GROUP, message="a consumer group is required"))
            return
        invisible = (req.invisible_duration.ToMilliseconds() / 1000
                     if req.HasField("invisible_duration") else 30.0)
        wait = (min(req.long_polling_timeout.ToMilliseconds() / 1000, 30.0)
                if req.HasField("long_polling_timeout") else 0.0)
        if invisible <= 0:
            yield pb.ReceiveMessageResponse(status=pb.Status(
                code=pb.ILLEGAL_INVISIBLE_TIME, message="invisible_duration must be > 0"))
            return
        wanted = tag_filter(req.filter_expression)
        batch = max(1, min(req.batch_size or 16, 64))
        loop = asyncio.get_running_loop()
        deadline, event = loop.time() + wait, asyncio.Event()
        events = self.broker.pulls.waiters.setdefault(topic, set())
        events.add(event)
        try:
            while True:
                event.clear()
                taken = []
                for m, receipt, attempt in self.pops.take(group, topic, qid, batch, invisible):
                    if attempt > self.broker.config.grpc_max_deliveries:
                        if await dead_letters.dead_letter(self, group, m):
                            self.pops.ack(group, topic, receipt)
                    elif wanted(m.tags):
                        taken.append((m, receipt, attempt))
                    else:  # not this group's tag: passed over, as RocketMQ filters
                        self.pops.ack(group, topic, receipt)
                left = deadline - loop.time()
                if taken or left <= 0:
                    break
                back = self.pops.next_visible(group, topic, qid)  # (a message held by
                if back is not None:  # another: its invisibility may run out first)
                    left = min(left, max(0.0, back - self.pops.clock()) + 0.001)
                self.pops.waiting[group] += 1  # (offsets show says how many wait)
                try:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(event.wait(), left)
                finally:
                    self.pops.waiting[group] -= 1
        finally:
            events.discard(event)
            if not events:
                self.broker.pulls.waiters.pop(topic, None)
        if not taken:
            yield pb.ReceiveMessageResponse(status=pb.Status(code=pb.MESSAGE_NOT_FOUND,
                                                             message="no new message"))
            return
        self.trace.delivered(group, client_of(ctx), taken)
        # counted as the native pull is (its messages out, the wait included)
        self.broker.recorder.record("pull", time.perf_counter() - received, len(taken),
                                    sum(len(m.body) for m, _r, _a in taken))
        yield pb.ReceiveMessageResponse(status=ok())
        for m, receipt, attempt in taken:
            yield pb.ReceiveMessageResponse(message=as_pb(m, receipt, attempt, invisible,
                                                          self.broker.config.name))
        # (when it was handed over: a PushConsumer's client measures its delivery by it)
        yield pb.ReceiveMessageResponse(delivery_timestamp=timestamp_pb2.Timestamp(
            seconds=int(time.time()), nanos=int(time.time() % 1 * 1e9)))

    async def ack_message(self, req: pb.AckMessageRequest, _ctx) -> pb.AckMessageResponse:
        entries = []
        for e in req.entries:
            done = self.pops.ack(req.group.name, req.topic.name, e.receipt_handle)
            entries.append(pb.AckMessageResultEntry(
                message_id=e.message_id, receipt_handle=e.receipt_handle,
                status=ok() if done else pb.Status(
                    code=pb.INVALID_RECEIPT_HANDLE,
                    message="acknowledged already, or handed out again since")))
        worst = next((e.status for e in entries if e.status.code != pb.OK), ok())
        return pb.AckMessageResponse(status=worst, entries=entries)

    async def change_invisible(self, req: pb.ChangeInvisibleDurationRequest, _ctx
                               ) -> pb.ChangeInvisibleDurationResponse:
        seconds = req.invisible_duration.ToMilliseconds() / 1000
        if seconds <= 0:
            return pb.ChangeInvisibleDurationResponse(status=pb.Status(
                code=pb.ILLEGAL_INVISIBLE_TIME, message="invisible_duration must be > 0"))
        group, topic, receipt = req.group.name, req.topic.name, req.receipt_handle
        if (self.pops.attempt(group, topic, receipt) or 0) >= \
                self.broker.config.grpc_max_deliveries:  # failed its last delivery: no wait
            answer = await self.forward_to_dlq(pb.ForwardMessageToDeadLetterQueueRequest(
                group=req.group, topic=req.topic, receipt_handle=receipt), None)
            return pb.ChangeInvisibleDurationResponse(status=answer.status,
                                                      receipt_handle=receipt)
        new = self.pops.change(group, topic, receipt, seconds)
        if new is None:
            return pb.ChangeInvisibleDurationResponse(status=pb.Status(
                code=pb.INVALID_RECEIPT_HANDLE,
                message="acknowledged already, or handed out again since"))
        for event in self.broker.pulls.waiters.get(topic, ()):  # a receive waiting there
            event.set()  # looks again at when a held message is visible (sooner, now)
        return pb.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=new)

    # -- a send ----------------------------------------------------------------------------
    async def _send_one(self, m: pb.Message, ctx) -> pb.SendResultEntry:
        sp = m.system_properties
        mid = sp.message_id
        try:
            props = self._properties(m)
        except ValueError as exc:
            return pb.SendResultEntry(status=pb.Status(code=pb.ILLEGAL_DELIVERY_TIME,
                                                       message=str(exc)), message_id=mid)
        traced = self.trace.traces(sp.trace_context)
        if traced:
            props[PROP_TRACE] = "1"
        half = sp.message_type == pb.TRANSACTION
        if half:
            half_properties(m.topic.name, props)
        queue = self._queue(m.topic.name, sp.message_group if sp.HasField("message_group")
                            else None)
        tag, keys = sp.tag if sp.HasField("tag") else "", " ".join(sp.keys)
        body = encode_send(m.topic.name, queue, OutMessage(m.body, tag, keys, props))
        born_ms, began = born(sp.born_timestamp), time.perf_counter()
        code, answer = await self.native_send(body)
        mapped = CODES.get(code, pb.INTERNAL_SERVER_ERROR)
        if mapped != pb.OK:
            why = answer.decode("utf-8", "replace") or Code(code).name
            if traced:
                self.trace.refused(m.topic.name, tag, keys, client_of(ctx), born_ms, len(m.body),
                                   pb.Code.Name(mapped), why)
            return pb.SendResultEntry(status=pb.Status(code=mapped, message=why),
                                      message_id=mid)
        stored = decode_send_answer(answer)
        if traced:
            self.trace.sent(stored, keys, client_of(ctx), born_ms, time.perf_counter() - began)
        queue_offset = stored[1]
        if not half:
            return pb.SendResultEntry(status=ok(), message_id=mid, offset=queue_offset)
        self.tx.stored_half()  # (its check falls due: grpc_front.transactions)
        return pb.SendResultEntry(status=ok(), message_id=mid, offset=queue_offset,
                                  transaction_id=tx_id(self.broker.config.name, queue_offset))

    def _queue(self, topic: str, group: str | None) -> int:
        """As RocketMQ's proxy picks: a FIFO message group's queue by its hash (the group's
        messages in one queue, in order), others in turn."""
        try:
            n = self.broker.topics.get(topic, create=True) or 1
        except ValueError:
            return 0  # (the send path refuses the topic, in words)
        if group is not None:
            return zlib.crc32(group.encode()) % n
        turn = self._turns[topic] = self._turns.get(topic, -1) + 1
        return turn % n

    def _properties(self, m: pb.Message) -> dict[str, str]:
        """The message's own properties and what RocketMQ 5 says in its system ones:
        its id (UNIQ_KEY, as RocketMQ stores it) and its delivery time (one of the
        broker's delay levels: floodgate keeps no timer wheel, protocol.delay)."""
        sp = m.system_properties
        props = dict(m.user_properties)
        if sp.message_id:
            props["UNIQ_KEY"] = sp.message_id
        if sp.HasField("message_group"):
            props["MESSAGE_GROUP"] = sp.message_group
        if sp.HasField("delivery_timestamp"):
            wait = sp.delivery_timestamp.ToMilliseconds() / 1000 - time.time()
            if wait > 0:  # never delivered before it is due; late by a second (or a tenth)
                level = next((i + 1 for i, s in enumerate(LEVELS_S) if s >= wait), None)
                if level is None or LEVELS_S[level - 1] - wait > max(1.0, 0.1 * wait):
                    raise ValueError(
                        f"a delivery {wait:.1f} s ahead is not one of this broker's delay "
                        f"levels ({', '.join(f'{s} s' for s in LEVELS_S)})")
                props["DELAY"] = str(level)
        return props

    async def native_send(self, body: bytes) -> tuple[int, bytes]:
        """The broker's SEND path, as a native producer's frame takes it: (code, the
        answer's body)."""
        self._rid = (self._rid + 1) & 0xFFFFFFFF
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def reply(frame) -> None:
            if not fut.done():
                fut.set_result(frame[0] if isinstance(frame, list) else frame)

        frame = self.broker.sends.send(self._rid, body, time.perf_counter(), reply)
        frame = frame if frame is not None else await fut
        h = p.decode_header(frame)
        return h.code, bytes(frame[p.HEADER_SIZE:])


def _server_credentials(config) -> grpc.ServerCredentials:
    verify = bool(config.tls_verify_clients and config.tls_ca)
    return grpc.ssl_server_credentials(
        [(config.tls_key.read_bytes(), config.tls_cert.read_bytes())],
        root_certificates=config.tls_ca.read_bytes() if verify else None,
        require_client_auth=verify)


def _route(topic: pb.Resource, brokers: list[tuple[str, str, int]]) -> pb.QueryRouteResponse:
    """Each (broker name, its gRPC host:port, the topic's queues there) as RocketMQ lists
    queues: read-write, every message type floodgate takes."""
    queues = []
    for name, addr, n in brokers:
        host, _, port = addr.rpartition(":")
        broker = pb.Broker(name=name, id=0, endpoints=pb.Endpoints(
            scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))]))
        queues += [pb.MessageQueue(topic=topic, id=q, permission=pb.READ_WRITE, broker=broker,
                                   accept_message_types=ALL_TYPES) for q in range(n)]
    return pb.QueryRouteResponse(status=ok(), message_queues=queues)
