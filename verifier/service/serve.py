"""The two long-running commands: ``verifier serve`` and ``verifier worker``.

Process lifecycle only; what a verification does is `verifier.service.worker`'s, and what
waits is `verifier.store.queue`'s.

* ``serve``: the HTTP API (uvicorn) and, unless ``--no-worker``, verifications
  in the same process: on SQLite a bounded thread pool fed from the store, with
  APScheduler running the periodic work; on PostgreSQL a procrastinate worker
  on its own event loop in a thread.
* ``worker`` (PostgreSQL only): procrastinate workers, one on the verify queue
  with ``--concurrency`` jobs at once and one on the maintenance queue, so that
  the periodic work never waits behind long test runs.

A stop (SIGTERM, SIGINT) sets `Runtime.stopping`, then kills the test runs under
way, again every moment until the verifications have ended (one may be about to
start its tests): their results are refused by the guard, nothing is recorded,
and their jobs go back to the queue (on SQLite, the sessions stay pending and
the next start picks them up). Whatever is left after `STOP_DEADLINE_S` is
abandoned by exiting: the stalled-job sweep of the other workers recovers it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

from verifier.config import Config
from verifier.errors import ConfigError, InfrastructureError
from verifier.store.queue import MAINTENANCE_QUEUE, VERIFY_QUEUE, LocalQueue, PostgresQueue, Queue

if TYPE_CHECKING:
    from verifier.service.worker import Runtime
    from verifier.store import Store

log = logging.getLogger(
    "verifier.service"
)  # its name before the move: logging configurations select by it

# A stop ends the process within this many seconds, whatever is still running.
STOP_DEADLINE_S = 12.0
# Seconds the API is given to finish its requests on a stop.
API_GRACE_S = 4
# How often the test runs are killed again while a stop waits for the verifications.
KILL_EVERY_S = 0.2


def with_concurrency(config: Config, concurrency: int | None) -> Config:
    """The configuration of a service process, with ``--concurrency`` in force.

    As a service, ``network_isolation = "auto"`` means ``"required"``: on the command
    line a missing sandbox falls back with a note (and a passing run is inconclusive);
    a service that quietly ran every session unsandboxed would be worse, so a worker
    with no sandbox refuses to test at all (inconclusive, "tests.isolation_unavailable").
    ``"off"`` stays off: an operator who wrote it meant it.
    """
    if config.network_isolation == "auto":
        config = replace(config, network_isolation="required")
    if concurrency is None:
        return config
    if concurrency < 1:
        raise ConfigError(f"--concurrency: expected at least 1, got {concurrency}")
    return replace(config, service=replace(config.service, concurrency=concurrency))


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


class Stopper:
    """What a stop request does, once: flag, kill the test runs until told to stop
    killing, and exit anyway after the deadline."""

    def __init__(self, runtime: Runtime | None, deadline_s: float = STOP_DEADLINE_S) -> None:
        self.runtime = runtime
        self.deadline_s = deadline_s
        self.requested = threading.Event()
        self.finished = threading.Event()
        self.callbacks: list[Callable[[], None]] = []

    def request(self, signum: int | None = None) -> None:
        if self.requested.is_set():
            return
        self.requested.set()
        log.info("stop requested%s", f" (signal {signum})" if signum else "")
        if self.runtime is not None:
            self.runtime.stopping.set()
        threading.Thread(target=self._kill_until_finished, name="stop", daemon=True).start()
        for callback in self.callbacks:
            callback()

    def _kill_until_finished(self) -> None:
        from verifier._internal.sandbox.runner import kill_all

        end = time.monotonic() + self.deadline_s
        while not self.finished.wait(KILL_EVERY_S):
            kill_all()
            if time.monotonic() > end:
                log.error("stop: still running after %ss, exiting now", self.deadline_s)
                kill_all()
                os._exit(143)
        kill_all()


@contextmanager
def _signals(handler: Callable[[int], None]) -> Iterator[None]:
    """SIGTERM and SIGINT call `handler` (in the main thread) while inside."""

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        handler(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _log_to_stderr() -> None:
    """A long-running process says what it does: one line per job, stop, stalled worker."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("procrastinate.worker").addFilter(_released_quietly)


