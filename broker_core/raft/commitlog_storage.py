"""A broker's Raft storage: the CommitLog is the Raft log (raft.log's RaftStorage).

    storage = CommitLogStorage(store, raft_dir, sync=True)
    node = RaftNode(name, peers, storage, ...)
    touched = storage.publish(node.commit)   # committed records into the ConsumeQueues

An entry's data is CommitLog bytes: the records of one leader append, placed at the
offset where the log ends (raft.entry_bytes), so every replica's CommitLog is
byte-identical up to the entries they share, as the master/slave replicas' are.
Where each entry ends and its term are in `entries` (raft.entry_index), the node's
term and vote in `vote.json` (raft.vote_file).

Readers see committed entries only. Bytes appended (by the leader's proposal or from
the leader) sit past the CommitLog's write offset, which readers and the
ConsumeQueues stop at, until `publish` indexes them. On start, records not known to
be committed are withdrawn from the queues (their bytes stay): those past the
`published` mark saved here, which lags the truth (saved at most every
`save_every_s` and on close), never leads it. The store's own recovery has by then
cut a torn record; an entry whose bytes did not all reach the disk, and bytes no
entry names, are cut here.

In sync flush mode an append returns once its bytes and slots are on disk (the
node acknowledges it, or counts it toward a majority, only then); otherwise once
they are in the page cache.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

from broker_core.errors import StoreCorruptError
from broker_core.fsutil import atomic_write
from broker_core.protocol.record import BLANK, BLANK_MAGIC, CorruptRecord, index_record
from broker_core.raft.config_file import ConfigFile
from broker_core.raft.entry_index import EntryIndex
from broker_core.raft.messages import Entry
from broker_core.raft.vote_file import VoteFile
from broker_core.store import MessageStore
from broker_core.store.index_service import split_keys
from broker_core.store.replica import MAX_KNOWN, Indexed

log = logging.getLogger("floodgate.raft")

SAVE_EVERY_S = 1.0
RECENT_ENTRIES, RECENT_BYTES = 64, 8 << 20  # own entries kept to send (followers trail by few)


class CommitLogStorage:
    def __init__(self, store: MessageStore, directory: str | Path, *, sync: bool,
                 clock: Callable[[], float] = time.monotonic,
                 save_every_s: float = SAVE_EVERY_S) -> None:
        self.store, self.sync = store, sync
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._clock, self._save_every_s = clock, save_every_s
        self.commitlog = store.commitlog
        self.segment_bytes = self.commitlog.allocator.size
        self.replica = store.replica_log()
        self.votes = VoteFile(self.dir / "vote.json")
        # a store that held records before it ran Raft: they are the base, committed
        self.index = EntryIndex(self.dir / "entries", base_offset=self.commitlog.write_offset)
        self._published_path = self.dir / "published.json"
        self._saved_at = clock()
        self._durable = 0  # bytes below this are on disk (sync mode)
        # records of entries not yet published, read already (store.replica.Indexed): a
        # follower's as it verified them, a leader's as it built them (raft.appender)
        self.known: dict[int, Indexed] = {}
        self._own = False  # appending this node's own proposal: built here, not verified
        self._recent: dict[int, Entry] = {}  # the newest own entries, oldest first
        self._recent_bytes = 0
        self.cut_on_start = self._reconcile()
        self.configs = ConfigFile(self.dir / "members.json", self.index.last_index(),
                                  self.index.base_index)
        self._installing: list | None = None  # [index, end, next offset, fresh start]
        self._touched: set[tuple[str, int]] = set()  # a snapshot's queues, told on publish

    # -- start ----------------------------------------------------------------------------
    def _reconcile(self) -> dict:
        """Make the entry index, the CommitLog and the queues agree after a restart."""
        cl, idx = self.commitlog, self.index
        held = cl.write_offset  # the store's recovery verified every record below
        if idx.base_offset > held:
            raise StoreCorruptError(f"{self.dir}: the Raft log starts at {idx.base_offset} "
                                    f"but the CommitLog holds only up to {held}")
        dropped = idx.dropped
        if idx.last_end() > held:  # an entry whose bytes did not all reach the disk
            keep = idx.index_at(held)
            dropped += idx.last_index() - keep
            idx.truncate(keep + 1)
        cut = self.replica.truncate(idx.last_end()) if held > idx.last_end() else 0
        published = max(idx.base_offset, min(self._load_published(), idx.last_end()))
        withdrawn = self.replica.withdraw(published)
        self._durable = idx.last_end()
        report = {"entries_dropped": dropped, "bytes_cut": cut, "units_withdrawn": withdrawn,
                  "published": self.commitlog.write_offset, "last_index": idx.last_index()}
        if dropped or cut:
            log.warning("raft log %s on start: %s", self.dir, report)
        return report

    def _load_published(self) -> int:
        try:
            return int(json.loads(self._published_path.read_text())["offset"])
        except FileNotFoundError:
            return 0
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreCorruptError(f"{self._published_path}: unreadable ({exc})") from None

    def save_published(self) -> None:
        """Save how far readers see (a lower bound of what is committed)."""
        atomic_write(self._published_path,
                     json.dumps({"offset": self.commitlog.write_offset}).encode())
        self._saved_at = self._clock()

    # -- RaftStorage ------------------------------------------------------------------------
    @property
    def term(self) -> int:
        return self.votes.term

    @property
    def voted_for(self) -> str | None:
        return self.votes.voted_for

    def save_vote(self, term: int, voted_for: str | None) -> None:
        self.votes.save_vote(term, voted_for)

    def last_index(self) -> int:
        return self.index.last_index()

    def term_at(self, index: int) -> int:
        return self.index.term_at(index) if index >= 0 else 0

    def end_offset(self) -> int:
        """Where the next entry's bytes go."""
        return self.index.last_end()

    def entries(self, first: int, last: int, max_bytes: float = math.inf) -> list[Entry]:
        first = max(first, self.index.base_index + 1)
        last = min(last, self.index.last_index())
        out, size = [], 0
        configs, recent, index = self.configs.entries, self._recent, self.index
        for i in range(first, last + 1):
            e = recent.get(i)
            if e is not None:
                size += len(e.data)
            else:  # (sized before it is read)
                start, end = index.end_of(i - 1), index.end_of(i)
                size += end - start
            if size > max_bytes and out:
                break
            if e is None:
                e = Entry(index.term_at(i), i, self._read(start, end), configs.get(i))
            out.append(e)
        return out

    def _remember(self, e: Entry) -> None:
        """A leader's own entry, kept to send as it is: every follower gets the same
        object (one encoding, raft.transport), none read back from the CommitLog."""
        recent = self._recent
        recent[e.index] = e
        self._recent_bytes += len(e.data)
        while len(recent) > RECENT_ENTRIES or self._recent_bytes > RECENT_BYTES:
            self._recent_bytes -= len(recent.pop(next(iter(recent))).data)

    def _forget(self) -> None:
        self.known.clear()  # (bytes at those offsets may be replaced: parsed again)
        self._recent.clear()
        self._recent_bytes = 0

    def append(self, entries: list[Entry]) -> None:
        for e in entries:
            if e.index != self.index.last_index() + 1:
                raise StoreCorruptError(f"entry {e.index} appended after "
                                        f"{self.index.last_index()}")
            start = self.index.last_end()
            if e.members is not None:  # saved before the slot that names it
                self.configs.add(e.index, e.members)
            if e.data:
                if not self._own:  # a leader's bytes, from the network
                    verify_entry(e.data, start, self.segment_bytes, self.known)
                self.replica.hold(start, e.data)
            self.index.append(e.term, start + len(e.data))
            if self._own:
                self._remember(e)
        if self.sync and entries:
            self._sync()

    def own_entries(self) -> _OwnEntries:
        """Appends meanwhile (a `with` block) are this node's proposals (records it
        encoded itself): their CRCs are not computed again (a fifth of a leader's CPU)."""
        return _OwnEntries(self)

    def truncate(self, index: int) -> None:
        self._forget()
        start = self.index.end_of(index - 1)
        if start < self.commitlog.write_offset:
            raise StoreCorruptError(f"Raft asked to cut entries from {index}, at offset "
                                    f"{start}, below what is committed "
                                    f"({self.commitlog.write_offset})")
        self.index.truncate(index)
        self.configs.cut(index)
        self.replica.truncate(start)
        self._durable = min(self._durable, start)
        if self.sync:
            self.index.sync()

    # -- membership and snapshots (raft.membership, raft.snapshots) -------------------------
    def first_index(self) -> int:
        return self.index.base_index + 1

    def config(self, upto: int | None = None) -> tuple[int, tuple[str, ...] | None]:
        upto = self.index.last_index() if upto is None else upto
        return self.configs.config(upto, self.index.base_index)

    def set_bootstrap(self, members: tuple[str, ...]) -> None:
        if self.config()[1] is None:
            self.configs.bootstrap = tuple(members)
            self.configs.save()

    def snapshot_size(self, index: int) -> tuple[int, int]:
        """The store's bytes up to entry `index`: from the CommitLog's first segment,
        records from before Raft ran too (a group once master/slave)."""
        return self.commitlog.min_offset, self.index.end_of(index)

    def snapshot_read(self, index: int, offset: int, size: int) -> bytes:
        try:
            return self._read(offset, offset + size)
        except StoreCorruptError as exc:
            raise LookupError(str(exc)) from None

    def install(self, index: int, start: int, offset: int, data: bytes, end: int) -> int:
        """Bytes of a leader's store at the offsets they hold there. A member that holds
        records keeps what it published (committed: the leader's bytes too) and takes
        the rest; an empty one starts its CommitLog where the leader's starts."""
        self._forget()
        st = self._installing
        if st is None or st[:2] != [index, end]:
            held, empty = self.commitlog.write_offset, not self.commitlog.segments
            if not empty and held < start:
                return -1  # a hole between its store and the leader's first byte
            if not empty:  # its tail past what it published goes, slots and bytes
                keep = self.index.index_at(held)
                if keep < self.index.last_index():
                    self.index.truncate(keep + 1)
                    self.configs.cut(keep + 1)
                self.replica.truncate(held)
            st = self._installing = [index, end, start if empty else held,
                                     start if empty else None]
        if offset != st[2]:
            return st[2]
        if st[3] is not None and not self.commitlog.segments:
            self.commitlog.add_segment(st[3])
        st[2] = self.replica.hold(offset, data)
        return st[2]

    def install_done(self, index: int, term: int, members: tuple[str, ...], end: int) -> None:
        """Every record verified (CRCs: the chunks came over a network) and indexed; the
        entry index restarts at the snapshot's last entry."""
        fresh = self._installing[3] if self._installing else None
        self._installing = None
        self._touched |= self.replica.publish(end, crc=True)
        self.commitlog.flush()
        self.index.reset(index, term, end)
        self.configs.rebase(members)
        if fresh:  # queues start at the leader's first record: their units below go
            for cq in self.store.queue_table.all():
                cq.delete_below(fresh)
        self._durable = end
        self.save_published()

    # -- committed entries to readers -------------------------------------------------------
    def publish(self, commit: int) -> set[tuple[str, int]]:
        """Entries up to `commit` are committed: readers see their records. Returns the
        (topic, queue id) pairs that got messages (to wake long polls)."""
        commit = min(commit, self.index.last_index())
        touched, self._touched = self._touched, set()
        if commit > self.index.base_index:
            touched |= self.replica.publish(self.index.end_of(commit), known=self.known)
        if touched and self._clock() - self._saved_at >= self._save_every_s:
            self.save_published()
        return touched

    def close(self) -> None:
        self.save_published()
        self.index.close()

    # -- bytes -------------------------------------------------------------------------------
    def _read(self, start: int, end: int) -> bytes:
        parts, pos = [], start
        while pos < end:
            seg = self.commitlog.segment_for(pos)
            if seg is None:
                raise StoreCorruptError(f"entry bytes at {pos} are not in the CommitLog "
                                        "(removed by retention?)")
            n = min(end, seg.end_offset) - pos
            parts.append(bytes(seg.mm[pos - seg.start_offset:pos - seg.start_offset + n]))
            pos += n
        return b"".join(parts)

    def _sync(self) -> None:
        end = self.index.last_end()
        for seg in self.commitlog.segments:
            if seg.end_offset > self._durable and seg.start_offset < end:
                seg.flush()
        self.index.sync()
        self._durable = end


