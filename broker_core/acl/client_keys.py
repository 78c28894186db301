"""What a client of a cluster needs to be let in, from the files its cluster file names:
its admin's credentials (brokers taking users only) and its CA (brokers serving TLS)."""

from __future__ import annotations


def client_keys(credentials: str = "", tls_ca: str = "") -> dict:
    """Keywords `credentials` and `tls_context` (None where the cluster needs none)."""
    keys: dict = {"credentials": None, "tls_context": None}
    if credentials:
        from broker_core.acl.credentials import load

        keys["credentials"] = load(credentials)
    if tls_ca:
        from broker_core.acl.tls import context_for

        keys["tls_context"] = context_for(tls_ca)
    return keys
