"""`floodgate certs make`: a local CA, a broker certificate and a client certificate (EC
P-256, a year) for TLS on the brokers' ports in a demo or a test; a production cluster
brings its own PKI."""

from __future__ import annotations

from pathlib import Path

from console.commands.common import add_subparser
from console.errors import CommandFailed, UsageError


def register(sub) -> None:
    parser = add_subparser(sub, "certs", "certificates for TLS on the brokers' ports")
    csub = parser.add_subparsers(metavar="ACTION")
    make = add_subparser(csub, "make", "a local CA with a broker and a client certificate")
    make.add_argument("--out", type=Path, required=True, metavar="DIR",
                      help="where to write ca.pem, broker.pem/.key, client.pem/.key "
                      "(refused when it holds any of them)")
    make.add_argument("--hosts", default="127.0.0.1,localhost", metavar="H,H",
                      help="names and addresses the broker certificate is for "
                      "(127.0.0.1,localhost)")
    make.set_defaults(func=run_make)


def run_make(args) -> int:
    from broker_core.acl.tls import make_certs

    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    if not hosts:
        raise UsageError("--hosts names at least one host or address")
    there = [n for n in ("ca.pem", "ca.key", "broker.pem", "broker.key", "client.pem",
                         "client.key") if (args.out / n).exists()]
    if there:
        raise UsageError(f"--out {args.out} holds {', '.join(there)} already: give a new "
                         f"directory")
    try:
        made = make_certs(args.out, hosts)
    except OSError as exc:  # said the bare path, not what was being done there
        raise CommandFailed(f"--out {args.out}: cannot write the certificates there: "
                            f"{exc.strerror or exc}") from None
    print(f"CA {made['ca']}; broker {made['broker']} (key {made['broker_key']}) for "
          f"{', '.join(hosts)}; client {made['client']} (key {made['client_key']}); keys "
          f"mode 0600")
    print(f"  floodgate broker serve ... --tls-cert {made['broker']} --tls-key "
          f"{made['broker_key']} --tls-ca {made['ca']}")
    print(f"  clients: FLOODGATE_TLS_CA={made['ca']} (mutual TLS: FLOODGATE_TLS_CERT, "
          f"FLOODGATE_TLS_KEY)")
    return 0
