"""Collect several small DataFrames in one Spark action.

Every ``collect()`` is a job with its own planning and scheduling (about a
second each on a busy 2-core machine); a report that needs ten small results
pays that ten times. Here each frame's rows become JSON text tagged with the
frame's name, the frames are unioned and collected once, and the rows are
decoded back by each frame's schema (timestamps as naive UTC datetimes and
dates as dates, as ``collect()`` gives them under a UTC session).
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from functools import reduce


def gather(frames: dict) -> dict[str, list[dict]]:
    """{name: rows as dicts} of {name: DataFrame}, in one action."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    parts = [
        df.select(F.lit(name).alias("part"), F.to_json(F.struct(*df.columns)).alias("row"))
        for name, df in frames.items()
    ]
    union = reduce(DataFrame.unionByName, parts)
    decoders = {name: _decoders(df.schema) for name, df in frames.items()}
    out: dict[str, list[dict]] = {name: [] for name in frames}
    for r in union.collect():
        fields = decoders[r["part"]]
        raw = json.loads(r["row"])
        out[r["part"]].append({k: (decode(raw[k]) if raw.get(k) is not None else None)
                               for k, decode in fields.items()})  # fmt: skip
    return out


def _decoders(schema) -> dict:
    from pyspark.sql import types as T

    def pick(t):
        if isinstance(t, T.TimestampType | T.TimestampNTZType):
            return _timestamp
        if isinstance(t, T.DateType):
            return date.fromisoformat
        if isinstance(t, T.StructType):
            inner = _decoders(t)
            return lambda v: {
                k: (d(v[k]) if v.get(k) is not None else None) for k, d in inner.items()
            }
        return lambda v: v

    return {f.name: pick(f.dataType) for f in schema.fields}


def _timestamp(text: str) -> datetime:
    t = datetime.fromisoformat(text)
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t
