"""cluster.toml: the brokers of a cluster, as `cluster up` writes it and every
other command (console, status, bench, prometheus config) reads it::

    name = "floodgate"
    supervisor_pid = 4242          # present while `cluster up` runs

    [[broker]]
    name = "broker-1"
    addr = "127.0.0.1:10911"       # TCP protocol
    http = "127.0.0.1:10912"       # /metrics, /stats, /admin
    data = "/data/broker-1"
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from broker_core.errors import BrokerError


@dataclass(frozen=True)
class BrokerEntry:
    name: str
    addr: str
    http: str
    data: str = ""


@dataclass
class ClusterFile:
    name: str
    brokers: list[BrokerEntry] = field(default_factory=list)
    supervisor_pid: int | None = None

    @property
    def addrs(self) -> dict[str, str]:
        return {b.name: b.addr for b in self.brokers}

    def to_toml(self) -> dict:
        data: dict = {"name": self.name}
        if self.supervisor_pid:
            data["supervisor_pid"] = self.supervisor_pid
        data["broker"] = [
            {"name": b.name, "addr": b.addr, "http": b.http, "data": b.data} for b in self.brokers
        ]
        return data

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(tomli_w.dumps(self.to_toml()).encode())
        os.replace(tmp, path)


def load_cluster(path: str | Path) -> ClusterFile:
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BrokerError(
            f"{path}: no such cluster file (made by `floodgate cluster up`)"
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BrokerError(f"{path}: not a readable cluster file: {exc}") from None
    brokers = []
    for i, entry in enumerate(raw.get("broker", [])):
        try:
            brokers.append(
                BrokerEntry(
                    str(entry["name"]),
                    str(entry["addr"]),
                    str(entry["http"]),
                    str(entry.get("data", "")),
                )
            )
        except (KeyError, TypeError) as exc:
            raise BrokerError(f"{path}: broker #{i + 1} lacks {exc}") from None
    if not brokers:
        raise BrokerError(f"{path}: lists no [[broker]]")
    pid = raw.get("supervisor_pid")
    return ClusterFile(str(raw.get("name", "floodgate")), brokers, int(pid) if pid else None)
