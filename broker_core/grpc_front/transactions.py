"""Transactional messages from RocketMQ 5 clients: a half sent with SendMessage, settled
with EndTransaction, and checked back through the producer's Telemetry stream.

The broker's own transactions carry them (server.transactions, server.tx_ops): a half
is kept aside until committed, the outcome is a replicated record, an unresolved half
is checked back after `--tx-check-s` and rolled back after its last check. What gRPC
changes is who is asked. A RocketMQ 5 producer names no producer group, so the halves
of a topic sent through gRPC belong to the group `rmq-tx-TOPIC`, and a check goes, as
RocketMQ's proxy sends it, to any producer whose Telemetry stream publishes the topic
(RecoverOrphanedTransactionCommand); its checker answers with EndTransaction from
SOURCE_SERVER_CHECK. The transaction id a client holds is the broker's own name for a
half, BROKER:OFFSET (`floodgate tx list` shows the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging

from broker_core import protocol as p
from broker_core.grpc_front import rocketmq_v2_pb2 as pb
from broker_core.grpc_front.codes import CODES
from broker_core.grpc_front.pop_messages import as_pb
from broker_core.protocol import Code, Op
from broker_core.protocol.codecs import PRODUCER_GROUP
from broker_core.protocol.transactions import (
    HALF_TOPIC,
    PRODUCER_ALIVE_S,
    PROP_TX_HALF,
    TxState,
    parse_tx_id,
    tx_id,
)

log = logging.getLogger("floodgate.grpc")

GROUP_PREFIX = "rmq-tx-"
RESOLUTIONS = {pb.COMMIT: TxState.COMMIT, pb.ROLLBACK: TxState.ROLLBACK}


def group_of(topic: str) -> str:
    return GROUP_PREFIX + topic


def half_properties(topic: str, props: dict[str, str]) -> None:
    """A TRANSACTION message's properties: a half of its topic's gRPC group."""
    props[PROP_TX_HALF] = "true"
    props[PRODUCER_GROUP] = group_of(topic)


class GrpcTransactions:
    def __init__(self, broker) -> None:
        self.broker = broker
        # the Telemetry streams of producers, by the group of each topic they publish
        self.producers: dict[str, list[asyncio.Queue]] = {}
        self._turn = itertools.count()
        self._wake = asyncio.Event()  # a half was stored, or a producer came
        self._checker: asyncio.Task | None = None

    def stored_half(self) -> None:
        self._wake.set()

    # -- EndTransaction ----------------------------------------------------------------
    async def end(self, req: pb.EndTransactionRequest, _ctx=None) -> pb.EndTransactionResponse:
        decision = RESOLUTIONS.get(req.resolution)
        if decision is None:
            return _answer(pb.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        try:
            owner, offset = parse_tx_id(req.transaction_id)
        except ValueError:
            owner, offset = "", -1
        if owner != self.broker.config.name or offset < 0:
            return _answer(pb.INVALID_TRANSACTION_ID,
                           f"{req.transaction_id!r} is not a transaction of "
                           f"{self.broker.config.name} (BROKER:OFFSET)")
        # the broker's own END_TRANSACTION, as a native producer's request
        by = "check" if req.source == pb.SOURCE_SERVER_CHECK else "producer"
        code, text = await self.broker.handle(p.Header(op=Op.END_TRANSACTION), p.encode_json(
            {"offset": offset, "decision": decision.value, "by": by}))
        mapped = CODES.get(code, pb.INTERNAL_SERVER_ERROR)
        return _answer(mapped, "OK" if mapped == pb.OK else
                       text.decode("utf-8", "replace") or Code(code).name)

    # -- check-backs through Telemetry -----------------------------------------------------
    async def stream(self, requests, settings_of):
        """A Telemetry stream: each command's settings answered (`settings_of`: the
        answer, None for a command that needs none); a producer's also carries the
        checks of its topics' halves until it closes."""
        outbox: asyncio.Queue = asyncio.Queue()

        async def read() -> None:
            with contextlib.ExitStack() as registered:
                producer = False
                async for cmd in requests:
                    settings = settings_of(cmd)
                    if settings is None:
                        continue
                    if settings.WhichOneof("pub_sub") == "publishing" and not producer:
                        producer = True  # (once a stream)
                        registered.enter_context(self.producer(settings, outbox))
                    outbox.put_nowait(pb.TelemetryCommand(status=pb.Status(
                        code=pb.OK, message="OK"), settings=settings))
                outbox.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while (answer := await outbox.get()) is not None:
                yield answer
        finally:
            reader.cancel()

    @contextlib.contextmanager
    def producer(self, settings: pb.Settings, outbox: asyncio.Queue):
        """A producer's stream, asked the checks of the topics it publishes while open."""
        groups = [group_of(t.name) for t in settings.publishing.topics]
        for g in groups:
            self.producers.setdefault(g, []).append(outbox)
        if self._checker is None or self._checker.done():
            self._checker = asyncio.ensure_future(self._check_loop())
            self._checker.add_done_callback(_said_if_failed)
        self._wake.set()
        try:
            yield
        finally:
            for g in groups:
                outboxes = self.producers.get(g, [])
                if outbox in outboxes:
                    outboxes.remove(outbox)
                if not outboxes:
                    self.producers.pop(g, None)

    async def _check_loop(self) -> None:
        """While producers are connected: ask the checks due, then wait for the next
        half due (or a new half, or producer). While halves of theirs are pending, each
        group is asked at least every half of PRODUCER_ALIVE_S, so the broker's own pass
        counts its producers alive and leaves the asking to them; nothing pending, no
        timer runs."""
        tx = self.broker.tx
        while self.producers:
            self._wake.clear()
            self._ask_due()
            due_ms = self._next_due_ms()
            wait = None if due_ms is None else \
                min(PRODUCER_ALIVE_S / 2, max(0.01, (due_ms - tx.wall_ms()) / 1000))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _next_due_ms(self) -> int | None:
        """When a half of a connected producer's topic is next due a check (wall ms)."""
        tx = self.broker.tx
        dues = [max(h.stored_ms + tx.check_after_ms, h.next_check_ms)
                for h in tx.pending.values() if h.group in self.producers
                and h.offset not in tx.resolving and h.checks < tx.max_checks]
        return min(dues, default=None)

    def _ask_due(self) -> None:
        if self.broker.write_refusal() is not None:
            return  # a slave: its master asks
        for group, outboxes in list(self.producers.items()):
            if not outboxes:
                continue
            for half in self.broker.tx.checks_for(group):
                got = self.broker.store.get(HALF_TOPIC, 0, half.offset, 1)
                if not got.messages:
                    continue
                cmd = pb.RecoverOrphanedTransactionCommand(
                    message=_as_checked(got.messages[0], half.topic, self.broker.config.name),
                    transaction_id=tx_id(self.broker.config.name, half.offset))
                outboxes[next(self._turn) % len(outboxes)].put_nowait(
                    pb.TelemetryCommand(recover_orphaned_transaction_command=cmd))

    def close(self) -> None:
        if self._checker is not None:
            self._checker.cancel()


def _as_checked(m, topic: str, broker: str) -> pb.Message:
    """A half as its producer's checker reads it: its topic, body and properties."""
    msg = as_pb(m, "", 1, 0.0, broker)
    msg.topic.name = topic
    msg.system_properties.message_type = pb.TRANSACTION
    msg.system_properties.ClearField("receipt_handle")
    msg.system_properties.ClearField("invisible_duration")
    return msg


def _said_if_failed(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:  # (checks stop until the
        log.error("gRPC transaction checks stopped: %r", task.exception())  # next producer)


def _answer(code: int, message: str) -> pb.EndTransactionResponse:
    return pb.EndTransactionResponse(status=pb.Status(code=code, message=message))
