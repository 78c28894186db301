"""Spark job entry points (runnable with spark-submit)."""
