"""`floodgate fuse simulate`: compare broker-isolation policies in virtual time."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from console.commands.common import add_subparser, int_range, positive_float, print_json, seed
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
    sim.add_argument("--brokers", type=int_range(1, 10_000), default=10,
                     help="brokers, 1-10000 (default 10)")  # fuse.sim.check_args's range
    sim.add_argument("--seconds", type=positive_float, default=600.0,
                     help="virtual seconds of sending (default 600)")
    sim.add_argument("--rate", type=positive_float, default=10_000.0,
                     help="sends per second, Poisson arrivals (default 10000)")
    sim.add_argument("--seed", type=seed, default=0, help="same seed, same result (default 0)")
    sim.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                     help="a Fuse setting for the fuse policy, e.g. backoff=2 or slow_s=0.005"
                          " (repeatable; see fuse.config.FuseConfig)")
    sim.add_argument("--json", action="store_true", help="print the results as JSON")
    sim.set_defaults(func=run_simulate)


def _pick(value: str, known: tuple[str, ...], what: str) -> list[str]:
    names = list(known) if value == "all" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise UsageError(f"unknown {what} {', '.join(unknown) or repr(value)};"
                         f" choose from {', '.join(known)} or all")
    return names


def _settings(pairs: list[str]) -> dict[str, float | int | bool]:
    """KEY=VALUE strings -> keyword arguments (numbers, or true/false)."""
    options: dict[str, float | int | bool] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set wants KEY=VALUE, got {pair!r}")
        raw = raw.strip().lower()
        if raw in ("true", "false"):
            value: float | int | bool = raw == "true"
        else:
            try:
                value = int(raw) if raw.lstrip("-").isdigit() else float(raw)
            except ValueError:
                raise UsageError(f"--set {key}: not a number: {raw!r}") from None
        options[key.strip()] = value
    return options


def run_simulate(args) -> int:
    scenarios = _pick(args.scenario, SCENARIOS, "scenario")
    policies = _pick(args.policy, POLICIES, "policy")

    from fuse import Fuse
    from fuse.errors import FuseError
    from fuse.sim import check_args, simulate

    options = _settings(args.settings)
    try:  # bad sizes and settings fail before minutes of simulation
        check_args(scenarios[0], policies[0], args.brokers, args.seconds, args.rate)
        Fuse(["probe"], **options)
    except FuseError as exc:
        raise UsageError(str(exc)) from None
    results = []
    if not args.json:
        print(f"{args.brokers} brokers, {args.seconds:g} s at {args.rate:g} sends/s, seed {args.seed}")
        print(f"{'scenario':<16} {'policy':<10} {'over 20ms':>10} {'avg ms':>8} {'p999 ms':>9}"
              f" {'failed':>7} {'max excluded':>13} {'false iso':>9}")
    with _progress_bar(len(scenarios) * len(policies)) as (advance, emit):
        for scenario in scenarios:
            for policy in policies:
                cell = f"{scenario} x {policy}"
                r = simulate(scenario, policy, brokers=args.brokers, seconds=args.seconds,
                             rate=args.rate, seed=args.seed,
                             progress=lambda done, cell=cell: advance(cell, done),
                             **(options if policy == "fuse" else {}))
                advance(cell, 1.0)
                results.append(r.to_dict())
                if not args.json:
                    emit(f"{scenario:<16} {policy:<10} {r.share_over_20ms:>10.4%}"
                         f" {r.avg_rt_ms:>8.2f} {r.p999_ms:>9.1f} {r.failed:>7}"
                         f" {r.max_excluded:>6} ({r.max_excluded_ratio:.0%})"
                         f" {r.false_isolations:>9}")
    if args.json:
        print_json(results[0] if len(results) == 1 else results)
    return 0


@contextmanager
def _progress_bar(cells: int):
    """Yields (advance, emit): a transient rich bar on whichever of stdout and
    stderr is a terminal (rows printed above it), or nothing when neither is."""

    def plain(line: str) -> None:
        print(line, flush=True)

    if not (sys.stdout.isatty() or sys.stderr.isatty()):
        yield (lambda cell, done: None), plain
        return
    from rich.console import Console
    from rich.progress import Progress

    on_stdout = sys.stdout.isatty()
    console = Console() if on_stdout else Console(stderr=True)
    with Progress(console=console, transient=True, redirect_stdout=False,
                  redirect_stderr=False) as bar:
        task = bar.add_task("simulating", total=cells)
        finished = [0]

        def advance(cell: str, done: float) -> None:
            if done >= 1.0:
                finished[0] += 1
                done = 0.0
            bar.update(task, completed=finished[0] + done, description=cell)

        def emit(line: str) -> None:
            bar.console.print(line, markup=False, highlight=False, soft_wrap=True)

        yield advance, (emit if on_stdout else plain)
