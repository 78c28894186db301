"""Pure DataFrame -> DataFrame steps of the capacity job.

Each function takes Spark DataFrames in the metrics-log schema (docs/architecture.md,
"Metrics log") and returns a small DataFrame; the job collects them and feeds
the `capacity` models. Divisions use `try_divide` so that ANSI mode (on by
default since Spark 4) gives null, not an error, for a zero denominator.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from heatmap.sla import SLA_MAX_US
from spark_reports.schema import with_quarantine_reason

ALL_BROKERS = "ALL"


def _div(num, den):
    return F.try_divide(num.cast("double"), den.cast("double"))


def with_reason(latency: DataFrame) -> DataFrame:
    """The rows with a `reason` column: the first metrics-log rule each breaks, or null."""
    return with_quarantine_reason(latency)


def split_quarantine(latency: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows, bad rows with a `reason` column) by the metrics-log rules."""
    tagged = with_reason(latency)
    good = tagged.filter(F.col("reason").isNull()).drop("reason")
    return good, tagged.filter(F.col("reason").isNotNull())


def broker_second_rates(latency: DataFrame, op: str = "send") -> DataFrame:
    """Per (ts, broker): msgs, bytes, calls and the slowest call in that second."""
    return (
        latency.filter(F.col("op") == op)
        .groupBy("ts", "broker")
        .agg(
            F.sum("msgs").alias("msgs"),
            F.sum("bytes").alias("bytes"),
            F.sum("count").alias("ops"),
            F.max(F.when(F.col("count") > 0, F.col("max_us"))).alias("max_us"),
        )
    )


def second_rollups(checked: DataFrame, op: str = "send", threshold_us: int = SLA_MAX_US) -> DataFrame:
    """One aggregation over 1 s rows carrying a quarantine `reason`, in three grouping
    sets: per second (`set` "ts": the cluster's msgs, bytes and brokers reporting),
    per broker (`set` "broker": busiest and mean second, seconds, totals, seconds
    over `threshold_us`) and per reason (`set` "reason": quarantined rows).

    By the contract a broker writes one row per (second, op), so a good row of
    `op` is a broker-second. Rows of other ops carry nulls into the sums (no
    filter: Spark pushes a filter on `reason` below the projection that computes
    it, inlining the rules and their bucket sum twice more per row, which took
    half of the pass on a day); groups of theirs alone have `seconds` 0 and are
    left out by the readers below. Partial aggregation keeps the shuffle small
    (no per-broker-second frame is materialized).
    """
    good = F.col("reason").isNull() & (F.col("op") == op)
    spike = good & (F.col("count") > 0) & (F.col("max_us") > threshold_us)
    kept = checked.select(
        "ts", "broker", "reason",
        F.when(good, F.col("msgs")).alias("msgs"),
        F.when(good, F.col("bytes")).alias("bytes"),
        F.when(good, F.col("count")).alias("ops"),
        F.when(spike, F.col("max_us")).alias("spike_us"),
        F.when(spike, F.col("ts")).alias("spike_ts"),
    )  # fmt: skip
    grouped = kept.groupingSets([["ts"], ["broker"], ["reason"]], "ts", "broker", "reason").agg(
        F.grouping("ts").alias("g_ts"),
        F.grouping("broker").alias("g_broker"),
        F.sum("msgs").alias("msgs"),
        F.sum("bytes").alias("bytes"),
        F.sum("ops").alias("ops"),
        F.max("msgs").alias("peak_msgs"),
        F.avg("msgs").alias("mean_msgs"),
        F.count("msgs").alias("seconds"),  # good rows: brokers reporting, or seconds seen
        F.count(F.lit(1)).alias("rows"),
        F.count("spike_us").alias("spike_seconds"),
        F.max("spike_us").alias("worst_max_us"),
        F.min("spike_ts").alias("first_spike"),
        F.max("spike_ts").alias("last_spike"),
    )
    which = F.when(F.col("g_ts") == 0, "ts").when(F.col("g_broker") == 0, "broker")
    return grouped.withColumn("set", which.otherwise("reason")).drop("g_ts", "g_broker")


def rollup_cluster_rates(rollups: DataFrame) -> DataFrame:
    """cluster_second_rates' frame (ts, msgs, bytes, brokers) from second_rollups."""
    return rollups.filter((F.col("set") == "ts") & (F.col("seconds") > 0)).select(
        "ts", "msgs", "bytes", F.col("seconds").alias("brokers")
    )


