"""Admin calls a console or a drill makes to brokers: create a topic ahead of
the load (ROUTE with create), inject, show and clear drill faults
(`/admin/fault`), set, show and clear flow-control quotas (`/admin/quota`), list,
create, change and delete topics (`/admin/topic`), wipe and restore a broker's
writes (`/admin/write`), move a raft group's leader or change its members
(`/admin/leader`, `/admin/members`). Failures raise `AdminError` with one line naming the broker.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from broker_core.client.connection import TLS_HINT, Connection
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
    return admin_call(http_addr, "/admin/fault", method, body, token, timeout)


def topic(http_addr: str, method: str = "GET", body: dict | None = None,
          token: str | None = None, query: Mapping[str, str] | None = None,
          timeout: float = 10.0) -> dict[str, Any]:
    """GET (list; `query` topic and hottest narrow it), POST (create or change `body`:
    topic, queues, perm) or DELETE (`query` topic) a broker's topics."""
    path = "/admin/topic" + (f"?{urllib.parse.urlencode(dict(query))}" if query else "")
    return admin_call(http_addr, path, method, body, token, timeout)


def write_permission(http_addr: str, writable: bool, token: str | None = None,
                     timeout: float = 5.0) -> dict[str, Any]:
    """Wipe a broker's writes (False: every send refused NO_PERMISSION, producers go
    elsewhere, consumers still read) or restore them."""
    return admin_call(http_addr, "/admin/write", "POST", {"writable": writable}, token, timeout)


def transfer_leader(http_addr: str, to: str, token: str | None = None,
                    timeout: float = 5.0) -> dict[str, Any]:
    """Ask a raft group's leader (at `http_addr`) to hand the group to member `to`."""
    return admin_call(http_addr, "/admin/leader", "POST", {"to": to}, token, timeout)


def members(http_addr: str, body: dict, token: str | None = None,
            timeout: float = 90.0) -> dict[str, Any]:
    """Change a raft group's membership at its leader (`http_addr`), one member at a time:
    `body` {"add": "NAME=HOST:PORT:RAFT_PORT"} or {"remove": NAME}. Answered once the
    change is committed (an added member is first caught up from a snapshot of the store:
    up to a minute), hence the long timeout."""
    return admin_call(http_addr, "/admin/members", "POST", body, token, timeout)


def offsets(http_addr: str, method: str = "GET", body: dict | None = None,
            token: str | None = None, query: Mapping[str, str] | None = None,
            timeout: float = 10.0) -> dict[str, Any]:
    """GET (a group's offsets per queue; `query` group, topic) or POST (reset: `body`
    group, topic, to, value, epoch, dry_run) on a broker."""
    path = "/admin/offsets" + (f"?{urllib.parse.urlencode(dict(query))}" if query else "")
    return admin_call(http_addr, path, method, body, token, timeout)


def quota(http_addr: str, method: str = "GET", body: dict | None = None,
          token: str | None = None, query: Mapping[str, str] | None = None,
          timeout: float = 5.0) -> dict[str, Any]:
    """GET (show), POST (set `body`: kind, target, rate, burst, warmup_s) or DELETE
    (clear; `query` kind and target narrow it) a broker's flow-control quotas; the
    broker's quotas and throttled counts now."""
    path = "/admin/quota" + (f"?{urllib.parse.urlencode(dict(query))}" if query else "")
    return admin_call(http_addr, path, method, body, token, timeout)


# What answered did not speak HTTP (a broker's data port does not): said in words, not
# with the raw bytes http.client puts in its BadStatusLine
NOT_HTTP = ("not an HTTP port (a broker's data port?): give the broker's HTTP port (the data "
            "port + 1 in a local cluster)")
# A plain request closed without a byte: a broker's TLS port does that (a data port answers
# with a frame: NOT_HTTP)
CLOSED_PLAIN = f"connection closed{TLS_HINT}"


def http_failure(exc: http.client.HTTPException, tls: bool) -> str:
    """Why an HTTP request (over TLS or not) got no answer it could read, in words."""
    if isinstance(exc, http.client.RemoteDisconnected) and not tls:
        return CLOSED_PLAIN
    return NOT_HTTP


def admin_call(http_addr: str, path: str, method: str, body: dict | None,
               token: str | None, timeout: float) -> dict[str, Any]:
    from broker_core.acl import admin_token, tls

    url, ctx = tls.broker_http(http_addr, path)
    token = token or admin_token.default()
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise AdminError(f"{http_addr}: {message}") from None
    except http.client.HTTPException as exc:
        raise AdminError(f"{http_addr}: {http_failure(exc, ctx is not None)}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AdminError(f"{http_addr}: cannot reach the broker: {reason}") from None


def fault_all(http_addrs: Sequence[str], method: str, body: dict | None = None,
              token: str | None = None) -> list[dict[str, Any]]:
    return [fault(addr, method, body, token) for addr in http_addrs]


# -- finding messages (QUERY_BY_KEY, VIEW_BY_ID, QUERY_BY_TIME) -----------------------

def _lookup(addr: str, op: Op, req: dict, timeout: float) -> tuple[int, bytes]:
    conn = Connection(addr)
    try:
        return conn.call(op, encode_json(req), timeout)
    finally:
        conn.close()


def query_by_key(addr: str, key: str, topic: str | None = None, begin_ms: int = 0,
                 end_ms: int | None = None, limit: int = 64, timeout: float = 5.0) -> dict:
    """The broker's answer: {messages: [...], more, candidates, broker}."""
    req = {"key": key, "topic": topic, "begin_ms": begin_ms, "end_ms": end_ms, "limit": limit}
    code, body = _lookup(addr, Op.QUERY_BY_KEY, req, timeout)
    if code != Code.OK:
        raise AdminError(f"{addr}: {Code(code).name}: {body.decode('utf-8', 'replace')}")
    return decode_json(body)


def view_by_id(addr: str, msg_id: str, timeout: float = 5.0) -> tuple[dict | None, str]:
    """(the message document, "") or (None, why the broker has none)."""
    code, body = _lookup(addr, Op.VIEW_BY_ID, {"id": msg_id}, timeout)
    if code == Code.MESSAGE_NOT_FOUND:
        return None, body.decode("utf-8", "replace")
    if code != Code.OK:
        raise AdminError(f"{addr}: {Code(code).name}: {body.decode('utf-8', 'replace')}")
    return decode_json(body)["message"], ""


def query_by_time(addr: str, topic: str, begin_ms: int, end_ms: int, limit: int = 64,
                  timeout: float = 5.0) -> dict:
    req = {"topic": topic, "begin_ms": begin_ms, "end_ms": end_ms, "limit": limit}
    code, body = _lookup(addr, Op.QUERY_BY_TIME, req, timeout)
    if code != Code.OK:
        raise AdminError(f"{addr}: {Code(code).name}: {body.decode('utf-8', 'replace')}")
    return decode_json(body)
