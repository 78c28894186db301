"""Finding a message and its trace records across a cluster (what `floodgate trace` and
the console's trace screen ask).

By key: every broker's key index (QUERY_BY_KEY), the same message seen on a master
and its slave counted once (its id names the broker that stored it). By id: the
broker the id names, then the other members of its group. Then, per message, the
trace topic of every broker by the message id (trace records go to any broker).
A broker that does not answer is noted, never fatal: the timeline says what could
not be asked.
"""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from broker_core.client import admin
from broker_core.client.connection import BrokerUnavailable
from broker_core.cluster.cluster_file import ClusterFile
from broker_core.errors import BrokerError
from broker_core.message_id import decode_id
from broker_core.store.index_file import CLOCK_SLACK_MS
from broker_core.trace.copies import copy_of, in_paths, paths
from broker_core.trace.records import (
    PROP_TRACE,
    TRACE_TOPIC,
    decode_batch,
    stored_key,
    trace_key,
)
from broker_core.trace.timeline import Timeline, build_timeline, join_copies

TRACE_RECORDS_LIMIT = 200  # trace messages read per message id and broker


def body_of(doc: dict) -> bytes:
    """A message document's body (text, or base64 when it is not UTF-8: a compressed
    trace batch)."""
    if doc.get("body") is not None:
        return doc["body"].encode("utf-8")
    return base64.b64decode(doc.get("body_b64") or "")


@dataclass
class TraceResult:
    timelines: list[Timeline] = field(default_factory=list)
    failed_sends: list[dict] = field(default_factory=list)  # sends that never got an id
    unreachable: dict[str, str] = field(default_factory=dict)  # broker -> why
    more: bool = False  # more messages matched than were traced
    not_found: str = ""  # by id: why no broker had it


