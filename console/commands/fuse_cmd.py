"""`floodgate fuse simulate`: compare broker-isolation policies in virtual time."""

from __future__ import annotations

from console.commands.common import add_subparser, print_json
from console.errors import UsageError
from fuse.sim_policies import POLICIES as _POLICIES  # pure Python, cheap to import
from fuse.sim_scenarios import SCENARIOS as _SCENARIOS

SCENARIOS = tuple(_SCENARIOS)
POLICIES = tuple(_POLICIES)


def register(sub) -> None:
    parser = add_subparser(sub, "fuse", "the broker fuse: simulate isolation policies")
    fsub = parser.add_subparsers(metavar="ACTION")
    sim = add_subparser(fsub, "simulate",
                        "deterministic virtual-time simulation of a producer over N brokers")
    sim.add_argument("--scenario", required=True, metavar="NAME",
                     help=f"{', '.join(SCENARIOS)}; a comma list or 'all'")
    sim.add_argument("--policy", required=True, metavar="NAME",
                     help=f"{', '.join(POLICIES)}; a comma list or 'all'")
    sim.add_argument("--brokers", type=int, default=10, help="brokers (default 10)")
    sim.add_argument("--seconds", type=float, default=600.0,
                     help="virtual seconds of sending (default 600)")
    sim.add_argument("--rate", type=float, default=10_000.0,
                     help="sends per second, Poisson arrivals (default 10000)")
    sim.add_argument("--seed", type=int, default=0, help="same seed, same result (default 0)")
    sim.add_argument("--json", action="store_true", help="print the results as JSON")
    sim.set_defaults(func=run_simulate)


def _pick(value: str, known: tuple[str, ...], what: str) -> list[str]:
    names = list(known) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"unknown {what} {', '.join(unknown) or repr(value)};"
                         f" choose from {', '.join(known)} or all")
    return names


def run_simulate(args) -> int:
    scenarios = _pick(args.scenario, SCENARIOS, "scenario")
    policies = _pick(args.policy, POLICIES, "policy")
    if args.brokers < 1:
        raise UsageError(f"--brokers must be >= 1, got {args.brokers}")
    if not args.seconds > 0 or not args.rate > 0:
        raise UsageError("--seconds and --rate must be > 0")

    from fuse.errors import FuseError
    from fuse.sim import check_args, simulate

    try:  # bad sizes fail before minutes of simulation
        check_args(scenarios[0], policies[0], args.brokers, args.seconds, args.rate)
    except FuseError as exc:
        raise UsageError(str(exc)) from None
    results = []
    if not args.json:
        print(f"{args.brokers} brokers, {args.seconds:g} s at {args.rate:g} sends/s, seed {args.seed}")
        print(f"{'scenario':<16} {'policy':<10} {'over 20ms':>10} {'avg ms':>8} {'p999 ms':>9}"
              f" {'failed':>7} {'max excluded':>13}")
    for scenario in scenarios:
        for policy in policies:
            r = simulate(scenario, policy, brokers=args.brokers, seconds=args.seconds,
                         rate=args.rate, seed=args.seed)
            results.append(r.to_dict())
            if not args.json:
                print(f"{scenario:<16} {policy:<10} {r.share_over_20ms:>10.4%} {r.avg_rt_ms:>8.2f}"
                      f" {r.p999_ms:>9.1f} {r.failed:>7} {r.max_excluded:>6} ({r.max_excluded_ratio:.0%})",
                      flush=True)
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
    return 0
