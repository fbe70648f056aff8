"""`verifier serve` serves the dashboard at `/`, as the README tells a user to open it:
a read token from `verifier token create`, the login page, the overview."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.dashboard_seed import seed
from tests.support.pages import by_id
from tests.support.paths import ROOT

PATIENCE_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_verifier_serve_answers_the_dashboard_behind_a_read_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'serve.sqlite3'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIFIER_")}
    env.update(VERIFIER_DATABASE_URL=url, VERIFIER_CONFIG=str(tmp_path / "none.toml"))
    (tmp_path / "none.toml").write_text("")
    verifier = [sys.executable, "-m", "verifier"]
    made = subprocess.run(
        [*verifier, "token", "create", "--scope", "read", "--name", "dashboard"],
        env=env, capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    )  # fmt: skip
    token = made.stdout.strip()
    seed(url)
    port, log = free_port(), tmp_path / "serve.log"
    with log.open("wb") as out:
        # --no-worker: the seeded pending session stays pending, as the page must show.
        proc = subprocess.Popen(
            [*verifier, "serve", "--no-worker", "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PATIENCE_S
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        with httpx.Client(base_url=base) as client:
            first = client.get("/")
            assert first.status_code == 303 and first.headers["location"] == "/login?next=%2F"
            logged = client.post("/login", data={"token": token}, follow_redirects=True)
            assert logged.status_code == 200 and str(logged.url) == f"{base}/"
            stats = client.get("/v1/stats", headers={"Authorization": f"Bearer {token}"}).json()
            assert by_id(logged.text, "total-sessions") == str(stats["total"])
            assert by_id(logged.text, "pending") == "1"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
