"""Benchmark: posting reports to the HTTP API against the driver writing the same rows.

The data: the ingest benchmark's 1,000 reports of 17 KB (`store_ingest.report_sets`).
The subject: `POST /v1/sessions` of each report's bytes to ONE server process,
``verifier serve --no-worker`` (on PostgreSQL with its `PostgresQueue`, so each new
session's job is written in the transaction that stores it), on a SQLite file and
on a PostgreSQL database; every answer must be 202. The reports are posted by a
client in a process of its own (this module run as ``python -m
tests.benchmarks.api_ingest``), as a harness posts from its own process: over one
keep-alive connection (one report after the other), and over `CONNECTIONS`
connections at once, as a fleet of harnesses posts. The whole request is timed
(HTTP, the token check, parsing the report, storing it), and the server's own CPU
time over the posts (``/proc/PID/stat``) is divided by the reports: the CPU each
post costs the server, the figure that travels from one machine's load to another.
The client sets TCP_NODELAY and sends each request in one write, as a harness
posting reports should: otherwise each request waits for a delayed ACK, 40 ms on
Linux, whatever the server does.

The same posts from an httpx client in the benchmark's own process, to `create_app`
under uvicorn in a thread of that process, are kept as a row for history (the
figure of the earlier measurements): there the client's CPU, on the same cores and
under the same GIL, is counted against the server.

Two raw operations, through the driver alone with the store's pragmas: the same
rows in one transaction (the ingest benchmark's: one commit for 1,000 reports),
and the same rows one transaction per report, which is the floor of a client that
posts one report after the other and is answered only once its report is on disk
(``synchronous=FULL``; PostgreSQL's ``synchronous_commit`` as the server has it):
a commit, so a flush of the log to the disk, per report. Target: 300 reports/s or
more through the API on SQLite, on one server process, with concurrent clients.
"""

from __future__ import annotations

import http.client
import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tests.benchmarks.timing import Result, Row

if TYPE_CHECKING:
    from verifier.contract.report import Report

TARGET_PER_S = 300
# Connections posting at once in the concurrent rows (a fleet of harnesses).
CONNECTIONS = 4
ROOT = Path(__file__).resolve().parents[2]


def _cpu_of(pid: int) -> float:
    """The CPU seconds (user and system) a process has used, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _write_set(path: Path, raws: list[bytes]) -> Path:
    """A set of reports as length-prefixed records, for the client process."""
    with path.open("wb") as out:
        for raw in raws:
            out.write(struct.pack(">I", len(raw)) + raw)
    return path


def _read_set(path: Path) -> list[bytes]:
    data, raws, at = path.read_bytes(), [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        raws.append(data[at + 4 : at + 4 + size])
        at += 4 + size
    return raws


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(tmp: Path, url: str, name: str) -> Iterator[tuple[int, int]]:
    """``verifier serve --no-worker`` on `url`, in a process of its own: (pid, port)."""
    config = tmp / f"{name}.toml"
    config.write_text(f'[verifier]\ndatabase_url = "{url}"\n')
    port = _free_port()
    verifier = Path(sys.executable).parent / "verifier"
    with (tmp / f"{name}.log").open("wb") as log:
        command = [str(verifier), "serve", "--no-worker", "--port", str(port)]
        server = subprocess.Popen([*command, "--config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"verifier serve did not start: see {tmp / name}.log"
                    ) from None
                time.sleep(0.05)
        yield server.pid, port
    finally:
        server.terminate()
        server.wait(30)


def through_server(
    stack: ExitStack, tmp: Path, url: str, name: str, connections: int
) -> Callable[[Path], float]:
    """Post a set file to a `served` process from a client process; returns the server's
    CPU seconds over the posts."""
    from tests.support.api import make_tokens

    token = make_tokens(url)["ingest"]
    pid, port = stack.enter_context(served(tmp, url, name))

    def post(reports: Path) -> float:
        client = subprocess.Popen(
            [sys.executable, "-m", "tests.benchmarks.api_ingest", str(port), str(connections)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "VERIFIER_BENCH_TOKEN": token},
            text=True,
        )
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write(f"{reports}\n")
        client.stdin.flush()
        assert client.stdout.readline() == "ready\n", "the client did not start"
        before = _cpu_of(pid)
        client.stdin.write("go\n")
        client.stdin.flush()
        answer = client.stdout.readline()
        after = _cpu_of(pid)
        client.wait(30)
        assert answer.startswith("ok"), answer
        return after - before

    return post


def in_process(stack: ExitStack, url: str) -> Callable[[Path], float]:
    """The earlier measurement: an httpx client in this process posting to `create_app`
    under uvicorn in a thread of it; returns this process's CPU (server and client)."""
    import httpx

    from tests.support.api import bearer, make_config, make_tokens, serve
    from verifier.service.api import create_app

    token = make_tokens(url)["ingest"]
    base = stack.enter_context(serve(create_app(make_config(url), None)))
    transport = httpx.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    client = stack.enter_context(
        httpx.Client(base_url=base, headers=bearer(token), timeout=60, transport=transport)
    )

    def post(reports: Path) -> float:
        raws = _read_set(reports)
        before = _self_cpu()
        for raw in raws:
            response = client.post("/v1/sessions", content=raw)
            assert response.status_code == 202, response.text
        return _self_cpu() - before

    return post


def _raw(
    write: Callable[[list[Report]], None], parsed: dict[Path, list[Report]]
) -> Callable[[Path], float]:
    def run(reports: Path) -> float:
        before = _self_cpu()
        write(parsed[reports])
        return _self_cpu() - before

    return run


