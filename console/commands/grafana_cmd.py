"""`floodgate grafana dashboard|push`: the floodgate dashboard, written or pushed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.commands.common import add_subparser, positive_float, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "grafana", "Grafana dashboard: write it or push it")
    gsub = parser.add_subparsers(metavar="ACTION")
    dash = add_subparser(gsub, "dashboard", "write the floodgate dashboard JSON")
    _datasource(dash)
    dash.add_argument("--out", type=Path, required=True, metavar="FILE",
                      help="where to write the dashboard JSON ('-' for stdout)")
    dash.set_defaults(func=run_dashboard)

    push = add_subparser(gsub, "push", "push the floodgate dashboard to a Grafana")
    push.add_argument("--url", required=True, help="Grafana's base URL, e.g. http://grafana:3000")
    push.add_argument("--token", metavar="T", help="service account token (or env GRAFANA_TOKEN)")
    push.add_argument("--user", metavar="U", help="basic-auth user (with --password)")
    push.add_argument("--password", metavar="P", help="basic-auth password (or env GRAFANA_PASSWORD)")
    push.add_argument("--folder", metavar="NAME", help="folder title (default: General)")
    push.add_argument("--overwrite", action="store_true",
                      help="replace a dashboard with the same uid")
    push.add_argument("--dashboard", type=Path, metavar="FILE",
                      help="push this dashboard JSON instead of building it")
    _datasource(push)
    push.add_argument("--timeout", type=positive_float, default=5.0, metavar="S",
                      help="per-request timeout, s")
    push.add_argument("--json", action="store_true")
    push.set_defaults(func=run_push)


def _datasource(parser) -> None:
    parser.add_argument("--datasource", default="Prometheus", metavar="NAME",
                        help="the Prometheus datasource the dashboard selects (default "
                             "Prometheus); a variable lets viewers switch")


def build(args) -> dict:
    from console.observability.grafana_dashboard import build_dashboard

    if not args.datasource.strip():
        raise UsageError("--datasource must not be empty")
    return build_dashboard(args.datasource)


def run_dashboard(args) -> int:
    from broker_core.fsutil import atomic_write

    text = json.dumps(build(args), indent=2) + "\n"
    if str(args.out) == "-":
        print(text, end="")
        return 0
    if not args.out.parent.is_dir():  # it named the temporary file it could not make
        raise UsageError(f"--out {args.out}: no directory {args.out.parent}")
    try:
        atomic_write(args.out, text.encode())
    except OSError as exc:  # it named the temporary file it could not make
        raise CommandFailed(f"--out {args.out}: cannot write it: {exc.strerror or exc}") \
            from None
    print(f"wrote {args.out}: import it in Grafana (Dashboards > New > Import) "
          "or run `floodgate grafana push`")
    return 0


def load_dashboard(path: Path) -> dict:
    try:
        model = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON: {exc}") from None
    model = model.get("dashboard", model) if isinstance(model, dict) else model
    if not isinstance(model, dict) or "panels" not in model:
        raise UsageError(f"{path}: not a Grafana dashboard (no panels)")
    return model


def run_push(args) -> int:
    from console.observability.errors import ObservabilityError
    from console.observability.grafana_push import check_url, connect, push_dashboard

    token = args.token or os.environ.get("GRAFANA_TOKEN")
    password = args.password or os.environ.get("GRAFANA_PASSWORD")
    if token and args.user:
        raise UsageError("give --token or --user/--password, not both")
    if not token and not (args.user and password):
        raise UsageError("give --token T, or --user U --password P")
    try:
        url = check_url(args.url)
    except ObservabilityError as exc:
        raise UsageError(str(exc)) from None
    model = load_dashboard(args.dashboard) if args.dashboard else build(args)
    api = connect(url, token=token, user=args.user, password=password, timeout=args.timeout)
    result = push_dashboard(api, url, model, folder=args.folder, overwrite=args.overwrite)
    if args.json:
        print_json(result.to_dict())
    else:
        print(f"{result.action} dashboard {result.uid} (version {result.version}) in folder "
              f"{result.folder}: {result.url}")
    return 0
