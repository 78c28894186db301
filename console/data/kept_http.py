"""One HTTP(S) connection per polled address, kept between the console's polls.

urllib opens a connection per request, and with the brokers' TLS a handshake per
request: a /stats poll of a TLS broker took 4.58 ms and 2.15 ms of the broker's CPU
(its own loop's) with a connection each, 0.87 ms and 0.50 ms on a kept one
(bench/console_poll.py). So the console keeps one per address and opens a new one only
when the old one failed.
A broker may close a connection while it sat idle: a request on a reused connection that
fails before any answer is tried once more on a fresh one (not after a timeout: that
would double the wait for a broker that is stuck).

http.client rather than a pool library: one connection per address, used by one thread
at a time (a source's polls never overlap: console/data/poller.py), is all it takes.
"""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from broker_core.client.admin import http_failure

Answer = tuple[Mapping[str, Any] | None, str | None]


class KeptConnections:
    """GET a JSON document from `addr` + `path` on a connection kept per address.
    `broker`: a broker's HTTP port (https when this process has TLS settings,
    acl.tls); otherwise plain HTTP (a producer's)."""

    def __init__(self, timeout: float, broker: bool) -> None:
        self.timeout, self.broker = timeout, broker
        self._conns: dict[str, http.client.HTTPConnection] = {}
        self.opened = 0  # connections opened so far (a test and the diagnostics read it)

    def get(self, addr: str, path: str) -> Answer:
        """(document, None) or (None, a one-line reason); never raises for the network."""
        try:
            scheme, host, port, target, ctx = self._where(addr, path)
        except ValueError as exc:
            return None, str(exc)
        conn = self._conns.pop(addr, None)
        reused = conn is not None
        while True:  # twice at most: only a reused connection is tried again
            if conn is None:
                conn = self._open(scheme, host, port, ctx)
            try:
                status, body = self._request(conn, target)
            except TimeoutError:
                conn.close()
                return None, "timed out"
            except http.client.HTTPException as exc:
                conn.close()
                if reused and isinstance(exc, http.client.RemoteDisconnected):
                    conn, reused = None, False  # closed while idle: once more, fresh
                    continue
                return None, http_failure(exc, scheme == "https")
            except OSError as exc:
                conn.close()
                if reused and isinstance(exc, (ConnectionResetError, BrokenPipeError)):
                    conn, reused = None, False
                    continue
                return None, reason(exc)
            self._conns[addr] = conn
            if status != 200:
                return None, f"HTTP {status} from {path.split('?')[0]}"
            return decode(body)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _where(self, addr: str, path: str):
        from broker_core.acl import tls

        if self.broker:
            url, ctx = tls.broker_http(addr, path)
        else:
            base = addr if addr.startswith("http") else f"http://{addr}"
            url, ctx = base.rstrip("/") + path, None
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an HTTP address: {addr}")
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        return parts.scheme, parts.hostname, parts.port, target, ctx

    def _open(self, scheme: str, host: str, port: int | None, ctx) -> http.client.HTTPConnection:
        self.opened += 1
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=self.timeout, context=ctx)
        return http.client.HTTPConnection(host, port, timeout=self.timeout)

    @staticmethod
    def _request(conn: http.client.HTTPConnection, target: str) -> tuple[int, bytes]:
        conn.request("GET", target)
        resp = conn.getresponse()
        body = resp.read()  # read in full, so the connection can carry the next request
        if resp.will_close:
            conn.close()  # the server said so; the next request opens a new one
        return resp.status, body


REFUSED = "connection refused"  # the host answered: nothing listens on the port


def reason(exc: Any) -> str:
    if isinstance(exc, TimeoutError) or "timed out" in str(exc):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError) or "Connection refused" in str(exc):
        return REFUSED
    return str(exc) or type(exc).__name__


def decode(body: bytes | str) -> Answer:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        return None, f"malformed /stats: {exc}"
    if not isinstance(doc, Mapping):
        return None, "malformed /stats: not a JSON object"
    return doc, None
