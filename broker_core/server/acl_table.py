"""The broker's ACL: users and rules in `acl.json` in its data dir (written as the other
tables: temporary file, fsync, rename), versioned so a change reaches every
connection's cached decisions at once, and handed to slaves with the other tables
(a promoted slave enforces what its master did)."""

from __future__ import annotations

import time
from pathlib import Path

from broker_core.acl.rules import Rule, RuleSet
from broker_core.acl.users import User
from broker_core.server.group_state import JsonTable, read_json


class AclTable(JsonTable):
    def __init__(self, path: Path) -> None:
        self.path = path
        doc = read_json(path)
        self.version = int(doc.get("version", 0))
        self.users = {n: User.from_dict(n, u) for n, u in (doc.get("users") or {}).items()}
        self.rules = [Rule.from_dict(r) for r in doc.get("rules") or []]
        self.dirty = False
        self._index()

    def _index(self) -> None:
        self.ruleset = RuleSet(self.rules, frozenset(n for n, u in self.users.items() if u.super))

    def _changed(self) -> None:
        self.version = max(self.version + 1, int(time.time() * 1000))
        self._index()
        self.dirty = True

    def bootstrap(self, credentials_file: Path) -> None:
        """The first super user, from a credentials file (`cluster up --acl` writes one),
        saved at once: a broker with an ACL and no user would take no one."""
        from broker_core.acl.credentials import load

        creds = load(credentials_file)
        self.add_user(User.make(creds.user, creds.secret, super_user=True))
        self.save()

    # -- changes (an operator's, through the ACL op) ---------------------------------------
    def add_user(self, user: User) -> None:
        self.users[user.name] = user
        self._changed()

    def remove_user(self, name: str) -> bool:
        if self.users.pop(name, None) is None:
            return False
        self.rules = [r for r in self.rules if r.user != name]
        self._changed()
        return True

    def add_rule(self, rule: Rule) -> bool:
        if rule in self.rules:
            return False
        self.rules.append(rule)
        self._changed()
        return True

    def remove_rule(self, rule: Rule) -> bool:
        if rule not in self.rules:
            return False
        self.rules.remove(rule)
        self._changed()
        return True

    # -- saved, and sent to slaves ------------------------------------------------------------
    def document(self) -> dict:
        return {"version": self.version,
                "users": {n: u.to_dict() for n, u in sorted(self.users.items())},
                "rules": [r.to_dict() for r in self.rules]}

    def adopt(self, doc: dict) -> None:
        """A master's ACL, when newer than this one."""
        try:
            version = int(doc.get("version", 0))
            if version <= self.version:
                return
            users = {n: User.from_dict(n, u) for n, u in (doc.get("users") or {}).items()}
            rules = [Rule.from_dict(r) for r in doc.get("rules") or []]
        except (KeyError, TypeError, ValueError):
            return
        self.version, self.users, self.rules = version, users, rules
        self._index()
        self.dirty = True

    def listing(self) -> dict:
        """What an operator may see: names and rules, never a key."""
        return {"version": self.version,
                "users": [{"name": n, "super": u.super} for n, u in sorted(self.users.items())],
                "rules": [r.to_dict() for r in self.rules]}
