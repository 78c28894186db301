"""The capacity report: Spark frames (`frames`), the plan the `capacity` models
make of them (`plan`) and the HTML page (`page`). The job is
`spark_reports/jobs/capacity.py`."""