def rollup_broker_load(rollups: DataFrame, per_broker_capacity: float | None) -> DataFrame:
    """broker_load's frame from second_rollups."""
    capacity = F.lit(per_broker_capacity).cast("double")
    return (
        rollups.filter((F.col("set") == "broker") & (F.col("seconds") > 0))
        .select(
            "broker",
            F.col("peak_msgs").alias("peak_msgs_per_s"),
            F.col("mean_msgs").alias("mean_msgs_per_s"),
            "seconds",
            F.col("msgs").alias("total_msgs"),
            F.col("bytes").alias("total_bytes"),
        )
        .withColumn("utilisation", _div(F.col("peak_msgs_per_s"), capacity))
    )


def rollup_spike_seconds(rollups: DataFrame) -> DataFrame:
    """spike_seconds' frame from second_rollups."""
    return rollups.filter((F.col("set") == "broker") & (F.col("spike_seconds") > 0)).select(
        "broker", "spike_seconds", "worst_max_us", "first_spike", "last_spike"
    )


def rollup_reasons(rollups: DataFrame) -> DataFrame:
    """reason, rows: quarantined rows per reason, from second_rollups."""
    return rollups.filter((F.col("set") == "reason") & F.col("reason").isNotNull()).select(
        "reason", "rows"
    )


def cluster_second_rates(broker_rates: DataFrame) -> DataFrame:
    """Per second, summed over brokers: msgs/s, bytes/s and brokers reporting."""
    return broker_rates.groupBy("ts").agg(
        F.sum("msgs").alias("msgs"),
        F.sum("bytes").alias("bytes"),
        F.countDistinct("broker").alias("brokers"),
    )


def daily_peaks(cluster_rates: DataFrame) -> DataFrame:
    """Per UTC date: peak second, its rate, the mean rate and their ratio.

    The mean is over the seconds observed that day (a partial day of data
    gives the mean of what was seen; `coverage` says how much of the day).
    """
    peak = F.max_by(F.struct("msgs", "ts"), "msgs")
    return (
        cluster_rates.withColumn("day", F.to_date("ts"))
        .groupBy("day")
        .agg(
            peak.alias("peak"),
            F.sum("msgs").alias("total_msgs"),
            F.sum("bytes").alias("total_bytes"),
            F.count("ts").alias("seconds"),
        )
        .select(
            "day",
            F.col("peak.msgs").alias("peak_msgs_per_s"),
            F.col("peak.ts").alias("peak_ts"),
            "total_msgs",
            "total_bytes",
            "seconds",
            _div(F.col("total_msgs"), F.col("seconds")).alias("mean_msgs_per_s"),
            _div(F.col("seconds"), F.lit(86_400)).alias("coverage"),
        )
        .withColumn("peak_to_mean", _div(F.col("peak_msgs_per_s"), F.col("mean_msgs_per_s")))
        .orderBy("day")
    )


def broker_load(broker_rates: DataFrame, per_broker_capacity: float | None) -> DataFrame:
    """Per broker: peak and mean msgs/s and utilisation of the peak against capacity."""
    capacity = F.lit(per_broker_capacity).cast("double")
    return (
        broker_rates.groupBy("broker")
        .agg(
            F.max("msgs").alias("peak_msgs_per_s"),
            F.avg("msgs").alias("mean_msgs_per_s"),
            F.count("ts").alias("seconds"),
            F.sum("msgs").alias("total_msgs"),
            F.sum("bytes").alias("total_bytes"),
        )
        .withColumn("utilisation", _div(F.col("peak_msgs_per_s"), capacity))
        .orderBy("broker")
    )


def disk_growth(broker_stats: DataFrame, water: float = 0.75) -> DataFrame:
    """Per broker: disk used first and last, growth in bytes/s, hours to the water level."""
    first_ts, last_ts = F.min("ts"), F.max("ts")
    grown = broker_stats.groupBy("broker").agg(
        F.min_by("disk_used_bytes", "ts").alias("first_used"),
        F.max_by("disk_used_bytes", "ts").alias("last_used"),
        F.max("disk_total_bytes").alias("disk_total_bytes"),
        (last_ts.cast("long") - first_ts.cast("long")).alias("span_s"),
    )
    growth = _div(F.col("last_used") - F.col("first_used"), F.col("span_s"))
    headroom = F.lit(water) * F.col("disk_total_bytes") - F.col("last_used")
    return (
        grown.withColumn("growth_bytes_per_s", growth)
        .withColumn(
            "hours_to_water",
            F.when(
                F.col("growth_bytes_per_s") > 0,
                _div(headroom, F.col("growth_bytes_per_s") * F.lit(3600.0)),
            ),
        )
        .withColumn("used_fraction", _div(F.col("last_used"), F.col("disk_total_bytes")))
        .orderBy("broker")
    )


