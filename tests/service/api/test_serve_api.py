"""`verifier serve` with this API, as a user runs it: a token made by `verifier token
create`, a report posted over HTTP, verified in the background, and the verdict in
`GET /v1/sessions/{id}`, `/v1/stats` and `/metrics`; on SQLite (verified in the serve
process's pool) and on PostgreSQL (through the procrastinate queue)."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gitrepo import GitRepo
from tests.support.service import (
    PYTHON,
    QUICK,
    ROOT,
    environment,
    logs_of,
    sessions,
    wait_for,
    write_config,
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_posted_report_is_verified_in_the_background_and_shows_in_stats_and_metrics(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    url = db_url
    config = write_config(tmp_path, repo, QUICK, database_url=url)
    env = environment(config, url)
    tokens = {}
    for scope in ("ingest", "read"):
        made = subprocess.run(
            [PYTHON, "-m", "verifier", "token", "create", "--scope", scope, "--name", scope],
            env=env, capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
        )  # fmt: skip
        tokens[scope] = {"Authorization": f"Bearer {made.stdout.strip()}"}
    port, log = free_port(), tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [PYTHON, "-m", "verifier", "serve", "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
        )  # fmt: skip
    try:
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                return httpx.get(f"{base}/readyz", timeout=5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for("serve ready", ready)
        (report,) = sessions(repo, 1)
        posted = httpx.post(f"{base}/v1/sessions", content=report, headers=tokens["ingest"])
        assert posted.status_code == 202, posted.text
        where = f"{base}{posted.json()['url']}"

        def verdict() -> str | None:
            status: str = httpx.get(where, headers=tokens["read"]).json()["delivery_status"]
            return None if status == "pending" else status

        assert wait_for("a verdict", verdict) == "delivered", logs_of(tmp_path)
        shown = httpx.get(where, headers=tokens["read"]).json()
        assert [run["delivery_status"] for run in shown["runs"]] == ["delivered"]
        assert shown["checks"]["tests"]["status"] == "pass"
        stats = httpx.get(f"{base}/v1/stats", headers=tokens["read"]).json()
        assert (stats["total"], stats["done"], stats["delivered"]) == (1, 1, 1)
        metrics = httpx.get(f"{base}/metrics", headers=tokens["read"]).text
        verdicts = {
            s.labels["verdict"]: s.value
            for family in text_string_to_metric_families(metrics)
            for s in family.samples
            if s.name == "verifier_verdicts_total"
        }
        assert verdicts == {"delivered": 1, "not_delivered": 0, "inconclusive": 0}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, logs_of(tmp_path)
