"""RocketMQ's own client on a cluster with access control (`cluster up --acl --grpc`): a
user made with `floodgate acl user add --rocketmq` signs with the access secret `floodgate
acl rocketmq-secret` prints; the rules allow or refuse its RPCs as the native port's do;
an unsigned request, a wrong secret, a user without a RocketMQ secret and a stale date
are refused UNAUTHORIZED, and nothing is stored."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from console.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cluster(cluster_factory, monkeypatch, tmp_path):
    monkeypatch.setenv("FLOODGATE_CREDENTIALS", "")
    monkeypatch.setenv("FLOODGATE_ADMIN_TOKEN_FILE", "")
    monkeypatch.setenv("HOME", str(tmp_path))  # (RocketMQ's client logs under ~/logs)
    return cluster_factory(1, acl=True, grpc=True)


def floodgate(capsys, *argv) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _user(capsys, c, tmp_path, name: str, rocketmq: bool) -> str:
    """Make `name`, allowed pub and sub on orders, sub on audit and on group billing;
    its RocketMQ access secret."""
    admin, path, creds = str(c.credentials), str(c.path), tmp_path / f"{name}.toml"
    floodgate(capsys, "--credentials", admin, "acl", "user", "add", "--cluster", path,
              "--name", name, "--write-credentials", str(creds),
              *(["--rocketmq"] if rocketmq else []))
    for resource, actions in (("topic:orders", "pub,sub"), ("topic:audit", "sub"),
                              ("group:billing", "sub")):
        floodgate(capsys, "--credentials", admin, "acl", "allow", "--cluster", path,
                  "--user", name, "--resource", resource, "--actions", actions)
    out = floodgate(capsys, "acl", "rocketmq-secret", "--credentials", str(creds))
    return out.split("access secret ")[1].strip()


def test_a_signed_client_is_held_to_its_users_rules(cluster, capsys, tmp_path):
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        Message,
        Producer,
        SimpleConsumer,
    )
    from rocketmq.v5.exception import ForbiddenException

    secret = _user(capsys, cluster, tmp_path, "shop", rocketmq=True)
    config = ClientConfiguration(cluster.file.brokers[0].grpc, Credentials("shop", secret),
                                 request_timeout=5)
    producer = Producer(config, ("orders", "audit"))
    producer.startup()
    try:
        m = Message()
        m.topic, m.body = "orders", b"signed"
        sent = producer.send(m)
        refused = Message()
        refused.topic, refused.body = "audit", b"read-only for shop"
        with pytest.raises(ForbiddenException, match="may not pub on topic:audit"):
            producer.send(refused)  # routed (sub), not sent (no pub): the rule's reason
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, "billing", {"orders": FilterExpression("*")},
                              await_duration=0)
    consumer.startup()
    try:
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = consumer.receive(16, 15)
        assert [g.body for g in got] == [b"signed"]
        assert got[0].message_id == sent.message_id
        consumer.ack(got[0])
    finally:
        consumer.shutdown()


def _signed(user: str, secret: str, at: time.struct_time) -> list[tuple[str, str]]:
    """RocketMQ 5's request signature (what its clients send), made here."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", at)
    sig = hmac.new(secret.encode(), stamp.encode(), hashlib.sha1).hexdigest()
    return [("x-mq-date-time", stamp), ("authorization", f"MQv2-HMAC-SHA1 Credential={user}, "
             f"SignedHeaders=x-mq-date-time, Signature={sig}")]


def test_unsigned_wrongly_signed_and_stale_requests_are_refused(cluster, capsys, tmp_path):
    import grpc

    from broker_core.grpc_front import rocketmq_v2_pb2 as pb

    secret = _user(capsys, cluster, tmp_path, "shop", rocketmq=True)
    plain = _user(capsys, cluster, tmp_path, "legacy", rocketmq=False)
    now, stale = time.gmtime(), time.gmtime(time.time() - 3600)
    request = pb.SendMessageRequest(messages=[pb.Message(
        topic=pb.Resource(name="orders"), body=b"x",
        system_properties=pb.SystemProperties(message_id="m1"))])
    with grpc.insecure_channel(cluster.file.brokers[0].grpc) as channel:
        send = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                                   request_serializer=pb.SendMessageRequest.SerializeToString,
                                   response_deserializer=pb.SendMessageResponse.FromString)
        for metadata, says in ((None, "sign requests"),
                               (_signed("shop", "not-the-secret", now), "failed"),
                               (_signed("nobody", secret, now), "failed"),
                               (_signed("legacy", plain, now), "failed"),
                               (_signed("shop", secret, stale), "min off")):
            answer = send(request, metadata=metadata, timeout=5)
            assert answer.status.code == pb.UNAUTHORIZED, (metadata, answer.status)
            assert says in answer.status.message
        stored = send(request, metadata=_signed("shop", secret, now), timeout=5)
        assert stored.status.code == pb.OK, stored.status
        assert stored.entries[0].offset == 0  # the first message: none refused was stored
