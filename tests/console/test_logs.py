"""Every process's log lines in one format, the time first: the demo's clients.log had
lines with no time at all, beside brokers' logs that have one on every line."""

from __future__ import annotations

import re
import subprocess
import sys

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} level=WARNING logger=floodgate\.x ")


def test_a_process_configured_so_writes_the_time_level_and_logger_first(tmp_path):
    script = ("import logging; from console.logs import configure_logging; "
              f"configure_logging(logging.WARNING, filename={str(tmp_path / 'p.log')!r}); "
              "logging.getLogger('floodgate.x').warning('behind by %d', 3); "
              "logging.getLogger('floodgate.x').info('not written')")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    lines = (tmp_path / "p.log").read_text().splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]) and lines[0].endswith("behind by 3")

