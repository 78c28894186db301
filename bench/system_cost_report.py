"""`bench/system_cost.py`'s report in words: each part against its goal, and with
`--before TREE` the code before a change beside it."""

from __future__ import annotations

from console.demo.summary import KEEPING_UP_P99_GOAL_S


def report(out: dict) -> None:
    def procs(part: dict) -> str:
        return ", ".join(f"{n} {v['ms_per_s']:g}" for n, v in part["procs"].items())

    def wakes(part: dict) -> str:
        return ", ".join(f"{n} {v['wakes_per_s']:g}" for n, v in part["procs"].items())

    def verdict(part: dict) -> str:
        return "met" if part["met"] else "MISSED"

    if "idle" in out:
        p = out["idle"]
        print(f"idle cluster (4 groups): {p['cores']:.4f} cores (goal <= 0.03), busiest broker "
              f"{p['max_broker_ms_per_s']} ms/s (goal <= 1): {verdict(p)}\n  ms/s: {procs(p)}"
              f"\n  wake-ups a second: {wakes(p)}\n  the peer, an event loop waking once a "
              f"second: {p['peer_wake_ms']} ms/s (what one wake-up costs on this host now)")
    if "consumer" in out:
        p = out["consumer"]
        print(f"a consumer group long-polling it: {p['consumer_ms_per_s']} ms/s (goal <= 1): "
              f"{verdict(p)}")
    if "console" in out:
        p = out["console"]
        print(f"the console watching 8 brokers: {p['console_ms_per_s']} ms/s "
              f"({p['console_ms_per_s'] / 10:.1f} % of a core, goal <= 3 %): {verdict(p)}")
    before = out.get("before", {})
    if "fixed" in out:
        p = out["fixed"]
        print(f"make demo at 10 msgs/s: {p['cores']:.3f} cores (goal <= 0.15): {verdict(p)}\n"
              f"  ms/s: {procs(p)}")
        if "fixed" in before:
            b = before["fixed"]
            print(f"  the code before ({before['tree']}), just before it: {b['cores']:.3f} cores"
                  f" (after / before {p['cores'] / b['cores']:.2f})\n  ms/s: {procs(b)}")
    if "pair" in out:
        for label in ("default", "linger 25 ms", "linger 25 ms, frames of 8"):
            p = out["pair"][label]
            r = p["rates"]
            print(f"sync pair ({label}), CPU a message: {r['333']['pair_us']} us at 333/s, "
                  f"{r['2000']['pair_us']} us at 2,000/s: x{p['ratio']} (goal <= 1.5); its "
                  f"floor {p['floor']['333']['pair_us']} vs {p['floor']['2000']['pair_us']} us:"
                  f" x{p['floor_ratio']}")
    for key in ("demo", "demo_plain_priority"):
        if key in out:
            p = out[key]
            print(f"{key.replace('_', ' ')} at 5,000 msgs/s: {p['cores']:.3f} cores "
                  f"(goal <= 1.6); producer {100 * p['achieved_of_target']:.1f} %, fault-free "
                  f"masters worst p99 {p['fault_free_worst_p99_ms']} ms / max "
                  f"{p['fault_free_worst_max_ms']} ms ({p['windows_over_goal']} windows over), "
                  f"beats late {p['late_beats_pct']} %, stall out after "
                  f"{_seconds(p['stall_excluded_after_s'])}, false isolations "
                  f"{p['false_isolations']}: {verdict(p)}\n  ms/s: {procs(p)}")
            c, w = p["consumer_ms"].get("billing", {}), p["wake_chain_ms"]
            goal_ms = KEEPING_UP_P99_GOAL_S * 1000
            met = "met" if c.get("p99") is not None and c["p99"] <= goal_ms else "missed"
            print(f"  consumer send -> hand (billing): p50 {c.get('p50')} ms, p99 {c.get('p99')}"
                  f" ms (goal <= {goal_ms:g}: {met}); its floor, four bare hops: p50 "
                  f"{w['p50_ms']}, p99 {w['p99_ms']} ms")
            if key in before:
                b = before[key]
                cb = b["consumer_ms"].get("billing", {})
                print(f"  the code before ({before['tree']}), just before it: {b['cores']:.3f} "
                      f"cores (after / before {p['cores'] / b['cores']:.2f}); fault-free masters"
                      f" worst p99 {b['fault_free_worst_p99_ms']} ms ({b['windows_over_goal']} "
                      f"windows over); billing p50 {cb.get('p50')} ms, p99 {cb.get('p99')} ms; "
                      f"four bare hops p99 {b['wake_chain_ms']['p99_ms']} ms\n"
                      f"  ms/s: {procs(b)}")
    h = out["host"]
    lo, hi = h["loop_2m_range_ms"]
    print(f"host speed at the start: a 2M-step Python loop {h['loop_2m_ms']} ms of CPU "
          f"(median of 5, {lo}-{hi}), 2,000 thread wake-ups {h['wakeups_2000_ms']} ms (this "
          f"VM has read 74-94 and 105-112)")
    print(f"bench process peak RSS {out['bench_peak_rss_mib']} MiB")


def _seconds(s: float | None) -> str:
    return "never" if s is None else f"{s:.2f} s"

