"""HTTP side of the broker (aiohttp, on the broker's own event loop, so it reads
the broker's state without locks): /healthz, /metrics, /stats, the drill
endpoints under /admin/fault, the flow-control quotas under /admin/quota, topics
under /admin/topic, the broker's write permission at /admin/write and consumer
groups' offsets at /admin/offsets.

The admin endpoints change behaviour, so they answer only loopback peers (and the
addresses named by --admin-from: the host's side of a namespaced cluster), or
anyone presenting `Authorization: Bearer <admin token>` when a token is set.
"""

from __future__ import annotations

import ipaddress
import json
import os

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from broker_core.errors import BrokerError
from broker_core.observe.prometheus import broker_registry
from broker_core.raft.members import ConfigError
from broker_core.raft.stream_election import NotLeader
from broker_core.server import offset_admin, topic_admin
from broker_core.server.faults import FaultSpec
from broker_core.server.flow_control import KINDS, Quota, QuotaError
from broker_core.server.topic_table import TopicError

FAULT_FIELDS = set(FaultSpec.__dataclass_fields__)
QUOTA_FIELDS = {"kind", "target", "rate", "burst", "warmup_s"}
# who answers /healthz: a launcher waiting for the broker it started must not take another
# cluster's broker on the same port for it (`cluster up` said "up" and its broker had died)
PID_HEADER = {"X-Floodgate-Pid": str(os.getpid())}


def _is_loopback(remote: str | None) -> bool:
    try:
        return remote is not None and ipaddress.ip_address(remote).is_loopback
    except ValueError:
        return False


