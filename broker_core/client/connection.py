"""A pipelined client connection to one broker.

Many threads may send at once: frames are written under a lock and each
response is handed to the future of its request id. Reading follows a
leader/follower pattern instead of a dedicated reader thread: a blocking
caller (`call`) reads the socket itself while it waits, so a synchronous send
costs one round trip and no thread hand-off (the hand-off halved sync
throughput). Futures from `request` that nobody waits on are served by a pump
thread that runs only while such futures are pending.

Futures are `concurrent.futures.Future`, so asyncio code can await them with
`asyncio.wrap_future`. A broken connection fails every pending request with
BrokerUnavailable; the next request reconnects.
"""

from __future__ import annotations

import ipaddress
import itertools
import select
import socket
import ssl
import threading
import time
from concurrent.futures import Future

from broker_core.acl import credentials, tls
from broker_core.acl.handshake import AuthFailed, client_handshake
from broker_core.errors import BrokerError
from broker_core.protocol import (
    FLAG_ONEWAY,
    HEADER_SIZE,
    LENGTH_SIZE,
    Code,
    FrameDecoder,
    ProtocolError,
    decode_header,
    decode_json,
    encode_frame,
    encode_json,
)

PUMP_LINGER_S = 1.0  # a pump thread with nothing to serve this long exits
# A plain connection closed before any answer: a TLS port closes on the first frame
TLS_HINT = " before any answer (a broker serving TLS? give --tls-ca or set FLOODGATE_TLS_CA)"


class BrokerUnavailable(BrokerError):
    """The broker could not be reached or the connection broke mid-call."""


class NotSent(BrokerUnavailable):
    """The request never left this client (no connection, or not all of it written):
    nothing of it can have been stored."""


