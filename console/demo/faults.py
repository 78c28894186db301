"""The demo's fault script played against its cluster (console.demo.script): each act
through the brokers' admin endpoints, a kill through the supervisor's processes, a
consumer group's offsets moved back; each recorded as a FaultAction (the headless
summary) and in the cluster's events log (the post-mortem's timeline).
"""

from __future__ import annotations

import logging
import time

from console.demo.script import (
    CYCLE_S,
    DEMO_TOPIC,
    FAULT_SCRIPT,
    HA_FAULT_SCRIPT,
    FaultAction,
    fault_kind,
    script_targets,
)

log = logging.getLogger("floodgate.demo")


class FaultPlayer:
    def __init__(self, demo) -> None:
        """`demo`: the console.demo.runner.Demo whose cluster the script plays on."""
        self.demo = demo

    def target(self, number: int) -> tuple[str, object]:
        """(the name the fuse knows, the broker entry) of a script's target: broker
        number N, or in a replicated demo group-N (its master now)."""
        if not self.demo.opts.groups:
            entry = self.demo.cluster.file.brokers[number - 1]
            return entry.name, entry
        group = f"group-{min(number, self.demo.opts.groups)}"
        record = self.demo.routes.records.get(group)
        return group, self.demo.cluster.file.broker(record.master) if record else \
            self.demo.cluster.file.groups[group][0]

    def fault(self, number: int, body: dict | None) -> None:
        from broker_core.client.admin import fault

        name, entry = self.target(number)
        text = "clear" if body is None else ", ".join(f"{k}={v}" for k, v in body.items())
        asked = time.time()
        try:
            if body is not None and body.get("rewind_group"):
                name = body["rewind_group"]  # a consumer group, not a broker
                text = self.rewind(name, body["back_s"])
            elif body is not None and body.get("kill"):
                text = self.kill(entry)
            else:
                fault(entry.http, "DELETE" if body is None else "POST", body)
                if self.demo.opts.groups:
                    text += f" on master {entry.name}"
        except Exception as exc:  # noqa: BLE001 - a dead broker must not end the demo
            text += f" (failed: {exc})"
        node = "" if fault_kind(body) == "rewind" or entry.name == name else entry.name
        self.demo.actions.append(FaultAction(asked, name, text, fault_kind(body), node))
        log.info("fault broker=%s %s", name, text)
        kind = fault_kind(body)
        self.event("offsets" if kind == "rewind" else "fault", text, at=asked, subject=name,
                    severity="info" if body is None else "warning", action=kind, node=node)

    def event(self, kind: str, text: str, **fields) -> None:
        try:
            self.demo.events.append(kind, text, **fields)
        except OSError as exc:  # a full disk must not end the demo
            log.warning("events log: %s", exc)

    def rewind(self, group: str, back_s: float) -> str:
        """A consumer group's offsets moved back by time on every broker, as `floodgate
        offsets reset --to-time` does, with its consumers online."""
        from broker_core.client.admin import offsets

        now = time.time()
        body = {"group": group, "topic": DEMO_TOPIC, "to": "time",
                "value": int((now - back_s) * 1000), "epoch": int(now * 1000)}
        replayed = 0
        for b in self.demo.cluster.file.brokers:
            doc = offsets(b.http, "POST", body)
            if doc.get("role") != "SLAVE":
                replayed += sum(max(0, q["old"] - q["new"]) for q in doc["queues"]
                                if q["old"] >= 0)
        return (f"offsets of group {group} reset {back_s:g} s back: {replayed:,} messages "
                f"read again (`floodgate offsets reset --to-time`)")

    def kill(self, entry) -> str:
        proc = self.demo.cluster.procs.get(entry.name)
        if proc is None or proc.poll() is not None:
            return f"master {entry.name} already down"
        proc.kill()
        return (f"SIGKILL master {entry.name} (pid {proc.pid}): its slave takes over, "
                "the supervisor brings it back as slave")

    def loop(self) -> None:
        targets = script_targets(self.demo.opts.brokers)
        script = HA_FAULT_SCRIPT if self.demo.opts.groups else FAULT_SCRIPT
        if self.demo.opts.groups:
            targets = {n: n for _at, n, _b in script}
        start = self.demo._script_start
        cycle = 0
        while not self.demo._stop.is_set():
            for at, number, body in script:
                due = start + cycle * CYCLE_S + at
                if self.demo._stop.wait(max(0.0, due - time.monotonic())):
                    return
                self.fault(targets[number], body)
            cycle += 1
