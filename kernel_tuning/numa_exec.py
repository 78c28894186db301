"""`python -m kernel_tuning.numa_exec -- CMD...`: exec CMD with interleaved memory."""

from __future__ import annotations

import sys

from kernel_tuning.errors import TuningError
from kernel_tuning.numa import exec_interleaved


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--":
        argv = argv[1:]
    try:
        exec_interleaved(argv)
    except TuningError as exc:
        print(f"numa_exec: error: {exc}", file=sys.stderr)
        return 127
    return 0  # not reached: exec replaced us


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
