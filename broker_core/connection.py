"""A pipelined client connection to one broker.

Many threads may call `request` at once: frames are written under a lock and
a reader thread hands each response to the future of its request id. The
futures are `concurrent.futures.Future`, so asyncio code can await them with
`asyncio.wrap_future`. A broken connection fails every pending request with
BrokerUnavailable and the next request reconnects.
"""

from __future__ import annotations

import itertools
import socket
import threading
from concurrent.futures import Future

from broker_core.errors import BrokerError
from broker_core.protocol import (
    FLAG_ONEWAY,
    HEADER_SIZE,
    LENGTH_SIZE,
    decode_header,
    encode_frame,
)


class BrokerUnavailable(BrokerError):
    """The broker could not be reached or the connection broke mid-call."""


def parse_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad broker address {addr!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class Connection:
    def __init__(self, addr: str, connect_timeout: float = 3.0) -> None:
        self.addr = addr
        self._host, self._port = parse_addr(addr)
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._pending: dict[int, Future] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self._host, self._port), self._connect_timeout)
        except OSError as exc:
            raise BrokerUnavailable(f"{self.addr}: {exc.strerror or exc}") from None
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = threading.Thread(
            target=self._read_loop, args=(sock,), daemon=True, name=f"floodgate-conn-{self.addr}"
        )
        reader.start()
        return sock

    def request(self, op: int, body: bytes = b"", oneway: bool = False) -> Future:
        """Send a request; the future resolves to (code, body) of the response."""
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise BrokerUnavailable(f"{self.addr}: connection closed")
            if self._sock is None:
                self._sock = self._connect()
            rid = next(self._ids) & 0xFFFFFFFF
            frame = encode_frame(op, rid, body, flags=FLAG_ONEWAY if oneway else 0)
            fut.request_id = rid  # type: ignore[attr-defined]  # for forget()
            if not oneway:
                self._pending[rid] = fut
            try:
                self._sock.sendall(frame)
            except OSError as exc:
                self._pending.pop(rid, None)
                self._fail_all(self._sock, f"{self.addr}: send failed: {exc}")
                raise BrokerUnavailable(f"{self.addr}: send failed: {exc}") from None
        if oneway:
            fut.set_result((0, b""))
        return fut

    def forget(self, fut: Future) -> None:
        """Stop waiting for a request (it timed out); a late answer is dropped."""
        with self._lock:
            self._pending.pop(getattr(fut, "request_id", None), None)

    def _read_loop(self, sock: socket.socket) -> None:
        buf = bytearray()
        reason = "connection closed by broker"
        try:
            while True:
                chunk = sock.recv(1 << 18)
                if not chunk:
                    break
                buf += chunk
                pos = 0
                while len(buf) - pos >= HEADER_SIZE:
                    header = decode_header(buf, pos)
                    end = pos + LENGTH_SIZE + header.length
                    if end > len(buf):
                        break
                    body = bytes(buf[pos + HEADER_SIZE : end])
                    pos = end
                    with self._lock:
                        fut = self._pending.pop(header.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result((header.code, body))
                if pos:
                    del buf[:pos]
        except (OSError, BrokerError) as exc:
            reason = f"connection lost: {exc}"
        with self._lock:
            self._fail_all(sock, f"{self.addr}: {reason}")

    def _fail_all(self, sock: socket.socket, reason: str) -> None:
        """Called with the lock held: drop the socket and fail what waits on it."""
        if self._sock is sock:
            self._sock = None
        try:
            sock.close()
        except OSError:
            pass
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(BrokerUnavailable(reason))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._sock is not None:
                sock = self._sock
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._fail_all(sock, f"{self.addr}: connection closed")
