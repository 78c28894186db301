"""A broadcast consumer's offsets file: written when it changed and at most once a
second (unless forced, on close), refused whole when it is another group's or not
readable, and a failed write is logged and tried again."""

from __future__ import annotations

import json
import logging

import pytest

from broker_core.client.offsets_file import SAVE_OFFSETS_S, OffsetsFile


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def on_disk(path) -> dict:
    return json.loads(path.read_text())["offsets"]


def test_saved_when_changed_and_at_most_once_a_second(tmp_path):
    clock, path = Clock(), tmp_path / "o.json"
    f = OffsetsFile(path, "cache", "prices", "host-a", clock)
    assert f.saved == {} and not path.exists()
    f.save({("b1", 0): 5})
    assert on_disk(path) == {"b1": {"0": 5}}
    f.save({("b1", 0): 9})  # within the second: not yet
    assert on_disk(path) == {"b1": {"0": 5}}
    clock.now += SAVE_OFFSETS_S
    f.save({("b1", 0): 9, ("b2", 3): 1})
    assert on_disk(path) == {"b1": {"0": 9}, "b2": {"3": 1}}
    f.save({("b1", 0): 10}, force=True)  # closing: now
    assert on_disk(path) == {"b1": {"0": 10}}
    again = OffsetsFile(path, "cache", "prices", "host-a", clock)
    assert again.saved == {("b1", 0): 10}


def test_another_groups_or_a_torn_file_is_refused_in_one_line(tmp_path):
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"group": "other", "topic": "prices", "offsets": {}}))
    with pytest.raises(ValueError, match="holds group 'other' topic 'prices', not 'cache'"):
        OffsetsFile(path, "cache", "prices", "host-a", Clock())
    path.write_text('{"group": "cache", "topic": "pri')
    with pytest.raises(ValueError, match=r"o\.json: unreadable") as err:
        OffsetsFile(path, "cache", "prices", "host-a", Clock())
    assert "\n" not in str(err.value)


def test_a_failed_write_is_said_and_tried_again(tmp_path, caplog):
    clock, where = Clock(), tmp_path / "state"
    where.write_text("a file where the offsets' directory should be")
    f = OffsetsFile(where / "o.json", "cache", "prices", "host-a", clock)
    with caplog.at_level(logging.WARNING, "floodgate.consumer"):
        f.save({("b1", 0): 5})
    assert "offsets not saved to" in caplog.text and f.saved == {}
    where.unlink()
    clock.now += SAVE_OFFSETS_S
    f.save({("b1", 0): 7})
    assert on_disk(where / "o.json") == {"b1": {"0": 7}}
