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


def encode_batch(records: list[dict]) -> tuple[bytes, str]:
    """(body, keys) of one trace message holding ``records``: keyed by their message
    ids, and a failed send (no id) by its message's own keys, so `trace --key` finds it."""
    body = json.dumps({"v": VERSION, "records": records}, separators=(",", ":"))
    keys: dict[str, None] = {}
    for r in records:
        if r.get("id"):
            keys[r["id"]] = None
        elif r.get("keys"):
            keys.update(dict.fromkeys(str(r["keys"]).split()))
    return body.encode("utf-8"), " ".join(keys)


def decode_batch(body: bytes) -> list[dict]:
    """The records of one trace message ([] for a body that is not one)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        return []
    return [r for r in doc["records"] if isinstance(r, dict) and r.get("type")]
