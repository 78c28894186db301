"""PySpark jobs over floodgate's metrics log: latency heatmaps, percentiles over
time, the HTML report, and a synthetic Double-11 generator for that log.

`spark_reports.schema` is the metrics-log contract (pyarrow and Spark forms,
validation rules); it imports no pyspark, so the broker can use it to write.
"""
