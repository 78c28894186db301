"""What the console shows of one broker after a poll (`state.broker_view` makes it): its
state, the send figures of the last 10 s and, in a replicated group, its role."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: `offsets show` and `dlq` import the group rules
    from broker_core.observe.stats_doc import BrokerStats, HistorySecond


@dataclass(frozen=True)
class BrokerView:
    key: str
    name: str
    state: str
    reason: str = ""
    failures: int = 0  # polls in a row without an answer
    last_seen: float | None = None
    in_per_s: float | None = None
    out_per_s: float | None = None
    mean: float | None = None
    p50: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    over_20ms: int | None = None  # sends over 20 ms in the last 10 s
    errors: int | None = None  # sends answered with an error in the last 10 s
    send_failures: int | None = None  # of those, failed by the broker itself
    last_failure: str = ""  # the latest of those: "SYSTEM_ERROR: injected error"
    last_refusal: str = ""  # the latest of the others, when there were: "NOT_MASTER: …"
    disk_used_ratio: float | None = None
    flush_lag_bytes: int | None = None
    consumer_lag: int | None = None
    fault: Mapping[str, Any] | None = None
    # a replicated group's broker: its role, epoch, and the replication lag it sees
    group: str | None = None
    role: str | None = None  # MASTER | SLAVE | NONE
    epoch: int | None = None
    in_sync: int | None = None  # a master's slaves in sync (0: one copy only)
    repl_lag_bytes: int | None = None  # a master's worst slave, or a slave's own
    repl_lag_s: float | None = None  # a master's worst slave
    replication: str = ""
    role_since: float | None = None  # wall clock of its last role change
    role_why: str = ""  # why it became master (the controller's words), when it says
    stats: BrokerStats | None = None  # the latest /stats answer, for the broker screen
    history: tuple[HistorySecond, ...] = ()  # send histograms per second, oldest first

    @property
    def answering(self) -> bool:
        return self.failures == 0 and self.stats is not None
