"""The master's end of one slave's replication link (an asyncio Protocol on the HA port).

The slave says HELLO (where its log ends, the epochs that wrote it); the master
answers WELCOME and streams from there, or TRUNCATE / REFUSE and closes. Then it
streams what has accumulated since the last transfer, as RocketMQ's HA service
does: every append in a turn of the event loop wakes the link once (`kick`), and
the push sends everything up to the log's end in one DATA frame (1 MiB at most,
never across a segment end). A slave's acks arrive in batches too: each read takes
the highest. A link that sent nothing for HEARTBEAT_S sends a heartbeat, with the
master's topic and offset tables (META) when they may have changed since it last
sent them (`meta_version`); a slave that says nothing for HELLO_TIMEOUT_S after
connecting is dropped. One timer a link, armed for the next heartbeat owed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from broker_core.deadline import Deadline
from broker_core.gather_write import is_tls, write_parts
from broker_core.ha import wire
from broker_core.store import MessageStore

log = logging.getLogger("floodgate.ha")

HELLO_TIMEOUT_S = 5.0


class LinkOwner(Protocol):
    """What a link needs of its master (ha.master.ReplicationMaster is one): the link
    is written against this, so the master's module is the only one importing the
    other."""

    group: str
    store: MessageStore

    def now(self) -> float: ...
    def wall_ms(self) -> int: ...
    def epoch(self) -> int: ...
    def commit_offset(self) -> int: ...
    def configs_between(self, start: int, end: int) -> list: ...
    def is_master(self) -> bool: ...
    def meta(self) -> dict: ...
    def meta_version(self) -> int: ...
    def welcome(self, link: SlaveLink, hello: dict) -> bool: ...
    def on_ack(self, link: SlaveLink) -> None: ...
    def dropped(self, link: SlaveLink) -> None: ...


class SlaveLink(asyncio.Protocol):
    """One slave, as its master sees it: its link, what it holds, when it last acked."""

    def __init__(self, master: LinkOwner) -> None:
        self.master = master
        self.name = ""
        self.addr = "?"
        self.acked = 0  # the slave holds every record below this offset
        self.connected_at = 0.0
        self.last_ack = 0.0
        self.open = False  # streaming (after the handshake) and not yet dropped
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._pos = 0  # the next byte to send
        self._kicked = False
        self._paused = False
        self._last_sent = 0.0
        self._meta_sent = -1  # the owner's meta_version when META last went out
        self._timer: asyncio.TimerHandle | None = None  # the HELLO's deadline
        self._beat = Deadline(self._tick, "replication heartbeat")
        self.tls = False  # a TLS link: a frame's head and data are joined, one record

    # -- the connection --------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.tls = is_tls(transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.addr = f"{peer[0]}:{peer[1]}"
        self._timer = asyncio.get_running_loop().call_later(HELLO_TIMEOUT_S, self._no_hello)

    def _no_hello(self) -> None:
        if not self.name:
            self.close(f"no HELLO within {HELLO_TIMEOUT_S:g} s")

    def connection_lost(self, exc) -> None:
        if self.name:
            log.info("replication link closed group=%s slave=%s: %s", self.master.group,
                     self.name, exc or "closed by the slave")
        self._stop()

    def _stop(self) -> None:
        self.open = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._beat.close()
        self.master.dropped(self)

    def close(self, reason: str = "") -> None:
        """Drop the link (the slave reconnects and says HELLO again)."""
        if reason and self.name:
            log.info("replication link dropped group=%s slave=%s: %s", self.master.group,
                     self.name, reason)
        if self.transport is not None:
            self.transport.close()
            self.transport = None
        self._stop()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self.kick()

    # -- what the slave sends ------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos = 0
        acked = self.acked
        try:
            for kind, body, pos in wire.frames(buf):  # noqa: B007 - pos: consumed so far
                if not self.name:
                    if kind != wire.HELLO:
                        raise wire.LinkError(f"expected HELLO, got {wire.KIND_NAMES[kind]}")
                    if not self.master.welcome(self, wire.decode_json(body)):
                        return  # refused or told to truncate: closing
                    acked = self.acked
                elif kind == wire.ACK:
                    acked = max(acked, wire.decode_ack(body))
                else:
                    raise wire.LinkError(f"unexpected {wire.KIND_NAMES[kind]} from a slave")
        except wire.LinkError as exc:
            self.close(str(exc))
            return
        finally:
            del buf[:pos]
        if acked > self.acked:
            self.acked = acked
            self.last_ack = self.master.now()
            self.master.on_ack(self)

    # -- what the master sends -------------------------------------------------------------
    def start(self, offset: int, welcome: list[bytes]) -> None:
        """The handshake passed: say so and stream from `offset`."""
        self.acked = self._pos = offset
        self.connected_at = self._last_sent = self.master.now()
        self.open = True
        write_parts(self.transport, welcome, self.tls)  # with META
        self._meta_sent = self.master.meta_version()
        self._timer.cancel()
        self._timer = None
        self._beat.after(wire.HEARTBEAT_S)

    def refuse(self, frame: bytes) -> None:
        """Answer the HELLO with REFUSE or TRUNCATE, then close once it is out."""
        self.transport.write(frame)
        self.transport.close()
        self.transport = None
        self._stop()

    def kick(self) -> None:
        """The log grew: push once this turn of the loop is over (one frame for all)."""
        if not self._kicked and self.open:
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._push)

    def _push(self) -> None:
        self._kicked = False
        if not self.open or self._paused or self.transport is None:
            return
        m = self.master
        cl = m.store.commitlog
        end = cl.write_offset
        pos = self._pos
        if pos >= end:
            return
        ms, epoch, commit = m.wall_ms(), m.epoch(), m.commit_offset()
        for offset, members in m.configs_between(pos, end):  # (a raft group's members)
            self.transport.write(wire.json_frame(wire.CONFIG, {"offset": offset,
                                                               "members": list(members)}))
        while pos < end and not self._paused:
            seg = cl.segment_for(pos)
            data = None if seg is None else \
                cl.read(pos, min(end, seg.end_offset, pos + wire.CHUNK) - pos)
            if data is None:
                self.close(f"offset {pos} is no longer in the log")
                return
            write_parts(self.transport, wire.data_frame_parts(pos, end, ms, epoch, data, commit),
                        self.tls)
            pos += len(data)
        self._pos = pos
        self._last_sent = m.now()

    def _tick(self) -> float | None:
        """META if the tables may have changed, a heartbeat if nothing went out for a
        beat; due again when the next heartbeat is owed."""
        if not self.open or self.transport is None:
            return None
        m = self.master
        now = m.now()
        if not m.is_master():
            self.close("no longer master")
            return None
        if self._paused:  # the slave reads nothing: the resume's push says we live
            return wire.HEARTBEAT_S
        version = m.meta_version()
        if version != self._meta_sent:
            self.transport.write(wire.json_frame(wire.META, m.meta()))
            self._meta_sent = version
        if now - self._last_sent >= wire.HEARTBEAT_S * 0.9:
            self.transport.write(wire.data_frame(self._pos, self._pos, m.wall_ms(), m.epoch(),
                                                 commit=m.commit_offset()))
            self._last_sent = now
        return wire.HEARTBEAT_S - (now - self._last_sent)
