"""Fixtures for the broker store tests: small configs, a crash-writer child, a tiny tmpfs."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

from broker_core.server.broker import Broker
from broker_core.server.config import BrokerConfig
from broker_core.store import StoreConfig
from tests.clock import ManualClock

WRITER = os.path.join(os.path.dirname(__file__), "store", "store_writer.py")


@pytest.fixture
def small_config():
    """StoreConfig factory with small segments and no background threads (except group commit)."""

    def make(**overrides) -> StoreConfig:
        kw = dict(
            commitlog_segment_bytes=64 * 1024,
            max_message_bytes=8 * 1024,
            consumequeue_units_per_file=256,
            background_services=False,
        )
        kw.update(overrides)
        return StoreConfig(**kw)

    return make


@pytest.fixture
def broker(tmp_path):
    """A broker driven in-process (no TCP), on a clock the test moves: 2026-11-11 00:00 UTC."""
    b = Broker(BrokerConfig("b1", tmp_path / "b1", segment_bytes=8 << 20),
               clock=ManualClock(1_794_355_200.0))
    yield b
    b.close()


@pytest.fixture
def writer_script() -> str:
    return WRITER


@pytest.fixture
def tmpfs():
    """Mount a tmpfs of a given size (bytes) and return its path; skip where mounting is refused."""
    mounted: list[str] = []

    def mount(size: int) -> str:
        path = tempfile.mkdtemp(prefix="floodgate-tmpfs-")
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            os.rmdir(path)
            pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", path], capture_output=True)
        os.rmdir(path)
