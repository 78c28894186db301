"""How cheap is `tune verify`? (the console's Host screen polls it; a fleet check runs it on every host)

Measures, on this host, the median time of a full verify of the `broker` profile
(every plugin's setter in no-write mode: ~20 reads of /proc/sys, /sys and /etc)
against the peer an os.sh-style script would use: one `sysctl -n` subprocess
reading just the profile's sysctl keys. Also one apply + rollback round trip on a
fake tree (journal fsynced included). Goal: verify <= 50 ms.

    .venv/bin/python bench/tune_verify.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import median_seconds, peak_rss_mib  # noqa: E402

from kernel_tuning.engine import apply_plan, rollback  # noqa: E402
from kernel_tuning.plan import build_plan  # noqa: E402
from kernel_tuning.profile import load_profile  # noqa: E402

GOAL_VERIFY_S = 0.050


def fake_tree(root: Path) -> None:
    def put(rel: str, text: str) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    put("proc/meminfo", "MemTotal: 67108864 kB\n")
    for key in load_profile("broker").sections["sysctl"]:
        put("proc/sys/" + key.replace(".", "/"), "0\n")
    put("proc/sys/vm/watermark_scale_factor", "10\n")
    for name in ("enabled", "defrag"):
        put(f"sys/kernel/mm/transparent_hugepage/{name}", "always [madvise] never\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()

    verify = median_seconds(lambda: build_plan("broker", "/"), args.repeat)
    print(f"verify broker profile (live host):   {verify * 1e3:7.2f} ms   peak RSS {peak_rss_mib():.0f} MiB")
    keys = [k for k in load_profile("broker").sections["sysctl"] if os.path.exists("/proc/sys/" + k.replace(".", "/"))]
    missed = []
    if shutil.which("sysctl"):
        peer = median_seconds(
            lambda: subprocess.run(["sysctl", "-n", *keys], capture_output=True, check=True), args.repeat
        )
        print(f"peer: sysctl -n ({len(keys)} keys, one process): {peer * 1e3:7.2f} ms   "
              f"ratio verify/peer {verify / peer:.2f}x")  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        root, state = Path(d) / "root", Path(d) / "state"
        fake_tree(root)

        def cycle() -> None:
            apply_plan(build_plan("broker", root), state_dir=state)
            rollback(root, state_dir=state)

        round_trip = median_seconds(cycle, max(3, args.repeat // 4))
    print(f"apply + rollback (fake tree, fsync): {round_trip * 1e3:7.2f} ms   peak RSS {peak_rss_mib():.0f} MiB")
    if verify > GOAL_VERIFY_S:
        missed.append(f"verify {verify * 1e3:.1f} ms > {GOAL_VERIFY_S * 1e3:.0f} ms")
    for m in missed:
        print(f"goal missed: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
