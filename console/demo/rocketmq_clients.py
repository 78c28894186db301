"""The demo's RocketMQ application: a producer and a SimpleConsumer that speak RocketMQ 5's
gRPC protocol to the brokers' gRPC ports (broker_core.grpc_front), beside floodgate's
own clients, so the console shows what a RocketMQ application does through the faults.

A small client of the protocol's messages written here, signed and over TLS as
RocketMQ's clients do (its official client, `rocketmq-python-client`, serves the
interoperability tests; the demo keeps to the project's own dependencies). What it
does: a route from any broker (every group's master), sends in turn over the route's
queues, and per queue a receive long-polling, each message acknowledged and its
send -> in hand delay counted (console.demo.delays) as `rmq-audit`. The brokers trace
what it sends and receives (`floodgate trace --key rmq-order-N`). All of it on one
asyncio loop in one thread (grpc.aio): the blocking client's thread a receive, 16 of
them, cost the demo's host a sixth of a core.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import logging
import os
import threading
import time
import uuid

import grpc

from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.grpc_front.handlers import SERVICE
from broker_core.grpc_front.server_options import NO_BDP_PROBE

log = logging.getLogger("floodgate.demo")

TOPIC, GROUP = "demo-rmq", "rmq-audit"  # (the demo's runner makes the topic, as admin)
WAIT_S = 10  # each receive long-polls this long
KEY_PREFIX = "rmq-order-"  # the n-th message sent is keyed rmq-order-n (floodgate trace)
ROUTE_EVERY_S = 30.0  # as RocketMQ's clients refresh (and at once after a failed send)
_NUMBERS = itertools.count()  # each client's number in its id
CHANNEL_OPTIONS = (NO_BDP_PROBE,)  # no pings on the data of small calls (grpc_front.server_options)


class RocketMQClient:
    """Calls to one endpoint's gRPC port, each signed with the user's access secret."""

    def __init__(self, endpoint: str, user: str = "", secret: str = "",
                 ca: bytes | None = None) -> None:
        self.user, self.secret = user, secret
        # who the brokers' trace says sent and received (grpc_front.tracing), as
        # RocketMQ's clients name themselves (host@pid@n)
        self.client_id = f"rmq-demo@{os.getpid()}@{next(_NUMBERS)}"
        self.channel = grpc.aio.secure_channel(endpoint, grpc.ssl_channel_credentials(ca),
                                               options=CHANNEL_OPTIONS) \
            if ca is not None else grpc.aio.insecure_channel(endpoint, options=CHANNEL_OPTIONS)
        call = f"/{SERVICE}/"
        self._unary = {name: self.channel.unary_unary(
            call + name, request_serializer=req.SerializeToString,
            response_deserializer=ans.FromString) for name, req, ans in (
            ("QueryRoute", pb.QueryRouteRequest, pb.QueryRouteResponse),
            ("SendMessage", pb.SendMessageRequest, pb.SendMessageResponse),
            ("AckMessage", pb.AckMessageRequest, pb.AckMessageResponse))}
        self._receive = self.channel.unary_stream(
            call + "ReceiveMessage", request_serializer=pb.ReceiveMessageRequest.SerializeToString,
            response_deserializer=pb.ReceiveMessageResponse.FromString)

    def metadata(self) -> list[tuple[str, str]]:
        """RocketMQ 5's signature: an HMAC-SHA1 of the request's date (grpc_front.access)."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        head = [("x-mq-date-time", stamp), ("x-mq-client-id", self.client_id)]
        if not self.user:
            return head
        sig = hmac.new(self.secret.encode(), stamp.encode(), hashlib.sha1).hexdigest()
        return [*head, ("authorization", f"MQv2-HMAC-SHA1 Credential={self.user}, "
                        f"SignedHeaders=x-mq-date-time, Signature={sig}")]

    async def call(self, name: str, request, timeout: float = 5.0):
        answer = await self._unary[name](request, metadata=self.metadata(), timeout=timeout)
        if answer.status.code != pb.OK:
            raise RuntimeError(f"{name}: {pb.Code.Name(answer.status.code)}: "
                               f"{answer.status.message}")
        return answer

    async def receive(self, queue: pb.MessageQueue, batch: int = 32, invisible_s: int = 30,
                      wait_s: int = WAIT_S) -> list[pb.Message]:
        req = pb.ReceiveMessageRequest(group=pb.Resource(name=GROUP), message_queue=queue,
                                       batch_size=batch, auto_renew=False)
        req.invisible_duration.seconds = invisible_s
        req.long_polling_timeout.seconds = wait_s
        return [a.message async for a in self._receive(req, metadata=self.metadata(),
                                                       timeout=wait_s + 5)
                if a.WhichOneof("content") == "message"]

    async def close(self) -> None:
        await self.channel.close()


