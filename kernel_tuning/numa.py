"""Run a command with interleaved memory: numactl when present, else set_mempolicy.

A memory policy is inherited across fork and kept across execve, so setting
MPOL_INTERLEAVE on ourselves and then exec'ing the command is what
`numactl --interleave=all CMD` does.

For the broker launcher: `interleave_command(cmd)` returns an argv that
starts `cmd` interleaved, for subprocess.Popen; `exec_interleaved(cmd)`
replaces the current process.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import sys

from kernel_tuning.errors import TuningError
from kernel_tuning.hostfs import HostFS

MPOL_INTERLEAVE = 3
# set_mempolicy(2) by architecture (the asm-generic table covers arm64, riscv64).
SYS_SET_MEMPOLICY = {
    "x86_64": 238, "amd64": 238, "aarch64": 237, "arm64": 237, "riscv64": 237,
    "ppc64le": 261, "ppc64": 261, "s390x": 270, "i686": 276, "i386": 276,
}


def parse_node_list(text: str) -> list[int]:
    """"0-3,5" -> [0, 1, 2, 3, 5] (the kernel's list format)."""
    nodes: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        nodes.extend(range(int(lo), int(hi or lo) + 1))
    return nodes


def online_nodes(host: HostFS | None = None) -> list[int]:
    host = host or HostFS("/")
    text = host.read("sys/devices/system/node/online")
    try:
        return parse_node_list(text) if text else [0]
    except ValueError:
        return [0]


def set_interleave(nodes: list[int] | None = None) -> None:
    """Set MPOL_INTERLEAVE over `nodes` (default: all online) for this process."""
    nodes = nodes if nodes is not None else online_nodes()
    number = SYS_SET_MEMPOLICY.get(platform.machine().lower())
    if number is None:
        raise TuningError(f"set_mempolicy: unknown syscall number on {platform.machine()}; install numactl")
    bits = ctypes.sizeof(ctypes.c_ulong) * 8
    words = max(nodes) // bits + 1
    mask = (ctypes.c_ulong * words)()
    for node in nodes:
        mask[node // bits] |= 1 << (node % bits)
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.syscall(
        ctypes.c_long(number), ctypes.c_int(MPOL_INTERLEAVE), mask, ctypes.c_ulong(words * bits + 1)
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise TuningError(f"set_mempolicy(MPOL_INTERLEAVE, nodes {nodes}) failed: {os.strerror(err)}")


def interleave_command(cmd: list[str]) -> list[str]:
    """An argv that runs `cmd` with memory interleaved over all online nodes."""
    if not cmd:
        raise TuningError("no command to run")
    numactl = shutil.which("numactl")
    if numactl:
        return [numactl, "--interleave=all", *cmd]
    return [sys.executable, "-m", "kernel_tuning.numa_exec", "--", *cmd]


def exec_interleaved(cmd: list[str]) -> None:
    """Replace this process with `cmd`, memory interleaved. Returns only on error."""
    if not cmd:
        raise TuningError("no command to run")
    numactl = shutil.which("numactl")
    argv = [numactl, "--interleave=all", *cmd] if numactl else list(cmd)
    if not numactl:
        set_interleave()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        raise TuningError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
