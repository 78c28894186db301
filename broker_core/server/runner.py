"""Run one broker process: TCP server, HTTP server, its housekeeping (the tick that
feeds the metrics log and the timed passes: `server.housekeeping`), and a clean
shutdown on SIGTERM or SIGINT (stop accepting, finish in-flight requests, flush,
checkpoint, close the log).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import resource
import signal
import socket
import time

from broker_core.errors import BrokerError
from broker_core.observe.metrics_log import MetricsLogWriter
from broker_core.server.broker import Broker
from broker_core.server.config import BrokerConfig
from broker_core.server.housekeeping import Housekeeping
from broker_core.server.http import start_http
from broker_core.server.tcp import start_tcp
from broker_core.store.config import SYNCFS_ABOVE
from heatmap import layout

log = logging.getLogger("floodgate.broker")


def raise_nofile_limit() -> int:
    """Lift the soft open-files limit to the hard one: a broker holds many sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            return hard
    return soft


def queue_mapping_budget() -> int:
    """Queues that may stay mapped: a quarter of the kernel's mappings per process
    (vm.max_map_count; segments, index files and the interpreter need the rest). A
    mapped queue holds no descriptor (store.libc_map), so the open-files limit is no
    bound on it."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            max_maps = int(f.read())
    except (OSError, ValueError):
        max_maps = 65530  # the kernel's default
    return max(SYNCFS_ABOVE, max_maps // 4)


async def _finish_requests(broker: Broker, timeout: float) -> None:
    """Answer what is in flight before closing: held pulls now (with what there is),
    control requests and writes waiting on a flush, a fault or the slaves' acks."""
    broker.pulls.answer_all()
    deadline = time.monotonic() + timeout
    tasks = [t for conn in broker.connections for t in conn.tasks]
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
    while broker.write_path.inflight and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def ports_in_use(config: BrokerConfig) -> list[str]:
    """The broker's ports something else holds (checked by binding each, as the servers
    will: SO_REUSEADDR, so a port in TIME_WAIT after a restart counts as free)."""
    named = [("data port", config.port), ("HTTP port", config.http_port)]
    if config.ha_port:
        named.append(("HA port", config.ha_port))
    if config.raft_port:
        named.append(("Raft port", config.raft_port))
    if config.grpc_port:
        named.append(("gRPC port", config.grpc_port))
    taken = []
    for what, port in named:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((config.bind, port))
            except OSError:
                taken.append(f"{what} {port}")
    return taken


async def serve(config: BrokerConfig, stop: asyncio.Event | None = None) -> None:
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    taken = ports_in_use(config)
    if taken:  # before the store is opened: a refused start must not look like a crash
        raise BrokerError(f"{', '.join(taken)} in use on {config.bind}: another broker "
                          f"there? nothing was opened")
    nofile = raise_nofile_limit()
    if "consumequeue_max_mapped" not in config.store_extra:
        config.store_extra["consumequeue_max_mapped"] = queue_mapping_budget()
    broker = Broker(config)
    rec = broker.store.recovery.to_dict()
    writer = MetricsLogWriter(
        config.metrics_dir or config.data_dir / "metrics",
        config.cluster,
        config.name,
        config.metrics_roll_s,
    )
    tcp = await start_tcp(broker)
    http = await start_http(broker)
    ha = None
    if config.group:
        if config.consensus == "raft":
            from broker_core.raft.runtime import start_raft as start_ha
        else:
            from broker_core.ha.runtime import start_ha

        try:
            ha = await start_ha(broker)
        except BaseException:
            tcp.close()
            await http.cleanup()
            broker.close()
            raise
    grpc_front = None
    if config.grpc_port:
        from broker_core.grpc_front.service import GrpcFront

        grpc_front = GrpcFront(broker, config.bind, config.grpc_port,
                               routes_file=config.grpc_routes,
                               tls=config if config.tls_cert is not None else None)
        await grpc_front.start()
    writer.warm()  # before the freeze: what the first roll loads is start-up's too
    layout.warm()  # the latency histograms' bucket tables, 6 MiB
    broker.serving = True
    # What start-up made (modules, the store's tables) lives as long as the process: a
    # full collection need not walk it. Without this each one held the loop 20-30 ms.
    gc.collect()
    gc.freeze()
    log.info(
        "serving broker=%s tcp=%s http=%s flush=%s nofile=%d recovery=%s",
        config.name,
        config.addr,
        config.http_addr,
        config.flush,
        nofile,
        rec,
    )
    housekeeping = Housekeeping(broker, writer)
    housekeeping.start()
    try:
        await stop.wait()
    finally:
        log.info("stopping broker=%s", config.name)
        broker.serving = False
        if grpc_front is not None:
            await grpc_front.stop()
        if ha is not None:
            await ha.close()
        tcp.close()
        await _finish_requests(broker, 5.0)
        for conn in list(broker.connections):
            if conn.transport is not None:
                conn.transport.close()
        # the second under way too: what a broker served just before it stopped (a
        # restart in an incident) is the log's to keep; a restart within the same
        # second writes a second row for it, and readers add rows up
        await housekeeping.stop()
        broker.close()
        await http.cleanup()
        log.info("stopped broker=%s cleanly", config.name)


def run(config: BrokerConfig) -> None:
    try:
        import uvloop  # faster event loop where installed
    except ImportError:
        asyncio.run(serve(config))
    else:
        uvloop.run(serve(config))