async def route(make) -> list[pb.MessageQueue] | None:
    """The topic's queues (every group's master), asked of any broker; None: none answered."""
    client = make(None)
    try:
        return list((await client.call("QueryRoute", pb.QueryRouteRequest(
            topic=pb.Resource(name=TOPIC)))).message_queues)
    except (grpc.RpcError, RuntimeError) as exc:
        log.info("demo RocketMQ route: %s", exc)
        return None
    finally:
        await client.close()


def endpoint(queue: pb.MessageQueue) -> str:
    a = queue.broker.endpoints.addresses[0]
    return f"{a.host}:{a.port}"


async def produce(make, stamp, rate: float) -> None:
    """Send `rate` msgs/s in turn over the route's queues, each body stamped (`stamp`)."""
    clients: dict[str, RocketMQClient] = {}
    queues, routed, turn = None, 0.0, itertools.count()
    loop = asyncio.get_running_loop()
    start, sent = loop.time(), 0
    try:
        while True:
            await asyncio.sleep(max(0.0, start + sent / rate - loop.time()))
            sent += 1
            if loop.time() - routed >= ROUTE_EVERY_S or not queues:
                queues, routed = await route(make), loop.time()
                if not queues:
                    continue
            q = queues[next(turn) % len(queues)]
            c = clients.get(endpoint(q)) or clients.setdefault(endpoint(q), make(endpoint(q)))
            m = pb.Message(topic=q.topic, body=stamp(b"rmq order"), system_properties=
                           pb.SystemProperties(message_id=uuid.uuid4().hex.upper(),
                                               message_type=pb.NORMAL,
                                               keys=[f"{KEY_PREFIX}{sent}"]))
            m.system_properties.born_timestamp.GetCurrentTime()
            try:
                await c.call("SendMessage", pb.SendMessageRequest(messages=[m]))
            except (grpc.RpcError, RuntimeError) as exc:  # a failover: a new route next
                routed = 0.0
                log.info("demo RocketMQ producer: %s", exc)
    finally:
        for c in clients.values():
            await c.close()


async def consume(make, record) -> None:
    """A receive loop a queue of the route, each receive acknowledged; `record(msgs)`."""
    queues = await route(make)
    while not queues:
        await asyncio.sleep(1.0)
        queues = await route(make)
    await asyncio.gather(*(_consume_queue(make, q, record) for q in queues))


async def _consume_queue(make, queue: pb.MessageQueue, record) -> None:
    """Receive from one queue (its group's master: after a failover, found again from
    a new route, by the group's name)."""
    client = make(endpoint(queue))
    try:
        while True:
            try:
                got = await client.receive(queue)
                if got:
                    record(got)
                    await client.call("AckMessage", pb.AckMessageRequest(
                        group=pb.Resource(name=GROUP), topic=queue.topic, entries=[
                            pb.AckMessageEntry(message_id=m.system_properties.message_id,
                                               receipt_handle=m.system_properties.receipt_handle)
                            for m in got]))
            except (grpc.RpcError, RuntimeError) as exc:  # its master gone: ask the route
                log.info("demo RocketMQ consumer %s: %s", endpoint(queue), exc)
                await asyncio.sleep(1.0)
                now = next((q for q in await route(make) or ()
                            if q.broker.name == queue.broker.name and q.id == queue.id), None)
                if now is not None and endpoint(now) != endpoint(queue):
                    await client.close()
                    queue, client = now, make(endpoint(now))
    finally:
        await client.close()


def start(endpoints: list[str], stop: threading.Event, credentials, delays,
          rate: float) -> list[threading.Thread]:
    """The producer (`rate` msgs/s: console.demo.clients.story_rates) and the consumer,
    on one loop in a thread, until `stop`: as `credentials`' user (its RocketMQ access
    secret) when the cluster takes users, over TLS when its CA is set
    (FLOODGATE_TLS_CA, as the demo's other clients)."""
    from broker_core.acl.tls import ENV_CA
    from broker_core.acl.users import rocketmq_secret
    from broker_core.client.loadgen import STAMP

    user = credentials.user if credentials is not None else ""
    secret = rocketmq_secret(credentials.secret) if credentials is not None else ""
    ca_file = os.environ.get(ENV_CA)
    ca = open(ca_file, "rb").read() if ca_file else None  # noqa: SIM115 - read at once
    turn = itertools.count()

    def make(where: str | None) -> RocketMQClient:  # (None: any broker, in turn)
        return RocketMQClient(where or endpoints[next(turn) % len(endpoints)], user, secret, ca)

    def stamp(body: bytes) -> bytes:  # (what console.demo.delays reads)
        return STAMP.pack(time.time()) + body

    async def app() -> None:
        tasks = [asyncio.ensure_future(produce(make, stamp, rate)), asyncio.ensure_future(
            consume(make, lambda msgs: delays.record(GROUP, msgs)))]
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    thread = threading.Thread(target=asyncio.run, args=(app(),), daemon=True,
                              name="demo-rocketmq")
    thread.start()
    return [thread]
