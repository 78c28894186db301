"""RocketMQ 5's gRPC protocol on a broker (`broker serve --grpc-port PORT`): a RocketMQ
application's own producer (the official clients: Java, Go, Python, ...) sends to
floodgate unchanged.

    server = GrpcFront(broker, bind, port); await server.start(); ...; await server.stop()

Served: QueryRoute (this broker's queues of the topic, its gRPC endpoint as their
broker's), Heartbeat, Telemetry (the client's settings answered, as it waits for them
before it sends), SendMessage and NotifyClientTermination. Every other RPC of the
service answers UNIMPLEMENTED naming it, never a hang (the simple and push consumers'
ReceiveMessage and AckMessage are next: issue 63).

A send goes through the broker's own SEND path (`SendOps.send`, the frame a native
producer sends, built here): the same checks, flow control, idempotence table,
replication wait and trace, so a gRPC send is answered when a native one would be.
Refusals map to RocketMQ's codes so its client retries as it does against RocketMQ
(flow control -> TOO_MANY_REQUESTS, no permission -> FORBIDDEN, ...).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import zlib

import grpc

from broker_core import protocol as p
from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.protocol import Code
from broker_core.protocol.codecs import OutMessage, decode_send_answer, encode_send
from broker_core.protocol.delay import LEVELS_S

log = logging.getLogger("floodgate.grpc")

SERVICE = "apache.rocketmq.v2.MessagingService"
MAX_BODY = 4 << 20
# a refusal the fuse understands is one a RocketMQ client retries the same way
CODES = {
    Code.OK: pb.OK, Code.SLAVE_NOT_AVAILABLE: pb.OK,
    Code.BAD_REQUEST: pb.BAD_REQUEST, Code.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    Code.MESSAGE_TOO_LARGE: pb.MESSAGE_BODY_TOO_LARGE, Code.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    Code.FLOW_CONTROL: pb.TOO_MANY_REQUESTS, Code.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    Code.NO_PERMISSION: pb.FORBIDDEN, Code.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    Code.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT, Code.NOT_MASTER: pb.HA_NOT_AVAILABLE,
    Code.UNACKNOWLEDGED: pb.HA_NOT_AVAILABLE, Code.DISK_FULL: pb.INTERNAL_SERVER_ERROR,
    Code.SYSTEM_ERROR: pb.INTERNAL_SERVER_ERROR,
    Code.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
}
ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY)


def ok(message: str = "OK") -> pb.Status:
    return pb.Status(code=pb.OK, message=message)


class GrpcFront:
    def __init__(self, broker, bind: str, port: int, advertise: str | None = None) -> None:
        """`advertise`: the host clients reach this broker at (default: `bind`, or this
        machine's name when bound to every address)."""
        self.broker, self.bind, self.port = broker, bind, port
        self.host = advertise or (socket.gethostname() if bind in ("", "0.0.0.0") else bind)
        self.server: grpc.aio.Server | None = None
        self._rid = 0
        self._turns: dict[str, int] = {}
        self.counters = {"sends": 0, "refused": 0, "unimplemented": 0}

    async def start(self) -> None:
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers((_Handlers(self),))
        if not self.server.add_insecure_port(f"{self.bind}:{self.port}"):
            raise OSError(f"gRPC port {self.port} could not be bound on {self.bind}")
        await self.server.start()
        log.info("gRPC front end (RocketMQ 5 clients) on %s:%d", self.bind, self.port)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop(grace=1.0)

    # -- the RPCs ------------------------------------------------------------------------
    async def query_route(self, req: pb.QueryRouteRequest, _ctx) -> pb.QueryRouteResponse:
        topic = req.topic.name
        try:
            queues = self.broker.topics.get(topic, create=True)
        except ValueError as exc:
            return pb.QueryRouteResponse(status=pb.Status(code=pb.ILLEGAL_TOPIC,
                                                          message=str(exc)))
        if not queues:
            return pb.QueryRouteResponse(status=pb.Status(
                code=pb.TOPIC_NOT_FOUND, message=f"no topic {topic!r} on "
                f"{self.broker.config.name} (create it: floodgate topic create)"))
        me = pb.Broker(name=self.broker.config.name, id=0, endpoints=pb.Endpoints(
            scheme=pb.IPv4, addresses=[pb.Address(host=self.host, port=self.port)]))
        return pb.QueryRouteResponse(status=ok(), message_queues=[
            pb.MessageQueue(topic=req.topic, id=q, permission=pb.READ_WRITE, broker=me,
                            accept_message_types=ALL_TYPES) for q in range(queues)])

    async def heartbeat(self, _req, _ctx) -> pb.HeartbeatResponse:
        return pb.HeartbeatResponse(status=ok())

    async def notify_termination(self, _req, _ctx) -> pb.NotifyClientTerminationResponse:
        return pb.NotifyClientTerminationResponse(status=ok())

    async def telemetry(self, requests, _ctx):
        """Each settings the client reports is answered with what this broker holds it
        to (its body limit); the client starts once the first answer arrives."""
        async for cmd in requests:
            if cmd.WhichOneof("command") != "settings":
                continue
            settings = pb.Settings()
            settings.CopyFrom(cmd.settings)
            if settings.WhichOneof("pub_sub") == "publishing":
                settings.publishing.max_body_size = self._max_body()
                settings.publishing.validate_message_type = True
            yield pb.TelemetryCommand(status=ok(), settings=settings)

    async def send_message(self, req: pb.SendMessageRequest, _ctx) -> pb.SendMessageResponse:
        entries = [await self._send_one(m) for m in req.messages]
        worst = next((e.status for e in entries if e.status.code != pb.OK), ok())
        return pb.SendMessageResponse(status=worst, entries=entries)

    # -- a send ----------------------------------------------------------------------------
    async def _send_one(self, m: pb.Message) -> pb.SendResultEntry:
        sp = m.system_properties
        mid = sp.message_id
        try:
            props = self._properties(m)
        except ValueError as exc:
            self.counters["refused"] += 1
            return pb.SendResultEntry(status=pb.Status(code=pb.ILLEGAL_DELIVERY_TIME,
                                                       message=str(exc)), message_id=mid)
        queue = self._queue(m.topic.name, sp.message_group if sp.HasField("message_group")
                            else None)
        body = encode_send(m.topic.name, queue, OutMessage(m.body, sp.tag if sp.HasField(
            "tag") else "", " ".join(sp.keys), props))
        code, answer = await self._native_send(body)
        if code not in (Code.OK, Code.SLAVE_NOT_AVAILABLE):
            self.counters["refused"] += 1
            why = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else ""
            return pb.SendResultEntry(status=pb.Status(
                code=CODES.get(code, pb.INTERNAL_SERVER_ERROR),
                message=why or Code(code).name), message_id=mid)
        self.counters["sends"] += 1
        _qid, queue_offset, *_rest = decode_send_answer(answer)
        return pb.SendResultEntry(status=ok(), message_id=mid, offset=queue_offset)

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
            due = sp.delivery_timestamp.ToMilliseconds() / 1000
            wait = due - time.time()
            if wait > 0.5:
                level = next((i + 1 for i, s in enumerate(LEVELS_S) if s >= wait - 0.5), None)
                if level is None or LEVELS_S[level - 1] - wait > max(1.0, 0.1 * wait):
                    raise ValueError(
                        f"a delivery {wait:.1f} s ahead is not one of this broker's delay "
                        f"levels ({', '.join(f'{s} s' for s in LEVELS_S)})")
                props["DELAY"] = str(level)
        return props

    async def _native_send(self, body: bytes) -> tuple[int, bytes]:
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

    def _max_body(self) -> int:
        store = getattr(self.broker.store, "config", None)
        return int(getattr(store, "max_message_bytes", MAX_BODY))


class _Handlers(grpc.GenericRpcHandler):
    def __init__(self, front: GrpcFront) -> None:
        f = front
        self.front = front
        unary = grpc.unary_unary_rpc_method_handler
        self.methods = {
            "QueryRoute": unary(f.query_route, pb.QueryRouteRequest.FromString,
                                pb.QueryRouteResponse.SerializeToString),
            "Heartbeat": unary(f.heartbeat, pb.HeartbeatRequest.FromString,
                               pb.HeartbeatResponse.SerializeToString),
            "SendMessage": unary(f.send_message, pb.SendMessageRequest.FromString,
                                 pb.SendMessageResponse.SerializeToString),
            "NotifyClientTermination": unary(
                f.notify_termination, pb.NotifyClientTerminationRequest.FromString,
                pb.NotifyClientTerminationResponse.SerializeToString),
            "Telemetry": grpc.stream_stream_rpc_method_handler(
                f.telemetry, pb.TelemetryCommand.FromString,
                pb.TelemetryCommand.SerializeToString),
        }

    def service(self, details):
        service, _, name = details.method.lstrip("/").partition("/")
        handler = self.methods.get(name) if service == SERVICE else None
        if handler is not None:
            return handler
        self.front.counters["unimplemented"] += 1

        async def unimplemented(_request, ctx):
            await ctx.abort(grpc.StatusCode.UNIMPLEMENTED,
                            f"{details.method}: not served by floodgate's RocketMQ front end "
                            "(served: " + ", ".join(sorted(self.methods)) + ")")

        return grpc.unary_unary_rpc_method_handler(unimplemented)
