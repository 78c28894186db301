"""Network faults between the hosts of a namespaced cluster (cluster.netns).

Every rule lives inside the namespaces the cluster made, never in the host's own
tables: a table `inet floodgate` per namespace for drops (nftables), a root
`tbf` qdisc on a link for a rate, and for a delay a relay (cluster.delay_relay)
behind a `redirect` in a table `ip floodgate_nat`. What is in force is kept in
`netfaults.json` beside the cluster file, so `fault net --show` can say it and
`--heal` (and `cluster down`, and the reaper) can remove it all.

- partition A,B/C,D: packets between the two sides dropped, both ways (or from
  the first side to the second only, `one_way`); `clients` names the root
  namespace (producers, consumers, the console);
- isolate N: N / everything else, clients included;
- loss N PCT: each packet over N's link dropped with probability PCT %, both ways;
- rate N KBIT: N's link shaped to KBIT each way (TBF);
- delay N MS: connections to N's ports delayed MS each way (the relay).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker_core.cluster.netns import CLIENTS, NetLayout, NetnsError
from broker_core.fsutil import atomic_write

STATE = "netfaults.json"
RELAY_PORT = 39999  # in the slow node's namespace: its own port space
KINDS = ("partition", "isolate", "loss", "rate", "delay")


class NetFaultError(NetnsError):
    """A fault that cannot be applied, said in one line."""


def _run(argv: list[str], stdin: str | None = None) -> None:
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetFaultError(f"`{' '.join(argv[:6])}…` failed: "
                            f"{proc.stderr.strip() or proc.returncode}")


def _nft(netns: str, script: str) -> None:
    _run(["ip", "netns", "exec", netns, "nft", "-f", "-"], script)


def _addr(layout: NetLayout, node: str) -> str:
    return layout.gateway if node == CLIENTS else layout.host(node).addr


def _known(layout: NetLayout, nodes: list[str]) -> list[str]:
    for n in nodes:
        if n != CLIENTS:
            layout.host(n)  # NetnsError for a target we did not make
    return nodes


_BASE = """table inet floodgate {
  chain input { type filter hook input priority -10; policy accept; }
  chain output { type filter hook output priority -10; policy accept; }
}
"""


def _drops(netns: str, rules: list[str]) -> None:
    _nft(netns, _BASE + "".join(f"add rule inet floodgate {r}\n" for r in rules))


# -- state --------------------------------------------------------------------------------------
def load(state_dir: Path) -> list[dict]:
    try:
        return json.loads((Path(state_dir) / STATE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise NetFaultError(f"{Path(state_dir) / STATE}: unreadable: {exc}") from None


def _record(state_dir: Path, fault: dict) -> dict:
    faults = load(state_dir)
    fault = {**fault, "since": time.time()}
    faults.append(fault)
    # the faults in force: what `fault net clear` and the reaper undo after a crash
    atomic_write(Path(state_dir) / STATE, json.dumps(faults, indent=1).encode())
    return fault


# -- the faults ---------------------------------------------------------------------------------
def partition(layout: NetLayout, state_dir: Path, side_a: list[str], side_b: list[str],
              *, one_way: bool = False, kind: str = "partition") -> dict:
    _known(layout, side_a + side_b)
    if set(side_a) & set(side_b):
        raise NetFaultError(f"{', '.join(sorted(set(side_a) & set(side_b)))} on both sides")
    if not side_a or not side_b:
        raise NetFaultError("a partition needs a node on each side")
    a_addrs = [_addr(layout, n) for n in side_a]
    b_addrs = [_addr(layout, n) for n in side_b]
    for nodes, theirs, first in ((side_a, b_addrs, True), (side_b, a_addrs, False)):
        for node in nodes:
            if node == CLIENTS:
                continue
            peers = "{ " + ", ".join(theirs) + " }"
            if one_way:  # only what the first side sends to the second
                rules = ([f"output ip daddr {peers} drop"] if first
                         else [f"input ip saddr {peers} drop"])
            else:
                rules = [f"input ip saddr {peers} drop", f"output ip daddr {peers} drop"]
            _drops(layout.host(node).netns, rules)
    return _record(state_dir, {"kind": kind, "a": side_a, "b": side_b, "one_way": one_way})


def isolate(layout: NetLayout, state_dir: Path, node: str) -> dict:
    others = [n for n in layout.hosts if n != node] + [CLIENTS]
    return partition(layout, state_dir, [node], others, kind="isolate")


def loss(layout: NetLayout, state_dir: Path, node: str, pct: float) -> dict:
    if not 0 < pct <= 100:
        raise NetFaultError(f"--loss must be in (0, 100] %, got {pct:g}")
    host = layout.host(node)
    per_10k = round(pct * 100)
    draw = "" if per_10k >= 10000 else f"numgen random mod 10000 < {per_10k} "
    _drops(host.netns, [f'input iifname "eth0" {draw}drop',
                        f'output oifname "eth0" {draw}drop'])
    return _record(state_dir, {"kind": "loss", "node": node, "pct": pct})


def rate(layout: NetLayout, state_dir: Path, node: str, kbit: int) -> dict:
    if kbit < 8:
        raise NetFaultError(f"--rate must be at least 8 kbit/s, got {kbit}")
    host = layout.host(node)
    burst = max(1600, kbit * 1000 // 8 // 50)  # 20 ms of the rate, at least a frame
    tbf = ["root", "tbf", "rate", f"{kbit}kbit", "burst", str(burst), "latency", "200ms"]
    _run(["ip", "netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", "eth0", *tbf])
    _run(["tc", "qdisc", "replace", "dev", host.veth, *tbf])  # toward the node
    return _record(state_dir, {"kind": "rate", "node": node, "kbit": kbit})


def delay(layout: NetLayout, state_dir: Path, node: str, ms: float,
          ports: list[int]) -> dict:
    if not 0 < ms <= 10_000:
        raise NetFaultError(f"--delay must be in (0, 10000] ms, got {ms:g}")
    if any(f["kind"] == "delay" and f["node"] == node for f in load(state_dir)):
        raise NetFaultError(f"{node} is delayed already: --heal first")
    host = layout.host(node)
    relay = subprocess.Popen(
        ["ip", "netns", "exec", host.netns, sys.executable, "-m",
         "broker_core.cluster.delay_relay", "--listen", f"{host.addr}:{RELAY_PORT}",
         "--delay-ms", str(ms)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    _wait_listening(host.netns, RELAY_PORT, relay)
    dports = "{ " + ", ".join(str(p) for p in sorted(set(ports))) + " }"
    _nft(host.netns, f"""table ip floodgate_nat {{
  chain prerouting {{ type nat hook prerouting priority dstnat; policy accept;
    iifname "eth0" tcp dport {dports} redirect to :{RELAY_PORT}
  }}
}}
""")
    # connections made before go on undelayed (NAT applies to new ones): end them, the
    # clients connect again, through the relay
    subprocess.run(["ip", "netns", "exec", host.netns, "ss", "-K", "state", "established",
                    "( " + " or ".join(f"sport = :{p}" for p in sorted(set(ports))) + " )"],
                   capture_output=True)
    return _record(state_dir, {"kind": "delay", "node": node, "ms": ms, "ports": ports,
                               "relay_pid": relay.pid})


def _wait_listening(netns: str, port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise NetFaultError(f"the delay relay exited with {proc.returncode}")
        out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-Hltn",
                              f"sport = :{port}"], capture_output=True, text=True).stdout
        if out.strip():
            return
        time.sleep(0.05)
    proc.kill()
    raise NetFaultError("the delay relay did not listen within 10 s")


def heal(layout: NetLayout, state_dir: Path) -> list[dict]:
    """Remove every fault of this cluster (rules, qdiscs, relays); returns what was in
    force. Also removes what a crash left unrecorded: it clears every host."""
    faults = load(state_dir)
    for fault in faults:
        pid = fault.get("relay_pid")
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for host in layout.hosts.values():
        if not Path(f"/run/netns/{host.netns}").exists():
            continue
        for table in ("inet floodgate", "ip floodgate_nat"):
            subprocess.run(["ip", "netns", "exec", host.netns, "nft", "delete", "table",
                            *table.split()], capture_output=True)
        subprocess.run(["ip", "netns", "exec", host.netns, "tc", "qdisc", "del", "dev", "eth0",
                        "root"], capture_output=True)
        subprocess.run(["tc", "qdisc", "del", "dev", host.veth, "root"], capture_output=True)
    (Path(state_dir) / STATE).unlink(missing_ok=True)
    return faults


def describe(fault: dict, now: float | None = None) -> str:
    """One line: the fault and how long it has been in force (`now`: epoch seconds)."""
    kind = fault["kind"]
    if kind in ("partition", "isolate"):
        arrow = " -/-> " if fault.get("one_way") else " / "
        what = (f"isolate {fault['a'][0]}" if kind == "isolate"
                else f"partition {','.join(fault['a'])}{arrow}{','.join(fault['b'])}")
    elif kind == "loss":
        what = f"loss {fault['pct']:g} % on {fault['node']}'s link"
    elif kind == "rate":
        what = f"{fault['node']}'s link shaped to {fault['kbit']} kbit/s"
    else:
        what = (f"connections to {fault['node']} delayed {fault['ms']:g} ms each way "
                f"(relay pid {fault['relay_pid']})")
    age = (time.time() if now is None else now) - fault["since"]
    return f"{what}, " + ("from now" if age < 1 else f"in force for {age:.0f} s")
