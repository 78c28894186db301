"""PySpark jobs over floodgate's metrics log: latency heatmaps, percentiles over
time, the capacity plan, their HTML reports, and a synthetic Double-11
generator for that log.

The metrics-log contract (schemas, rows, quarantine rules) is
``heatmap.metrics_log``; ``spark_reports.schema`` is its Spark side. Each report
is a package (``heatmap_report``, ``capacity_report``: frames, page, and
charts or plan) over one ``report_kit``; ``jobs/`` holds the spark-submit
entry points.
"""
