"""Run one broker process: TCP server, HTTP server, the per-second tick that
feeds the metrics log, and a clean shutdown on SIGTERM or SIGINT (stop
accepting, finish in-flight requests, flush, checkpoint, close the log).
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
from broker_core.server import tx_ops
from broker_core.server.broker import Broker
from broker_core.server.config import BrokerConfig
from broker_core.server.delay_service import INTERVAL_S as DELAY_INTERVAL_S
from broker_core.server.http import start_http
from broker_core.server.tcp import reap_slow_clients, start_tcp
from broker_core.store.config import SYNCFS_ABOVE
from heatmap import layout

log = logging.getLogger("floodgate.broker")
TICK_SPREAD_S = (0.1, 0.9)  # where in each second the tick's heavy half may run (tick_phase)
TICK_SLOTS = 11  # a prime: ports k apart (k < 11) take distinct slots


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


def tick_phase(port: int) -> float:
    """Seconds after each boundary this broker does the tick's heavy half. Brokers that
    share a host (make demo: 8 on 2 cores) all ticked at the boundary: ~10 ms of each
    loop at the same instant held every send on the host for 20-50 ms (the demo's
    fault-free masters read SLOW). Spread by the data port modulo a prime: up to
    TICK_SLOTS brokers a launcher starts (ports 1, 2 or 3 apart) each get a slot of
    their own; one broker a host (production) only takes its snapshot later in the second."""
    first, last = TICK_SPREAD_S
    return first + (port % TICK_SLOTS) / TICK_SLOTS * (last - first)


async def _tick(broker: Broker, writer: MetricsLogWriter) -> None:
    loop = asyncio.get_running_loop()
    rolling: asyncio.Future | None = None
    saving: asyncio.Future | None = None
    phase = tick_phase(broker.config.port)
    while True:
        now = time.time()
        await asyncio.sleep(1.0 - (now % 1.0) + 0.001)  # just after each second boundary
        closed = broker.close_seconds()
        refreshed = False
        try:
            await asyncio.sleep(phase)
            for _step in broker.refresh_steps():  # sends and pulls served between steps
                await asyncio.sleep(0)
            refreshed = True
        finally:  # stopped in between: the seconds closed still reach the metrics log
            if not refreshed:
                broker.refresh()
            if closed:
                writer.add(broker.snapshot(), closed)
        if saving is None or saving.done():
            save = broker.save_tables()
            if save is not None:
                saving = loop.run_in_executor(None, save)
        if closed and writer.due(time.time()) and (rolling is None or rolling.done()):
            # Off the loop: converting two minutes of rows, the Parquet write and two
            # fsyncs took 50 ms and more under load, and held every send meanwhile.
            rolling = loop.run_in_executor(None, writer.roll, writer.take())


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


async def _deliver_delayed(broker) -> None:
    """Delayed messages to their queues when due (server.delay_service), every 50 ms."""
    while True:
        await asyncio.sleep(DELAY_INTERVAL_S)
        if broker.delivers_delayed():
            try:
                broker.delay.run_once()
            except Exception:  # noqa: BLE001 - logged; delivery goes on in 50 ms
                log.exception("delayed delivery")


def ports_in_use(config: BrokerConfig) -> list[str]:
    """The broker's ports something else holds (checked by binding each, as the servers
    will: SO_REUSEADDR, so a port in TIME_WAIT after a restart counts as free)."""
    named = [("data port", config.port), ("HTTP port", config.http_port)]
    if config.ha_port:
        named.append(("HA port", config.ha_port))
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
        from broker_core.ha.runtime import start_ha

        try:
            ha = await start_ha(broker)
        except BaseException:
            tcp.close()
            await http.cleanup()
            broker.close()
            raise
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
    tasks = [
        asyncio.ensure_future(_tick(broker, writer)),
        asyncio.ensure_future(reap_slow_clients(broker)),
        asyncio.ensure_future(broker.loop_lag.run()),
        asyncio.ensure_future(_deliver_delayed(broker)),
        asyncio.ensure_future(tx_ops.check_loop(broker)),
    ]
    try:
        await stop.wait()
    finally:
        log.info("stopping broker=%s", config.name)
        broker.serving = False
        if ha is not None:
            await ha.close()
        tcp.close()
        await _finish_requests(broker, 5.0)
        for conn in list(broker.connections):
            if conn.transport is not None:
                conn.transport.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # the second under way too: what a broker served just before it stopped (a
        # restart in an incident) is the log's to keep; a restart within the same
        # second writes a second row for it, and readers add rows up
        closed = broker.tick(final=True)
        writer.add(broker.snapshot(), closed)
        writer.roll()
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
