"""Transactional sends (RocketMQ's TransactionMQProducer): a half message, the local
transaction, then COMMIT or ROLLBACK; and the check-backs of halves left unresolved.

    with TransactionProducer("payments", brokers, check=was_paid) as tx:
        tx.send_in_transaction("paid", body, lambda msg: pay(order))

`local_tx(msg)` and `check(msg)` return TxState (or its name): COMMIT, ROLLBACK or
UNKNOWN. A local transaction that raises is rolled back; a check that raises
counts as UNKNOWN (asked again later). UNKNOWN leaves the half pending: the
broker asks this producer group back (server.transactions) after its check time,
then periodically, 15 times at most, then rolls it back.

The broker cannot call a producer (connections carry requests one way), so the
producer asks: a thread polls every broker with CHECK_TRANSACTION each `poll_s`
and answers each half handed to it with END_TRANSACTION. A check must be
idempotent: a half may be checked more than once (its producer's sends are idempotent,
so a half retried after a timeout is stored once; one sent with `idempotent=False` may
exist twice).
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker_core.client.attempts import SendResult
from broker_core.client.connection import BrokerUnavailable
from broker_core.client.producer import Producer
from broker_core.errors import BrokerError
from broker_core.protocol import STORED_CODES, Code, Op, decode_json, encode_json
from broker_core.protocol.transactions import PROP_TX_HALF, TxState, poll_s_error, tx_id

log = logging.getLogger("floodgate.producer")

POLL_S = 1.0


@dataclass(frozen=True)
class TxMessage:
    """What a local transaction and a check-back see of the message."""

    topic: str
    body: bytes
    tags: str | None
    keys: str | None
    properties: Mapping[str, str]
    tx_id: str  # BROKER:OFFSET, as `floodgate tx list` names it
    msg_id: str | None = None
    checks: int = 0  # check-backs so far (0 in the local transaction)


@dataclass(frozen=True)
class TxResult:
    state: TxState  # what the local transaction decided
    send: SendResult  # where the half is
    # the COMMIT or ROLLBACK went out (end_oneway) or the broker wrote it; False: a
    # check-back will settle it
    ended: bool
    tx_id: str = ""


def as_state(value) -> TxState:
    try:
        return value if isinstance(value, TxState) else TxState(str(value).upper())
    except ValueError:
        raise ValueError(f"a transaction answers COMMIT, ROLLBACK or UNKNOWN, not "
                         f"{value!r}") from None


@dataclass
class TxCounters:
    committed: int = 0
    rolled_back: int = 0
    unknown: int = 0
    local_tx_errors: int = 0
    checks: dict[str, int] = field(default_factory=dict)  # answer -> how many
    end_failures: int = 0


class TransactionProducer:
    """`group`: the producer group the brokers ask back; `check`: the check-back
    (None: this producer answers none; another of its group must). `end_oneway`: the
    COMMIT or ROLLBACK goes out without waiting for the broker's answer (RocketMQ's
    endTransactionOneway: a transaction costs one round trip more than a send, not
    two; one lost is settled by the check-back); False waits for the answer, and
    `TxResult.ended` then says the broker wrote it. The rest goes to the Producer it
    sends with."""

    def __init__(self, group: str, brokers: Sequence[str] | Mapping[str, str] | str | None = None,
                 check: Callable[[TxMessage], object] | None = None, routes=None,
                 timeout: float = 3.0, poll_s: float = POLL_S, end_oneway: bool = True,
                 **producer_kw) -> None:
        if not group:
            raise ValueError("a transactional producer needs a group: the brokers ask it back")
        if (why := poll_s_error(poll_s)) is not None:  # (how often brokers are asked)
            raise ValueError(f"check-backs: {why}")
        self.group, self.check, self.poll_s = group, check, poll_s
        self.end_oneway = end_oneway
        self.producer = Producer(brokers, routes=routes, timeout=timeout, group=group,
                                 **producer_kw)
        self.counters = TxCounters()
        self._closed = threading.Event()
        self._checker: threading.Thread | None = None
        if check is not None:
            self._checker = threading.Thread(target=self._check_loop, daemon=True,
                                             name=f"floodgate-tx-checks-{group}")
            self._checker.start()

    def send_in_transaction(self, topic: str, body: bytes,
                            local_tx: Callable[[TxMessage], object], tags: str | None = None,
                            keys: str | None = None,
                            properties: dict[str, str] | None = None,
                            order_key: str | None = None) -> TxResult:
        """Store the half (raises SendFailed: then nothing was stored and `local_tx` did
        not run), run `local_tx`, commit or roll back as it says. `order_key`: the
        committed message goes to the key's queue (Producer.send), in commit order."""
        props = {**(properties or {}), PROP_TX_HALF: "true"}
        sent = self.producer.send(topic, body, tags, keys, props, order_key=order_key)
        handle = tx_id(sent.broker, sent.queue_offset)
        msg = TxMessage(topic, body, tags, keys, dict(properties or {}), handle, sent.msg_id)
        try:
            state = as_state(local_tx(msg))
        except Exception:  # noqa: BLE001 - the application's failure: rolled back
            log.warning("%s: local transaction of %s raised: rolled back", self.group, handle,
                        exc_info=True)
            self.counters.local_tx_errors += 1
            state = TxState.ROLLBACK
        if state is TxState.UNKNOWN:
            self.counters.unknown += 1
            return TxResult(state, sent, False, handle)
        if state is TxState.COMMIT:
            self.counters.committed += 1
        else:
            self.counters.rolled_back += 1
        return TxResult(state, sent, self._end(sent.broker, sent.queue_offset, state, "producer",
                                               self.end_oneway), handle)

    def _end(self, broker: str, offset: int, state: TxState, by: str,
             oneway: bool = False) -> bool:
        payload = encode_json({"offset": offset, "decision": state.value, "by": by,
                               "group": self.group})
        try:
            if oneway:
                self.producer.request_oneway(broker, Op.END_TRANSACTION, payload)
                return True
            code, body = self.producer.request(broker, Op.END_TRANSACTION, payload)
        except (BrokerUnavailable, TimeoutError, BrokerError) as exc:
            reason = str(exc)
        else:
            if code in STORED_CODES:  # written (short of a promise, as a send's answer says)
                return True
            reason = f"{Code(code).name}: {body.decode('utf-8', 'replace')}"
        self.counters.end_failures += 1  # the half stays pending: a check-back settles it
        log.warning("%s: %s of %s not taken (%s): a check-back will settle it", self.group,
                    state.value, tx_id(broker, offset), reason)
        return False

    # -- check-backs ----------------------------------------------------------------------
    def poll_checks(self) -> int:
        """Ask every broker for the halves to check now and answer them; how many."""
        n = 0
        for broker in self.producer.names:
            try:
                code, body = self.producer.request(
                    broker, Op.CHECK_TRANSACTION,
                    encode_json({"group": self.group, "client_id": self.producer.client_id,
                                 "poll_s": self.poll_s}))  # (gone once it misses two asks)
            except (BrokerUnavailable, TimeoutError, BrokerError):
                continue
            if code != Code.OK:
                continue
            for doc in decode_json(body).get("checks", []):
                n += 1
                self._answer_check(broker, doc)
        return n

    def _answer_check(self, broker: str, doc: dict) -> None:
        msg = TxMessage(str(doc.get("topic", "")), base64.b64decode(doc.get("body", "")),
                        doc.get("tags"), doc.get("keys"), dict(doc.get("properties") or {}),
                        tx_id(broker, int(doc["offset"])), doc.get("msg_id"),
                        int(doc.get("checks", 0)))
        try:
            state = as_state(self.check(msg))
        except Exception:  # noqa: BLE001 - asked again at the next check
            log.warning("%s: check-back of %s raised: UNKNOWN", self.group, msg.tx_id,
                        exc_info=True)
            state = TxState.UNKNOWN
        self.counters.checks[state.value] = self.counters.checks.get(state.value, 0) + 1
        if state is not TxState.UNKNOWN:
            self._end(broker, int(doc["offset"]), state, "check")

    def _check_loop(self) -> None:
        while not self._closed.wait(self.poll_s):
            try:
                self.poll_checks()
            except Exception:  # noqa: BLE001 - the thread must live: logged, polled again
                log.exception("%s: check-back poll", self.group)

    def close(self) -> None:
        self._closed.set()
        if self._checker is not None:
            self._checker.join(5)
        self.producer.close()

    def __enter__(self) -> TransactionProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
