"""`make bench`: run every bench/*.py script in turn and report which met its goals.

Each script prints its own figures and exits 1 when a goal is missed; this
runner keeps going so one slow part does not hide the others.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    scripts = sorted(p for p in HERE.glob("*.py") if not p.name.startswith(("_", "run_all")))
    only = set(sys.argv[1:])
    failed = []
    for script in scripts:
        if only and script.stem not in only:
            continue
        print(f"\n=== {script.name} ===", flush=True)
        rc = subprocess.call([sys.executable, str(script)])
        if rc != 0:
            failed.append(script.name)
    print("\nbench: " + (f"goals missed in {', '.join(failed)}" if failed else "all goals met"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
