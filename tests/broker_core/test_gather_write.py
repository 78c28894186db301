"""Several buffers written as one: over TLS, one record for what fits in one (asyncio's
and uvloop's TLS transports sealed each buffer of `writelines` in a record of its own,
and a consumer read a pull's records one by one); in plain TCP, the same bytes."""

from __future__ import annotations

import asyncio
import ssl
import struct

import pytest
import uvloop

from broker_core.acl.tls import context_for, make_certs, server_context
from broker_core.gather_write import is_tls, write_parts

APP_DATA = 23  # a TLS record's content type: application data
PARTS = [b"H" * 40] + [bytes([65 + i]) * 150 for i in range(32)]  # a pull: head, 32 records


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls"), ["127.0.0.1"])


class _Writes(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        write_parts(transport, PARTS, is_tls(transport))


async def _records_and_bytes(server_ctx, client_ctx) -> tuple[list[int], bytes]:
    """Serve `PARTS` with write_parts; read them as a client whose TLS runs over memory
    buffers, so the raw records on the wire can be counted: (the size of each
    application-data record, the bytes read)."""
    server = await asyncio.get_running_loop().create_server(_Writes, "127.0.0.1", 0,
                                                             ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    want = sum(map(len, PARTS))
    raw = bytearray()
    try:
        if client_ctx is None:
            return [], await reader.readexactly(want)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = client_ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
        got = bytearray()
        handshaken = False
        while len(got) < want:
            try:
                if not handshaken:
                    tls.do_handshake()
                    handshaken = True
                while len(got) < want:  # every record the memory buffer holds
                    got += tls.read(1 << 16)
            except ssl.SSLWantReadError:
                pass
            if outgoing.pending:
                writer.write(outgoing.read())
            if len(got) < want:
                data = await asyncio.wait_for(reader.read(1 << 16), 5)
                assert data, "the server closed the connection"
                raw += data
                incoming.write(data)
        sizes, pos = [], 0
        while pos + 5 <= len(raw):
            kind, _version, length = struct.unpack_from(">BHH", raw, pos)
            if kind == APP_DATA:
                sizes.append(length)
            pos += 5 + length
        return sizes, bytes(got)
    finally:
        writer.close()
        server.close()


@pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop],
                         ids=["asyncio", "uvloop"])
def test_buffers_written_over_tls_leave_in_one_record(certs, loop_factory):
    server_ctx = server_context(certs["broker"], certs["broker_key"])
    client_ctx = context_for(certs["ca"])
    client_ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # 1.3 seals its tickets as data too
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        sizes, got = runner.run(_records_and_bytes(server_ctx, client_ctx))
    assert got == b"".join(PARTS)
    assert len(sizes) == 1  # writelines: 33


def test_plain_tcp_gets_the_same_bytes(certs):
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        _sizes, got = runner.run(_records_and_bytes(None, None))
    assert got == b"".join(PARTS)
