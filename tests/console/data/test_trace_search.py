"""The console's trace search says what to do with what it cannot search: no cluster, not
one word, or a RocketMQ client's message id (which names no broker, so only its keys
find the message)."""

from pathlib import Path

from console.data.traces import search


def test_a_rocketmq_id_asks_for_a_key(tmp_path):
    (line,) = search(tmp_path / "cluster.toml", "0102FC0000000125390B1E041C00000000")
    assert "RocketMQ client's message id" in line and "type a key" in line


def test_what_cannot_be_searched_says_why():
    assert "start the console with --cluster" in search(None, "order-1")[0]
    assert "type one key" in search(Path("cluster.toml"), "two words")[0]
