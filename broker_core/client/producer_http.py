"""A producer's own HTTP endpoint: /metrics (fuse state and send RT) and /stats
(the fuse snapshot with the last transitions, for the console's Fuse screen).

The producer is threaded, so this is the standard library's threading HTTP
server; handlers read the fuse's snapshot (thread-safe) and the load figures
under the load generator's lock.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from fuse.export import metric_families


def fuse_stats(fuse, mono_now: float | None = None) -> dict:
    """Snapshot as JSON, with transition times also given as wall-clock epochs."""
    snap = fuse.snapshot()
    data = snap.to_dict()
    offset = time.time() - (mono_now if mono_now is not None else time.monotonic())
    for t in data.get("transitions", []):
        t["wall_time"] = t["time"] + offset
    for b in data.get("isolated", []):
        b["since_wall"] = b["since"] + offset
    return data


class FuseCollector(Collector):
    def __init__(self, fuse, producer: str) -> None:
        self.fuse, self.producer = fuse, producer

    def collect(self):
        for fam in metric_families(self.fuse.snapshot(transitions=False)):
            kind = GaugeMetricFamily if fam.kind == "gauge" else CounterMetricFamily
            name = fam.name.removesuffix("_total") if fam.kind == "counter" else fam.name
            metric = kind(name, fam.help, labels=["producer", *fam.label_names])
            for labels, value in fam.samples:
                metric.add_metric([self.producer, *labels], value)
            yield metric


class SendCountersCollector(Collector):
    """The producer's throttling figures (client.attempts.SendCounters)."""

    HELP = {"flow_control": "Send attempts answered FLOW_CONTROL (a broker's quota)",
            "flow_control_gave_up": "Sends failed after their FLOW_CONTROL backoffs ran out",
            "backoff_s": "Seconds sends spent backing off after FLOW_CONTROL"}

    def __init__(self, counters, producer: str) -> None:
        self.counters, self.producer = counters, producer

    def collect(self):
        for key, value in self.counters.snapshot().items():
            metric = CounterMetricFamily(f"floodgate_producer_{key}", self.HELP[key],
                                         labels=["producer"])
            metric.add_metric([self.producer], float(value))
            yield metric


class ProducerHttp:
    def __init__(
        self,
        fuse,
        name: str,
        port: int,
        bind: str = "127.0.0.1",
        extra_stats: Callable[[], dict] | None = None,
        counters=None,
    ) -> None:
        registry = CollectorRegistry(auto_describe=False)
        if fuse is not None:
            registry.register(FuseCollector(fuse, name))
        if counters is not None:
            registry.register(SendCountersCollector(counters, name))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/stats":
                    body = {
                        "producer": name,
                        "time": time.time(),
                        "fuse": fuse_stats(fuse) if fuse is not None else None,
                        **({"sends": counters.snapshot()} if counters is not None else {}),
                        **(extra_stats() if extra_stats else {}),
                    }
                    self._send(200, json.dumps(body, default=str).encode(), "application/json")
                elif path == "/healthz":
                    self._send(200, b"ok\n", "text/plain")
                else:
                    self._send(404, b'{"error": "not found"}', "application/json")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # quiet: this is a metrics endpoint
                pass

        self.server = ThreadingHTTPServer((bind, port), Handler)
        self.server.daemon_threads = True
        self.addr = f"{bind}:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, daemon=True, name="floodgate-producer-http"
        )

    def start(self) -> ProducerHttp:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
