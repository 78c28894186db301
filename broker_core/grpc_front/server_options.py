"""The gRPC server's channel arguments (grpc_front.service), and what a client shares."""

from __future__ import annotations

# HTTP/2's BDP probe pings a peer on the data it receives, to size the window for bulk
# transfers. RocketMQ's calls are small: in `make demo` at 10 msgs/s the pings cost the
# brokers and the demo's RocketMQ application 20-30 ms of CPU a second together, an
# eighth of everything the demo ran (bench/README.md). Off, windows stay at gRPC's
# defaults, which a body at the broker's limit crosses in a few round trips more.
NO_BDP_PROBE = ("grpc.http2.bdp_probe", 0)
# A request's room past the broker's body limit: its properties, topic and the other
# messages of a batch (the native port's frame has as much: protocol.MAX_FRAME)
REQUEST_ROOM = 4 << 20


def server_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """gRPC refuses a request over 4 MiB unless told, which is below a body at the
    broker's own limit (the one its Settings give clients) with its properties: such a
    send was answered RESOURCE_EXHAUSTED before the broker saw it, not by the limit's
    name. Past this room the broker's own check answers, MESSAGE_BODY_TOO_LARGE."""
    return [NO_BDP_PROBE, ("grpc.max_receive_message_length", max_message_bytes + REQUEST_ROOM)]
