"""Numeric command-line flags, one rule for all (a value out of range is refused by name,
exit 2, before anything starts): the argparse types and the parser that words their
refusals. Shared by the broker's own entry point (`python -m broker_core`) and the
`floodgate` command, which imports them from here.
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

EXIT_USAGE = 2


class ArgsError(ValueError):
    """A flag, or a combination of flags, that cannot be served: usage (exit 2)."""


@dataclass(frozen=True)
class Range:
    """The valid values of a numeric flag. Checked by the command before any model
    runs, so the error names the flag that was typed (models name their own fields)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # low itself is not valid
    high_open: bool = False

    def contains(self, v: float) -> bool:
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            return False
        return self.high is None or (v < self.high if self.high_open else v <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {_bound(self.low)}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"within {left}{_bound(self.low)}, {_bound(self.high)}{right}"


def _bound(x: float) -> str:
    """A range's end as written: 4194304, not :g's 4.1943e+06."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


POSITIVE = Range(0, low_open=True)
NON_NEGATIVE = Range(0)
AT_LEAST_1 = Range(1)
FRACTION = Range(0, 1, low_open=True)  # (0, 1]: a share that cannot be zero
SHARE = Range(0, 1)  # [0, 1]


class Bounded:
    """argparse `type=` of a numeric flag: the
    text as `kind` within `valid`, else ArgumentTypeError with the rule and the text as
    typed, which FlagParser words "--brokers must be >= 1, got 0", exit 2. Checked as
    the command line is read, so nothing is made or started before."""

    def __init__(self, valid: Range, kind: type = float) -> None:
        self.valid, self.kind = valid, kind

    def __call__(self, text: str):
        try:
            value = self.kind(text)
        except ValueError:
            what = "a whole number" if self.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text.strip()}")
        if not self.valid.contains(value):
            raise argparse.ArgumentTypeError(f"must be {self.valid}, got {text.strip()}")
        return value

    def __repr__(self) -> str:
        return f"{self.kind.__name__} {self.valid}"


def int_range(low: int, high: int | None = None) -> Bounded:
    return Bounded(Range(low, high), int)


def float_range(low: float, high: float | None = None, *, low_open: bool = False) -> Bounded:
    return Bounded(Range(low, high, low_open=low_open))


# The argparse types of numeric flags; a flag where 0 means "none" or "off" says so in
# its help.
positive_int = Bounded(AT_LEAST_1, int)  # counts of things: 0 makes no sense
nonneg_int = Bounded(NON_NEGATIVE, int)
positive_float = Bounded(POSITIVE)  # rates, durations, timeouts
nonneg_float = Bounded(NON_NEGATIVE)
share = Bounded(SHARE)  # [0, 1]
fraction = Bounded(FRACTION)  # (0, 1]
port = int_range(1, 65535)  # 0 would be "any free port", never what a flag means
seed = nonneg_int  # numpy's SeedSequence (gen double11) takes >= 0 only: so does every seed




class FlagParser(argparse.ArgumentParser):
    """argparse, but bad usage is one line on stderr and exit 2, a numeric flag's refusal
    in the words "--brokers must be >= 1, got 0", and a negative number after a flag is
    its value, so that its range check can say what is wrong."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # argparse's own pattern knows -1 and -1.5 only: "-1e6" or "-inf" would be
        # read as an unknown flag ("expected one argument").
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-inf(inity)?$", re.IGNORECASE
        )

    def error(self, message: str) -> None:  # type: ignore[override]
        message = re.sub(r"^argument (-\S+): (?=must be )", r"\1 ", message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


# SCHED_RR's top priority on Linux (kernel_tuning.realtime.MAX_PRIORITY: that package
# takes 20 ms to import, paid by every command's start)
RT_PRIORITY_MAX = 99


def add_realtime_arg(parser, who: str) -> None:
    parser.add_argument("--realtime", type=int_range(1, RT_PRIORITY_MAX), metavar="PRIO",
                        help=f"run under SCHED_RR at PRIO (1-99): {who} sharing a small host, "
                        "as `floodgate demo` runs them (needs root or CAP_SYS_NICE; "
                        "refused, it says so and runs at normal priority)")


def take_realtime(args, logger: str) -> None:
    """--realtime, before any thread starts (each inherits the policy); a refusal is a
    warning: the process runs, at normal priority."""
    if args.realtime is None:
        return
    from kernel_tuning.realtime import MAX_PRIORITY, set_realtime

    if not 1 <= args.realtime <= MAX_PRIORITY:
        raise ValueError(f"--realtime must be 1 to {MAX_PRIORITY}, got {args.realtime}")
    refused = set_realtime(args.realtime)
    if refused:
        import logging

        logging.getLogger(logger).warning("SCHED_RR %d %s: at normal priority",
                                          args.realtime, refused)
