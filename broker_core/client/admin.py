"""Admin calls a console or a drill makes to brokers: create a topic ahead of
the load (ROUTE with create), inject, show and clear drill faults
(`/admin/fault`). Failures raise `AdminError` with one line naming the broker.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from broker_core.client.connection import Connection
from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_json, encode_json


class AdminError(BrokerError):
    """An admin call failed; the message names the broker and why."""


def ensure_topic(brokers: Mapping[str, str], topic: str, timeout: float = 5.0
                 ) -> dict[str, int]:
    """Create `topic` on every broker now (ROUTE with create), so the first sends
    do not pay for its files; broker name -> its queues."""
    out = {}
    for name, addr in brokers.items():
        conn = Connection(addr)
        try:
            code, body = conn.call(Op.ROUTE, encode_json({"topic": topic, "create": True}),
                                   timeout)
        finally:
            conn.close()
        if code != Code.OK:
            raise AdminError(f"{name}: cannot create topic {topic!r}: "
                             f"{body.decode('utf-8', 'replace')}")
        out[name] = int(decode_json(body)["queues"])
    return out


def fault(http_addr: str, method: str = "GET", body: dict | None = None,
          token: str | None = None, timeout: float = 5.0) -> dict[str, Any]:
    """GET (show), POST (inject `body`) or DELETE (clear) a broker's drill fault;
    the broker's description of the fault now."""
    url = f"http://{http_addr}/admin/fault"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise AdminError(f"{http_addr}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AdminError(f"{http_addr}: cannot reach the broker: {reason}") from None


def fault_all(http_addrs: Sequence[str], method: str, body: dict | None = None,
              token: str | None = None) -> list[dict[str, Any]]:
    return [fault(addr, method, body, token) for addr in http_addrs]