def _released_quietly(record: logging.LogRecord) -> bool:
    """procrastinate logs a job released by a stop with its traceback: the stop is no
    error, its line ("Error, to retry") is enough."""
    from verifier.service.worker import Released

    if record.exc_info and isinstance(record.exc_info[1], Released):
        record.exc_info = None
    return True


def _open_store(config: Config) -> Store:
    from verifier.store import Store

    return Store.open(config.database_url)


# --- verifier worker --------------------------------------------------------------------


def run_worker(config: Config, concurrency: int | None = None) -> int:
    """``verifier worker``: run verification jobs until stopped; returns the exit code."""
    config = with_concurrency(config, concurrency)
    if _is_sqlite(config.database_url):
        raise ConfigError(
            "verifier worker needs a PostgreSQL database (database_url): with the embedded "
            "SQLite store, `verifier serve` verifies in its own process"
        )
    from verifier.service.worker import Runtime

    _log_to_stderr()
    store = _open_store(config)
    queue = PostgresQueue(config.database_url)
    runtime = Runtime(config, store)
    stopper = Stopper(runtime)
    try:
        asyncio.run(_work(runtime, queue, stopper, own_signals=True))
    finally:
        stopper.finished.set()
        queue.close()
        store.close()
    return 0


async def _work(runtime: Runtime, queue: Queue, stopper: Stopper, *, own_signals: bool) -> None:
    """Run the verify and maintenance workers until a stop is requested."""
    from verifier.service.worker import build_app

    service = runtime.config.service
    loop = asyncio.get_running_loop()
    # procrastinate runs a synchronous task in the loop's default executor: one thread
    # per job at once, and one for the periodic work's database reads.
    loop.set_default_executor(ThreadPoolExecutor(service.concurrency + 2, thread_name_prefix="job"))
    if own_signals:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopper.request, signum)
    common: dict[str, Any] = {
        "install_signal_handlers": False,
        "update_heartbeat_interval": max(service.stalled_after_s / 3, 0.2),
        "stalled_worker_timeout": service.stalled_after_s,
        "shutdown_graceful_timeout": STOP_DEADLINE_S - 2,
        "additional_context": {},
    }
    app = build_app(runtime, queue)
    async with app.open_async():
        workers = [
            asyncio.create_task(
                app.run_worker_async(
                    queues=[VERIFY_QUEUE], concurrency=service.concurrency, name="verify", **common
                )
            ),
            asyncio.create_task(
                app.run_worker_async(
                    queues=[MAINTENANCE_QUEUE],
                    concurrency=1,
                    name="maintenance",
                    listen_notify=False,
                    fetch_job_polling_interval=1.0,
                    # one row a minute otherwise, for ever; verify jobs stay (runs name them)
                    delete_jobs="successful",
                    **common,
                )
            ),
        ]

        def cancel() -> None:
            for task in workers:
                task.cancel()

        def cancel_soon() -> None:
            loop.call_soon_threadsafe(cancel)

        stopper.callbacks.append(cancel_soon)
        if stopper.requested.is_set():
            cancel()
        results = await asyncio.gather(*workers, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
            raise result
    if not stopper.requested.is_set():
        # procrastinate stops a worker whose listener or heartbeat failed: the database
        # went away. Say so with a failing exit, for a supervisor to start it again.
        raise InfrastructureError("the worker stopped on its own: is the database reachable?")


# --- verifier serve ---------------------------------------------------------------------


def serve(
    config: Config,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    worker: bool = True,
    concurrency: int | None = None,
    app_factory: Callable[[Config, Queue | None], Any] | None = None,
) -> int:
    """``verifier serve``: the API, and the verifications unless `worker` is False."""
    import uvicorn

    config = with_concurrency(config, concurrency)
    factory = app_factory or _api_factory()
    _log_to_stderr()
    store = _open_store(config)
    background = Background.start(config, store, worker=worker)
    stopper = background.stopper

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            stopper.request(sig)
            super().handle_exit(sig, frame)

    app = factory(config, background.queue)
    server = _Server(server_config(app, host, port))
    try:
        with _signals(stopper.request):
            server.run()
    except SystemExit:  # uvicorn exits when it cannot listen, after saying why
        raise ConfigError(f"cannot serve on {host}:{port}: see uvicorn's message above") from None
    finally:
        stopper.request()
        background.stop()
        store.close()
    return 0


def server_config(app: Any, host: str, port: int) -> Any:
    """uvicorn's configuration of the API: its HTTP parser and event loop left to uvicorn,
    which takes httptools and uvloop (dependencies: compiled, a fifth less CPU a request)."""
    import uvicorn

    return uvicorn.Config(
        app, host=host, port=port, timeout_graceful_shutdown=API_GRACE_S, log_level="info"
    )


def _api_factory() -> Callable[[Config, Queue | None], Any]:
    """The API's app factory (verifier.service.api), imported when serving."""
    import importlib

    api: Any = importlib.import_module("verifier.service.api")
    factory: Callable[[Config, Queue | None], Any] = api.create_app
    return factory


class Background:
    """The verifications of a ``serve`` process, and their periodic work."""

    def __init__(self, runtime: Runtime | None, queue: Queue | None, stopper: Stopper) -> None:
        self.runtime = runtime
        self.queue = queue
        self.stopper = stopper
        self._scheduler: Any = None
        self._thread: threading.Thread | None = None

    @classmethod
    def start(cls, config: Config, store: Store, *, worker: bool) -> Background:
        from verifier.service.worker import Runtime

        runtime = Runtime(config, store) if worker else None
        stopper = Stopper(runtime)
        if _is_sqlite(config.database_url):
            if runtime is None:
                return cls(None, None, stopper)
            return cls._local(runtime, stopper)
        queue = PostgresQueue(config.database_url)
        background = cls(runtime, queue, stopper)
        if runtime is not None:
            background._thread = threading.Thread(
                target=lambda: asyncio.run(_work(runtime, queue, stopper, own_signals=False)),
                name="worker",
                daemon=True,
            )
            background._thread.start()
        return background

    @classmethod
    def _local(cls, runtime: Runtime, stopper: Stopper) -> Background:
        from apscheduler.schedulers.background import BackgroundScheduler

        from verifier.service.worker import run_local

        queue = LocalQueue(partial(run_local, runtime), runtime.config.service.concurrency)
        background = cls(runtime, queue, stopper)
        scheduler = BackgroundScheduler(timezone="UTC")
        scheduler.add_job(
            background.maintain,
            cron_trigger(runtime.config.service.maintenance_cron),
            id="maintenance",
            max_instances=1,
            coalesce=True,
        )
        background.maintain()  # the sessions left pending by the last run, at once
        scheduler.start()
        background._scheduler = scheduler
        return background

    def maintain(self) -> dict[str, int]:
        """The periodic work of the in-process mode (SQLite)."""
        from verifier.service.worker import requeue, retry_webhooks

        queue = self.queue
        assert isinstance(queue, LocalQueue) and self.runtime is not None
        if self.stopper.requested.is_set():
            return {}

        try:
            queued = requeue(self.runtime.store, queue, self.runtime.config.service)
            return {**queued, **retry_webhooks(self.runtime)}
        except Exception:
            log.exception("periodic work failed")
            return {}

    def stop(self) -> None:
        """Stop taking work, end what runs (see the module docstring), then return."""
        self.stopper.request()
        try:
            if self._scheduler is not None:
                self._scheduler.shutdown(wait=False)
            if isinstance(self.queue, LocalQueue):
                self.queue.close(wait=True)
            if self._thread is not None:
                self._thread.join()
        finally:
            self.stopper.finished.set()
            if isinstance(self.queue, PostgresQueue):
                self.queue.close()


def cron_trigger(cron: str) -> Any:
    """An APScheduler trigger for a cron expression as procrastinate reads it (croniter:
    minute hour day month day-of-week, then seconds when there is a 6th field)."""
    from apscheduler.triggers.cron import CronTrigger

    fields = cron.split()
    minute, hour, day, month, day_of_week = fields[:5]
    second = fields[5] if len(fields) > 5 else "0"
    return CronTrigger(
        second=second,
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=day_of_week,
        timezone="UTC",
    )
