"""The latency heatmap report: Spark frames (`frames`), its pictures
(`charts`) and the HTML page (`page`). The job is `spark_reports/jobs/heatmap.py`."""