def parse_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad broker address {addr!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_local(addr: str) -> bool:
    """Does `addr` point at this host (loopback, its own name, or one of its
    interfaces' addresses)? Such a broker shares the producer's cores."""
    host, _port = parse_addr(addr)
    if host in ("localhost", socket.gethostname()):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name: not resolved here (no DNS in a constructor)
    if ip.is_loopback or ip.is_unspecified:
        return True
    import psutil

    return any(a.address.split("%")[0] == host
               for addrs in psutil.net_if_addrs().values() for a in addrs)


class _Link:
    """One TCP connection and its read buffer: replaced as a whole on reconnect,
    so a reader still holding the old one never mixes bytes of two streams."""

    __slots__ = ("sock", "buf", "chunk", "tls", "answered")

    def __init__(self, sock: socket.socket, tls: threading.Lock | None = None) -> None:
        self.sock = sock
        # TLS: the socket is non-blocking and this lock is held around each of its reads
        # and writes (an OpenSSL connection must not be used by two threads at once; the
        # reader and the writers here are different threads)
        self.tls = tls
        self.answered = False  # any frame read: a broker that speaks our protocol here
        self.buf = bytearray()
        # read into one buffer kept for the link: recv(256 KiB) allocated (mmap'd) and
        # shrank a fresh one on every read, three system calls and page faults each
        self.chunk = bytearray(1 << 18)


class Connection:
    """`credentials` (acl.credentials; default: FLOODGATE_CREDENTIALS): each connect
    authenticates with them before anything else is sent (acl.handshake).
    `tls_context`: an ssl.SSLContext for a broker serving TLS (default: the process's,
    FLOODGATE_TLS_CA: acl.tls)."""

    def __init__(self, addr: str, connect_timeout: float = 3.0, credentials=None,
                 tls_context=None) -> None:
        self.addr = addr
        self._credentials = credentials
        self._tls_context = tls_context
        self._host, self._port = parse_addr(addr)
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()  # socket writes, pending map, (re)connect
        self._read_lock = threading.Lock()  # whoever holds it reads the socket
        self._link: _Link | None = None
        self._pending: dict[int, Future] = {}
        self._unwatched = 0  # pending futures no blocking caller reads for
        self._pump: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._closed = False

    # -- writing ------------------------------------------------------------
    def _connect(self) -> _Link:
        try:
            sock = socket.create_connection((self._host, self._port), self._connect_timeout)
        except OSError as exc:
            raise BrokerUnavailable(f"{self.addr}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ctx = self._tls_context if self._tls_context is not None else tls.client_context()
        if ctx is not None:
            try:
                sock = ctx.wrap_socket(sock, server_hostname=self._host)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise BrokerUnavailable(f"{self.addr}: TLS handshake failed: {exc}") from None
        creds = self._credentials if self._credentials is not None else credentials.default()
        if creds is not None:
            self._authenticate(sock, creds)
        if ctx is None:
            sock.settimeout(None)
            return _Link(sock)
        sock.setblocking(False)
        return _Link(sock, threading.Lock())

    @staticmethod
    def _send_tls(link: _Link, data: bytes) -> None:
        """sendall on a non-blocking TLS socket: each write under the link's lock, waiting
        for room outside it (a reader may need the lock meanwhile)."""
        view = memoryview(data)
        while view:
            try:
                with link.tls:
                    n = link.sock.send(view)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                poller = select.poll()
                poller.register(link.sock, select.POLLOUT | select.POLLIN)
                poller.poll(50)
                continue
            view = view[n:]

    def _authenticate(self, sock: socket.socket, creds) -> None:
        """The handshake on the fresh socket, before the link reads it (blocking, within
        the connect timeout). AuthFailed when refused; BrokerUnavailable when cut."""
        decoder = FrameDecoder()
        sock.settimeout(self._connect_timeout)
        # closed before any answer on a plain socket: likely a broker serving TLS
        plain = not isinstance(sock, ssl.SSLSocket)

        def call(op: int, payload: dict):
            nonlocal plain
            sock.sendall(encode_frame(op, 0, encode_json(payload)))
            while True:
                data = sock.recv(65536)
                if not data:
                    raise OSError("closed by the broker" + (TLS_HINT if plain else ""))
                for header, body in decoder.feed(data):
                    plain = False
                    if header.code == Code.OK:
                        return header.code, decode_json(body)
                    return header.code, body.decode("utf-8", "replace")

        try:
            client_handshake(call, creds.user, creds.secret)
        except (OSError, ProtocolError) as exc:
            sock.close()
            raise BrokerUnavailable(f"{self.addr}: authentication cut off: {exc}") from None
        except AuthFailed as exc:
            sock.close()
            raise AuthFailed(f"{self.addr}: {exc}") from None

    def _send(self, op: int, body: bytes, oneway: bool, watched: bool, flags: int = 0
              ) -> Future:
        """NotSent when the request did not leave (no link, or not all of it written:
        the broker drops a partial frame); later failures come through the future."""
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise NotSent(f"{self.addr}: connection closed")
            if self._link is None:
                try:
                    self._link = self._connect()
                except BrokerUnavailable as exc:  # (no link: nothing left)
                    raise NotSent(str(exc)) from None
            link = self._link
            rid = next(self._ids) & 0xFFFFFFFF
            fut.request_id = rid  # type: ignore[attr-defined]  # for forget()
            fut.watched = watched  # type: ignore[attr-defined]
            if not oneway:
                self._pending[rid] = fut
                if not watched:
                    self._unwatched += 1
            try:
                frame = encode_frame(op, rid, body,
                                     flags=flags | FLAG_ONEWAY if oneway else flags)
                if link.tls is None:
                    link.sock.sendall(frame)
                else:
                    self._send_tls(link, frame)
            except OSError as exc:
                self._fail_all(link, f"{self.addr}: send failed: {exc}")
                raise NotSent(f"{self.addr}: send failed: {exc}") from None
            if not oneway and not watched and self._pump is None:
                self._pump = threading.Thread(target=self._pump_loop, daemon=True,
                                              name=f"floodgate-conn-{self.addr}")
                self._pump.start()
        if oneway:
            fut.set_result((0, b""))
        return fut

    def request(self, op: int, body: bytes = b"", oneway: bool = False,
                watched: bool = False, flags: int = 0) -> Future:
        """Send a request; the future resolves to (code, body) of the response.
        `watched`: the caller reads the answer itself (`serve_any`), no pump thread."""
        return self._send(op, body, oneway, watched, flags)

    def call(self, op: int, body: bytes = b"", timeout: float = 3.0, flags: int = 0
             ) -> tuple[int, bytes]:
        """Send and wait for the answer, reading the socket ourselves when we can.

        Raises TimeoutError (and forgets the request) after ``timeout``; NotSent when
        the request did not leave.
        """
        fut = self._send(op, body, False, True, flags)
        deadline = time.monotonic() + timeout
        while not fut.done():
            left = deadline - time.monotonic()
            if left <= 0:
                self.forget(fut)
                raise TimeoutError(f"{self.addr}: no answer in {timeout:g} s")
            if self._read_lock.acquire(blocking=False):
                try:
                    if not fut.done():
                        self._read_once(min(left, 0.05))
                finally:
                    self._read_lock.release()
            else:  # another thread is reading; it hands us our answer
                try:
                    fut.result(min(left, 0.005))
                except TimeoutError:
                    pass
        return fut.result(0)

    def pending(self) -> bool:
        """TLS: decrypted bytes wait in OpenSSL (poll cannot see them)."""
        link = self._link
        return link is not None and link.tls is not None and bool(link.sock.pending())

    def fileno(self) -> int:
        """The socket's descriptor (-1 when not connected): for `serve_any`."""
        link = self._link
        return link.sock.fileno() if link is not None else -1

    def serve(self) -> None:
        """Read what has arrived (the socket is readable), unless another thread is
        reading: `serve_any`."""
        if self._read_lock.acquire(blocking=False):
            try:
                self._read_once(0, ready=True)
            finally:
                self._read_lock.release()

    def forget(self, fut: Future) -> None:
        """Stop waiting for a request (it timed out); a late answer is dropped."""
        with self._lock:
            if self._pending.pop(getattr(fut, "request_id", None), None) is not None:
                if not getattr(fut, "watched", True):
                    self._unwatched -= 1

    # -- reading ------------------------------------------------------------
    def _read_once(self, timeout: float, ready: bool = False) -> None:
        """Read what arrives within ``timeout`` (``ready``: the socket is known to be
        readable) and dispatch complete frames. Called with the read lock held."""
        link = self._link
        if link is None:
            return
        try:
            if not ready and not (link.tls is not None and link.sock.pending()):
                # poll, not select: select() fails for an fd over 1023, which a busy
                # process (many brokers, ZooKeeper clients) reaches. TLS: what OpenSSL
                # already decrypted is not on the socket for poll to see (pending)
                poller = select.poll()
                poller.register(link.sock, select.POLLIN)
                if not poller.poll(max(0.0, timeout) * 1000.0):
                    return
            # another reader may have taken what poll saw: never block here
            if link.tls is None:
                n = link.sock.recv_into(link.chunk, 0, socket.MSG_DONTWAIT)
            else:
                with link.tls:
                    n = link.sock.recv_into(link.chunk)
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except (OSError, ValueError) as exc:  # ValueError: closed under us
            with self._lock:
                self._fail_all(link, f"{self.addr}: connection lost: {exc}")
            return
        if not n:
            hint = "" if link.answered or link.tls is not None else TLS_HINT
            with self._lock:
                self._fail_all(link, f"{self.addr}: connection closed by broker{hint}")
            return
        link.answered = True
        buf = link.buf
        buf += memoryview(link.chunk)[:n]
        pos = 0
        done = []
        try:
            while len(buf) - pos >= HEADER_SIZE:
                header = decode_header(buf, pos)
                end = pos + LENGTH_SIZE + header.length
                if end > len(buf):
                    break
                done.append((header, bytes(buf[pos + HEADER_SIZE:end])))
                pos = end
        except BrokerError as exc:
            with self._lock:
                self._fail_all(link, f"{self.addr}: bad frame from broker: {exc}")
            return
        if pos:
            del buf[:pos]
        with self._lock:
            futs = [(self._pending.pop(h.request_id, None), h, b) for h, b in done]
            for fut, _h, _b in futs:
                if fut is not None and not fut.watched:
                    self._unwatched -= 1
        for fut, header, body in futs:
            if fut is not None and not fut.done():
                fut.set_result((header.code, body))

    def _pump_loop(self) -> None:
        """Serve futures nobody blocks on; exit when there were none for PUMP_LINGER_S
        (a sender paced at 100 msgs/s, each answer back before the next send, started
        a thread a message)."""
        idle_since = None
        while True:
            with self._lock:
                if self._link is None:
                    self._pump = None
                    return
                if self._unwatched > 0:
                    idle_since = None
                elif idle_since is None:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since >= PUMP_LINGER_S:
                    self._pump = None
                    return
            if self._read_lock.acquire(timeout=0.05):
                try:
                    self._read_once(0.05)
                finally:
                    self._read_lock.release()

    def _fail_all(self, link: _Link, reason: str) -> None:
        """Called with the lock held: drop the link and fail what waits on it."""
        try:
            link.sock.close()
        except OSError:
            pass
        if self._link is not link:
            return  # a stale link: its requests were failed when it was dropped
        self._link = None
        pending, self._pending = self._pending, {}
        self._unwatched = 0
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(BrokerUnavailable(reason))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._link is not None:
                link = self._link
                try:
                    link.sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._fail_all(link, f"{self.addr}: connection closed")