class TraceFinder:
    def __init__(self, cluster: ClusterFile, timeout: float = 3.0, workers: int = 8) -> None:
        self.cluster, self.timeout = cluster, timeout
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trace-find")
        self.unreachable: dict[str, str] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    def _each(self, fn) -> list[tuple[object, dict]]:
        """fn(broker entry) on every group at once (and every broker outside one): [(entry,
        answer)] of those that answered. A group's members hold the same log, so its
        master is enough: members are asked in turn until one says it is the master (a
        slave, or a member cut off after a failover, may lack the newest messages); a
        member that does not answer is noted. Asking all woke every slave for the same
        answer."""
        units: dict[str, list] = {}
        for b in self.cluster.brokers:
            units.setdefault(b.group or b.name, []).append(b)

        def ask(members: list) -> list[tuple[object, dict]]:
            got = []
            for b in members:
                try:
                    answer = fn(b)
                except (BrokerUnavailable, TimeoutError, BrokerError, OSError) as exc:
                    self.unreachable[b.name] = str(exc)
                    continue
                got.append((b, answer))
                if answer.get("role", "MASTER") == "MASTER":  # a broker before roles: as one
                    break
            return got

        futures = [self._pool.submit(ask, members) for members in units.values()]
        return [got for fut in futures for got in fut.result()]

    def _name_of(self, addr: str) -> str:
        for b in self.cluster.brokers:
            if b.addr == addr:
                return b.name
        return addr

    # -- finding messages ------------------------------------------------------------
    def by_key(self, key: str, topic: str | None, begin_ms: int, end_ms: int | None,
               limit: int) -> TraceResult:
        docs, more = self._keyed(key, topic, begin_ms, end_ms, limit)
        ordered = in_paths(list(docs.values()))
        result = TraceResult(more=more or len(ordered) > limit)
        result.timelines = self._timelines(ordered[:limit])
        result.failed_sends = self._failed_sends(key, topic, begin_ms, end_ms)
        result.unreachable = dict(self.unreachable)
        return result

    def _keyed(self, key: str, topic: str | None, begin_ms: int, end_ms: int | None,
               limit: int) -> tuple[dict[str, dict], bool]:
        """The messages of ``key`` (in ``topic``, if given) on any broker, by id, and
        whether a broker had more than ``limit``."""
        docs: dict[str, dict] = {}
        more = False
        for b, answer in self._each(lambda b: admin.query_by_key(
                b.addr, key, topic, begin_ms, end_ms, limit, self.timeout)):
            more |= bool(answer.get("more"))
            for doc in answer.get("messages", []):
                if doc["topic"] == TRACE_TOPIC and topic != TRACE_TOPIC:
                    continue
                # the copy on the broker that stored it knows the groups' offsets first-hand
                if doc["id"] not in docs or b.addr == doc["store_host"]:
                    docs[doc["id"]] = doc
        return docs, more

    def _path_of(self, doc: dict) -> list[dict]:
        """``doc`` and the copies on its path (trace.copies) found under its first key,
        in the order stored; ``doc`` alone when it has no key to find them by."""
        keys = (doc.get("keys") or "").split()
        if not keys:
            return [doc]
        since = doc["store_ms"] - CLOCK_SLACK_MS if copy_of(doc) is None else 0  # copies later
        found, _more = self._keyed(keys[0], None, since, None, TRACE_RECORDS_LIMIT)
        found[doc["id"]] = doc
        return next(p for p in paths(found.values()) if doc in p)

    def _timelines(self, docs: list[dict]) -> list[Timeline]:
        timelines = [self._timeline(doc) for doc in docs]
        join_copies(timelines, int(time.time() * 1000))
        return timelines

    def by_id(self, msg_id: str) -> TraceResult:
        addr, _phys = decode_id(msg_id)  # MessageIdError: bad usage, raised as it is
        result = TraceResult()
        reasons = []
        for b in self._replicas_of(addr):
            try:
                doc, why = admin.view_by_id(b.addr, msg_id, self.timeout)
            except (BrokerUnavailable, TimeoutError, BrokerError, OSError) as exc:
                self.unreachable[b.name] = str(exc)
                continue
            if doc is not None:
                result.timelines = self._timelines(self._path_of(doc))
                break
            reasons.append(f"{b.name}: {why}")
        else:
            known = self._replicas_of(addr)
            result.not_found = ("; ".join(reasons) if reasons else
                                f"no broker at {addr} in cluster {self.cluster.name}"
                                if not known else "no broker of its group answered")
        result.unreachable = dict(self.unreachable)
        return result

    def _replicas_of(self, addr: str) -> list:
        """The broker at ``addr`` and the other members of its group (same log)."""
        first = [b for b in self.cluster.brokers if b.addr == addr]
        group = first[0].group if first and first[0].group else None
        peers = [b for b in self.cluster.brokers if group and b.group == group and b not in first]
        return first + peers

    # -- trace records ---------------------------------------------------------------
    def records_for(self, msg_id: str) -> list[dict]:
        """Every trace record about ``msg_id``, from every broker, each trace message once:
        under its stretch's `trace_key`, or else under the id itself (as before VERSION 2;
        asked only when the first finds none, which halves what a trace asks the brokers)."""
        for key in (trace_key(msg_id), msg_id):
            got = [r for r in self._trace_records(key, 0, None) if r.get("id") == msg_id]
            if got:
                return got
        return []

    def _trace_records(self, key: str, begin_ms: int, end_ms: int | None) -> list[dict]:
        """The records of every %TRACE% message indexed under ``key``, each message once."""
        answers = self._each(lambda b: admin.query_by_key(
            b.addr, key, TRACE_TOPIC, begin_ms, end_ms, TRACE_RECORDS_LIMIT, self.timeout))
        seen, records = set(), []
        for _b, answer in answers:
            for doc in answer.get("messages", []):
                if doc["id"] in seen:
                    continue
                seen.add(doc["id"])
                records.extend(decode_batch(body_of(doc)))
        return records

    def _failed_sends(self, key: str, topic: str | None, begin_ms: int,
                      end_ms: int | None) -> list[dict]:
        out = [r for r in self._trace_records(key, begin_ms, end_ms)
               if r.get("type") == "send" and not r.get("id")
               and key in str(r.get("keys", "")).split()
               and (not topic or r.get("topic") == topic)]
        return sorted(out, key=lambda r: r.get("born_ms", 0))

    def _timeline(self, doc: dict) -> Timeline:
        records = self.records_for(doc["id"])
        traced = PROP_TRACE in (doc.get("properties") or {})
        if traced and not any(r.get("type") == "store" for r in records):
            records += self._stored_summary(doc)
        return build_timeline(doc, records, self._name_of)

    def _stored_summary(self, doc: dict) -> list[dict]:
        """The storing broker's ``stored`` summary whose window holds the message (a
        traced message answered OK has no store record of its own: trace_store)."""
        addr, phys, ms = doc["store_host"], doc["phys"], doc["store_ms"]
        # written within a second or two after the message, by the same broker's clock
        for r in self._trace_records(stored_key(addr, ms), ms - CLOCK_SLACK_MS, None):
            if (r.get("type") == "stored" and r.get("addr") == addr
                    and r["from_phys"] <= phys <= r["to_phys"]):
                return [r]
        return []

    # -- samples for a time window (the console's jump from a spike) -----------------------
    def sample_sends(self, broker: str | None, begin_ms: int, end_ms: int,
                     limit: int = 20) -> list[dict]:
        """The slowest traced sends in [begin_ms, end_ms] (to ``broker`` if given)."""
        answers = self._each(lambda b: admin.query_by_time(
            b.addr, TRACE_TOPIC, begin_ms - 5_000, end_ms + 5_000, 500, self.timeout))
        seen, sends = set(), {}
        for _b, answer in answers:
            for doc in answer.get("messages", []):
                if doc["id"] in seen:
                    continue
                seen.add(doc["id"])
                for r in decode_batch(body_of(doc)):
                    if r.get("type") != "send" or not r.get("id"):
                        continue
                    if not begin_ms <= r.get("born_ms", 0) <= end_ms:
                        continue
                    if broker and broker not in (r.get("broker"), self._name_of(r.get("addr"))):
                        continue
                    sends[r["id"]] = r
        return sorted(sends.values(), key=lambda r: -r.get("rt_ms", 0))[:limit]
