"""A Raft group's members as `broker serve` is told them:

    --consensus raft --raft-port 10913 \\
        --raft-member group-1-a=127.0.0.1:10911:10913 --raft-member group-1-b=... ...

Each member: its name, the host and port clients use, and its Raft port. Every member
is given the same list (its own entry included), so they agree on who votes.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.errors import BrokerError

MIN_MEMBERS = 3  # two cannot lose one and keep a majority


class ConfigError(ValueError):
    """A change of members the group cannot take now (said in words)."""


def member_name(member: str) -> str:
    """A configuration lists members as NAME or NAME=HOST:PORT:RAFT_PORT."""
    return member.partition("=")[0]


@dataclass(frozen=True)
class RaftMember:
    name: str
    host: str
    port: int  # clients'
    raft_port: int

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def flag(self) -> str:
        return f"{self.name}={self.host}:{self.port}:{self.raft_port}"


def parse_member(text: str) -> RaftMember:
    name, eq, rest = text.partition("=")
    host, _, ports = rest.partition(":")
    port, _, raft = ports.partition(":")
    if not (eq and name and host and port.isdigit() and raft.isdigit()
            and 0 < int(port) < 65536 and 0 < int(raft) < 65536):
        raise BrokerError(f"--raft-member takes NAME=HOST:PORT:RAFT_PORT, not {text!r}")
    return RaftMember(name, host, int(port), int(raft))


def check_members(members: list[RaftMember], me: str, port: int, raft_port: int) -> None:
    """One entry per name, this broker among them as it serves, enough to lose one."""
    names = [m.name for m in members]
    if len(set(names)) != len(names):
        raise BrokerError(f"--raft-member names a member twice: {sorted(names)}")
    if len(members) < MIN_MEMBERS:
        raise BrokerError(f"a raft group needs at least {MIN_MEMBERS} members (given "
                          f"{len(members)}): with two, losing one stops it")
    mine = next((m for m in members if m.name == me), None)
    if mine is None:
        raise BrokerError(f"--raft-member does not list this broker ({me})")
    if (mine.port, mine.raft_port) != (port, raft_port):
        raise BrokerError(f"--raft-member {mine.flag()} does not match this broker's "
                          f"--port {port} and --raft-port {raft_port}")
