"""Every process's log lines in one format, the time first: the demo's clients.log had
lines with no time at all, beside brokers' logs that have one on every line."""

from __future__ import annotations

import re
import subprocess
import sys

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} level=WARNING logger=floodgate\.x ")


def test_the_demos_clients_process_writes_the_time_level_and_logger_first():
    # the clients' own main, its clients replaced by one warning and one info line
    script = ("import logging; from console.demo import clients; "
              "clients.run = lambda *a: (logging.getLogger('floodgate.x').warning('behind by 3'),"
              " logging.getLogger('floodgate.x').info('not written')); "
              "clients.main(['cluster.toml'])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]) and lines[0].endswith("behind by 3"), lines
