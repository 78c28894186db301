"""TLS for the brokers' ports: contexts for the servers and the clients, and a local CA
with broker and client certificates for the demo and tests (`floodgate certs make`).

Clients find their settings in the environment, as they find their credentials:
FLOODGATE_TLS_CA (the CA that signed the brokers: TLS on), and for mutual TLS
FLOODGATE_TLS_CERT and FLOODGATE_TLS_KEY. Certificates are made with `cryptography`
(its X.509 builder), keys are EC P-256, valid for a year.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from pathlib import Path

ENV_CA, ENV_CERT, ENV_KEY = "FLOODGATE_TLS_CA", "FLOODGATE_TLS_CERT", "FLOODGATE_TLS_KEY"


def server_context(cert: str | os.PathLike, key: str | os.PathLike,
                   ca: str | os.PathLike | None = None,
                   verify_clients: bool = False) -> ssl.SSLContext:
    """A server's context; `verify_clients`: mutual TLS (clients show a cert `ca` signed).
    ValueError (one line) when a file is missing or does not match."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
        if ca is not None:
            ctx.load_verify_locations(ca)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"TLS certificate {cert} / key {key}: {exc}") from None
    if verify_clients:
        if ca is None:
            raise ValueError("mutual TLS needs --tls-ca: the CA client certificates come from")
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def context_for(ca: str | os.PathLike, cert=None, key=None) -> ssl.SSLContext:
    """A client's context trusting `ca` (and showing `cert` for mutual TLS)."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


_cached: tuple[tuple, ssl.SSLContext | None] = ((), None)


def client_context() -> ssl.SSLContext | None:
    """The process's client context from the environment (None: plain TCP), made once per
    value of the variables."""
    global _cached
    key = tuple(os.environ.get(v) or "" for v in (ENV_CA, ENV_CERT, ENV_KEY))
    if key != _cached[0]:
        ca, cert, pkey = key
        try:
            ctx = context_for(ca, cert or None, pkey or None) if ca else None
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS settings ({ENV_CA}={ca}): {exc}") from None
        _cached = (key, ctx)
    return _cached[1]


def use(ca: str | os.PathLike | None, cert=None, key=None) -> None:
    """`--tls-ca FILE`: every connection this process opens uses TLS."""
    if ca is None:
        return
    context_for(ca, cert, key)  # checked now: one line at start, not at the first call
    os.environ[ENV_CA] = str(ca)
    if cert:
        os.environ[ENV_CERT], os.environ[ENV_KEY] = str(cert), str(key)


# -- a local CA (demo and tests) ----------------------------------------------------------
def make_certs(out: Path, hosts: list[str], days: int = 365) -> dict[str, Path]:
    """ca.pem / ca.key, broker.pem / broker.key (for `hosts`: names and addresses),
    client.pem / client.key; keys mode 0600. The paths by name."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "floodgate"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def save(stem: str, cert, key) -> None:
        (out / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        path = out / f"{stem}.key"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("floodgate local CA"))
          .issuer_name(name("floodgate local CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    save("ca", ca, ca_key)

    def leaf(stem: str, cn: str, usages: list, sans: list[x509.GeneralName]) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        save(stem, builder.sign(ca_key, hashes.SHA256()), key)

    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    # a broker is also a client of its master's HA port
    leaf("broker", "floodgate broker",
         [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], sans)
    leaf("client", "floodgate client", [ExtendedKeyUsageOID.CLIENT_AUTH], [])
    return {stem: out / f"{stem}.{ext}" for stem in ("ca", "broker", "client")
            for ext in ("pem",)} | {f"{s}_key": out / f"{s}.key" for s in ("broker", "client")}


def broker_http(addr: str, path: str) -> tuple[str, ssl.SSLContext | None]:
    """(URL, context) of a path on a broker's HTTP port: https with the process's TLS
    settings (a broker with TLS serves its HTTP port with it too), else http."""
    if addr.startswith(("http://", "https://")):
        base = addr.rstrip("/")
        return base + path, client_context() if base.startswith("https") else None
    ctx = client_context()
    return f"{'https' if ctx is not None else 'http'}://{addr}{path}", ctx
