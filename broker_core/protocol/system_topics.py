"""Topics the brokers and clients make for their own use, by name (RocketMQ's), and the
rule for a consumer group's name, which becomes part of two of them."""

import re

from broker_core.names import MAX_TOPIC, NAME_CHARS, NAME_RULE

RETRY_PREFIX = "%RETRY%"  # + consumer group: what the group's consumers sent back
DLQ_PREFIX = "%DLQ%"  # + consumer group: what failed max_reconsume times

# what a message sent back for a group carries (client.retry), and a dead letter resent
PROP_RETRY_TIMES = "RETRY_TIMES"  # how many times it was sent back
PROP_ORIGIN_TOPIC = "ORIGIN_TOPIC"  # the topic it was first sent to
PROP_ORIGIN_ID = "ORIGIN_MSG_ID"  # the id it was first stored under
# what a broker stores from a message it holds in a system topic (a delayed message due
# from %SCHEDULE%, a committed half from %TX_HALF%) carries the id it was stored from:
# ids name a place in a log, so without it `floodgate trace` cannot join the two
PROP_COPY_OF = "COPY_OF"

# made on first send even where topics are not auto-created (RocketMQ makes them itself)
ALWAYS_CREATED = (RETRY_PREFIX, DLQ_PREFIX)

# A group's name is part of its retry and dead-letter topics' names, so it obeys the topic
# rules with room for the longer prefix (RocketMQ checks group names too: Validators); a
# group named "a b" could consume and commit, and then every nack of it failed.
MAX_GROUP = MAX_TOPIC - len(RETRY_PREFIX)
GROUP_RE = re.compile(rf"^[{NAME_CHARS}]{{1,{MAX_GROUP}}}$")


def check_group(group: str) -> str:
    """`group`, or ValueError (a broker answers BAD_REQUEST with the message)."""
    if not isinstance(group, str) or not GROUP_RE.match(group):
        raise ValueError(f"illegal consumer group name {group!r}: 1-{MAX_GROUP} of {NAME_RULE}")
    return group


# a failed message's first retry waits this delay level (10 s), one level more each time
# after (client.retry; a RocketMQ consumer's backoff on the gRPC port the same)
RETRY_FIRST_LEVEL = 3
