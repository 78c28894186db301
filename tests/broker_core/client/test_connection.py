"""The client connection against a scripted peer on a real socket: answers matched
by request id however the bytes arrive, a broken link failing what waits on it and
the next request reconnecting, a garbled stream refused, timeouts forgotten, and
the pool's addresses."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pytest

from broker_core.client.connection import BrokerUnavailable, Connection, parse_addr
from broker_core.client.pool import ConnectionPool
from broker_core.protocol import HEADER_SIZE, LENGTH_SIZE, decode_header, encode_answer

Handler = Callable[[socket.socket], None]


class Peer:
    """A listening socket that hands each accepted connection to the next handler."""

    def __init__(self, *handlers: Handler) -> None:
        self.handlers = list(handlers)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for handler in self.handlers:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            with conn:
                handler(conn)

    def close(self) -> None:
        self.server.close()
        self.thread.join(5)


def read_requests(conn: socket.socket, n: int) -> list[tuple[int, int, bytes]]:
    """(op, request id, body) of the next n frames."""
    buf, out = b"", []
    while len(out) < n:
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= HEADER_SIZE:
            h = decode_header(buf)
            end = LENGTH_SIZE + h.length
            if len(buf) < end:
                break
            out.append((h.op, h.request_id, buf[HEADER_SIZE:end]))
            buf = buf[end:]
    return out


@pytest.fixture
def peers():
    made: list[Peer] = []

    def make(*handlers: Handler) -> Peer:
        made.append(Peer(*handlers))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_answers_go_to_their_request_however_the_bytes_arrive(peers):
    def answer_backwards_a_byte_at_a_time(conn):
        reqs = read_requests(conn, 3)
        stream = b"".join(encode_answer(op, rid, 0, b"re:" + body)
                          for op, rid, body in reversed(reqs))
        for i in range(len(stream)):  # every split of a frame, header included
            conn.sendall(stream[i:i + 1])
        conn.recv(1)  # hold the link until the client closes

    peer = peers(answer_backwards_a_byte_at_a_time)
    conn = Connection(peer.addr)
    try:
        futs = [conn.request(7, body) for body in (b"a", b"bb", b"ccc")]
        assert [f.result(5) for f in futs] == [(0, b"re:a"), (0, b"re:bb"), (0, b"re:ccc")]
    finally:
        conn.close()


def test_a_broken_link_fails_what_waits_and_the_next_request_reconnects(peers):
    def hang_up(conn):
        read_requests(conn, 2)  # two requests in, no answer, then the link breaks

    def answer(conn):
        (op, rid, body), = read_requests(conn, 1)
        conn.sendall(encode_answer(op, rid, 0, body))
        conn.recv(1)

    peer = peers(hang_up, answer)
    conn = Connection(peer.addr)
    try:
        waiting = [conn.request(1, b"x"), conn.request(1, b"y")]
        for fut in waiting:
            with pytest.raises(BrokerUnavailable, match="closed by broker"):
                fut.result(5)
        assert conn.call(1, b"again", timeout=5) == (0, b"again")
        assert peer.accepted == 2
    finally:
        conn.close()


def test_a_garbled_stream_is_refused_not_read_on(peers):
    def garble(conn):
        read_requests(conn, 1)
        conn.sendall(b"\x00" * 40)
        conn.recv(1)

    peer = peers(garble)
    conn = Connection(peer.addr)
    try:
        with pytest.raises(BrokerUnavailable, match="bad frame from broker"):
            conn.call(1, b"x", timeout=5)
        assert conn.fileno() == -1  # the link is dropped, not resynchronised
    finally:
        conn.close()


def test_a_timed_out_call_is_forgotten_and_its_late_answer_dropped(peers):
    release = threading.Event()

    def late_then_prompt(conn):
        (op, rid, _), = read_requests(conn, 1)
        release.wait(5)
        conn.sendall(encode_answer(op, rid, 0, b"late"))
        (op2, rid2, body2), = read_requests(conn, 1)
        conn.sendall(encode_answer(op2, rid2, 0, body2))
        conn.recv(1)

    peer = peers(late_then_prompt)
    conn = Connection(peer.addr)
    try:
        with pytest.raises(TimeoutError, match="no answer in 0.05 s"):
            conn.call(1, b"slow", timeout=0.05)
        release.set()
        assert conn.call(1, b"next", timeout=5) == (0, b"next")  # not the late one
    finally:
        conn.close()


def test_closing_fails_pending_requests_and_refuses_new_ones(peers):
    peer = peers(lambda conn: (read_requests(conn, 1), conn.recv(1)))
    conn = Connection(peer.addr)
    fut = conn.request(1, b"x")
    conn.close()
    with pytest.raises(BrokerUnavailable, match="connection closed"):
        fut.result(5)
    with pytest.raises(BrokerUnavailable, match="connection closed"):
        conn.request(1, b"y")


def test_nothing_listening_names_the_address():
    with socket.create_server(("127.0.0.1", 0)) as s:
        addr = f"127.0.0.1:{s.getsockname()[1]}"
    conn = Connection(addr, connect_timeout=1.0)
    with pytest.raises(BrokerUnavailable, match=addr):
        conn.call(1, b"x", timeout=1)


@pytest.mark.parametrize("bad", ["nohost", "h:", "h:0", "h:65536", "h:port"])
def test_a_bad_address_is_refused_with_the_form_expected(bad):
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        parse_addr(bad)


def test_the_pool_reroutes_a_broker_to_its_new_address(peers):
    def echo(conn):
        (op, rid, body), = read_requests(conn, 1)
        conn.sendall(encode_answer(op, rid, 0, body))
        conn.recv(1)

    old, new = peers(echo), peers(echo)
    pool = ConnectionPool({"group-1": old.addr, "group-2": ""})
    try:
        first = pool.get("group-1")
        assert pool.get("group-1") is first  # one connection per broker
        assert first.call(1, b"a", timeout=5) == (0, b"a")
        pool.reroute("group-1", new.addr)  # its group's new master
        with pytest.raises(BrokerUnavailable):
            first.request(1, b"stale")  # the old link is closed
        assert pool.get("group-1").call(1, b"b", timeout=5) == (0, b"b")
        assert new.accepted == 1
        with pytest.raises(BrokerUnavailable, match="group-2: no address"):
            pool.get("group-2")
    finally:
        pool.close()


def test_one_pump_thread_serves_a_paced_sender_and_exits_once_idle(peers, monkeypatch):
    """Requests nobody waits on are read by a pump thread: a sender whose answers come
    back before its next send keeps the one thread (it started one a message), and the
    thread goes once nothing was in flight for PUMP_LINGER_S."""
    import time

    from broker_core.client import connection

    monkeypatch.setattr(connection, "PUMP_LINGER_S", 0.3)

    def echo(conn):
        for _ in range(5):
            ((op, rid, body),) = read_requests(conn, 1)
            conn.sendall(encode_answer(op, rid, 0, body))
        conn.recv(1)

    peer = peers(echo)
    conn = Connection(peer.addr)
    try:
        pumps = set()
        for i in range(5):
            assert conn.request(7, b"%d" % i).result(5) == (0, b"%d" % i)
            pumps.add(conn._pump)
            time.sleep(0.05)  # answered: nothing in flight until the next send
        assert len(pumps) == 1 and None not in pumps
        (pump,) = pumps
        pump.join(2)
        assert not pump.is_alive() and conn._pump is None
    finally:
        conn.close()
