"""Trace records and their envelope.

A trace message in `TRACE_TOPIC` carries a batch of records as its body (JSON
``{"v": 2, "records": [...]}``) and, as its KEYS, the `trace_key` of each message
id the records are about (RocketMQ's trace topic keys by every id), so the key
index finds every record of a message from its id. Three kinds:

* ``send`` (producer): client, broker chosen, RT, attempts and why each failed
  attempt was retried, the fuse's view, the answer code (what the stored message
  itself holds, topic, tags, queue, offset, store time, is not repeated); a send
  that failed has no message: its record holds all of it, keyed by its keys;
* ``stored`` (broker): a summary of the traced messages it stored in a window
  answered OK (offsets, times, count, flush and replication modes), keyed by
  `stored_keys`; ``store`` (broker): one traced message answered otherwise
  (queue, offset, store time, the answer code: flush or replication outcome);
* ``deliver`` (consumer): group, client, pulled at, committed at (when the
  commit came while the record was still buffered), times this client saw it.

Only messages a producer sampled carry `PROP_TRACE`; brokers and consumers
trace those (a consumer may sample further down).
"""

from __future__ import annotations

import json
import random
import time
import zlib

TRACE_TOPIC = "%TRACE%"
PROP_TRACE = "TRACE"  # on a sampled message: "1"
VERSION = 2
# an id and its separator take 33 bytes of the KEYS property (32767 bytes at most)
MAX_RECORDS = 500
# A batch's JSON over this is zlib-compressed (level 1), as RocketMQ compresses bodies over
# 4 KiB: records of one client repeat themselves (10x smaller, 0.5 µs a record to pack),
# and every byte of a trace costs the wire, the CommitLog, its flush and the slaves.
COMPRESS_OVER = 4096
MAX_BATCH_BYTES = 8 << 20  # a compressed body that inflates past this is not one of ours
_ZLIB = b"\x78"  # a zlib stream's first byte at level 1 (JSON starts with '{')


def now_ms() -> int:
    return int(time.time() * 1000)


class Sampler:
    """Decides which messages are traced: `rate` in [0, 1] (1: all, 0: none)."""

    def __init__(self, rate: float, seed: int | None = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"trace rate must be within [0, 1], got {rate!r}")
        self.rate = rate
        self._random = random.Random(seed).random

    def __bool__(self) -> bool:
        return self.rate > 0.0

    def sample(self) -> bool:
        return self.rate >= 1.0 or (self.rate > 0.0 and self._random() < self.rate)


# A hot record (one per traced send or delivery) is a JSON array, (type, *values) in these orders,
# formatted by its maker as text (`json_str`, SendTracer.record) and queued as a
# (trace key, text) tuple: the client's share of a traced send is what bounds tracing's
# cost (its one event loop thread is the bench's bottleneck), and an f-string costs a
# fraction of building a tuple and running it through json.dumps. Others are dicts.
# VERSION 1 batches (before the send record left out what the message holds) are
# still read.
FIELDS = {
    "send": ("id", "keys", "client", "born_ms", "rt_ms", "status", "broker", "attempts",
             "retries", "broker_ms", "fuse"),
    # what the message holds (topic, queue, offset, store time) is not repeated
    "deliver": ("id", "group", "client", "broker", "pulled_ms", "committed_ms"),
}
_FIELDS_BY_VERSION = {
    1: {"send": ("id", "topic", "tags", "keys", "client", "born_ms", "rt_ms", "bytes",
                 "status", "broker", "addr", "attempts", "retries", "queue_id",
                 "queue_offset", "store_ms", "broker_ms", "fuse", "error"),
        "store": ("id", "broker", "addr", "topic", "queue_id", "queue_offset", "store_ms",
                  "code", "flush", "replication")},
    2: FIELDS,
}


def json_str(text: str | None) -> str:
    """``text`` as a JSON string (null for None): most keys need no escaping, and
    checking that is far cheaper than json.dumps."""
    if text is None:
        return "null"
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text)


def stored_keys(addr: str, first_ms: int, last_ms: int) -> list[str]:
    """The keys of a broker's ``stored`` summary covering [first_ms, last_ms]: one per
    minute, so a message's summary is one short index chain away (`stored_key`)."""
    return [f"%STORED%@{addr}@{minute}"
            for minute in range(first_ms // 60_000, last_ms // 60_000 + 1)]


def stored_key(addr: str, store_ms: int) -> str:
    """The key under which the summary covering a message stored at ``store_ms`` is."""
    return stored_keys(addr, store_ms, store_ms)[0]


TRACE_KEY_CHARS = 29  # of an id's 32 hex digits: all but the offset's last 12 bits


def trace_key(msg_id: str) -> str:
    """What a message's trace records are indexed under: its id less the last three hex
    digits, i.e. its broker and its 4 KiB stretch of the CommitLog. A batch of 200
    sends is about a few stretches per broker: a dozen index entries, not 200 (an
    entry per id was most of what tracing cost a broker: bench/trace_cost.py). A
    lookup reads the few batches of its stretch and keeps the records of its id."""
    return msg_id[:TRACE_KEY_CHARS]


def encode_batch(records: list) -> tuple[bytes, str]:
    """(body, keys) of one trace message holding ``records``: dicts, or (trace key,
    JSON text) tuples of hot records. Keyed by the `trace_key` of their message ids,
    and a failed send (a dict without an id) by its message's own keys, so `trace
    --key` finds it."""
    texts: list[str] = []
    keys: dict[str, None] = {}
    for r in records:
        if isinstance(r, tuple):
            keys[r[0]] = None
            texts.append(r[1])
            continue
        texts.append(json.dumps(r, separators=(",", ":")))
        rid, rkeys = r.get("id"), r.get("keys")
        if rid:
            keys[trace_key(rid)] = None
        elif rkeys:
            keys.update(dict.fromkeys(str(rkeys).split()))
    body = f'{{"v":{VERSION},"records":[{",".join(texts)}]}}'.encode()
    if len(body) > COMPRESS_OVER:
        body = zlib.compress(body, 1)
    return body, " ".join(keys)


def decode_batch(body: bytes) -> list[dict]:
    """The records of one trace message ([] for a body that is not one)."""
    try:
        if body[:1] == _ZLIB:
            body = zlib.decompressobj().decompress(body, MAX_BATCH_BYTES)
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, zlib.error):
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        return []
    fields = _FIELDS_BY_VERSION.get(doc.get("v"), FIELDS)
    out = []
    for r in doc["records"]:
        if isinstance(r, list) and r and r[0] in fields:
            names = fields[r[0]]
            if len(r) == len(names) + 1:
                out.append({"type": r[0], **dict(zip(names, r[1:], strict=True))})
        elif isinstance(r, dict) and r.get("type"):
            out.append(r)
    return out
