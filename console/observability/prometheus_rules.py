"""floodgate.rules.yml: recording rules and the SLA alerts of the Double-11 talk.

Recording rules follow Prometheus' `level:metric:operations` naming:
`broker:floodgate_send_latency_seconds:p99_rate1m` is the p99 of the last
minute per broker, `cluster:...` the same over every broker of a cluster.
Percentiles come from the classic power-of-two buckets the broker exports, so
they sit within one bucket of the broker's own /stats figures (which are read
off its finer schema-3 histogram).

The alerts (summary, a description naming the broker or producer, and a
runbook line each):
- average send RT over 3 ms for 1 minute;
- any send over 20 ms (the broker's exact counter, not a bucket estimate);
- a broker down (its scrape fails);
- a producer's fuse with as many brokers isolated as the cap allows (naming them);
- a data disk over 75 % full;
and for replicated groups (`floodgate.ha`): a slave lagging over a second, a
master with no slave in sync (one copy only), a failover in the last 5 minutes;
for consumers and flow control (`floodgate.consumers`): a group STALLED or
STOPPED, a group whose lag keeps growing, sends throttled by a quota for 5
minutes.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker_core.observe import metric_names as n
from broker_core.store.config import DISK_MAX_USED_RATIO
from fuse.export import FUSE_BROKER_ISOLATED, FUSE_CAP, FUSE_ISOLATED
from heatmap.metrics_log import BROKER_OPS as OPS
from heatmap.sla import SLA_MAX_MS, SLA_MEAN_MS, SLA_MEAN_S

QUANTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}
BROKER_JOB = "floodgate-broker"
PRODUCER_JOB = "floodgate-producer"
RATE_WINDOW = "1m"

DISK_USED_RATIO = DISK_MAX_USED_RATIO  # where the store starts deleting early

# The isolated brokers of the producer an alert is about, named in its description
# (FUSE_BROKER_ISOLATED has one series per isolated broker).
ISOLATED_BROKERS = (
    f' {{{{ range query (printf "{FUSE_BROKER_ISOLATED}{{instance=%q}}" $labels.instance) }}}}'
    " {{ .Labels.broker }} ({{ .Labels.reason }}){{ end }}"
)
BY_BROKER = "cluster, broker, instance"
BY_CLUSTER = "cluster"


@dataclass(frozen=True)
class Rule:
    record: str
    expr: str

    def to_dict(self) -> dict:
        return {"record": self.record, "expr": self.expr}


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    for_: str | None
    severity: str
    summary: str
    description: str
    runbook: str

    def to_dict(self) -> dict:
        out: dict = {"alert": self.name, "expr": self.expr}
        if self.for_:
            out["for"] = self.for_
        out["labels"] = {"severity": self.severity}
        out["annotations"] = {
            "summary": self.summary,
            "description": self.description,
            "runbook": self.runbook,
        }
        return out


def rule_name(level: str, metric: str, operation: str) -> str:
    return f"{level}:{metric}:{operation}"


def latency_rules(window: str = RATE_WINDOW) -> list[Rule]:
    """p50/p99/p999 and mean per broker and per cluster, for every operation."""
    rules = []
    for op in OPS:
        metric = n.latency(op)
        for level, by in (("broker", BY_BROKER), ("cluster", BY_CLUSTER)):
            buckets = f"sum by ({by}, le) (rate({metric}_bucket[{window}]))"
            for label, q in QUANTILES.items():
                rules.append(Rule(rule_name(level, metric, f"{label}_rate{window}"),
                                  f"histogram_quantile({q}, {buckets})"))
            rules.append(Rule(
                rule_name(level, metric, f"mean_rate{window}"),
                f"sum by ({by}) (rate({metric}_sum[{window}]))"
                f" / sum by ({by}) (rate({metric}_count[{window}]))"))
    return rules


def rate_rules(window: str = RATE_WINDOW) -> list[Rule]:
    """Messages and bytes in and out per second, errors and sends over the SLA max."""
    rules = []
    for metric in (n.MESSAGES_IN, n.MESSAGES_OUT, n.BYTES_IN, n.BYTES_OUT, n.SEND_ERRORS,
                   n.SEND_FAILURES):
        for level, by in (("broker", BY_BROKER), ("cluster", BY_CLUSTER)):
            rules.append(Rule(rule_name(level, metric, f"rate{window}"),
                              f"sum by ({by}) (rate({n.total(metric)}[{window}]))"))
    for level, by in (("broker", BY_BROKER), ("cluster", BY_CLUSTER)):
        rules.append(Rule(rule_name(level, n.SEND_OVER_20MS, f"increase{window}"),
                          f"sum by ({by}) (increase({n.total(n.SEND_OVER_20MS)}[{window}]))"))
    return rules


def sla_alerts(window: str = RATE_WINDOW) -> list[Alert]:
    mean = rule_name("broker", n.SEND_LATENCY, f"mean_rate{window}")
    over = rule_name("broker", n.SEND_OVER_20MS, f"increase{window}")
    return [
        Alert(
            f"FloodgateSendAverageOver{SLA_MEAN_MS:g}ms",
            f"{mean} > {SLA_MEAN_S}",
            "1m",
            "page",
            f"Average send RT over {SLA_MEAN_MS:g} ms on {{{{ $labels.broker }}}}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}, cluster {{ $labels.cluster }})"
            " has averaged {{ $value | humanizeDuration }} per send over the last minute,"
            f" for a minute (SLA: {SLA_MEAN_MS:g} ms).",
            "Runbook: open the send heatmap for {{ $labels.broker }}; a full-width stripe is a"
            " PageCache or flush stall (check flush lag and disk), a slow drift is load (msgs/s"
            " in); `floodgate fault show --broker {{ $labels.instance }}` rules out a drill"
            " left on; if producers suffer, let the fuse isolate it.",
        ),
        Alert(
            f"FloodgateSendOver{SLA_MAX_MS:g}ms",
            f"{over} > 0",
            None,
            "page",
            f"Sends over {SLA_MAX_MS:g} ms on {{{{ $labels.broker }}}}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}, cluster {{ $labels.cluster }})"
            " answered about {{ $value | printf \"%.0f\" }} sends slower than"
            f" {SLA_MAX_MS:g} ms in the"
            f" last minute (SLA: no send over {SLA_MAX_MS:g} ms).",
            "Runbook: look for the stall on the send heatmap of {{ $labels.broker }}; check its"
            " flush lag, disk and `floodgate fault show --broker {{ $labels.instance }}`;"
            " producers' fuses should isolate it within a minute; if every broker shows it,"
            " look at the hosts (THP, dirty page settings: `floodgate tune verify`).",
        ),
        Alert(
            "FloodgateBrokerDown",
            f'up{{job="{BROKER_JOB}"}} == 0',
            "30s",
            "page",
            "Broker {{ $labels.broker }} is down",
            "Prometheus cannot scrape broker {{ $labels.broker }} at {{ $labels.instance }}"
            " (cluster {{ $labels.cluster }}) for 30 s: it is down or its HTTP side hangs.",
            "Runbook: check the process and its log (the cluster's logs/{{ $labels.broker }}.log),"
            " the host's disk and memory; restart it (`floodgate cluster up --restart` does it"
            " on its own); producers route around it meanwhile.",
        ),
        Alert(
            "FloodgateBrokerFailingSends",
            f"sum by (broker, instance, cluster) (increase({n.total(n.SEND_FAILURES)}"
            f"[{window}])) > 0",
            None,
            "page",
            "Broker {{ $labels.broker }} is failing sends",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}, cluster {{ $labels.cluster }})"
            " failed about {{ $value | printf \"%.0f\" }} sends itself in the last minute"
            " (SYSTEM_ERROR, SYSTEM_BUSY, DISK_FULL, a flush or slave timeout), not"
            " refusals of a client's input or of the operator's settings.",
            "Runbook: `floodgate status` names the latest failure's code and text on the"
            " broker's row; check its log, disk and `floodgate fault show --broker"
            " {{ $labels.instance }}`; producers' fuses isolate it meanwhile.",
        ),
        Alert(
            "FloodgateFuseIsolatedAtCap",
            f"{FUSE_ISOLATED} >= {FUSE_CAP} and {FUSE_CAP} > 0",
            None,
            "page",
            "Producer {{ $labels.producer }} has isolated as many brokers as its cap allows",
            "The fuse of producer {{ $labels.producer }} ({{ $labels.instance }}) has"
            " {{ $value }} brokers isolated, the 30 % cap:"
            f"{ISOLATED_BROKERS}; the next slow broker stays in service (overflow).",
            "Runbook: read the isolated brokers off http://{{ $labels.instance }}/stats (fuse),"
            " check those brokers' send RT and errors; more than 30 % of the cluster slow at"
            " once is a cluster-wide cause (hosts, network, load), not one broker.",
        ),
        Alert(
            "FloodgateDiskOver75Percent",
            f"{n.DISK_USED_RATIO} > {DISK_USED_RATIO}",
            "1m",
            "warning",
            "Data disk of {{ $labels.broker }} over 75 % full",
            "The data disk of broker {{ $labels.broker }} ({{ $labels.instance }}) is"
            " {{ $value | humanizePercentage }} full (limit 75 %).",
            f"Runbook: check retention and the CommitLog size ({n.STORE_BYTES}) of"
            " {{ $labels.broker }}; shorten retention or add disk before it fills and the"
            " broker refuses writes.",
        ),
    ]


REPL_LAG_S = 1.0


def ha_alerts() -> list[Alert]:
    """Replicated groups: what the masters export (floodgate_ha_*, replication lag)."""
    return [
        Alert(
            "FloodgateReplicationLag",
            f"{n.REPL_LAG_SECONDS} > {REPL_LAG_S:g}",
            "30s",
            "warning",
            "Slave {{ $labels.slave }} of {{ $labels.group }} is behind its master",
            "Slave {{ $labels.slave }} has not acknowledged what master {{ $labels.broker }}"
            " ({{ $labels.instance }}, group {{ $labels.group }}) appended"
            " {{ $value | humanizeDuration }} ago, for 30 s. Sync sends wait for it; after"
            " --sync-timeout it leaves the in-sync set.",
            "Runbook: check the slave's host (disk, CPU) and its log; `floodgate status` shows"
            " its lag; a slave restarted from empty catches up at the network's pace, so a"
            " large lag right after a restart is expected.",
        ),
        Alert(
            "FloodgateNoSlaveInSync",
            f"{n.HA_IN_SYNC} == 0",
            "15s",
            "page",
            "Group {{ $labels.group }} has no slave in sync",
            "Master {{ $labels.broker }} ({{ $labels.instance }}) of group {{ $labels.group }}"
            " has had no slave in its in-sync set for 15 s: its messages are on one copy,"
            " sync sends answer SLAVE_NOT_AVAILABLE and a failover now could not happen.",
            "Runbook: bring the group's slave back (`floodgate cluster up --restart` restarts"
            " it; it rejoins as slave and catches up); until then the group is single-copy.",
        ),
        Alert(
            "FloodgateFailover",
            f'changes({n.HA_EPOCH}[5m]) > 0 and on (instance) '
            f'{n.HA_ROLE}{{role="MASTER"}} == 1',
            None,
            "warning",
            "Group {{ $labels.group }} failed over to {{ $labels.broker }}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}) became master of group"
            " {{ $labels.group }} in the last 5 minutes (its epoch changed).",
            "Runbook: find why the old master's ZooKeeper session ended (its log; `floodgate"
            " status` shows who is master now); restart it: it rejoins as slave and cuts any"
            " tail the new master never had (logged). Check the group has a slave in sync.",
        ),
    ]


# A group's lag per topic on the broker an alert is about, named in its description.
GROUP_LAG = (
    f' {{{{ range query (printf "sum by (topic) ({n.QUEUE_LAG}{{instance=%q,group=%q}})"'
    " $labels.instance $labels.group) }} {{ .Labels.topic }} {{ .Value | printf \"%.0f\" }}"
    "{{ end }}"
)


def consumer_alerts(window: str = RATE_WINDOW) -> list[Alert]:
    """Consumer groups as the brokers judge them (floodgate_consumer_group_status: 0 OK,
    1 WARNING, 2 STALLED, 3 STOPPED), and sends refused by flow control."""
    return [
        Alert(
            "FloodgateConsumerStalled",
            f"{n.GROUP_STATUS} >= 2",
            # the broker calls a stall within 2 s; 30 s lets a rebalance or a consumer's
            # restart pass without paging anyone
            "30s",
            "page",
            "Consumer group {{ $labels.group }} is not consuming on {{ $labels.broker }}",
            "Consumer group {{ $labels.group }} has lag on broker {{ $labels.broker }}"
            " ({{ $labels.instance }}) and its offsets have not moved for 30 s (status"
            " {{ $value }}: 2 STALLED, its consumers are alive but stuck; 3 STOPPED, none"
            f" heard from). Lag by topic:{GROUP_LAG}.",
            "Runbook: `floodgate status` (or the console's g screen) shows the group's queues;"
            " STALLED: look at its consumers' logs for a message they fail on or a blocked"
            " downstream; STOPPED: restart its consumers. Other groups are not delayed by"
            " its backlog (each group reads at its own offset).",
        ),
        Alert(
            "FloodgateConsumerLagGrowing",
            f"{n.GROUP_STATUS} == 1",
            "2m",
            "warning",
            "Consumer group {{ $labels.group }} falls behind on {{ $labels.broker }}",
            "Consumer group {{ $labels.group }} consumes slower than producers write on broker"
            " {{ $labels.broker }} ({{ $labels.instance }}): its lag has grown for 2 minutes."
            f" Lag by topic:{GROUP_LAG}.",
            "Runbook: compare the group's consume and write rates (`floodgate status`); add"
            " consumers (up to one per queue) or speed up their processing; a peak that ends"
            " soon drains by itself (the console shows the time to drain).",
        ),
        Alert(
            "FloodgateFlowControlThrottling",
            f"rate({n.total(n.FLOW_THROTTLED)}[{window}]) > 0",
            "5m",
            "info",
            "Topic {{ $labels.topic }} from {{ $labels.group }} throttled on {{ $labels.broker }}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}) has refused sends of topic"
            " {{ $labels.topic }} from producer group {{ $labels.group }} with FLOW_CONTROL for"
            ' 5 minutes, {{ $value | printf "%.1f" }} a second now: a quota holds them back'
            " and the producers back off and retry.",
            "Runbook: `floodgate quota show --cluster FILE` lists the quotas; if this is planned"
            " peak traffic, raise the quota (`floodgate quota set`, or re-plan with `floodgate"
            " report capacity` and `floodgate quota apply`); if a producer runs away, the quota"
            " is doing its job: find it by its group.",
        ),
        Alert(
            "FloodgateDeadLettersGrowing",
            f"increase({n.DEAD_LETTERS}[5m]) > 0",
            None,
            "warning",
            "Dead letters of group {{ $labels.group }} growing on {{ $labels.broker }}",
            "Consumer group {{ $labels.group }} has sent {{ $value | printf \"%.0f\" }}"
            " messages to its dead-letter queue on broker {{ $labels.broker }}"
            " ({{ $labels.instance }}) in the last 5 minutes: they failed every retry.",
            "Runbook: `floodgate dlq show --cluster FILE --group GROUP` shows them (where"
            " each came from, how often tried); fix the cause in the group's handler, then"
            " `floodgate dlq resend`.",
        ),
        Alert(
            "FloodgateDelayedOverdue",
            f"{n.DELAYED_OVERDUE} > 1",
            "1m",
            "warning",
            "Delayed messages overdue on {{ $labels.broker }}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}) holds delayed messages"
            ' {{ $value | printf "%.1f" }} s past their due time, for a minute: delivery'
            " stopped or cannot keep up.",
            "Runbook: `floodgate status` shows the pending delayed messages per level; a"
            " slave (or a broker fenced from its group) does not deliver: check the group has a"
            " master; a full disk stops delivery too (`floodgate status`, disk).",
        ),
        Alert(
            "FloodgateHalfMessageStuck",
            f"{n.TX_OLDEST} > {HALF_STUCK_S}",
            "1m",
            "warning",
            "A transaction's half message unresolved on {{ $labels.broker }}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}) holds a half message"
            ' {{ $value | printf "%.0f" }} s old: neither committed nor rolled back, so its'
            " message is not delivered (15 check-backs roll it back at last).",
            "Runbook: `floodgate tx list --cluster FILE` names it, its producer group, its"
            " check-backs and whether a producer of the group is asking; with the producer"
            " gone, settle it from the business's own record: `floodgate tx resolve --id ID"
            " --commit` or `--rollback`.",
        ),
    ]


HALF_STUCK_S = 300  # a half older than 5 minutes: its producer is gone or stuck UNKNOWN
DENIED_BURST_5M = 100  # requests one user had refused in 5 minutes


def access_alerts() -> list[Alert]:
    return [
        Alert(
            "FloodgateAclDenialsBurst",
            f"sum by (cluster, broker, instance, user) (increase({n.ACL_DENIED}_total[5m]))"
            f" > {DENIED_BURST_5M}",
            None,
            "warning",
            "User {{ $labels.user }} refused by the ACL on {{ $labels.broker }}",
            "Broker {{ $labels.broker }} ({{ $labels.instance }}) refused"
            ' {{ $value | printf "%.0f" }} requests of user {{ $labels.user }} in the last'
            " 5 minutes (NO_PERMISSION): a client deployed without its permissions, or"
            " someone trying what they may not.",
            "Runbook: `floodgate_acl_denied_total` names the action and resource; `floodgate"
            " acl list --cluster FILE` shows the user's rules; grant the permission"
            " (`floodgate acl allow`) if the client is right, else find the client by its"
            " user.",
        ),
    ]


def rules_file(window: str = RATE_WINDOW) -> dict:
    """The floodgate.rules.yml document."""
    return {
        "groups": [
            {"name": "floodgate.latency", "rules": [r.to_dict() for r in latency_rules(window)]},
            {"name": "floodgate.rates", "rules": [r.to_dict() for r in rate_rules(window)]},
            {"name": "floodgate.sla", "rules": [a.to_dict() for a in sla_alerts(window)]},
            {"name": "floodgate.ha", "rules": [a.to_dict() for a in ha_alerts()]},
            {"name": "floodgate.consumers",
             "rules": [a.to_dict() for a in consumer_alerts(window)]},
            {"name": "floodgate.access", "rules": [a.to_dict() for a in access_alerts()]},
        ]
    }
