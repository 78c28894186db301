"""Each way a group elects its master, its measured recovery side by side: which mode a
night's availability target needs.

`floodgate drill failover --json` on a cluster of each mode (`cluster up --consensus
controller` or `raft`) records the mode as `consensus` (bench/raft_modes.py's drills as
`mode`). The drills of every file given are grouped by it; each mode's median failover is
its MTTR, assessed against the same MTBF and target. A mode whose drills lost an
acknowledged message is no candidate, however fast it came back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from capacity.availability import DAY_S, MeasuredRecovery, assess, drill_docs, mttr_from_drills
from capacity.errors import CapacityError

# drill output from before raft groups names no mode: the controller was the only one
UNNAMED_MODE = "controller"


@dataclass(frozen=True)
class ModeVerdict:
    mode: str
    mttr_s: float
    drills: int
    lost: int
    availability: float
    nines: float
    downtime_s_per_period: float
    target_met: bool  # the availability, and nothing acknowledged lost

    def to_dict(self) -> dict:
        return asdict(self)


def read_modes(paths: list[str]) -> dict[str, MeasuredRecovery]:
    """mode -> its MeasuredRecovery, over the drill results of every file."""
    by_mode: dict[str, list[dict]] = {}
    for path in paths:
        for i, doc in enumerate(drill_docs(path)):
            if not isinstance(doc, dict):
                raise CapacityError(f"--from-drill {path}: result #{i + 1} is not an object")
            mode = doc.get("consensus") or doc.get("mode") or UNNAMED_MODE
            by_mode.setdefault(str(mode), []).append(doc)
    out = {}
    for mode, docs in by_mode.items():
        try:
            out[mode] = mttr_from_drills(docs)
        except CapacityError as exc:
            raise CapacityError(f"{mode} drills: {exc}") from None
    return out


def compare(mtbf_s: float, modes: dict[str, MeasuredRecovery], target: float = 0.99999,
            period_s: float = DAY_S) -> list[ModeVerdict]:
    """Each mode assessed at the same MTBF and target, the fastest recovery first."""
    verdicts = []
    for mode, m in modes.items():
        r = assess(mtbf_s, m.mttr_s, target=target, period_s=period_s)
        verdicts.append(ModeVerdict(mode, m.mttr_s, m.drills, m.lost, r.availability, r.nines,
                                    r.downtime_s_per_period, r.target_met and m.lost == 0))
    return sorted(verdicts, key=lambda v: (v.lost > 0, v.mttr_s, v.mode))


def needs(verdicts: list[ModeVerdict], mtbf_s: float, target: float = 0.99999) -> str:
    """What the measurements say a night needs, in one sentence."""
    if not verdicts:
        raise CapacityError("no mode measured")
    allowed = assess(mtbf_s, 0.0, target=target).max_mttr_s_for_target
    pct = f"{target * 100:g} %"
    lossy = [f"{v.mode} lost {v.lost} acknowledged message(s) in its drills"
             for v in verdicts if v.lost]
    met = [v for v in verdicts if v.target_met]
    if not met:
        best = min(verdicts, key=lambda v: v.mttr_s)
        said = (f"no mode measured meets {pct}: the fastest, {best.mode}, recovers in "
                f"{best.mttr_s:.2f} s where one failure every {mtbf_s:,.0f} s allows "
                f"{allowed:.2f} s")
    elif len(met) == len(verdicts):
        said = f"every mode measured meets {pct}; {met[0].mode} recovers fastest " \
               f"({met[0].mttr_s:.2f} s, {allowed:.2f} s allowed)"
    else:
        short = [v for v in verdicts if not v.target_met and not v.lost]
        said = f"{' and '.join(v.mode for v in met)} meets {pct}" + "".join(
            f"; {v.mode} does not ({v.mttr_s:.2f} s to recover, {allowed:.2f} s allowed)"
            for v in short)
    return "; ".join([said, *lossy])


def headline(modes: dict[str, MeasuredRecovery]) -> MeasuredRecovery:
    """The recovery a plan counts on: the fastest mode's that lost nothing (else the
    fastest)."""
    return min(modes.values(), key=lambda m: (m.lost > 0, m.mttr_s))


def side_by_side(mtbf_s: float, modes: dict[str, MeasuredRecovery] | None,
                 target: float = 0.99999) -> dict:
    """The capacity report's comparison of modes, or {} for fewer than two."""
    if not modes or len(modes) < 2:
        return {}
    verdicts = compare(mtbf_s, modes, target=target)
    return {"modes": [v.to_dict() for v in verdicts], "needs": needs(verdicts, mtbf_s, target)}