def run(tmp: Path, repeat: int) -> Result:
    from tests.benchmarks import store_ingest
    from verifier.store import Store

    n = store_ingest.REPORTS
    sets = store_ingest.report_sets(repeat + 1)  # the warm-up posts one set too
    files = [_write_set(tmp / f"set-{k}.bin", [r.raw for r in s]) for k, s in enumerate(sets)]
    parsed: dict[Path, list[Report]] = dict(zip(files, sets, strict=True))
    targets: dict[str, Callable[[Path], float]] = {}
    with ExitStack() as stack:
        for conns in (1, CONNECTIONS):
            url = f"sqlite:///{tmp / f'api-{conns}.sqlite3'}"
            targets[f"sqlite api {conns}"] = through_server(
                stack, tmp, url, f"sqlite-{conns}", conns
            )
        targets["sqlite in process"] = in_process(stack, f"sqlite:///{tmp / 'in-process.sqlite3'}")
        for each in (False, True):
            raw_path = tmp / f"raw-{each}.sqlite3"
            Store.open(f"sqlite:///{raw_path}").close()
            write = store_ingest.raw_sqlite(raw_path, each=each)
            targets[f"sqlite raw{' each' * each}"] = _raw(write, parsed)
        postgres = store_ingest._postgres_databases(stack, 4)
        if postgres is not None:
            for k, conns in enumerate((1, CONNECTIONS)):
                targets[f"postgres api {conns}"] = through_server(
                    stack, tmp, postgres[k], f"postgres-{conns}", conns
                )
            for each in (False, True):
                write = store_ingest.raw_postgres(postgres[2 + each], stack, each=each)
                targets[f"postgres raw{' each' * each}"] = _raw(write, parsed)
        wall, cpu = _measure(targets, files, repeat)

    rows: list[Row] = []
    facts: dict[str, str] = {}
    for engine, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        if f"{engine} api 1" not in wall:
            facts["postgresql"] = f"not measured: no server at {store_ingest.POSTGRES_URL}"
            continue
        each = wall[f"{engine} raw each"]
        for conns in (CONNECTIONS, 1):
            key = f"{engine} api {conns}"
            subject = (
                f"POST /v1/sessions x {n:,}, {name}, one server process, {conns} client "
                f"connection{'s' * (conns > 1)} ({n / wall[key]:,.0f}/s, server CPU "
                f"{1000 * cpu[key] / n:.2f} ms a post)"
            )
            target: tuple[str, float | None] = (
                (f">= {TARGET_PER_S}/s", n / TARGET_PER_S)
                if engine == "sqlite" and conns == CONNECTIONS
                else ("-", None)
            )
            rows.append(
                Row(
                    "api",
                    subject,
                    wall[key],
                    f"the same rows, one transaction per report ({n / each:,.0f}/s)",
                    each,
                    *target,
                )
            )
        if engine == "sqlite":
            key = "sqlite in process"
            rows.append(
                Row(
                    "api",
                    f"the same, 1 connection, the httpx client in the server's process "
                    f"(history: {n / wall[key]:,.0f}/s, CPU of both {1000 * cpu[key] / n:.2f} ms "
                    "a post)",
                    wall[key],
                    "the same rows, one transaction per report",
                    each,
                )
            )
        rows.append(
            Row(
                "api",
                f"POST /v1/sessions x {n:,}, {name}, {CONNECTIONS} connections",
                wall[f"{engine} api {CONNECTIONS}"],
                "executemany of the same rows, one transaction",
                wall[f"{engine} raw"],
            )
        )
    facts["api, rates"] = ", ".join(f"{name} {n / s:,.0f}/s" for name, s in wall.items())
    facts["api, server CPU a post"] = ", ".join(
        f"{name} {1000 * cpu[name] / n:.2f} ms" for name in wall if " api " in name
    )
    return Result(rows, facts)


def _measure(
    targets: dict[str, Callable[[Path], float]], files: list[Path], repeat: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall time and CPU of each target, one warm-up then `repeat` turns, each call
    on the next set (so every report is new to its store)."""
    import statistics

    walls: dict[str, list[float]] = {name: [] for name in targets}
    cpus: dict[str, list[float]] = {name: [] for name in targets}
    for turn, reports in enumerate(files):
        for name, target in targets.items():
            start = time.perf_counter()
            cpu = target(reports)
            if turn:  # the first set warms up
                walls[name].append(time.perf_counter() - start)
                cpus[name].append(cpu)
    assert len(files) == repeat + 1
    return (
        {name: statistics.median(t) for name, t in walls.items()},
        {name: statistics.median(t) for name, t in cpus.items()},
    )


def _client(port: int, connections: int) -> None:
    """The client process: read the set file named on stdin, say ``ready``, post on
    ``go`` over `connections` keep-alive connections, then say ``ok`` (or what failed)."""
    token = os.environ["VERIFIER_BENCH_TOKEN"]
    raws = _read_set(Path(sys.stdin.readline().strip()))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    pending = iter(raws)
    lock = threading.Lock()
    failures: list[str] = []

    def post() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.connect()
        assert connection.sock is not None
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while not failures:
            with lock:
                raw = next(pending, None)
            if raw is None:
                break
            # bytes: http.client sends the headers and the body in one write.
            connection.request("POST", "/v1/sessions", body=raw, headers=headers)
            response = connection.getresponse()
            body = response.read()
            if response.status != 202:
                failures.append(f"{response.status} {body[:300]!r}")
        connection.close()

    threads = [threading.Thread(target=post) for _ in range(connections)]
    print("ready", flush=True)
    sys.stdin.readline()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"failed: {failures[0]}" if failures else "ok", flush=True)


if __name__ == "__main__":
    _client(int(sys.argv[1]), int(sys.argv[2]))
