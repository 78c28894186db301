"""The metrics-log contract (DESIGN.md, "Metrics log"): table layout, the
schema in pyarrow and Spark form, and the rules that send a row to quarantine.

The broker writes its per-second metrics log with these pyarrow schemas and the
generator writes the same; Spark jobs check what they read against the Spark
form. This module imports no pyspark at import time (the broker does not need
it): Spark-facing functions import it when called.

A log is a directory with two tables, each partitioned by ``date=YYYY-MM-DD``
(the UTC date of ``ts``)::

    LOG/latency/date=2026-11-11/part-00000.parquet
    LOG/broker_stats/date=2026-11-11/part-00000.parquet
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_reports.errors import SchemaMismatch

LATENCY_TABLE = "latency"
BROKER_STATS_TABLE = "broker_stats"
PARTITION_COLUMN = "date"

# Operations a broker times. A row with any other op is quarantined, so a typo
# in a writer shows up as a count in the report instead of a phantom op.
KNOWN_OPS = ("send", "pull", "flush", "replicate", "commit", "ack")

# Schema-3 bucket indices a row may use: the zero bucket (upper 2**-20 s) up to
# 2**16 s (18 h); anything outside is a corrupt writer, not a slow broker.
ZERO_BUCKET = -160
MAX_BUCKET = 128

# Timestamps are whole UTC seconds; stored at microsecond precision, the unit
# pyarrow, Spark and DuckDB all read as "timestamp with time zone".
TS_TYPE = pa.timestamp("us", tz="UTC")

LATENCY_SCHEMA = pa.schema(
    [
        pa.field("ts", TS_TYPE),
        pa.field("cluster", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("op", pa.string()),
        pa.field("count", pa.int64()),  # operations timed in this second
        pa.field("sum_us", pa.int64()),  # their latency sum, microseconds
        pa.field("min_us", pa.int64()),
        pa.field("max_us", pa.int64()),
        pa.field("buckets", pa.map_(pa.int32(), pa.int64())),  # schema-3 index -> count
        pa.field("msgs", pa.int64()),  # messages carried (a pull returns many)
        pa.field("bytes", pa.int64()),
    ]
)

BROKER_STATS_SCHEMA = pa.schema(
    [
        pa.field("ts", TS_TYPE),
        pa.field("cluster", pa.string()),
        pa.field("broker", pa.string()),
        pa.field("disk_used_bytes", pa.int64()),
        pa.field("disk_total_bytes", pa.int64()),
        pa.field("msgs_in_per_s", pa.float64()),
        pa.field("msgs_out_per_s", pa.float64()),
        pa.field("commit_offset", pa.int64()),  # CommitLog max physical offset
        pa.field("consumer_lag", pa.int64()),  # messages behind, all groups
    ]
)

SCHEMAS = {LATENCY_TABLE: LATENCY_SCHEMA, BROKER_STATS_TABLE: BROKER_STATS_SCHEMA}

# Quarantine reasons, in the order they are checked (a row gets the first).
NULL_FIELD = "null field"
NEGATIVE = "negative count"
COUNT_MISMATCH = "count != sum(buckets)"
UNKNOWN_OP = "unknown op"
TIME_OUT_OF_RANGE = "ts out of range"
BAD_BUCKET = "bucket index out of range"
MIN_OVER_MAX = "min_us > max_us"
REASONS = (
    NULL_FIELD,
    NEGATIVE,
    COUNT_MISMATCH,
    UNKNOWN_OP,
    TIME_OUT_OF_RANGE,
    BAD_BUCKET,
    MIN_OVER_MAX,
)

# Sane wall-clock range for any metrics log; tighter: ts must match its date= partition.
EARLIEST_TS = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_TS = datetime(2100, 1, 1, tzinfo=UTC)

_KEY_COLUMNS = ("ts", "cluster", "broker", "op", "count", "sum_us", "min_us", "max_us", "buckets")
_NON_NEGATIVE = ("count", "sum_us", "min_us", "max_us", "msgs", "bytes")


def partition_dir(table: str, day: date) -> str:
    """Relative directory of one day of ``table``: ``latency/date=2026-11-11``."""
    return f"{table}/{PARTITION_COLUMN}={day.isoformat()}"


# --- pyarrow side (writers, cross-checks) ----------------------------------


def check_arrow_schema(schema: pa.Schema, table: str = LATENCY_TABLE) -> None:
    """Raise SchemaMismatch naming the first column missing or of the wrong type."""
    expected = SCHEMAS[table]
    for field in expected:
        idx = schema.get_field_index(field.name)
        if idx < 0:
            raise SchemaMismatch(f"{table}: column '{field.name}' is missing")
        got = schema.field(idx).type
        if not _arrow_compatible(got, field.type):
            raise SchemaMismatch(
                f"{table}: column '{field.name}' has type {got}, expected {field.type}"
            )


def _arrow_compatible(got: pa.DataType, want: pa.DataType) -> bool:
    if got.equals(want):
        return True
    if pa.types.is_timestamp(want):
        return pa.types.is_timestamp(got)
    if pa.types.is_integer(want):
        return pa.types.is_integer(got)
    if pa.types.is_floating(want):
        return pa.types.is_floating(got) or pa.types.is_integer(got)
    if pa.types.is_string(want):
        return pa.types.is_string(got) or pa.types.is_large_string(got)
    if pa.types.is_map(want):
        return (
            pa.types.is_map(got)
            and pa.types.is_integer(got.key_type)
            and pa.types.is_integer(got.item_type)
        )
    return False


def quarantine_reasons(table: pa.Table, partition_day: date | None = None) -> np.ndarray:
    """Reason per row of a latency table (object array, None for a good row).

    The same rules as :func:`spark_quarantine_reason`, in numpy: used by
    writers that want to refuse bad rows and by tests as the independent check.
    """
    n = table.num_rows
    reasons = np.full(n, None, dtype=object)

    def mark(mask: np.ndarray, reason: str) -> None:
        reasons[(reasons == None) & mask] = reason  # noqa: E711 - elementwise on objects

    null = np.zeros(n, dtype=bool)
    for name in _KEY_COLUMNS:
        null |= table.column(name).is_null().to_numpy(zero_copy_only=False)
    mark(null, NULL_FIELD)

    buckets = table.column("buckets").combine_chunks()
    offsets = buckets.offsets.to_numpy()  # absolute into .values, even when sliced
    lengths = np.diff(offsets)
    row_of_entry = np.repeat(np.arange(n), lengths)
    entries = slice(offsets[0], offsets[-1])
    keys = buckets.values.field(0).to_numpy(zero_copy_only=False)[entries]
    items = buckets.values.field(1)
    null_item = items.is_null().to_numpy(zero_copy_only=False)[entries]
    values = pc.fill_null(items, 0).to_numpy(zero_copy_only=False)[entries]

    null_entry_rows = np.zeros(n, dtype=bool)
    null_entry_rows[row_of_entry[null_item]] = True
    mark(null_entry_rows, NULL_FIELD)

    def col(name: str) -> np.ndarray:
        return pc.fill_null(table.column(name), 0).to_numpy(zero_copy_only=False)

    negative = np.zeros(n, dtype=bool)
    for name in _NON_NEGATIVE:
        negative |= col(name) < 0
    negative[row_of_entry[values < 0]] = True
    mark(negative, NEGATIVE)

    exact_sum = np.zeros(n, dtype=np.int64)
    np.add.at(exact_sum, row_of_entry, values.astype(np.int64))
    mark(exact_sum != col("count"), COUNT_MISMATCH)

    ops = pc.fill_null(table.column("op"), "").to_numpy(zero_copy_only=False)
    mark(~np.isin(ops, np.array(KNOWN_OPS, dtype=object)), UNKNOWN_OP)

    ts_us = pc.fill_null(table.column("ts").cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    lo, hi = _epoch_us(EARLIEST_TS), _epoch_us(LATEST_TS)
    if partition_day is not None:
        day0 = _epoch_us(
            datetime(partition_day.year, partition_day.month, partition_day.day, tzinfo=UTC)
        )
        lo, hi = day0, day0 + 86_400_000_000
    mark((ts_us < lo) | (ts_us >= hi), TIME_OUT_OF_RANGE)

    bad_key = (keys < ZERO_BUCKET) | (keys > MAX_BUCKET)
    bad_bucket = np.zeros(n, dtype=bool)
    bad_bucket[row_of_entry[bad_key]] = True
    mark(bad_bucket, BAD_BUCKET)

    mark((col("count") > 0) & (col("min_us") > col("max_us")), MIN_OVER_MAX)
    return reasons


def _epoch_us(t: datetime) -> int:
    return int(t.timestamp()) * 1_000_000


# --- Spark side (imported lazily) ---------------------------------------------


def spark_schema(table: str = LATENCY_TABLE):
    """The Spark StructType of ``table`` (without the ``date`` partition column)."""
    from pyspark.sql import types as T

    def spark_type(t: pa.DataType):
        if pa.types.is_timestamp(t):
            return T.TimestampType()
        if pa.types.is_string(t):
            return T.StringType()
        if t == pa.int32():
            return T.IntegerType()
        if t == pa.int64():
            return T.LongType()
        if pa.types.is_floating(t):
            return T.DoubleType()
        if pa.types.is_map(t):
            return T.MapType(spark_type(t.key_type), spark_type(t.item_type))
        raise TypeError(f"no Spark type for {t}")  # pragma: no cover - schema is fixed above

    return T.StructType([T.StructField(f.name, spark_type(f.type), True) for f in SCHEMAS[table]])


def conform_spark_frame(df, table: str = LATENCY_TABLE):
    """Check ``df``'s columns against the contract and cast compatible types.

    Integer widths and timestamp flavours are accepted and cast; anything else
    raises SchemaMismatch naming the column. Extra columns are kept.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    expected = spark_schema(table)
    have = {f.name: f.dataType for f in df.schema.fields}
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    casts = {}
    for field in expected.fields:
        got = have.get(field.name)
        if got is None:
            raise SchemaMismatch(f"{table}: column '{field.name}' is missing")
        want = field.dataType
        if got == want:
            continue
        ok = (
            (isinstance(want, T.TimestampType) and isinstance(got, T.TimestampNTZType))
            or (isinstance(want, T.LongType | T.IntegerType) and isinstance(got, integral))
            or (isinstance(want, T.DoubleType) and isinstance(got, integral + (T.FloatType,)))
            or (
                isinstance(want, T.MapType)
                and isinstance(got, T.MapType)
                and isinstance(got.keyType, integral)
                and isinstance(got.valueType, integral)
            )
        )
        if not ok:
            raise SchemaMismatch(
                f"{table}: column '{field.name}' has type {got.simpleString()},"
                f" expected {want.simpleString()}"
            )
        casts[field.name] = F.col(field.name).cast(want)
    return df.withColumns(casts) if casts else df


