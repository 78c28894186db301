"""The demo's session weighted against the host's other sessions (kernel_tuning.autogroup):
on the real kernel, in a session of the test's own (the test's session keeps its weight),
lowered by root and put back, refused without the privilege (said in a phrase, the weight
left as it was); read from a fake /proc where the kernel has no autogroups or has them off."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernel_tuning.autogroup import ENABLED, session_nice, set_session_nice

PROBE = """
import ctypes, os, sys
from kernel_tuning.autogroup import session_nice, set_session_nice
if len(sys.argv) > 1:  # as nobody (the interpreter may sit where nobody may not read)
    os.setgid(65534); os.setuid(65534)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self is its own again
print(session_nice(), set_session_nice(-10), session_nice(), set_session_nice(5),
      session_nice(), sep="|")
"""


def autogroups_on() -> bool:
    try:
        with open(ENABLED) as f:
            return f.read().strip() == "1" and session_nice() is not None
    except OSError:
        return False


def probe(*argv: str) -> list[str]:
    """PROBE in a new session (a new autogroup, at nice 0); as nobody with an argument."""
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                         text=True, timeout=30, start_new_session=True, check=True).stdout
    return out.strip().split("|")


needs_root = pytest.mark.skipif(os.geteuid() != 0 or not autogroups_on(),
                                reason="needs root and a kernel with autogroups on")


@needs_root
def test_root_lowers_its_sessions_nice_level_and_puts_it_back():
    ours = session_nice()
    assert probe() == ["0", "None", "-10", "None", "5"]
    assert session_nice() == ours  # another session's weight is its own


@needs_root
def test_lowering_it_is_refused_without_the_privilege_and_raising_it_is_not():
    assert probe("nobody") == ["0", "not permitted (needs root or CAP_SYS_NICE)",
                                          "0", "None", "5"]


def test_a_kernel_without_autogroups_or_with_them_off(tmp_path):
    missing = str(tmp_path / "none")
    assert session_nice(missing) is None
    assert set_session_nice(-10, missing, missing) == "this kernel has no autogroups"
    off, group = tmp_path / "enabled", tmp_path / "autogroup"
    off.write_text("0\n")
    group.write_text("/autogroup-42 nice 3\n")
    assert session_nice(str(group)) == 3
    assert set_session_nice(-10, str(group), str(off)) == \
        "autogroups are off (kernel.sched_autogroup_enabled=0)"
    assert session_nice(str(group)) == 3  # nothing written
    group.write_text("something else\n")
    assert session_nice(str(group)) is None


def test_a_nice_level_out_of_range_is_refused_by_name():
    with pytest.raises(ValueError, match="a nice level is -20 to 19, got -21"):
        set_session_nice(-21)
