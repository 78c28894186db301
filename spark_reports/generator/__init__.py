"""Synthetic Double-11 metrics log in the schema of docs/architecture.md (see model.py for the night)."""

from spark_reports.generator.model import OP_SHAPES, Double11Config
from spark_reports.generator.writer import GenerateResult, generate_double11

__all__ = ["OP_SHAPES", "Double11Config", "GenerateResult", "generate_double11"]
