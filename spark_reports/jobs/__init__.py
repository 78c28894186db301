"""Spark job entry points (spark-submit targets)."""
