"""A RocketMQ consumer's pops count where a native consumer's pulls do: the broker's
`pull` figures (messages and bytes out, a latency sample per receive that handed
some out), so /stats, /metrics and the heatmap see what RocketMQ clients read."""

from __future__ import annotations

from tests.broker_core.grpc_front.test_grpc_tracing import front_on, receive, send


def test_a_pop_counts_as_a_pull(broker):
    front, _clock = front_on(broker, 0.0)
    for key in ("a", "bb", "ccc"):
        send(front, key)
    assert len(receive(front)) == 3
    assert receive(front) == []  # nothing left: no sample for an empty receive
    broker.clock.t += 1
    (second,) = broker.close_seconds()
    pull = second.ops["pull"]
    assert (pull.msgs, pull.bytes) == (3, 6)
    assert pull.hist.count >= 1 and pull.errors == 0
