"""The weight of this process's session against the host's other sessions.

With kernel.sched_autogroup_enabled (most desktop and server kernels), CFS shares the
CPU between sessions first, then between the processes of each: a terminal running
`floodgate trace` weighs as much as a whole cluster started from another terminal, and
on two cores it takes a core from the brokers for as long as it runs. The session's
autogroup has a nice level of its own (/proc/self/autogroup, sched(7)) that weights the
whole session; nice(2) on a process only orders it within its session.

A production broker has its host to itself and needs none of this.
"""

from __future__ import annotations

import os
import re
import time

PATH = "/proc/self/autogroup"
ENABLED = "/proc/sys/kernel/sched_autogroup_enabled"
# Without CAP_SYS_ADMIN the kernel takes one change of any session's level a tenth of
# a second (EAGAIN otherwise): a raise back after the demo may meet another's change
RETRIES, RETRY_S = 5, 0.11
_LINE = re.compile(r"^/autogroup-\d+ nice (-?\d+)$")


def session_nice(path: str = PATH) -> int | None:
    """The nice level of this session's autogroup; None where there is none to read."""
    try:
        with open(path) as f:
            m = _LINE.match(f.read().strip())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def set_session_nice(nice: int, path: str = PATH, enabled: str = ENABLED) -> str | None:
    """Set this session's autogroup nice level (-20..19); None once done, else why not, in
    a phrase. Lowering it needs root or CAP_SYS_NICE; raising it back never does."""
    if not -20 <= nice <= 19:
        raise ValueError(f"a nice level is -20 to 19, got {nice}")
    try:
        with open(enabled) as f:
            if f.read().strip() != "1":
                return "autogroups are off (kernel.sched_autogroup_enabled=0)"
    except OSError:
        return "this kernel has no autogroups"
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        return f"cannot open {path}: {exc.strerror or exc}"
    try:
        for _ in range(RETRIES):
            try:
                os.write(fd, str(nice).encode())
                return None
            except BlockingIOError:  # another change in this tenth of a second
                time.sleep(RETRY_S)
        return "the kernel kept refusing the change for now (EAGAIN)"
    except PermissionError:
        return "not permitted (needs root or CAP_SYS_NICE)"
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(fd)
