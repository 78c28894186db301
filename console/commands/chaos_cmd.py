"""`floodgate drill chaos`: random faults under load, then what was lost (exit 1 on any
lost acknowledged message, split-brain ack or broken order)."""

from __future__ import annotations

from pathlib import Path

from console.commands.common import add_subparser, float_range, positive_float, print_json, seed
from console.errors import CommandFailed, UsageError


def register(dsub) -> None:
    p = add_subparser(dsub, "chaos", "keyed producers and a consumer group under random "
                      "partitions, isolations, lossy and slow links, kills and pauses; then "
                      "every acknowledged message read back (openchaos-style)")
    p.add_argument("--cluster", type=Path, required=True, metavar="FILE",
                   help="cluster.toml of `floodgate cluster up --groups G --netns --restart`")
    p.add_argument("--duration", type=positive_float, default=60.0,
                   help="seconds under faults (60)")
    p.add_argument("--faults", default="partition,isolate,kill,pause,loss,delay",
                   metavar="KIND,...", help="fault kinds the nemesis draws from (all)")
    p.add_argument("--seed", type=seed, default=1, help="the nemesis's random seed (1)")
    p.add_argument("--rate", type=positive_float, default=200.0,
                   help="messages per second (200)")
    p.add_argument("--send-deadline", type=float_range(0.001, 60), default=15.0, metavar="S",
                   help="each send's retry budget (15 s: a fault's length and a failover); "
                   "a send with no answer is retried on its group only (idempotent: stored "
                   "once), one refused goes to another group")
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                   help="leave out the exactly-once pipeline (the topic transformed into "
                   "<topic>-out by two members of one group, under the same faults)")
    p.add_argument("--no-register", dest="register", action="store_false",
                   help="leave out the register (three clients racing compare-and-sets on "
                   "one queue's end, checked for linearizability)")
    p.add_argument("--history", type=Path, metavar="FILE",
                   help="where the history goes (default: DIR/chaos-<time>.jsonl beside "
                   "the cluster file; the report beside it, .report.json)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=run_chaos_cmd)


def report_lines(r) -> list[str]:
    lines = [f"sends      {r.sends:,}: acked {r.acked:,}, failed {r.failed:,}; read back "
             f"{r.read_back:,}",
             f"lost       {r.lost}" + (f" (first: {', '.join(r.lost_sample[:5])})"
                                       if r.lost else ""),
             f"split brain {r.split_brain_acks} ack(s) from a deposed master"
             + (f": {r.split_brain_sample[0]}" if r.split_brain_acks else ""),
             f"order      {r.order_violations} violation(s) over {r.order_checked_keys} "
             "ordered key(s)" if r.order_checked_keys else
             "order      not promised by these sends (no ordered key)",
             f"duplicates {r.duplicates_stored} stored twice, {r.duplicates_delivered} "
             f"delivered twice to the group (at least once: not a failure)"]
    lines += pipeline_lines(r.pipeline) + register_lines(r.register)
    kinds: dict[str, int] = {}
    for f in r.faults:
        kinds[f["fault"]["kind"]] = kinds.get(f["fault"]["kind"], 0) + 1
    lines.append(f"faults     {len(r.faults)}: "
                 + (", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"))
    for fo in r.failovers:
        after = fo["first_ack_after_s"]
        lines.append(f"failover   {fo['group']}: {fo['from']} -> {fo['to']} (epoch "
                     f"{fo['epoch']}) at {fo['at']:.1f} s; first ack by it "
                     + (f"{after:.2f} s later" if after is not None else "never"))
    detected = [f.get("fuse_detect_s") for f in r.faults if f["fault"]["kind"] in
                ("loss", "delay")]
    if r.fuse_isolations or detected:
        seen = [d for d in detected if d is not None]
        lines.append(f"fuse       {len(r.fuse_isolations)} isolation(s), {r.fuse_unjustified} "
                     f"of a group no fault touched; lossy/slow masters isolated "
                     f"{len(seen)} of {len(detected)}"
                     + (f", in {min(seen):.2f}-{max(seen):.2f} s" if seen else ""))
    windows = sorted(w["seconds"] for w in r.unavailable if w["seconds"] is not None)
    if r.unavailable:
        lines.append(f"unavailable {len(r.unavailable)} window(s) (a group's failed send to "
                     f"its next ack): median {windows[len(windows) // 2] if windows else 0:.2f}"
                     f" s, longest {max(windows, default=0):.2f} s")
        lines += [f"  {w['group'] or '?'}  {w['from']:.1f} s -> "
                  + (f"{w['to']:.1f} s ({w['seconds']:.2f} s)" if w["to"] is not None
                     else "never acked again") for w in r.unavailable if
                  w["seconds"] is None or w["seconds"] >= 1.0]
    else:
        lines.append("unavailable never (no send failed)")
    return lines


def pipeline_lines(p: dict) -> list[str]:
    if not p:
        return []
    s = p["samples"]
    return [f"pipeline   exactly once: {p['inputs']:,} inputs -> {p['outputs']:,} outputs"
            + ("" if p["drained"] else " (NOT drained: the transforms never caught up)")
            + f"; {p['commits']:,} commits, {p['aborted']} aborted, {p['unknown']} unknown",
            f"           lost {p['lost']}" + (f" ({', '.join(s['lost'][:5])})" if p["lost"]
                                              else "")
            + f", duplicated {p['duplicated']}, aborted reads {p['aborted_reads']}"
            + f", order {p['order_violations']} violation(s)"
            + (f" ({s['order'][0]})" if p["order_violations"] else "")]


def register_lines(g: dict) -> list[str]:
    if not g:
        return []
    verdict = "linearizable" if g["linearizable"] else "NOT linearizable"
    return [f"register   {g['ops']:,} compare-and-sets: {g['ok']:,} stored, {g['conflicts']:,} "
            f"refused, {g['unknown']} unknown; {verdict}",
            f"           lost {g['lost']}, duplicated {g['duplicated']}, refused yet stored "
            f"{g['conflict_stored']}, off their offset {g['cas_violations']}",
            *(f"           {v}" for v in g["violations"])]


def run_chaos_cmd(args) -> int:
    from broker_core.cluster.chaos import ChaosSpec, run_chaos
    from broker_core.cluster.cluster_file import load_cluster

    faults = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    if not faults:
        raise UsageError("--faults names no fault kind")
    spec = load_cluster(args.cluster)
    chaos = ChaosSpec(duration=args.duration, faults=faults, seed=args.seed, rate=args.rate,
                      history=args.history, send_deadline=args.send_deadline,
                      pipeline=args.pipeline, register=args.register)
    report = run_chaos(spec, chaos, Path(args.cluster).parent)
    args.event_fields = {"lost": report.lost, "duplicated": report.duplicates_stored}
    if args.json:
        print_json(report.to_dict())
    else:
        print("\n".join(report_lines(report)))
    if not report.ok:
        p = report.pipeline
        raise CommandFailed(f"{report.lost} acknowledged message(s) lost, "
                            f"{report.split_brain_acks} split-brain ack(s), "
                            f"{report.order_violations} order violation(s)"
                            + (f"; pipeline: {p['lost']} lost, {p['duplicated']} duplicated, "
                               f"{p['aborted_reads']} aborted read(s), "
                               f"{p['order_violations']} out of order"
                               + ("" if p["drained"] else ", not drained") if p else "")
                            + (f"; register: {report.register['lost']} lost, "
                               + ("linearizable" if report.register["linearizable"] else
                                  "NOT linearizable") if report.register else ""))
    return 0
