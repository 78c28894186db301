"""SCHED_RR for the demo's brokers and load (kernel_tuning.realtime), on the real kernel:
taken by the calling thread and inherited by the threads it starts later; refused without
the privilege, said in a phrase, the process left as it was; bad priorities refused by
name before anything starts; and SCHED_IDLE, the other way round, for what must not delay
them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest

from console.cli import main
from kernel_tuning.realtime import allowed, set_idle_class, set_realtime

PROBE = """
import os, sys, threading
from kernel_tuning.realtime import allowed, set_realtime
print(allowed(1), set_realtime(1))
early = threading.Thread(target=threading.Event().wait, daemon=True)
early.start()  # a thread that was there before: the whole process takes the policy
seen = []
t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
t.start(); t.join()
print(os.sched_getscheduler(0) == os.SCHED_RR, seen[0] == os.SCHED_RR,
      os.sched_getscheduler(early.native_id) == os.SCHED_RR)
"""


def probe(prefix=(), preexec=None) -> list[str]:
    done = subprocess.run([*prefix, sys.executable, "-c", PROBE], capture_output=True,
                          text=True, timeout=60, preexec_fn=preexec)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")


@pytest.mark.skipif(not allowed(1), reason="needs root or CAP_SYS_NICE")
def test_taken_by_every_thread_of_the_process_and_those_it_starts_later():
    assert probe()[:2] == ["True None", "True True True"]


@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv (util-linux)")
def test_refused_without_the_privilege_leaves_the_process_as_it_was():
    """Root without CAP_SYS_NICE (as in a container that dropped it) and no RLIMIT_RTPRIO."""
    def no_budget():
        import resource

        resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))

    drop = ("setpriv", "--bounding-set", "-sys_nice", "--inh-caps", "-sys_nice")
    first, second = probe(drop, no_budget)[:2]
    assert first == "False not permitted (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO)"
    assert second == "False False False"


@pytest.mark.parametrize("priority", [0, 100, -1])
def test_a_priority_out_of_range_is_refused(priority):
    with pytest.raises(ValueError, match=f"1 to 99, got {priority}"):
        set_realtime(priority)


@pytest.mark.parametrize("argv", [
    ["broker", "serve", "--name", "b", "--data", "D", "--realtime", "100"],
    ["bench", "produce", "--brokers", "127.0.0.1:9", "--count", "1", "--realtime", "0"],
])  # fmt: skip
def test_the_flag_out_of_range_is_a_usage_error(tmp_path, capsys, argv):
    argv = [str(tmp_path) if a == "D" else a for a in argv]
    with pytest.raises(SystemExit) as exc:  # refused as the command line is read
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"--realtime must be within [1, 99], got {argv[-1]} (see --help)")
    assert "\n" not in err
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # nothing taken on the way


@pytest.mark.skipif(not allowed(1), reason="needs root or CAP_SYS_NICE")
def test_a_broker_started_with_the_flag_serves_under_sched_rr(cluster_factory):
    """Every thread of the broker process (its loop, the flusher, the executor's, and the
    native ones its imports started before the flag was read), as `floodgate demo
    --realtime` starts them; and it still answers."""
    from broker_core.client.producer import Producer

    cluster = cluster_factory(n=1, extra_args=["--realtime", "1"])
    pid = next(iter(cluster.procs.values())).pid
    producer = Producer(cluster.file.addrs, fuse=False)
    try:
        producer.send("rt", b"x")
    finally:
        producer.close()
    policies = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            policies.append(os.sched_getscheduler(int(tid)))
        except ProcessLookupError:  # a worker thread that ended meanwhile
            pass
    assert len(policies) > 1 and set(policies) == {os.SCHED_RR}


def test_the_idle_class_holds_for_the_thread_and_the_threads_it_starts_not_its_caller():
    seen = {}

    def started_after() -> None:
        seen["started after"] = os.sched_getscheduler(0)

    def console() -> None:
        seen["why not"] = set_idle_class()
        seen["itself"] = os.sched_getscheduler(0)
        t = threading.Thread(target=started_after)
        t.start()
        t.join()

    t = threading.Thread(target=console)
    t.start()
    t.join()
    assert seen == {"why not": None, "itself": os.SCHED_IDLE,
                    "started after": os.SCHED_IDLE}
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the thread that started it: untouched
