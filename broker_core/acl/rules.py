"""ACL rules: who may do what to which topic or group, from where.

A rule is user x resource x actions x allow|deny x optional source network, as
RocketMQ 5.3's ACL 2.0 has them. Resources: `topic:NAME`, `topic:PREFIX*`,
`group:NAME`, `group:PREFIX*`, `cluster` (the broker itself: stats, lookups by key
or id); `*` as a name is every topic or group. Actions: pub (send), sub (pull,
offsets, heartbeats, queue locks), create, update, delete, get (lookups, stats), list.
Deny wins over allow; what no rule allows is denied; a super user is allowed all.
System topics (`%TRACE%`, `%RETRY%G`, `%DLQ%G`, ...) take sends only from a rule that
names them (`topic:%RETRY%billing`, `topic:%RETRY%*`), never from `topic:*`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import NamedTuple

from broker_core.names import NAME_CHARS

ACTIONS = ("pub", "sub", "create", "update", "delete", "get", "list")
KINDS = ("topic", "group", "cluster")
# every topic and group name (broker_core.names: "|" was missing, so `topic:a|b` could not
# be written); "." and "@" stay, for rules already saved with them
NAME = re.compile(rf"[.@{NAME_CHARS}]{{1,128}}")
USER = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class Decision(NamedTuple):
    allowed: bool
    why: str


@dataclass(frozen=True)
class Resource:
    kind: str
    name: str = ""  # "" for cluster; "*" every one
    prefix: bool = False

    @classmethod
    def parse(cls, text: str) -> Resource:
        kind, _sep, name = text.partition(":")
        if kind == "cluster" and not name:
            return cls("cluster")
        if kind not in ("topic", "group") or not name:
            raise ValueError(f"a resource is topic:NAME, topic:PREFIX*, group:NAME, "
                             f"group:PREFIX* or cluster, not {text!r}")
        prefix = name.endswith("*") and name != "*"
        bare = name[:-1] if prefix else name
        if name != "*" and not NAME.fullmatch(bare):
            raise ValueError(f"{text!r}: a name is 1-128 of letters, digits and _%|-.@ "
                             f"(a trailing * for a prefix)")
        return cls(kind, bare, prefix)

    def matches(self, kind: str, name: str) -> bool:
        if kind != self.kind:
            return False
        if self.kind == "cluster" or self.name == "*":
            return True
        return name.startswith(self.name) if self.prefix else name == self.name

    def __str__(self) -> str:
        if self.kind == "cluster":
            return "cluster"
        return f"{self.kind}:{self.name}{'*' if self.prefix else ''}"


@dataclass(frozen=True)
class Rule:
    user: str
    resource: Resource
    actions: frozenset[str]
    allow: bool = True
    source: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    @classmethod
    def make(cls, user: str, resource: str, actions, allow: bool = True,
             source: str | None = None) -> Rule:
        """A checked rule; ValueError (one line) when any part is wrong."""
        if not USER.fullmatch(user or ""):
            raise ValueError(f"a user name is 1-64 of letters, digits and _.-, not {user!r}")
        if isinstance(actions, str):
            actions = [a for a in actions.split(",") if a]
        bad = [a for a in actions if a not in ACTIONS]
        if bad or not actions:
            raise ValueError(f"actions are some of {', '.join(ACTIONS)}, not "
                             f"{','.join(bad) or 'none'}")
        net = None
        if source:
            try:
                net = ipaddress.ip_network(source, strict=False)
            except ValueError:
                raise ValueError(f"a source is a network such as 10.0.0.0/8 or an address, "
                                 f"not {source!r}") from None
        return cls(user, Resource.parse(resource), frozenset(actions), allow, net)

    def applies(self, user: str, kind: str, name: str, action: str, ip) -> bool:
        return (self.user == user and action in self.actions
                and self.resource.matches(kind, name)
                and (self.source is None or (ip is not None and ip in self.source)))

    def to_dict(self) -> dict:
        return {"user": self.user, "resource": str(self.resource),
                "actions": sorted(self.actions), "effect": "allow" if self.allow else "deny",
                "source": str(self.source) if self.source is not None else None}

    @classmethod
    def from_dict(cls, doc: dict) -> Rule:
        effect = doc.get("effect", "allow")
        if effect not in ("allow", "deny"):
            raise ValueError(f"effect is allow or deny, not {effect!r}")
        return cls.make(str(doc.get("user", "")), str(doc.get("resource", "")),
                        list(doc.get("actions") or []), effect == "allow", doc.get("source"))

    def __str__(self) -> str:
        src = f" from {self.source}" if self.source is not None else ""
        return (f"{'allow' if self.allow else 'deny'} {self.user} "
                f"{','.join(sorted(self.actions))} on {self.resource}{src}")


class RuleSet:
    """Rules indexed by user, with decisions cached (a connection asks the same few
    questions over and over: the cache keeps a check under a microsecond)."""

    MAX_CACHED = 65536

    def __init__(self, rules: list[Rule], supers: frozenset[str] = frozenset()) -> None:
        self.rules = list(rules)
        self.supers = supers
        self._by_user: dict[str, list[Rule]] = {}
        for r in self.rules:
            self._by_user.setdefault(r.user, []).append(r)
        self._cache: dict[tuple, Decision] = {}

    def decide(self, user: str, kind: str, name: str, action: str, ip=None) -> Decision:
        key = (user, kind, name, action, ip)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        decision = self._decide(user, kind, name, action, ip)
        if len(self._cache) >= self.MAX_CACHED:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _decide(self, user: str, kind: str, name: str, action: str, ip) -> Decision:
        if user in self.supers:
            return Decision(True, "super user")
        what = f"{action} on {kind}{':' + name if name else ''}"
        system = kind == "topic" and action == "pub" and name.startswith("%")
        allowed = None
        for r in self._by_user.get(user, ()):
            if r.applies(user, kind, name, action, ip):
                if system and r.allow and r.resource.name == "*":
                    continue  # a system topic is named, not caught by *
                if not r.allow:
                    return Decision(False, f"user {user} may not {what}: denied by rule "
                                           f"`{r}`")
                allowed = allowed or r
        if allowed is not None:
            return Decision(True, f"allowed by rule `{allowed}`")
        return Decision(False, f"user {user} may not {what}: no rule allows it")
