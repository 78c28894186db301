"""Is a broker just started up, and if it exited, why (the last line of its log)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

from broker_core.acl import tls
from broker_core.errors import BrokerError


def last_line(log: Path | None) -> str:
    """The last line a process wrote to its log (its one-line error when it exits at once);
    ": " and the line, or "" when there is none."""
    try:
        lines = log.read_bytes()[-4096:].decode(errors="replace").splitlines() if log else []
    except OSError:
        return ""
    lines = [line for line in lines if line.strip()]
    return f": {lines[-1].strip()}" if lines else ""


def wait_healthy(
    http_addr: str, timeout: float = 30.0, proc: subprocess.Popen | None = None,
    tls_ca: str | None = None, log: Path | None = None,
) -> None:
    """`tls_ca`: the broker serves TLS signed by this CA (None: as this process's TLS
    settings say); `log`: the broker's, whose last line says why it exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BrokerError(f"broker at {http_addr} exited with {proc.returncode} while "
                              f"starting{last_line(log)}")
        try:
            url, ctx = tls.broker_http(http_addr, "/healthz")
            if tls_ca:
                url, ctx = f"https://{http_addr}/healthz", tls.context_for(tls_ca)
            with urllib.request.urlopen(url, timeout=1, context=ctx) as r:
                pid = r.headers.get("X-Floodgate-Pid")
                if proc is not None and pid is not None and int(pid) != proc.pid:
                    raise BrokerError(
                        f"{http_addr} is answered by another broker (pid {pid}), not the one "
                        f"just started: is another cluster on these ports? stop it, or give "
                        f"another --base-port")
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise BrokerError(f"broker at {http_addr} not healthy after {timeout:g} s")
