"""Real-time scheduling for a broker that shares a small host with its clients.

On a host where brokers, load generators and a console share two cores, a broker
woken by a frame waited behind whatever ran: 1-15 ms at the host's 90 % load, and a
sync send waits for three such wake-ups (master, slave, master). Under SCHED_RR a
woken broker preempts every ordinary process at once (the brokers and the load at 1,000
msgs/s: fault-free masters' send p99 9-12 ms -> 1.8-2.5 ms, max 21-26 ms -> 5-13 ms, while
the ordinary consumer processes fell behind; `floodgate demo` now runs the consumer that
keeps up beside them: bench/README.md). The
kernel keeps 5 % of each second for ordinary processes
(/proc/sys/kernel/sched_rt_runtime_us), so a broker that spun would slow the host,
not stop it; brokers wait on their sockets and timers, they do not spin.

A production broker has its host to itself and needs none of this.
"""

from __future__ import annotations

import os
import resource

MAX_PRIORITY = 99
CAP_SYS_NICE = 23  # bit in /proc/self/status CapEff


def allowed(priority: int) -> bool:
    """Whether this process may take SCHED_RR at `priority`: CAP_SYS_NICE (root has it,
    unless a container took it away) or an RLIMIT_RTPRIO that reaches it."""
    limit = resource.getrlimit(resource.RLIMIT_RTPRIO)[0]
    if limit == resource.RLIM_INFINITY or limit >= priority:
        return True
    try:
        with open("/proc/self/status") as f:
            caps = next((line.split()[1] for line in f if line.startswith("CapEff:")), "0")
    except OSError:
        return False
    return bool(int(caps, 16) >> CAP_SYS_NICE & 1)


def set_realtime(priority: int) -> str | None:
    """SCHED_RR at `priority` for every thread of this process (the native ones that
    imports started too) and the threads they start later; None once done, else why
    not, in a phrase."""
    if not 1 <= priority <= MAX_PRIORITY:
        raise ValueError(f"a real-time priority is 1 to {MAX_PRIORITY}, got {priority}")
    param = os.sched_param(priority)
    try:
        os.sched_setscheduler(0, os.SCHED_RR, param)  # this thread: the refusal, if any
    except PermissionError:
        return "not permitted (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO)"
    except OSError as exc:  # e.g. a container's cgroup with no real-time budget
        return exc.strerror or str(exc)
    for tid in os.listdir("/proc/self/task"):  # Linux: a policy is per thread
        try:
            os.sched_setscheduler(int(tid), os.SCHED_RR, param)
        except ProcessLookupError:  # ended meanwhile
            pass
    return None


def set_idle_class() -> str | None:
    """The other way round, for work that must not delay the brokers on their host (the
    demo's clients that may fall behind; not a console, which would freeze on a saturated
    host): SCHED_IDLE for this thread and the threads it starts later. It runs on a core
    nothing else wants, and an ordinary task woken preempts it at once, where a nice
    level only orders who runs next (the fair scheduler lets a running nice-10 task
    finish its slice first). Any user may lower its own class; None once done, else why
    not, in a phrase."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError) as exc:  # (AttributeError: not Linux)
        return str(exc) or type(exc).__name__
    return None
