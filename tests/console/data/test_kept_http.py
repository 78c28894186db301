"""The console's kept connections against a real aiohttp server (what brokers run):
one connection for many polls, a fresh one when the server closed the idle one, and
each failure as the one line the broker table shows."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from aiohttp import web

from broker_core.client.admin import NOT_HTTP
from console.data.kept_http import KeptConnections


class Server:
    """An aiohttp app on its own loop in a thread; counts the connections it accepted."""

    def __init__(self, keepalive_s: float = 75.0) -> None:
        self.peers: set[tuple] = set()
        self.keepalive_s = keepalive_s
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def stats(request: web.Request) -> web.Response:
            self.peers.add(request.transport.get_extra_info("peername"))
            return web.json_response({"broker": "b0", "history": request.query.get("history")})

        app = web.Application()
        app.add_routes([web.get("/stats", stats)])
        self.runner = web.AppRunner(app, keepalive_timeout=self.keepalive_s)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.addr = f"127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        self.ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def plain_http(monkeypatch):
    from broker_core.acl.tls import ENV_CA, ENV_CERT, ENV_KEY

    for name in (ENV_CA, ENV_CERT, ENV_KEY):
        monkeypatch.setenv(name, "")  # a broker without TLS: plain http


def test_many_polls_ride_one_connection(plain_http):
    server, http = Server(), KeptConnections(timeout=5, broker=True)
    try:
        docs = [http.get(server.addr, f"/stats?history={n}") for n in range(5)]
    finally:
        http.close()
        server.stop()
    assert [doc["history"] for doc, _ in docs] == ["0", "1", "2", "3", "4"]
    assert http.opened == 1 and len(server.peers) == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error(plain_http):
    server, http = Server(keepalive_s=0.2), KeptConnections(timeout=5, broker=True)
    try:
        first = http.get(server.addr, "/stats")
        time.sleep(0.6)  # the server's keep-alive ran out: it closed our connection
        second = http.get(server.addr, "/stats")
    finally:
        http.close()
        server.stop()
    assert first[1] is None and second[1] is None
    assert http.opened == 2 and len(server.peers) == 2


def test_each_failure_is_one_line(plain_http):
    http = KeptConnections(timeout=0.5, broker=True)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        refused = f"127.0.0.1:{free.getsockname()[1]}"
    assert http.get(refused, "/stats") == (None, "connection refused")

    with socket.socket() as silent:  # accepts (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        t0 = time.monotonic()
        silent_addr = f"127.0.0.1:{silent.getsockname()[1]}"
        assert http.get(silent_addr, "/stats") == (None, "timed out")
        assert time.monotonic() - t0 < 2

    server = Server()
    try:
        assert http.get(server.addr, "/nothing") == (None, "HTTP 404 from /nothing")
        assert http.get(server.addr, "/stats")[1] is None  # the same connection goes on
    finally:
        server.stop()
    assert http.get("127.0.0.1:1:2", "/stats")[1] is not None


def test_a_port_that_does_not_speak_http_is_named(plain_http):
    with socket.socket() as data_port:
        data_port.bind(("127.0.0.1", 0))
        data_port.listen()

        def answer_garbage():
            conn, _ = data_port.accept()
            conn.recv(1024)
            conn.sendall(b"\x00\x00\x00\x10binary frame....")
            conn.close()

        t = threading.Thread(target=answer_garbage, daemon=True)
        t.start()
        got = KeptConnections(timeout=2, broker=True).get(
            f"127.0.0.1:{data_port.getsockname()[1]}", "/stats")
        t.join(5)
    assert got == (None, NOT_HTTP)
