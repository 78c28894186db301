"""Where the console's figures come from: brokers' and producers' /stats over
HTTP, a directory of recorded /stats files (tests, the benchmark), or the
host itself. Every fetch returns samples, each answer decoded once into
`BrokerStats` / `ProducerStats` (leniently: a newer broker's extra fields are
ignored); a source that does not answer becomes a sample with an error
string, never an exception.

Each broker is asked only for the seconds of history it has not sent yet
(`/stats?history=N`), so a refresh of 200 brokers moves a few KB each, not
the full 5 minutes every second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from broker_core.observe.stats_doc import BrokerStats, ProducerStats
from console.data.histories import HISTORY_S
from console.data.kept_http import KeptConnections, decode
from console.data.state import BrokerSample, ProducerSample

SHOWN_HISTORY = ("send",)  # the only per-second histograms the console draws


def producer_sample(key: str, doc: Mapping[str, Any] | None, error: str | None
                    ) -> ProducerSample:
    return ProducerSample(key, None if doc is None else ProducerStats.from_dict(doc), error)


class HttpBrokers:
    """GET /stats of every broker, in parallel, each with the history it lacks."""

    def __init__(self, brokers: Sequence[tuple[str, str]], timeout: float = 0.8,
                 workers: int = 32, clock=time.monotonic) -> None:
        # enough threads that a few black-holed brokers (each a full timeout) do not delay
        # the answer of the others past a refresh
        self.brokers = list(brokers)  # (name, http addr)
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(workers, len(self.brokers))),
                                        thread_name_prefix="floodgate-poll")
        self._clock = clock
        self._last_ok: dict[str, float] = {}
        self.http = KeptConnections(timeout, broker=True)

    def _one(self, name: str, http: str) -> BrokerSample:
        last = self._last_ok.get(http)
        history = HISTORY_S if last is None else min(HISTORY_S, int(self._clock() - last) + 3)
        doc, error = self.http.get(http, f"/stats?history={history}")
        if doc is None:
            return BrokerSample(http, name, None, error)
        self._last_ok[http] = self._clock()
        return BrokerSample(http, name, BrokerStats.from_dict(doc, SHOWN_HISTORY))

    def fetch(self) -> list[BrokerSample]:
        return list(self._pool.map(lambda b: self._one(*b), self.brokers))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()


class HttpProducers:
    def __init__(self, addrs: Sequence[str], timeout: float = 0.8) -> None:
        self.addrs, self.timeout = list(addrs), timeout
        self.http = KeptConnections(timeout, broker=False)

    def fetch(self) -> list[ProducerSample]:
        return [producer_sample(a, *self.http.get(a, "/stats")) for a in self.addrs]

    def close(self) -> None:
        self.http.close()


class ReplayDir:
    """Recorded /stats files: DIR/brokers/*.json, DIR/producers/*.json, DIR/host.json.

    Every fetch serves the same documents through the same decoding as HTTP
    (JSON, then `from_dict`), each broker's history cut to what a live poll
    would have asked for.
    """

    def __init__(self, root: Path, copies: int = 1) -> None:
        self.root = Path(root)
        files = sorted((self.root / "brokers").glob("*.json"))
        if not files:
            raise ValueError(f"{self.root}: no recorded brokers/*.json")
        docs = [json.loads(f.read_bytes()) for f in files]
        self.docs: list[tuple[str, dict]] = []
        for i in range(copies):  # the benchmark multiplies 6 recordings into 200 brokers
            for doc in docs:
                name = doc.get("broker", "broker") if copies == 1 else f"b{i:03d}-{doc['broker']}"
                self.docs.append((f"replay/{name}", {**doc, "broker": name}))
        self.producers = [(f.stem, f.read_bytes())
                          for f in sorted((self.root / "producers").glob("*.json"))]
        self._seen: set[str] = set()
        self._bodies: dict[tuple[str, bool], bytes] = {}  # what the "server" sends, made once

    @property
    def brokers(self) -> list[tuple[str, str]]:
        return [(doc["broker"], key) for key, doc in self.docs]

    def fetch(self) -> list[BrokerSample]:
        out = []
        for key, doc in self.docs:
            again = key in self._seen  # a live poll asks for the last few seconds only
            body = self._bodies.get((key, again))
            if body is None:
                history = doc.get("history", {})
                if again:
                    history = {op: rows[-3:] for op, rows in history.items()}
                body = self._bodies[key, again] = json.dumps({**doc, "history": history}).encode()
            self._seen.add(key)
            parsed, error = decode(body)
            stats = None if parsed is None else self.decode_stats(parsed)
            out.append(BrokerSample(key, doc["broker"], stats, error))
        return out

    def decode_stats(self, doc: Mapping[str, Any]) -> BrokerStats:
        """A fresh document (what JSON gave) to BrokerStats; the benchmark changes
        the figures here, before decoding, as a live cluster's would change."""
        return BrokerStats.from_dict(doc, SHOWN_HISTORY)

    def fetch_producers(self) -> list[ProducerSample]:
        return [producer_sample(f"replay/{stem}", *decode(body))
                for stem, body in self.producers]

    def host(self) -> Mapping[str, Any] | None:
        path = self.root / "host.json"
        return json.loads(path.read_text()) if path.exists() else None

    def close(self) -> None:
        pass
