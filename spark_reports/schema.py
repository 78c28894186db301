"""The Spark side of the metrics-log contract (docs/architecture.md, "Metrics log").

The contract itself (table layout, pyarrow schemas, rows, the quarantine rules
in numpy) is ``heatmap.metrics_log``, shared with the broker that writes the
log; it is re-exported here for readers. This module adds the reader's checks:
the arrow schema check, the Spark schema, conforming a frame, and the same
quarantine rules as Spark SQL expressions. It imports no pyspark at import
time: Spark-facing functions import it when called.
"""

from __future__ import annotations

import pyarrow as pa

from heatmap.layout import MAX_INDEX, ZERO_INDEX
from heatmap.metrics_log import (
    BAD_BUCKET,
    BROKER_STATS_SCHEMA,
    BROKER_STATS_TABLE,
    COUNT_MISMATCH,
    EARLIEST_TS,
    KEY_COLUMNS,
    KNOWN_OPS,
    LATENCY_1M_TABLE,
    LATENCY_SCHEMA,
    LATENCY_TABLE,
    LATEST_TS,
    MIN_OVER_MAX,
    NEGATIVE,
    NON_NEGATIVE,
    NULL_FIELD,
    PARTITION_COLUMN,
    REASONS,
    SCHEMAS,
    TIME_OUT_OF_RANGE,
    TS_TYPE,
    UNKNOWN_OP,
    partition_dir,
    quarantine_reasons,
)
from spark_reports.errors import SchemaMismatch

__all__ = [  # the contract, re-exported for readers, and the Spark side
    "BAD_BUCKET", "BROKER_STATS_SCHEMA", "BROKER_STATS_TABLE", "COUNT_MISMATCH", "KNOWN_OPS",
    "LATENCY_1M_TABLE", "LATENCY_SCHEMA", "LATENCY_TABLE", "MIN_OVER_MAX", "NEGATIVE", "NULL_FIELD",
    "PARTITION_COLUMN", "REASONS", "SCHEMAS", "TIME_OUT_OF_RANGE", "TS_TYPE", "UNKNOWN_OP",
    "check_arrow_schema", "conform_spark_frame", "partition_dir", "quarantine_reasons",
    "spark_quarantine_reason", "spark_row_is_good", "spark_rules", "spark_schema",
    "with_quarantine_reason",
]  # fmt: skip


# --- pyarrow side (a reader's cross-check) -----------------------------------


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


BUCKET_SUM = "_bucket_sum"  # helper column of with_quarantine_reason, dropped after


def bucket_sum():
    """A Column: the sum of a row's bucket counts; null when any count is null.

    The one higher-order function of the rules (Spark interprets it row by
    row): computed once per row, it answers both "a null entry" and
    "count != sum(buckets)". An empty map sums to 0.
    """
    from pyspark.sql import functions as F

    return F.aggregate(F.map_values("buckets"), F.lit(0).cast("bigint"), lambda acc, v: acc + v)


def spark_rules(has_partition_date: bool = True, sum_column: str | None = None) -> list:
    """[(Column true when the row breaks the rule, reason)] in REASONS order.

    Pure SQL expressions, so checks run in the JVM without Python workers;
    built-in array functions where one exists (they compile to Java code).
    ``sum_column`` names a column holding :func:`bucket_sum` (so it is computed
    once, see :func:`with_quarantine_reason`); without it the sum is inline.
    Every condition is null-safe (never null), so "good" and "quarantined"
    split the rows exactly.
    """
    from pyspark.sql import functions as F

    values = F.map_values("buckets")
    keys = F.map_keys("buckets")
    total = F.col(sum_column) if sum_column else bucket_sum()
    null = F.lit(False)
    for name in KEY_COLUMNS:
        null = null | F.col(name).isNull()
    null = null | total.isNull()  # buckets itself is not null here: a null count inside
    negative = F.coalesce(F.array_min(values) < 0, F.lit(False))
    for name in NON_NEGATIVE:
        negative = negative | (F.coalesce(F.col(name), F.lit(0)) < 0)
    out_of_range = (F.col("ts") < F.lit(EARLIEST_TS)) | (F.col("ts") >= F.lit(LATEST_TS))
    if has_partition_date:
        out_of_range = out_of_range | (F.to_date("ts") != F.col(PARTITION_COLUMN))
    bad_bucket = (F.array_min(keys) < ZERO_INDEX) | (F.array_max(keys) > MAX_INDEX)
    rules = [
        (null, NULL_FIELD),
        (negative, NEGATIVE),
        (total != F.col("count"), COUNT_MISMATCH),
        (~F.col("op").isin(*KNOWN_OPS), UNKNOWN_OP),
        (out_of_range, TIME_OUT_OF_RANGE),
        (bad_bucket, BAD_BUCKET),
        ((F.col("count") > 0) & (F.col("min_us") > F.col("max_us")), MIN_OVER_MAX),
    ]
    return [(F.coalesce(cond, F.lit(False)), name) for cond, name in rules]


def with_quarantine_reason(df):
    """``df`` with a ``reason`` column (:func:`spark_quarantine_reason`), the bucket sum
    computed once per row in a projection of its own (Spark keeps a costly
    expression from being inlined into each of its uses)."""
    from pyspark.sql import functions as F

    has_date = PARTITION_COLUMN in df.columns
    summed = df.withColumn(BUCKET_SUM, bucket_sum())
    reason = spark_quarantine_reason(has_date, sum_column=BUCKET_SUM)
    return summed.withColumn("reason", reason).drop(BUCKET_SUM).select(
        *df.columns, F.col("reason")
    )


def spark_quarantine_reason(has_partition_date: bool = True, sum_column: str | None = None):
    """A Column: the first rule a latency row breaks (see REASONS), or null."""
    from pyspark.sql import functions as F

    rules = spark_rules(has_partition_date, sum_column)
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