class _OwnEntries:
    """`own_entries`' block (a class, not @contextmanager: once per proposal, and the
    generator's machinery cost a leader several µs a send)."""

    __slots__ = ("storage",)

    def __init__(self, storage: CommitLogStorage) -> None:
        self.storage = storage

    def __enter__(self) -> None:
        self.storage._own = True

    def __exit__(self, *exc) -> None:
        self.storage._own = False


def verify_entry(data: bytes, start: int, segment_bytes: int,
                 into: dict[int, Indexed] | None = None) -> None:
    """Every record of an entry whole and in place (magic, lengths, its physical offset
    field, body CRC), and a blank only where it closes a segment, with the segment's
    rest: what a follower checks before it writes a leader's bytes. What it read of each
    record goes `into` (by physical offset), for its publishing."""
    pos, view = 0, memoryview(data)
    while pos < len(data):
        phys = start + pos
        left = min(segment_bytes - phys % segment_bytes, len(data) - pos)
        if left < BLANK.size:
            raise StoreCorruptError(f"entry bytes at {phys} end inside a record")
        size, magic = BLANK.unpack_from(view, pos)
        if magic == BLANK_MAGIC:
            if size != segment_bytes - phys % segment_bytes or size > left:
                raise StoreCorruptError(f"entry blank at {phys} of {size} bytes does not "
                                        "close its segment")
        else:
            try:
                topic, qid, qoff, th, stored, keys = index_record(view, pos, phys, pos + left)
            except CorruptRecord as exc:
                raise StoreCorruptError(f"entry record at {phys} does not verify: {exc}") \
                    from None
            if into is not None and len(into) < MAX_KNOWN:
                into[phys] = (size, topic, qid, qoff, th, stored,
                              split_keys(keys) if keys else None)
        pos += size
