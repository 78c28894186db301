"""A producer whose fuse isolates a raft group tells the group's leader (STEP_ASIDE): if
the operator allowed it (`cluster up ... --fuse-moves-leaders`), the
leader hands the group to a follower (raft.step_aside), the routes follow the new leader,
and the producer forgets what it judged of the old one. Without the operator's word the
leader answers why not, and the fuse's minute of isolation is all that happens.

Only raft groups: a controller's master is moved only when it fails.
"""

from __future__ import annotations

import logging
import threading

from broker_core.errors import BrokerError
from broker_core.protocol import Code, Op, decode_json, encode_json

log = logging.getLogger("floodgate.producer")


class SlowLeaders:
    """The fuse's `on_isolate` hook of a producer on raft groups."""

    def __init__(self, routes, credentials=None, timeout: float = 1.0) -> None:
        self.routes, self.credentials, self.timeout = routes, credentials, timeout
        self.told: dict[str, dict] = {}  # group -> the leader's last answer

    def __call__(self, group: str, reason: str, detail: str) -> None:
        """Called under the fuse's lock: only hands the news to a thread."""
        addr = self.routes.master(group)
        if addr:
            threading.Thread(target=self.tell, args=(group, addr, f"{reason}: {detail}"),
                             daemon=True, name=f"step-aside-{group}").start()

    def tell(self, group: str, addr: str, why: str = "slow") -> dict:
        """Ask the leader at `addr` to step aside; its answer (or why it gave none)."""
        from broker_core.client.connection import Connection

        conn = Connection(addr, connect_timeout=self.timeout, credentials=self.credentials)
        try:
            code, body = conn.call(Op.STEP_ASIDE, encode_json(
                {"reason": f"a producer's fuse isolated it ({why})"}), self.timeout)
            answer = decode_json(body) if code == Code.OK else {
                "moved": False, "why": body.decode("utf-8", "replace")}
        except (BrokerError, OSError, TimeoutError) as exc:
            answer = {"moved": False, "why": f"no answer: {exc}"}
        finally:
            conn.close()
        self.told[group] = answer
        if answer.get("moved"):
            log.warning("group %s: leader %s isolated (%s), handed the group to %s", group,
                        answer.get("from"), why, answer.get("to"))
        else:
            log.info("group %s: its leader stays (%s)", group, answer.get("why"))
        return answer
