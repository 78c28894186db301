"""A consumer's calls to a broker by name (client.consumer): its address, or in a
replicated cluster its group's master first, then its slaves, the addresses that
failed lately last (client.pulls.DownList), so a master that is gone costs one
timeout, not one a call."""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker_core.acl.handshake import AuthFailed
from broker_core.client.connection import BrokerUnavailable
from broker_core.client.pool import ConnectionPool
from broker_core.client.pulls import DownList
from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_json, encode_json


class Refused(BrokerError):
    """A broker answered a call with an error `code` (a Code)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


log = logging.getLogger("floodgate.consumer")

REFUSED_WARN_S = 60.0  # brokers refusing a consumer that still reads: said this often


def refuses_client(exc: BaseException) -> bool:
    """Whether a broker refused this client itself, not one call: its credentials
    (AuthFailed) or what the ACL lets its user do (NO_PERMISSION)."""
    return isinstance(exc, AuthFailed) or (isinstance(exc, Refused)
                                           and exc.code == Code.NO_PERMISSION)


class Refusals:
    """A heartbeat's brokers that refused the consumer (`refuses_client`): when every one
    that answered did, the first refusal is raised (the consumer polled nothing, for
    ever, without a word), unless it can do without them (its group's retry topic: a
    warning, at most every REFUSED_WARN_S)."""

    def __init__(self, group: str, topic: str, clock: Callable[[], float]) -> None:
        self.group, self.topic, self._clock = group, topic, clock
        self._warn_at = 0.0

    def settle(self, refused: list[BaseException], answered: int, asked: int,
               fatal: bool) -> None:
        if not refused:
            return
        if fatal and not answered:
            raise refused[0]
        if self._clock() >= self._warn_at:
            self._warn_at = self._clock() + REFUSED_WARN_S
            log.warning("%s: %d of %d brokers refused this client on %s: %s", self.group,
                        len(refused), asked, self.topic, refused[0])


class GroupCalls:
    """`routes` (None: the names are the brokers' addresses) gives a group's replicas,
    the master first; `pool` holds a connection per address."""

    def __init__(self, pool: ConnectionPool, routes, down: DownList, timeout: float,
                 clock: Callable[[], float]) -> None:
        self._pool, self._routes, self._down = pool, routes, down
        self.timeout, self._clock = timeout, clock

    def call(self, broker: str, op: Op, body: bytes,
             timeout: float | None = None) -> tuple[int, bytes]:
        """(code, body); BrokerUnavailable when no replica answered."""
        timeout = timeout if timeout is not None else self.timeout
        if self._routes is None:
            return self._call_at(broker, op, body, timeout)
        last: BrokerUnavailable | None = None
        now = self._clock()
        replicas = self._routes.replicas(broker)  # the master first, then its slaves
        up = [a for a in replicas if self._down.up(a, now)]
        for addr in up + [a for a in replicas if a not in up]:  # the down ones last
            self._pool.addrs.setdefault(addr, addr)
            try:
                answer = self._call_at(addr, op, body, timeout)
            except BrokerUnavailable as exc:
                last = exc
                self._down.failed(addr)
                continue
            self._down.answered(addr)
            return answer
        raise last or BrokerUnavailable(f"group {broker}: no broker known")

    def json(self, broker: str, op: Op, payload: dict) -> dict:
        """The answer's JSON; Refused when the broker answered with an error."""
        code, body = self.call(broker, op, encode_json(payload))
        if code != Code.OK:
            raise Refused(f"{broker}: {Code(code).name}: {body.decode('utf-8', 'replace')}",
                          code)
        return decode_json(body)

    def _call_at(self, name: str, op: Op, body: bytes, timeout: float) -> tuple[int, bytes]:
        try:
            return self._pool.get(name).call(op, body, timeout)
        except TimeoutError as exc:
            raise BrokerUnavailable(str(exc)) from None
