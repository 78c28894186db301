"""The gRPC service's dispatch: each RPC's handler, its request parsed leniently (bytes
that are not its message answered INVALID_ARGUMENT, nothing done), checked against the
broker's ACL (grpc_front.access) before it runs; an RPC not served, UNIMPLEMENTED by
name."""

from __future__ import annotations

import grpc
from google.protobuf.message import DecodeError

from broker_core.grpc_front import rocketmq_v2_pb2 as pb

SERVICE = "apache.rocketmq.v2.MessagingService"


class Malformed:
    """A request whose bytes are not the message the RPC takes."""

    def __init__(self, why: str) -> None:
        self.why = why


def _lenient(cls):
    def parse(raw: bytes):
        try:
            return cls.FromString(raw)
        except DecodeError as exc:
            return Malformed(f"not a {cls.__name__}: {exc}")
    return parse


class Handlers(grpc.GenericRpcHandler):
    """Each served RPC: (unary or stream, the front end's method, its request, its
    answer: a refusal is the answer with the refusing status)."""

    def __init__(self, front) -> None:
        f = front
        table = {
            "QueryRoute": ("unary", f.query_route, pb.QueryRouteRequest, pb.QueryRouteResponse),
            "Heartbeat": ("unary", f.heartbeat, pb.HeartbeatRequest, pb.HeartbeatResponse),
            "SendMessage": ("unary", f.send_message, pb.SendMessageRequest,
                            pb.SendMessageResponse),
            "ReceiveMessage": ("stream", f.receive_message, pb.ReceiveMessageRequest,
                               pb.ReceiveMessageResponse),
            "AckMessage": ("unary", f.ack_message, pb.AckMessageRequest, pb.AckMessageResponse),
            "ChangeInvisibleDuration": ("unary", f.change_invisible,
                                        pb.ChangeInvisibleDurationRequest,
                                        pb.ChangeInvisibleDurationResponse),
            "EndTransaction": ("unary", f.tx.end, pb.EndTransactionRequest,
                               pb.EndTransactionResponse),
            "QueryAssignment": ("unary", f.query_assignment, pb.QueryAssignmentRequest,
                                pb.QueryAssignmentResponse),
            "ForwardMessageToDeadLetterQueue": (
                "unary", f.forward_to_dlq, pb.ForwardMessageToDeadLetterQueueRequest,
                pb.ForwardMessageToDeadLetterQueueResponse),
            "NotifyClientTermination": ("unary", f.notify_termination,
                                        pb.NotifyClientTerminationRequest,
                                        pb.NotifyClientTerminationResponse),
        }
        guard, woke = f.guard, f.broker.woke
        self.methods = {name: _handler(name, guard, woke, *row) for name, row in table.items()}

        async def telemetry(requests, ctx):
            refused = guard.refusal("Telemetry", None, ctx)
            if refused is not None:
                yield pb.TelemetryCommand(status=refused)
                return
            async for answer in f.telemetry(requests, ctx):
                yield answer

        self.methods["Telemetry"] = grpc.stream_stream_rpc_method_handler(
            telemetry, _lenient(pb.TelemetryCommand), _serialize)

    def service(self, details):
        service, _, name = details.method.lstrip("/").partition("/")
        handler = self.methods.get(name) if service == SERVICE else None
        if handler is not None:
            return handler
        async def unimplemented(_request, ctx):
            await ctx.abort(grpc.StatusCode.UNIMPLEMENTED,
                            f"{details.method}: not served by floodgate's RocketMQ front end "
                            "(served: " + ", ".join(sorted(self.methods)) + ")")

        return grpc.unary_unary_rpc_method_handler(unimplemented)


def _handler(name: str, guard, woke, kind: str, fn, request, answer):
    async def refusal(req, ctx):
        """Why the request is not served (None: it is): bytes not its message abort
        INVALID_ARGUMENT; what the ACL refuses is answered with its status. Each request
        is work, as a native client's read is (`Broker.woke`): the broker's tick runs
        while they come, closing their seconds and taking the snapshot."""
        woke()
        if isinstance(req, Malformed):
            await ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name}: {req.why}")
        return guard.refusal(name, req, ctx)

    if kind == "unary":
        async def unary(req, ctx):
            refused = await refusal(req, ctx)
            return answer(status=refused) if refused is not None else await fn(req, ctx)
        return grpc.unary_unary_rpc_method_handler(unary, _lenient(request), _serialize)

    async def stream(req, ctx):
        refused = await refusal(req, ctx)
        if refused is not None:
            yield answer(status=refused)
            return
        async for out in fn(req, ctx):
            yield out
    return grpc.unary_stream_rpc_method_handler(stream, _lenient(request), _serialize)


def _serialize(message) -> bytes:
    return message.SerializeToString()
