"""`floodgate report capacity`: the capacity plan from a metrics log (Spark job).

`report_cmd.py` owns `floodgate report`; it calls `add_capacity_parser` on
its sub-parsers so the heatmap and capacity reports live in separate files.
"""

from __future__ import annotations

from console.commands.common import add_subparser, print_json, spark_failures
from console.errors import EXIT_FAILED, EXIT_OK, REPORT_EXIT_RULE, UsageError

EPILOG = (
    f"{REPORT_EXIT_RULE} Spark's and Java's messages go to a log file named on failure "
    "(`floodgate --debug report ...`: to stderr)."
)


def add_capacity_parser(report_subparsers):
    from spark_reports.jobs.capacity import add_arguments  # argparse only: no Spark import

    parser = add_subparser(
        report_subparsers,
        "capacity",
        "capacity plan: forecast peak, brokers needed, SLA verdict (capacity.json, report.html)",
        epilog=EPILOG,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def run(args) -> int:
    from spark_reports import preflight
    from spark_reports.errors import ReportError
    from spark_reports.jobs import capacity as job

    try:  # before Spark starts: a JVM takes ~10 s to say the same
        job.check_arguments(args)
        days = preflight.check_input(args.input)
        preflight.check_target_date(days, job.parse_date(args.target_date))
        preflight.check_out(args.out, args.force)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    with spark_failures():
        plan = job.run(args)
    verdict = plan["verdict"]
    code = EXIT_OK if verdict["pass"] else EXIT_FAILED
    if args.json:
        print_json(verdict)
        return code
    from capacity.figures import significant

    fp = verdict["forecast_peak_msgs_per_s"]
    print(
        f"{'PASS' if verdict['pass'] else 'FAIL'}: forecast peak {significant(fp['low'])} .. "
        f"{significant(fp['high'])} msgs/s (mid {significant(fp['mid'])}); brokers needed "
        f"{verdict['brokers_needed']['mid']} ({verdict['binding_constraint']['mid']} binds), "
        f"{verdict['brokers_now']} now"
    )
    for warning in verdict.get("warnings", []):
        print(f"  warning: {warning}")
    for check in verdict["checks"]:
        print(f"  {'ok  ' if check['pass'] else 'FAIL'} {check['check']}: {check['detail']}")
    if plan.get("at_risk"):
        first = plan["at_risk"][0]
        print(f"  at risk: {len(plan['at_risk'])} of {verdict['brokers_now']} brokers; "
              f"{first['broker']} binds ({first['severity']:.1f}x past its line: "
              f"{first['reasons'][0]})")
    print(f"wrote {args.out}/capacity.json and {args.out}/report.html")
    return code