def spark_rules(has_partition_date: bool = True) -> list:
    """[(Column true when the row breaks the rule, reason)] in REASONS order.

    Pure SQL expressions, so checks run in the JVM without Python workers;
    built-in array functions where one exists (they compile to Java code), the
    sum of the bucket counts is the one higher-order function. Every condition
    is null-safe (never null), so "good" and "quarantined" split the rows exactly.
    """
    from pyspark.sql import functions as F

    values = F.map_values("buckets")
    keys = F.map_keys("buckets")
    null = F.lit(False)
    for name in _KEY_COLUMNS:
        null = null | F.col(name).isNull()
    null = null | F.coalesce(F.size(F.array_compact(values)) < F.size(values), F.lit(False))
    negative = F.coalesce(F.array_min(values) < 0, F.lit(False))
    for name in _NON_NEGATIVE:
        negative = negative | (F.coalesce(F.col(name), F.lit(0)) < 0)
    bucket_sum = F.aggregate(values, F.lit(0).cast("bigint"), lambda acc, v: acc + v)
    out_of_range = (F.col("ts") < F.lit(EARLIEST_TS)) | (F.col("ts") >= F.lit(LATEST_TS))
    if has_partition_date:
        out_of_range = out_of_range | (F.to_date("ts") != F.col(PARTITION_COLUMN))
    bad_bucket = (F.array_min(keys) < ZERO_BUCKET) | (F.array_max(keys) > MAX_BUCKET)
    rules = [
        (null, NULL_FIELD),
        (negative, NEGATIVE),
        (bucket_sum != F.col("count"), COUNT_MISMATCH),
        (~F.col("op").isin(*KNOWN_OPS), UNKNOWN_OP),
        (out_of_range, TIME_OUT_OF_RANGE),
        (bad_bucket, BAD_BUCKET),
        ((F.col("count") > 0) & (F.col("min_us") > F.col("max_us")), MIN_OVER_MAX),
    ]
    return [(F.coalesce(cond, F.lit(False)), name) for cond, name in rules]


def spark_quarantine_reason(has_partition_date: bool = True):
    """A Column: the first rule a latency row breaks (see REASONS), or null."""
    from pyspark.sql import functions as F

    rules = spark_rules(has_partition_date)
    reason = F.when(rules[0][0], F.lit(rules[0][1]))
    for cond, name in rules[1:]:
        reason = reason.when(cond, F.lit(name))
    return reason


def spark_row_is_good(has_partition_date: bool = True):
    """A Column: true when the row breaks no rule. A plain AND of predicates,
    which Spark evaluates faster than the CASE of :func:`spark_quarantine_reason`."""
    good = None
    for cond, _ in spark_rules(has_partition_date):
        good = ~cond if good is None else good & ~cond
    return good
