"""The error family of console.observability (one line on stderr, exit 1)."""


class ObservabilityError(Exception):
    """A Prometheus or Grafana set-up could not be written or pushed."""