def latency_totals(latency: DataFrame, op: str = "send") -> DataFrame:
    """Per broker and cluster-wide (`broker = "ALL"`): count, sum, min and max in µs."""
    rows = latency.filter(F.col("op") == op)
    aggs = [
        F.sum("count").alias("count"),
        F.sum("sum_us").alias("sum_us"),
        F.min(F.when(F.col("count") > 0, F.col("min_us"))).alias("min_us"),
        F.max(F.when(F.col("count") > 0, F.col("max_us"))).alias("max_us"),
    ]
    per_broker = rows.groupBy("broker").agg(*aggs)
    cluster = rows.agg(*aggs).select(F.lit(ALL_BROKERS).alias("broker"), "*")
    return (
        per_broker.unionByName(cluster)
        .withColumn("mean_us", _div(F.col("sum_us"), F.col("count")))
        .orderBy("broker")
    )


def latency_buckets(latency: DataFrame, op: str = "send") -> DataFrame:
    """Merged schema-3 bucket counts per broker and cluster-wide: broker, bucket, count."""
    exploded = latency.filter(F.col("op") == op).select(
        "broker", F.explode("buckets").alias("bucket", "n")
    )
    per_broker = exploded.groupBy("broker", "bucket").agg(F.sum("n").alias("count"))
    cluster = per_broker.groupBy("bucket").agg(F.sum("count").alias("count"))
    return per_broker.unionByName(
        cluster.select(F.lit(ALL_BROKERS).alias("broker"), "bucket", "count")
    ).orderBy("broker", "bucket")


def spike_seconds(
    latency: DataFrame, op: str = "send", threshold_us: int = SLA_MAX_US
) -> DataFrame:
    """Per broker: seconds whose max exceeds the threshold (20 ms), worst max, first and last."""
    return (
        latency.filter((F.col("op") == op) & (F.col("max_us") > threshold_us))
        .groupBy("broker")
        .agg(
            F.countDistinct("ts").alias("spike_seconds"),
            F.max("max_us").alias("worst_max_us"),
            F.min("ts").alias("first_spike"),
            F.max("ts").alias("last_spike"),
        )
        .orderBy(F.desc("spike_seconds"), "broker")
    )


def spikes_from_heatmap(percentiles: DataFrame, op: str = "send") -> DataFrame:
    """Per broker from the heatmap job's spike list (its `percentiles/` output).

    Uses `heatmap_report.frames.spikes` (windows whose max exceeds 20 ms), so both
    reports name the same brokers; counts windows of the heatmap's width.
    """
    from spark_reports.heatmap_report.frames import spikes

    return (
        spikes(percentiles.filter(F.col("op") == op))
        .groupBy("broker")
        .agg(
            F.count("window_start").alias("spike_windows"),
            F.round(F.max("max") * 1e6).cast("long").alias("worst_max_us"),
            F.min("window_start").alias("first_spike"),
            F.max("window_start").alias("last_spike"),
        )
        .orderBy(F.desc("spike_windows"), "broker")
    )


def minute_series(cluster_rates: DataFrame, latency: DataFrame, op: str = "send") -> DataFrame:
    """Per minute: peak and mean cluster msgs/s, mean and max send latency (for charts)."""
    rates = (
        cluster_rates.withColumn("minute", F.date_trunc("minute", "ts"))
        .groupBy("minute")
        .agg(F.max("msgs").alias("peak_msgs_per_s"), F.avg("msgs").alias("mean_msgs_per_s"))
    )
    lat = (
        latency.filter(F.col("op") == op)
        .withColumn("minute", F.date_trunc("minute", "ts"))
        .groupBy("minute")
        .agg(
            _div(F.sum("sum_us"), F.sum("count")).alias("mean_us"),
            F.max(F.when(F.col("count") > 0, F.col("max_us"))).alias("max_us"),
        )
    )
    return rates.join(lat, "minute", "left").orderBy("minute")
