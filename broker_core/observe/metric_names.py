"""Prometheus metric names a broker exports: the one place they are spelled.

The exporter (observe.prometheus), the console's recording and alerting rules,
its Grafana dashboard and its Prometheus data source all import these, so a
renamed metric cannot leave a rule or a panel reading nothing. Counters are
named without `_total`: prometheus-client adds it on exposition, and queries
use `total(name)`. The fuse's own families are named in fuse.export.
"""

from __future__ import annotations


def total(counter: str) -> str:
    """The exposed series of a counter."""
    return f"{counter}_total"


def latency(op: str) -> str:
    """A broker op's latency histogram (`_bucket`, `_sum`, `_count` on exposition)."""
    return f"floodgate_{op}_latency_seconds"


SEND_LATENCY = latency("send")

# counters
MESSAGES_IN = "floodgate_messages_in"
MESSAGES_OUT = "floodgate_messages_out"
BYTES_IN = "floodgate_bytes_in"
BYTES_OUT = "floodgate_bytes_out"
SEND_OVER_20MS = "floodgate_send_over_20ms"
SEND_ERRORS = "floodgate_send_errors"
SEND_FAILURES = "floodgate_send_failures"  # of the errors, the broker's own
SYSTEM_BUSY = "floodgate_system_busy"
FLOW_THROTTLED = "floodgate_flow_control_throttled"
DELAYED_DELIVERED = "floodgate_delayed_delivered"
TX_COMMITS = "floodgate_tx_commits"
TX_ROLLBACKS = "floodgate_tx_rollbacks"  # label: by (producer, check, operator, checks-exhausted)
TX_CHECKS = "floodgate_tx_checks"
LOCK_CHANGES = "floodgate_queue_lock_changes"
ACL_DENIED = "floodgate_acl_denied"  # labels: user, action, resource
AUTH_FAILURES = "floodgate_acl_auth_failures"
ACL_CHANGES = "floodgate_acl_changes"


def ha_counter(key: str) -> str:
    """slave_timeouts, slave_not_available."""
    return f"floodgate_ha_{key}"


# gauges
DISK_USED_RATIO = "floodgate_disk_used_ratio"
DISK_USED_BYTES = "floodgate_disk_used_bytes"
DISK_TOTAL_BYTES = "floodgate_disk_total_bytes"
STORE_BYTES = "floodgate_store_bytes"
FLUSH_LAG_BYTES = "floodgate_flush_lag_bytes"
COMMITLOG_MAX_OFFSET = "floodgate_commitlog_max_offset"
LOOP_LAG = "floodgate_broker_loop_lag_seconds"
INFLIGHT_WRITES = "floodgate_inflight_writes"
FAULT_ACTIVE = "floodgate_fault_active"
CONSUMER_LAG = "floodgate_consumer_lag"
GROUP_STATUS = "floodgate_consumer_group_status"
GROUP_DRAIN = "floodgate_consumer_group_drain_seconds"
QUEUE_LAG = "floodgate_consumer_queue_lag"
FLOW_QUOTA = "floodgate_flow_control_quota"
HA_ROLE = "floodgate_ha_role"
HA_EPOCH = "floodgate_ha_epoch"
HA_IN_SYNC = "floodgate_ha_in_sync_slaves"
REPL_LAG_BYTES = "floodgate_replication_lag_bytes"
REPL_LAG_SECONDS = "floodgate_replication_lag_seconds"
RAFT_MEMBERS = "floodgate_raft_members"
RAFT_COMMIT = "floodgate_raft_commit_index"
RAFT_LAST = "floodgate_raft_last_index"
RAFT_MATCH = "floodgate_raft_match_index"
DELAYED_PENDING = "floodgate_delayed_pending"
DEAD_LETTERS = "floodgate_dead_letters"
RETRIES = "floodgate_retries"
DELAYED_OVERDUE = "floodgate_delayed_overdue_seconds"
TX_PENDING = "floodgate_tx_halves_pending"
TX_FENCED = "floodgate_tx_fenced_commits"  # _total: FENCED, the halves rolled back
TX_OFFSET_COMMITS = "floodgate_tx_offset_commits"  # _total: offsets moved with output
TX_OLDEST = "floodgate_tx_oldest_half_seconds"
LOCKS_HELD = "floodgate_queue_locks_held"
PULLS_HELD = "floodgate_pulls_held"
PULL_SESSIONS = "floodgate_pull_sessions"
DUPLICATE_SENDS = "floodgate_duplicate_sends"  # _total: retries answered from the first try
EXPIRED_SEQUENCES = "floodgate_expired_sequences"  # _total: retries older than remembered
IDEMPOTENT_PRODUCERS = "floodgate_idempotent_producers"

# the send histogram's exposed series
SEND_BUCKET = f"{SEND_LATENCY}_bucket"
SEND_SUM = f"{SEND_LATENCY}_sum"
SEND_COUNT = f"{SEND_LATENCY}_count"
