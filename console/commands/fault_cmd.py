"""`floodgate fault inject|clear|show`: drills on a running broker's admin endpoint."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from console.commands.common import add_subparser, print_json
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "fault", "inject drill faults into a running broker")
    fsub = parser.add_subparsers(metavar="ACTION")
    inject = add_subparser(fsub, "inject", "add latency, PageCache-like stalls, errors or a pause")
    _target(inject)
    inject.add_argument("--stall-ms", type=float, default=0.0,
                        help="stall every write for this long, once per period")
    inject.add_argument("--every", type=float, default=0.0, metavar="SECONDS",
                        help="period of the stalls")
    inject.add_argument("--random-stall", action="store_true",
                        help="draw each stall from 200 ms up to --stall-ms (seed 000's pattern)")
    inject.add_argument("--latency-ms", type=float, default=0.0, help="add to every write")
    inject.add_argument("--error-rate", type=float, default=0.0, help="share of sends failed")
    inject.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                        help="hold every request for this long")
    inject.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                        help="clear by itself after this long")
    inject.set_defaults(func=run_inject)
    clear = add_subparser(fsub, "clear", "remove every injected fault")
    _target(clear)
    clear.set_defaults(func=run_clear)
    show = add_subparser(fsub, "show", "print the active fault")
    _target(show)
    show.set_defaults(func=run_show)


def _target(parser) -> None:
    parser.add_argument("--broker", required=True, metavar="HTTP_ADDR",
                        help="the broker's HTTP address, e.g. 127.0.0.1:10912")
    parser.add_argument("--admin-token", help="the broker's --admin-token, if it set one")
    parser.add_argument("--json", action="store_true")


def call(addr: str, method: str, body: dict | None = None, token: str | None = None) -> dict:
    url = f"http://{addr}/admin/fault"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise CommandFailed(f"{addr}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CommandFailed(f"{addr}: cannot reach the broker: {reason}") from None


def _print(args, state: dict) -> int:
    if args.json:
        print_json(state)
    elif not state.get("active"):
        print(f"{args.broker}: no fault active")
    else:
        shown = {k: v for k, v in state.items() if v not in (0, 0.0, False, None) and
                 k not in ("active",)}
        print(f"{args.broker}: fault active: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
    return 0


def run_inject(args) -> int:
    spec = {"stall_ms": args.stall_ms, "stall_every_s": args.every,
            "stall_random": args.random_stall, "latency_ms": args.latency_ms,
            "error_rate": args.error_rate, "pause_s": args.pause, "duration_s": args.duration}
    if not any(v for k, v in spec.items() if k != "duration_s"):
        raise UsageError("nothing to inject: give --stall-ms/--every, --latency-ms, "
                         "--error-rate or --pause")
    if args.stall_ms and not args.every:
        raise UsageError("--stall-ms needs --every SECONDS")
    return _print(args, call(args.broker, "POST", spec, args.admin_token))


def run_clear(args) -> int:
    return _print(args, call(args.broker, "DELETE", None, args.admin_token))


def run_show(args) -> int:
    return _print(args, call(args.broker, "GET", None, args.admin_token))
