"""Just enough PromQL reading to list the metrics a query names.

Used to check that every metric the dashboard and the rules ask for is one a
broker or producer really exports, so a renamed metric breaks a test.
"""

from __future__ import annotations

import re

# floodgate's metric names all start with floodgate_; recording rules are
# level:metric:operations and are resolved separately (they contain colons).
_METRIC = re.compile(r"(?<![\w:$])([a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+|floodgate_[a-zA-Z0-9_]+|up)\b")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def metric_names(expr: str) -> set[str]:
    """Metric (and recording rule) names in a PromQL expression, label values left out."""
    return set(_METRIC.findall(_STRING.sub('""', expr)))

