"""The routes' ZooKeeper client talks through `ZK_LOG`: in a command that set up no
logging its connection warnings stay out of the terminal (errors still reach it); a
process that did set up logging gets every record."""

from __future__ import annotations

import logging

from broker_core.ha.routes import ZK_LOG


def reached_last_resort(monkeypatch, capsys, level: int, handlers: list) -> bool:
    monkeypatch.setattr(logging.root, "handlers", handlers)
    monkeypatch.setattr(ZK_LOG, "propagate", True)
    ZK_LOG.log(level, "Connection dropped: outstanding heartbeat ping not received")
    return "Connection dropped" in capsys.readouterr().err


def test_a_bare_command_hears_only_errors(monkeypatch, capsys):
    assert not reached_last_resort(monkeypatch, capsys, logging.WARNING, [])
    assert reached_last_resort(monkeypatch, capsys, logging.ERROR, [])


def test_a_process_with_logging_keeps_the_warnings(monkeypatch, capsys):
    kept: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            kept.append(record)

    reached_last_resort(monkeypatch, capsys, logging.WARNING, [Keep()])
    assert [r.getMessage() for r in kept] == [
        "Connection dropped: outstanding heartbeat ping not received"]
