"""What a topic's name may be: one rule for the store that writes it into every record,
the broker's topic table, the clients and the commands. RocketMQ's (TopicValidator:
``^[%|a-zA-Z0-9_-]+$``, at most 127: the record holds its length in one byte). There
was a second rule with "." in it: `topic create` made `orders.eu`, and the store then
refused every send to it."""

from __future__ import annotations

import re

NAME_CHARS = "A-Za-z0-9_%|-"  # inside a character class
NAME_RULE = "letters, digits and _ % | -"
MAX_TOPIC = 127
TOPIC_RE = re.compile(rf"^[{NAME_CHARS}]{{1,{MAX_TOPIC}}}$")


def topic_problem(topic: object) -> str | None:
    """Why `topic` cannot be a topic's name, in one line; None when it can."""
    if isinstance(topic, str) and TOPIC_RE.match(topic):
        return None
    return f"illegal topic name {topic!r}: 1-{MAX_TOPIC} of {NAME_RULE}"