def build_app(broker) -> web.Application:
    registry = broker_registry(broker.snapshot)
    app = web.Application(client_max_size=64 * 1024)

    async def healthz(_request: web.Request) -> web.Response:
        if not broker.serving:
            return web.Response(status=503, text="starting\n", headers=PID_HEADER)
        return web.Response(text="ok\n", headers=PID_HEADER)

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def stats(request: web.Request) -> web.Response:
        try:
            history = int(request.query.get("history", "300"))
        except ValueError:
            return _error(400, "history must be a number of seconds")
        return web.Response(body=broker.stats_json(max(0, min(history, 300))),
                            content_type="application/json")

    def _forbidden() -> web.Response:
        if broker.config.admin_token:
            return _error(403, "admin endpoints take this broker's admin token only: "
                               "--admin-token, FLOODGATE_ADMIN_TOKEN_FILE, or --cluster with "
                               "the cluster file naming it")
        return _error(403, "admin endpoints answer loopback or a valid admin token only")

    def _authorized(request: web.Request) -> bool:
        token = broker.config.admin_token
        if token:
            return request.headers.get("Authorization") == f"Bearer {token}"
        return _is_loopback(request.remote) or request.remote in broker.config.admin_from

    async def fault_get(request: web.Request) -> web.Response:
        return web.json_response(broker.faults.describe())

    async def admin_body(request: web.Request, what: str, valid: set[str]
                         ) -> tuple[dict | None, web.Response | None]:
        """An admin POST's JSON object of `valid` fields: (body, None) or (None, the
        answer refusing it: 403 for a caller not allowed, 400 for a bad body)."""
        if not _authorized(request):
            return None, _forbidden()
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if not isinstance(body, dict):
            return None, _error(400, f"body must be a JSON object of {what} fields")
        unknown = set(body) - valid
        if unknown:
            return None, _error(400, f"unknown {what} fields: {', '.join(sorted(unknown))}; "
                                     f"valid: {', '.join(sorted(valid))}")
        return body, None

    async def fault_set(request: web.Request) -> web.Response:
        body, refused = await admin_body(request, "fault", FAULT_FIELDS)
        if refused is not None:
            return refused
        try:
            spec = FaultSpec(**body)
            broker.faults.inject(spec)
        except (TypeError, ValueError) as exc:
            return _error(400, str(exc))
        return web.json_response(broker.faults.describe())

    async def fault_clear(request: web.Request) -> web.Response:
        if not _authorized(request):
            return _forbidden()
        broker.faults.clear()
        return web.json_response(broker.faults.describe())

    async def topic_get(request: web.Request) -> web.Response:
        try:
            hottest = int(request.query.get("hottest", str(topic_admin.HOTTEST)))
        except ValueError:
            return _error(400, "hottest must be a number of queues")
        return web.json_response(topic_admin.describe(broker, request.query.get("topic"),
                                                      max(0, min(hottest, 1000))))

    async def topic_set(request: web.Request) -> web.Response:
        """Body: {topic, queues?, perm?}: create the topic or change it; kept at once."""
        body, refused = await admin_body(request, "topic", topic_admin.TOPIC_FIELDS)
        if refused is not None:
            return refused
        try:
            out = topic_admin.put(broker, body)
        except TopicError as exc:
            return _error(400, str(exc))
        await topic_admin.save_tables(broker)
        return web.json_response(out)

    async def topic_delete(request: web.Request) -> web.Response:
        if not _authorized(request):
            return _forbidden()
        topic = request.query.get("topic")
        if not topic:
            return _error(400, "say which topic: ?topic=NAME")
        return web.json_response(await topic_admin.delete(broker, topic))

    async def write_set(request: web.Request) -> web.Response:
        """Body: {writable: bool}: wipe the broker's writes (false) or restore them."""
        body, refused = await admin_body(request, "write", {"writable"})
        if refused is not None:
            return refused
        if not isinstance(body.get("writable"), bool):
            return _error(400, "writable must be true or false")
        out = topic_admin.set_writable(broker, body["writable"])
        await topic_admin.save_tables(broker)
        return web.json_response(out)

    async def leader_move(request: web.Request) -> web.Response:
        """Body: {to: NAME}: a raft leader hands its group to NAME (TimeoutNow)."""
        body, refused = await admin_body(request, "leader transfer", {"to"})
        if refused is not None:
            return refused
        ha, to = broker.ha, str(body.get("to"))
        if ha is None or not hasattr(ha, "transfer"):
            return _error(409, f"{broker.config.name} is not in a raft group")
        if to not in ha.node.voters or to == ha.name:
            return _error(400, f"{to} is not another member of raft group {ha.group} "
                          f"(its voters: {', '.join(sorted(ha.node.voters))})")
        try:
            ha.transfer(to)
        except NotLeader as exc:
            return _error(409, f"{broker.config.name}: {exc}")
        return web.json_response({"from": broker.config.name, "to": body["to"],
                                  "term": ha.node.term})

    async def members_change(request: web.Request) -> web.Response:
        """Body: {add: NAME=HOST:PORT:RAFT_PORT} or {remove: NAME}: a raft group's
        leader changes its members one at a time; answered once the change commits."""
        body, refused = await admin_body(request, "membership change", {"add", "remove"})
        if refused is not None:
            return refused
        ha = broker.ha
        if ha is None or not hasattr(ha, "change_members"):
            return _error(409, f"{broker.config.name} is not in a raft group")
        add, remove = body.get("add"), body.get("remove")
        if (add is None) == (remove is None) or not isinstance(add or remove, str):
            return _error(400, 'say one change: {"add": "NAME=HOST:PORT:RAFT_PORT"} or '
                          '{"remove": "NAME"}')
        try:
            return web.json_response(await ha.change_members(add=add, remove=remove))
        except NotLeader as exc:
            return _error(409, f"{broker.config.name}: {exc}")
        except (ConfigError, BrokerError) as exc:
            return _error(409 if isinstance(exc, ConfigError) else 400, str(exc))
        except TimeoutError as exc:
            return _error(504, str(exc))

    async def offsets_get(request: web.Request) -> web.Response:
        group = request.query.get("group")
        if not group:
            return _error(400, "say which group: ?group=NAME[&topic=T]")
        return web.json_response(offset_admin.describe(broker, group,
                                                       request.query.get("topic")))

    async def offsets_reset(request: web.Request) -> web.Response:
        """Body: {group, topic, to: earliest|latest|time|by, value?, epoch, dry_run?}."""
        body, refused = await admin_body(request, "offset reset", offset_admin.RESET_FIELDS)
        if refused is not None:
            return refused
        try:
            out = offset_admin.reset(broker, body)
        except offset_admin.OffsetResetError as exc:
            return _error(400, str(exc))
        if out["applied"]:
            await topic_admin.save_tables(broker)
        return web.json_response(out)

    async def quota_get(_request: web.Request) -> web.Response:
        return web.json_response(broker.flow.describe())

    async def quota_set(request: web.Request) -> web.Response:
        """Body: {kind: topic|group, target, rate, burst?, warmup_s?}; kept in the data dir."""
        body, refused = await admin_body(request, "quota", QUOTA_FIELDS)
        if refused is not None:
            return refused
        try:
            quota = Quota.make(body.get("kind", "topic"), body.get("target"), body.get("rate"),
                               body.get("burst"), body.get("warmup_s", 0.0))
        except QuotaError as exc:
            return _error(400, str(exc))
        broker.flow.set(quota)
        return web.json_response(broker.flow.describe())

    async def quota_clear(request: web.Request) -> web.Response:
        """Query: kind and target narrow what is cleared (none: every quota)."""
        if not _authorized(request):
            return _forbidden()
        kind = request.query.get("kind")
        if kind is not None and kind not in KINDS:
            return _error(400, f"kind must be topic or group, not {kind!r}")
        removed = broker.flow.clear(kind, request.query.get("target"))
        return web.json_response({**broker.flow.describe(), "removed": removed})

    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/metrics", metrics),
            web.get("/stats", stats),
            web.get("/admin/fault", fault_get),
            web.post("/admin/fault", fault_set),
            web.delete("/admin/fault", fault_clear),
            web.get("/admin/quota", quota_get),
            web.post("/admin/quota", quota_set),
            web.delete("/admin/quota", quota_clear),
            web.get("/admin/topic", topic_get),
            web.post("/admin/topic", topic_set),
            web.delete("/admin/topic", topic_delete),
            web.post("/admin/write", write_set),
            web.get("/admin/offsets", offsets_get),
            web.post("/admin/leader", leader_move),
            web.post("/admin/members", members_change),
            web.post("/admin/offsets", offsets_reset),
        ]
    )
    return app


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def start_http(broker) -> web.AppRunner:
    runner = web.AppRunner(build_app(broker), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, broker.config.bind, broker.config.http_port, reuse_address=True,
                       ssl_context=broker.tls_http)
    await site.start()
    return runner
