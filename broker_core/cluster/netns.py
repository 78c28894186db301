"""Hosts of a local cluster: a network namespace each, on a bridge of our own.

`cluster up --netns` puts every broker, ZooKeeper and the controller in its own
namespace with its own address, as if each ran on its own machine, so that the
network can fail between them (cluster.netfault): a partition, a lossy or slow
link. The layout, for 2 hosts of cluster tag `3f2a`::

    root namespace:  bridge fg3f2abr  10.213.N.1/24   (producers, consumers, console)
      veth fg3f2av0 ── eth0 in netns fg-3f2a-group-1-a  10.213.N.10
      veth fg3f2av1 ── eth0 in netns fg-3f2a-zookeeper  10.213.N.11

The addresses live only on that bridge: no default route in a namespace, no NAT,
no rule in the host's own tables, so nothing leaves the host. N is the first
10.213.N.0/24 not on any interface. `destroy` removes what `create` made; a
reaper process (cluster.netns_reaper) does it when the launcher dies without
doing it itself.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from broker_core.errors import BrokerError

NET = "10.213"  # 10.213.N.0/24 for a cluster; the bridge is .1, hosts from .10
FIRST_HOST = 10


class NetnsError(BrokerError):
    """Namespaces could not be made, or a target is not one we made."""


@dataclass(frozen=True)
class NetHost:
    name: str  # the node: a broker's name, "zookeeper", "controller-1"
    netns: str
    addr: str
    veth: str  # its root-side end, on the bridge


@dataclass
class NetLayout:
    tag: str
    bridge: str
    gateway: str  # the bridge's address: where the root namespace's clients come from
    hosts: dict[str, NetHost] = field(default_factory=dict)

    def host(self, name: str) -> NetHost:
        """The host of a node; NetnsError for anything this layout did not make."""
        try:
            return self.hosts[name]
        except KeyError:
            raise NetnsError(f"no host {name!r} in this cluster's namespaces (hosts: "
                             f"{', '.join(sorted(self.hosts))})") from None

    def exec_prefix(self, name: str) -> list[str]:
        """The argv prefix that runs a command on the node's host."""
        return ["ip", "netns", "exec", self.host(name).netns]

    def by_addr(self, addr: str) -> str | None:
        """The node with this address (the gateway is "clients"), or None."""
        if addr == self.gateway:
            return CLIENTS
        return next((h.name for h in self.hosts.values() if h.addr == addr), None)

    def to_dict(self) -> dict:
        return {"tag": self.tag, "bridge": self.bridge, "gateway": self.gateway,
                "hosts": [asdict(h) for h in self.hosts.values()]}

    @classmethod
    def from_dict(cls, raw: dict) -> NetLayout:
        try:
            hosts = {str(h["name"]): NetHost(str(h["name"]), str(h["netns"]), str(h["addr"]),
                                             str(h["veth"])) for h in raw.get("hosts", [])}
            return cls(str(raw["tag"]), str(raw["bridge"]), str(raw["gateway"]), hosts)
        except (KeyError, TypeError) as exc:
            raise NetnsError(f"a namespace layout lacks {exc}") from None


CLIENTS = "clients"  # the root namespace, behind the bridge's address


def unavailable() -> str | None:
    """Why this host cannot make namespaces, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns, veth, a bridge): run as root"
    if shutil.which("ip") is None:
        return "no `ip` command: apt-get install iproute2"
    if not Path("/proc/self/ns/net").exists():
        return "this kernel has no network namespaces"
    return None


def _ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(("-n", netns) if netns else ()), *args]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def _free_subnet() -> str:
    used = _ip("-o", "-4", "addr", "show")
    for n in range(1, 255):
        prefix = f"{NET}.{n}."
        if f" {prefix}" not in used:
            return prefix
    raise NetnsError(f"every {NET}.N.0/24 is in use on this host")


def new_tag() -> str:
    return f"{os.getpid() & 0xffff:04x}"


def create(nodes: list[str], tag: str | None = None) -> NetLayout:
    """A namespace, a veth pair and an address for each node, on a new bridge."""
    why = unavailable()
    if why:
        raise NetnsError(why)
    if len(nodes) > 254 - FIRST_HOST:
        raise NetnsError(f"{len(nodes)} hosts do not fit one /24")
    tag = tag or new_tag()
    layout = None
    try:
        # one cluster at a time picks its subnet: two made at once took the same one
        with open(Path(tempfile.gettempdir()) / "floodgate-netns.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            prefix = _free_subnet()
            layout = NetLayout(tag, f"fg{tag}br", f"{prefix}1")
            _ip("link", "add", layout.bridge, "type", "bridge")
            _ip("addr", "add", f"{layout.gateway}/24", "dev", layout.bridge)
        _ip("link", "set", layout.bridge, "up")
        for i, node in enumerate(nodes):
            host = NetHost(node, f"fg-{tag}-{node}", f"{prefix}{FIRST_HOST + i}",
                           f"fg{tag}v{i}")
            _ip("netns", "add", host.netns)
            layout.hosts[node] = host
            _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0",
                "netns", host.netns)
            _ip("link", "set", host.veth, "master", layout.bridge, "up")
            _ip("addr", "add", f"{host.addr}/24", "dev", "eth0", netns=host.netns)
            _ip("link", "set", "eth0", "up", netns=host.netns)
            _ip("link", "set", "lo", "up", netns=host.netns)
    except BaseException:
        if layout is not None:
            destroy(layout)
        raise
    return layout


def pids_in(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split() if p.isdigit()]


def destroy(layout: NetLayout, *, kill: bool = True) -> list[str]:
    """Remove every namespace, link and the bridge of `layout` (their rules and queues
    go with them); with `kill`, SIGKILL what still runs in them first. Returns what
    could not be removed (nothing, normally)."""
    left = []
    for host in layout.hosts.values():
        if kill:
            for pid in pids_in(host.netns):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _ip("link", "del", host.veth, check=False)  # its peer goes with it
        if Path(f"/run/netns/{host.netns}").exists():
            try:
                _ip("netns", "del", host.netns)
            except NetnsError as exc:
                left.append(str(exc))
    _ip("link", "del", layout.bridge, check=False)
    if _ip("link", "show", layout.bridge, check=False).strip():
        left.append(f"bridge {layout.bridge} still there")
    return left


def leftovers(tag: str) -> list[str]:
    """Namespaces and links of cluster `tag` still on the host (tests check for none)."""
    found = [n for n in os.listdir("/run/netns")] if Path("/run/netns").is_dir() else []
    out = [n for n in found if n.startswith(f"fg-{tag}-")]
    links = _ip("-o", "link", "show", check=False)
    out += [ln.split(":")[1].strip().split("@")[0] for ln in links.splitlines()
            if f"fg{tag}" in ln]
    return out
