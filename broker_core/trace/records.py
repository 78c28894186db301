"""Trace records and their envelope.

A trace message in `TRACE_TOPIC` carries a batch of records as its body (JSON
``{"v": 1, "records": [...]}``) and, as its KEYS, the message ids the records
are about, so the key index finds every record of a message by its id (as
RocketMQ's trace topic does). Three kinds:

* ``send`` (producer): client, broker chosen and its address, RT, attempts and
  why each failed attempt was retried, the fuse's view, the answer code;
* ``store`` (broker): queue, offset, store time, the answer code (flush and
  replication outcome), the flush and replication modes, service time;
* ``deliver`` (consumer): group, client, pulled at, committed at (when the
  commit came while the record was still buffered), times this client saw it.

Only messages a producer sampled carry `PROP_TRACE`; brokers and consumers
trace those (a consumer may sample further down).
"""

from __future__ import annotations

import json
import random
import time

TRACE_TOPIC = "%TRACE%"
PROP_TRACE = "TRACE"  # on a sampled message: "1"
PROP_MSG_ID = "MSG_ID"  # a broker adds it to the traced messages a PULL returns
VERSION = 1
# an id and its separator take 33 bytes of the KEYS property (32767 bytes at most)
MAX_RECORDS = 500


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


# Hot records (one per traced send, at the producer and at the broker) are tuples,
# (type, *values) in these orders, and travel as JSON arrays: building and encoding a
# tuple costs a third of a dict with its names (bench/trace_cost.py). Others are dicts.
FIELDS = {
    "send": ("id", "topic", "tags", "keys", "client", "born_ms", "rt_ms", "bytes", "status",
             "broker", "addr", "attempts", "retries", "queue_id", "queue_offset", "store_ms",
             "broker_ms", "fuse", "error"),
    "store": ("id", "broker", "addr", "topic", "queue_id", "queue_offset", "store_ms", "code",
              "flush", "replication"),
}
_KEYS_AT = FIELDS["send"].index("keys") + 1


def encode_batch(records: list) -> tuple[bytes, str]:
    """(body, keys) of one trace message holding ``records`` (dicts or FIELDS tuples):
    keyed by their message ids, and a failed send (no id) by its message's own keys,
    so `trace --key` finds it."""
    body = json.dumps({"v": VERSION, "records": records}, separators=(",", ":"))
    keys: dict[str, None] = {}
    for r in records:
        if isinstance(r, dict):
            rid, rkeys = r.get("id"), r.get("keys")
        else:
            rid, rkeys = r[1], r[_KEYS_AT] if r[0] == "send" else None
        if rid:
            keys[rid] = None
        elif rkeys:
            keys.update(dict.fromkeys(str(rkeys).split()))
    return body.encode("utf-8"), " ".join(keys)


def decode_batch(body: bytes) -> list[dict]:
    """The records of one trace message ([] for a body that is not one)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        return []
    out = []
    for r in doc["records"]:
        if isinstance(r, list) and r and r[0] in FIELDS:
            names = FIELDS[r[0]]
            if len(r) == len(names) + 1:
                out.append({"type": r[0], **dict(zip(names, r[1:], strict=True))})
        elif isinstance(r, dict) and r.get("type"):
            out.append(r)
    return out
