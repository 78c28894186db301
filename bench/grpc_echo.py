"""The floor of a gRPC send in Python: a server that answers RocketMQ's SendMessage at once
(no store, no broker: parse the request, build the answer) and a lean grpc.aio client
closed-looping on it. bench/grpc_front.py runs it beside the broker, so the figure it
says is out of reach is measured, not guessed: what the gRPC machinery alone allows on
this host, whatever the broker does.

    python bench/grpc_echo.py serve PORT [--threads]   # grpc.aio, or a thread pool
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from broker_core.grpc_front import rocketmq_v2_pb2 as pb  # noqa: E402
from broker_core.grpc_front.handlers import SERVICE  # noqa: E402


def _answer(req: pb.SendMessageRequest, _ctx) -> pb.SendMessageResponse:
    ok = pb.Status(code=pb.OK, message="OK")
    return pb.SendMessageResponse(status=ok, entries=[
        pb.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=1)
        for m in req.messages])


def _handler(answer) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(SERVICE, {
        "SendMessage": grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=pb.SendMessageRequest.FromString,
            response_serializer=pb.SendMessageResponse.SerializeToString)})


async def _serve_aio(port: int) -> None:
    async def answer(req, ctx):
        return _answer(req, ctx)

    server = grpc.aio.server()  # as the broker's front end serves (grpc_front.service)
    server.add_generic_rpc_handlers((_handler(answer),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _serve_threads(port: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    server = grpc.server(ThreadPoolExecutor(8))
    server.add_generic_rpc_handlers((_handler(_answer),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    server.wait_for_termination()


def echo_rate(port: int, inflight: int, seconds: float) -> float:
    """Sends a second a lean grpc.aio client gets with `inflight` calls outstanding."""
    async def run() -> float:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(
                f"/{SERVICE}/SendMessage", request_serializer=pb.SendMessageRequest.SerializeToString,
                response_deserializer=pb.SendMessageResponse.FromString)
            req = pb.SendMessageRequest(messages=[pb.Message(
                topic=pb.Resource(name="bench"), body=b"x" * 128, system_properties=
                pb.SystemProperties(message_id="0" * 34, message_type=pb.NORMAL))])
            await call(req, timeout=10)  # (the connection: made before timing)
            done, t0 = 0, time.perf_counter()
            end = t0 + seconds

            async def caller() -> None:
                nonlocal done
                while time.perf_counter() < end:
                    await call(req, timeout=10)
                    done += 1

            await asyncio.gather(*(caller() for _ in range(inflight)))
            return done / (time.perf_counter() - t0)

    return asyncio.run(run())


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "serve":
        sys.exit("usage: grpc_echo.py serve PORT [--threads]")
    if "--threads" in sys.argv:
        _serve_threads(int(sys.argv[2]))
    else:
        asyncio.run(_serve_aio(int(sys.argv[2])))
