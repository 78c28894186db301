"""Brokers' figures read from Prometheus' HTTP API instead of their /stats.

What it covers: per broker (the `broker` label) msgs/s in and out, send
mean and p50/p99/p999 (from the classic power-of-two buckets, so coarse),
sends over 20 ms and errors, disk used share, flush lag, consumer lag, and
DOWN when the broker's series stopped being scraped. Rates are over `window`
(default 1m: a few scrapes). Not covered: the per-second heatmap history
(the Broker screen says "no send history"), an exact max (the upper bound
of the highest bucket with sends stands in), and ISOLATED (the fuse exports
counts, not which broker) — give --producers for that.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

from broker_core.observe import metric_names as n
from broker_core.observe.figures import DiskFigures, OpWindow
from broker_core.observe.stats_doc import BrokerStats
from console.data.kept_http import reason as _reason
from console.data.state import BrokerSample

STALE_S = 30.0  # no scrape of a broker for this long: DOWN


def queries(window: str) -> dict[str, str]:
    bucket = f"sum by (broker, le) (rate({n.SEND_BUCKET}[{window}]))"
    return {
        "in": f"sum by (broker) (rate({n.total(n.MESSAGES_IN)}[{window}]))",
        "out": f"sum by (broker) (rate({n.total(n.MESSAGES_OUT)}[{window}]))",
        "mean": f"sum by (broker) (rate({n.SEND_SUM}[{window}])) / "
                f"sum by (broker) (rate({n.SEND_COUNT}[{window}]))",
        "p50": f"histogram_quantile(0.5, {bucket})",
        "p99": f"histogram_quantile(0.99, {bucket})",
        "p999": f"histogram_quantile(0.999, {bucket})",
        "max": f"histogram_quantile(1, {bucket})",
        "over_20ms": f"sum by (broker) (increase({n.total(n.SEND_OVER_20MS)}[{window}]))",
        "errors": f"sum by (broker) (increase({n.total(n.SEND_ERRORS)}[{window}]))",
        "failures": f"sum by (broker) (increase({n.total(n.SEND_FAILURES)}[{window}]))",
        "disk": f"max by (broker) ({n.DISK_USED_RATIO})",
        "flush_lag": f"max by (broker) ({n.FLUSH_LAG_BYTES})",
        "consumer_lag": f"sum by (broker) ({n.CONSUMER_LAG})",
        "last_scrape": f"max by (broker) (timestamp({n.total(n.MESSAGES_IN)}))",
    }


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def _value(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if x != x or x in (float("inf"), float("-inf")) else x  # NaN: no sends


class PrometheusBrokers:
    def __init__(self, url: str, timeout: float = 2.0, window: str = "1m",
                 clock=time.time) -> None:
        self.url = url.rstrip("/")
        if not self.url.startswith("http"):
            self.url = "http://" + self.url
        self.timeout, self.window, self.clock = timeout, window, clock
        self.known: list[str] = []

    def query(self, expr: str) -> dict[str, float | None]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=self.timeout) as resp:
            body = json.loads(resp.read())
        if body.get("status") != "success":
            raise ValueError(body.get("error", "query failed"))
        return {r["metric"].get("broker", ""): _value(r["value"][1])
                for r in body["data"]["result"] if r.get("metric", {}).get("broker")}

    def fetch(self) -> list[BrokerSample]:
        try:
            figures = {name: self.query(expr) for name, expr in queries(self.window).items()}
        except Exception as exc:  # noqa: BLE001 - Prometheus down is state, not a crash
            reason = f"prometheus: {_reason(getattr(exc, 'reason', exc))}"
            names = self.known or ["prometheus"]
            return [BrokerSample(f"prom/{n}", n, None, reason) for n in names]
        names = sorted(set().union(*(f.keys() for f in figures.values())))
        self.known = sorted(set(self.known) | set(names))
        now = self.clock()
        return [self._sample(n, figures, now) for n in self.known]

    def _sample(self, name: str, f: dict[str, dict], now: float) -> BrokerSample:
        last = f["last_scrape"].get(name)
        if last is None or now - last > STALE_S:
            age = "never" if last is None else f"{now - last:.0f} s ago"
            return BrokerSample(f"prom/{name}", name, None, f"not scraped since {age}")
        # the broker table reads the 10 s window; here it spans the query's `window`
        send = OpWindow(**{k: f[k].get(name) for k in ("mean", "p50", "p99", "p999", "max")},
                        msgs_per_s=f["in"].get(name), over_20ms=_int(f["over_20ms"].get(name)),
                        errors=_int(f["errors"].get(name)),
                        failures=_int(f["failures"].get(name)))
        ratio = f["disk"].get(name)
        stats = BrokerStats(
            broker=name, time=last,
            ops={"send": {"10s": send}, "pull": {"10s": OpWindow(msgs_per_s=f["out"].get(name))}},
            disk=DiskFigures(used_ratio=ratio),
            flush_lag_bytes=_int(f["flush_lag"].get(name)),
            consumer_lag={"all": int(f["consumer_lag"].get(name) or 0)})
        return BrokerSample(f"prom/{name}", name, stats)

    def close(self) -> None:
        pass
