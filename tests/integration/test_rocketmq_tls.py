"""RocketMQ's own client over TLS: a broker whose ports speak TLS (`--tls-cert`) serves
its gRPC port with the same certificate; the official client with `tls_enable=True`,
trusting the broker's CA, sends and receives through it; a plaintext client is refused
and stores nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from broker_core.acl.tls import make_certs
from tests.integration.rocketmq_client_calls import _get, grpc_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CLIENT = textwrap.dedent("""
    import json, sys
    from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message,
                          Producer, SimpleConsumer)
    config = ClientConfiguration(sys.argv[1], Credentials(), request_timeout=5)
    producer = Producer(config, ("secure",), tls_enable=True)
    producer.startup()
    for i in range(3):
        m = Message(); m.topic = "secure"; m.body = f"sealed {i}".encode()
        producer.send(m)
    producer.shutdown()
    consumer = SimpleConsumer(config, "auditors", {"secure": FilterExpression("*")},
                              await_duration=0, tls_enable=True)
    consumer.startup()
    got = []
    for _ in range(200):
        for m in consumer.receive(16, 15):
            got.append(m.body.decode()); consumer.ack(m)
        if len(got) >= 3:
            break
    consumer.shutdown()
    print(json.dumps(sorted(got)))
""")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls"), ["127.0.0.1", "localhost"])


@pytest.fixture(scope="module")
def broker(tmp_path_factory, certs):
    yield from grpc_broker(tmp_path_factory, "--tls-cert", str(certs["broker"]),
                           "--tls-key", str(certs["broker_key"]), ca=certs["ca"])


def test_the_official_client_sends_and_receives_over_tls(broker, certs, tmp_path):
    # gRPC's own default roots (what the client's `ssl_channel_credentials()` trusts)
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(certs["ca"]),
           "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", CLIENT, broker["grpc"]], env=env,
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [f"sealed {i}" for i in range(3)]


def test_a_plaintext_client_is_refused_and_stores_nothing(broker):
    import grpc

    from broker_core.grpc_front import rocketmq_v2_pb2 as pb

    before = _get_stats(broker)
    with grpc.insecure_channel(broker["grpc"]) as channel:
        send = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                                   request_serializer=pb.SendMessageRequest.SerializeToString,
                                   response_deserializer=pb.SendMessageResponse.FromString)
        with pytest.raises(grpc.RpcError) as refused:
            send(pb.SendMessageRequest(messages=[pb.Message(
                topic=pb.Resource(name="secure"), body=b"in the clear")]), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert _get_stats(broker) == before


def _get_stats(broker) -> int:
    return _get(broker["stats"], broker["ssl"])["commitlog"]["max_offset"]
