"""The trace screen's data: a search (key or id) or a spike window's samples, asked of
the cluster's brokers off the UI thread. Failures come back as lines, never raised."""

from __future__ import annotations

import re
from pathlib import Path

ID_RE = re.compile(r"^[0-9A-Fa-f]{32}$")


def _finder(cluster: Path | None):
    from broker_core.cluster.cluster_file import load_cluster
    from broker_core.cluster.trace_finder import TraceFinder

    if cluster is None:
        return None
    return TraceFinder(load_cluster(cluster), timeout=2.0)


def search(cluster: Path | None, text: str, limit: int = 10) -> list[str]:
    """Timeline lines for a key or a message id (what `floodgate trace` prints)."""
    from broker_core.errors import BrokerError
    from console.trace_format import failed_send_lines, timeline_lines

    text = text.strip()
    if cluster is None:
        return ["no cluster file: start the console with --cluster FILE to search traces"]
    if not text or len(text.split()) != 1:
        return ["type one key (e.g. order-42) or a message id (32 hex digits), then Enter"]
    from broker_core.message_id import NOT_OURS, rocketmq_id

    if rocketmq_id(text):
        return [f"{text}: {NOT_OURS} (type a key)"]
    try:
        finder = _finder(cluster)
        try:
            result = finder.by_id(text) if ID_RE.match(text) else \
                finder.by_key(text, None, 0, None, limit)
        finally:
            finder.close()
    except (BrokerError, OSError) as exc:
        return [f"error: {exc}"]
    lines: list[str] = []
    for t in result.timelines:
        lines += timeline_lines(t) + [""]
    for r in result.failed_sends:
        lines += failed_send_lines(r)
    for name, why in result.unreachable.items():
        lines.append(f"warning: broker {name} did not answer: {why}")
    if not result.timelines and not result.failed_sends:
        lines.insert(0, f"nothing found for {text!r}"
                     + (f": {result.not_found}" if result.not_found else ""))
    return lines


def spike_window(broker_view, around_s: int = 2) -> tuple[int, int] | None:
    """(begin ms, end ms) around the broker's slowest second in its history."""
    worst = None
    for second, hist in broker_view.history:
        if hist.count and (worst is None or hist.max > worst[1]):
            worst = (second, hist.max)
    if worst is None:
        return None
    return (worst[0] - around_s) * 1000, (worst[0] + 1 + around_s) * 1000


def samples(cluster: Path | None, broker: str | None, begin_ms: int, end_ms: int,
            limit: int = 15) -> list[dict]:
    """The slowest traced sends of the window (to ``broker``)."""
    if cluster is None:
        return []
    finder = _finder(cluster)
    try:
        return finder.sample_sends(broker, begin_ms, end_ms, limit)
    finally:
        finder.close()
