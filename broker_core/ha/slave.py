"""The slave's side of replication: follow one master, write what it streams.

Connects to the master's HA port and says where its log ends and which
epochs wrote it. The master answers where to start, or that this log holds
bytes the master never had (TRUNCATE: cut them, logging how many, then
reconnect). DATA frames are written at their physical offsets; each read off
the link (one or many frames) is acked once, with the offset of the last
complete record. A frame from an epoch older than the newest this broker
knows is a fenced master talking: the link is dropped. A master silent for
SILENT_BEATS heartbeats is taken for gone (one timer, armed for when that would
be). Reconnects every RETRY_S until stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker_core.ha import wire
from broker_core.ha.epochs import EpochFile, EpochHistory
from broker_core.store import MessageStore

log = logging.getLogger("floodgate.ha")

RETRY_S = 0.2
HELLO_ANSWER_S = 5.0
SILENT_BEATS = 3


@dataclass
class MasterInfo:
    name: str
    ha_addr: str
    epoch: int


class ReplicaClient:
    def __init__(self, store: MessageStore, epochs: EpochFile, name: str, group: str,
                 master: MasterInfo, known_epoch: Callable[[], int],
                 on_records: Callable[[set[tuple[str, int]]], None],
                 on_meta: Callable[[dict], None],
                 on_truncate: Callable[[int, int], None],
                 wall: Callable[[], float] = time.time, tls=None,
                 on_refused: Callable[[MasterInfo], None] | None = None) -> None:
        """`tls`: the client context towards the master's HA port (None: plain TCP).
        `on_refused(master)`: the master's HA port refused a connection (nothing listens:
        its process is gone), told once per master and epoch."""
        self.tls = tls
        self._on_refused = on_refused
        self._refused_told = False
        self.store, self.epochs = store, epochs
        self.name, self.group, self.master = name, group, master
        self._known_epoch = known_epoch
        self._on_records, self._on_meta, self._on_truncate = on_records, on_meta, on_truncate
        self._wall = wall
        self.replica = store.replica_log()
        self._sync_flush = store.config.flush == "sync"
        self.connected = False
        self.master_end = 0  # the master's log end, as of its last frame
        self.master_ms = 0  # the master's clock at its last frame
        self.last_frame = 0.0
        self.last_error = ""
        self.frames = 0
        self._task: asyncio.Task | None = None
        self._writer: asyncio.Transport | None = None
        # Checked by every loop: Python 3.11's wait_for can swallow a cancel that
        # arrives as its read completes (the closed link), and the task would go on.
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop following; once this returns no byte of the master is written."""
        self._stopped = True
        task, self._task = self._task, None
        if self._writer is not None:
            self._writer.close()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self.connected = False

    def _log_end(self) -> int:
        """Where this log ends, said in HELLO: past its last complete record."""
        return self.replica.offset

    @property
    def lag_bytes(self) -> int:
        return max(0, self.master_end - self.replica.offset)

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._follow()
            except ConnectionRefusedError as exc:
                self.last_error = str(exc)
                if self._on_refused is not None and not self._refused_told:
                    self._refused_told = True
                    log.warning("replication from %s (%s): connection refused: its "
                                "process is gone?", self.master.name, self.master.ha_addr)
                    self._on_refused(self.master)
            except (wire.LinkError, OSError, ConnectionError, TimeoutError) as exc:
                if str(exc) != self.last_error:
                    log.info("replication from %s (%s): %s", self.master.name,
                             self.master.ha_addr, exc)
                self.last_error = str(exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a bad frame must not end following
                log.exception("replication from %s failed", self.master.name)
                self.last_error = str(exc)
            finally:
                was_linked, self.connected = self.connected, False
                if self._writer is not None:
                    self._writer.close()
                    self._writer = None
            if not self._stopped:  # a link that just ended: again at once (a killed
                await asyncio.sleep(0 if was_linked else RETRY_S)  # master refuses now)

    async def _follow(self) -> None:
        host, _, port = self.master.ha_addr.rpartition(":")
        loop = asyncio.get_running_loop()
        transport, link = await asyncio.wait_for(
            loop.create_connection(lambda: _Follower(self), host, int(port), ssl=self.tls,
                                   server_hostname=host if self.tls is not None else None),
            2.0)
        self._writer = transport
        if self._stopped:
            return
        transport.write(wire.json_frame(wire.HELLO, {
            "name": self.name, "group": self.group, "epoch": self._known_epoch(),
            # a partly received record is sent again from its start
            "offset": self._log_end(), "segment_bytes": self.store.commitlog.allocator.size,
            "history": self.epochs.history.to_list()}))
        await link.done

    def _welcomed(self, kind: int, body: bytes) -> None:
        """The master's answer to HELLO; raises LinkError unless it is WELCOME."""
        replica = self.replica
        doc = wire.decode_json(body) if kind != wire.DATA else {}
        if kind == wire.REFUSE:
            raise wire.LinkError(f"master refused: {doc.get('reason')}")
        if kind == wire.TRUNCATE:
            cut_at = int(doc["offset"])
            cut = replica.truncate(cut_at)
            self._on_truncate(cut_at, cut)
            raise wire.LinkError(f"cut the log at {cut_at} ({cut} bytes) as the master asked")
        if kind != wire.WELCOME or int(doc.get("offset", -1)) != self._log_end():
            raise wire.LinkError(f"unexpected answer to HELLO: {wire.KIND_NAMES.get(kind)}")
        if int(doc.get("epoch", 0)) < self._known_epoch():
            raise wire.LinkError(f"master at epoch {doc.get('epoch')} is fenced "
                                 f"(epoch {self._known_epoch()} exists)")
        self.epochs.replace(EpochHistory.from_list(doc.get("history", [])))
        self.connected = True
        self.last_error = ""
        log.info("following master=%s group=%s from offset=%d", self.master.name, self.group,
                 replica.offset)

    def _frames(self, frames: list[tuple[int, bytes]], transport) -> None:
        """DATA and META frames of one read: written, indexed, then acked once."""
        touched: set[tuple[str, int]] = set()
        wrote = False
        for kind, body in frames:
            if self._stopped:
                return
            self.frames += 1
            if kind == wire.META:
                self._on_meta(wire.decode_json(body))
                continue
            if kind != wire.DATA:
                raise wire.LinkError(f"unexpected {wire.KIND_NAMES[kind]} from the master")
            at, end, ms, epoch, _commit, data = wire.decode_data(body)
            if epoch < self._known_epoch():
                raise wire.LinkError(f"data of epoch {epoch} after epoch "
                                     f"{self._known_epoch()} began: the master is fenced")
            self.master_end, self.master_ms = end, ms
            if data:
                touched |= self.replica.append(at, data)
                wrote = True
        if wrote:
            transport.write(wire.ack_frame(self.replica.offset))
            if self._sync_flush:  # acked from the page cache, as RocketMQ's slaves do
                self.store.flushed_future(self.replica.offset)
            if touched:
                self._on_records(touched)

    def figures(self) -> dict:
        return {"master": self.master.name, "master_ha": self.master.ha_addr,
                "connected": self.connected, "offset": self.replica.offset,
                "master_end": self.master_end, "lag_bytes": self.lag_bytes,
                "last_error": self.last_error}


class _Follower(asyncio.Protocol):
    """The slave's end of the link: the answer to HELLO, then the stream."""

    def __init__(self, client: ReplicaClient) -> None:
        self.client = client
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future = loop.create_future()  # the link's end (or why)
        self.transport = None
        # whoever awaits `done` sees its exception; a link nobody waits for any more (the
        # broker's role changed) must not log "Future exception was never retrieved"
        self.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._buf = bytearray()
        self._welcomed = False
        self._last = time.monotonic()
        # armed once connected: uvloop makes the protocol before it connects, and a
        # refused connection left its watchdog running for 5 s (a master just killed)
        self._watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._last = time.monotonic()
        self._watch = asyncio.get_running_loop().call_later(HELLO_ANSWER_S, self._watchdog)

    def connection_lost(self, exc) -> None:
        self._end(exc or wire.LinkError("replication link closed by peer"))

    def _end(self, exc: BaseException) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if not self.done.done():
            self.done.set_exception(exc)
        if self.transport is not None:
            self.transport.close()

    def _watchdog(self) -> None:
        silent = time.monotonic() - self._last
        limit = SILENT_BEATS * wire.HEARTBEAT_S if self._welcomed else HELLO_ANSWER_S
        if silent >= limit:
            self._end(TimeoutError(f"master silent for {silent:.1f} s"))
            return
        self._watch = asyncio.get_running_loop().call_later(limit - silent, self._watchdog)

    def data_received(self, data: bytes) -> None:
        c = self.client
        if c._stopped or self.done.done():
            return  # once stop() returns no byte of the master is written
        self._last = now = time.monotonic()
        c.last_frame = now
        buf = self._buf
        buf += data
        frames: list[tuple[int, bytes]] = []
        pos = 0
        try:
            for kind, body, pos in wire.frames(buf):  # noqa: B007 - pos: consumed so far
                if not self._welcomed:
                    c._welcomed(kind, body)
                    self._welcomed = True
                else:
                    frames.append((kind, body))
            del buf[:pos]
            if frames:
                c._frames(frames, self.transport)
        except Exception as exc:  # noqa: BLE001 - the link ends; _run logs why, reconnects
            self._end(exc)
