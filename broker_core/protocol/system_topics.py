"""Topics the brokers and clients make for their own use, by name (RocketMQ's)."""

RETRY_PREFIX = "%RETRY%"  # + consumer group: what the group's consumers sent back
DLQ_PREFIX = "%DLQ%"  # + consumer group: what failed max_reconsume times

# made on first send even where topics are not auto-created (RocketMQ makes them itself)
ALWAYS_CREATED = (RETRY_PREFIX, DLQ_PREFIX)
