"""The command line as an operator meets it: signals, pipes, read-only stores, the demo,
the configuration in force. Real subprocesses throughout."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml, fixed_session, to_bytes

VERIFIER = [sys.executable, "-m", "verifier"]


def _processes_with(token: str) -> list[str]:
    out = subprocess.run(
        ["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True, check=True
    )
    return [line for line in out.stdout.splitlines() if token in line and "ps -eo" not in line]


@pytest.fixture
def slow_session(repo: GitRepo, tmp_path: Path) -> tuple[Path, Path, str]:
    """A report, a configuration, and a test command that sleeps with a unique token."""
    token = f"verifier-slow-{uuid.uuid4().hex}"
    command = ["{python}", "-c", "import time, sys; time.sleep(120)", token]
    cfg = config_toml(tmp_path, repo, test_command=command)
    report = tmp_path / "report.json"
    report.write_bytes(to_bytes(fixed_session(repo).report()))
    return report, cfg, token


# The command line with its signal handler wrapped so that the handler's exception is
# lost, as Python loses one raised inside a finalizer or a weakref callback (the garbage
# collector runs them in whichever thread allocates, the main thread included).
SWALLOWING = [
    sys.executable,
    "-c",
    "import signal, sys\n"
    "from verifier import cli\n"
    "def lost(signum, frame):\n"
    "    try:\n"
    "        cli._on_signal(signum, frame)\n"
    "    except BaseException:\n"
    "        pass\n"
    "signal.signal(signal.SIGINT, lost)\n"
    "signal.signal(signal.SIGTERM, lost)\n"
    "sys.exit(cli.run(sys.argv[1:]))\n",
]


@pytest.mark.parametrize("raised", ["raised", "lost"])
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_kills_the_test_run_removes_our_folders_and_records_nothing(
    slow_session: tuple[Path, Path, str], tmp_path: Path, signum: int, code: int, raised: str
) -> None:
    """Wherever the signal's exception lands, even where Python swallows it, the test run
    stops at once: the first signal cancels every verification before it raises."""
    report, cfg, token = slow_session
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    program = VERIFIER if raised == "raised" else SWALLOWING
    proc = subprocess.Popen(
        [*program, "verify", str(report), "--config", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + 60
    while not _processes_with(token):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the test run never started"
        time.sleep(0.05)
    proc.send_signal(signum)
    # Well within the test command's own timeout (60 s): the signal stopped it.
    _, err = proc.communicate(timeout=45)
    assert proc.returncode == code, err
    assert b"no verdict was recorded" in err and b"Traceback" not in err
    assert _processes_with(token) == []
    # The run's folder, wherever it was made (in memory when it had room), is gone.
    (folder,) = set(re.findall(rb"(/[^' ]*/verifier-tests-[^/' ]+)/", err))
    assert not Path(folder.decode()).exists()
    # The session may have been stored (it is whole and valid); a verdict never is.
    listed = subprocess.run(
        [*VERIFIER, "list", "--format", "json"], capture_output=True, check=True
    )
    sessions = json.loads(listed.stdout)["sessions"]
    assert all(s["latest_run"] is None for s in sessions)


def test_a_closed_stdout_ends_quietly(repo: GitRepo, tmp_path: Path) -> None:
    """`verifier verify ... | head -1`: no broken-pipe traceback, the verdict's exit code."""
    cfg = config_toml(tmp_path, repo)
    report = tmp_path / "report.json"
    report.write_bytes(to_bytes(fixed_session(repo).report()))
    proc = subprocess.Popen(
        [*VERIFIER, "verify", str(report), "--config", str(cfg), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert b"Traceback" not in err and b"BrokenPipe" not in err


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a read-only mount")
def test_list_and_show_work_on_a_store_on_a_read_only_mount(repo: GitRepo, tmp_path: Path) -> None:
    store_dir = tmp_path / "ro"
    url = f"sqlite:///{store_dir / 'v.sqlite3'}"
    cfg = config_toml(tmp_path, repo)
    report = tmp_path / "report.json"
    report.write_bytes(to_bytes(fixed_session(repo).report()))
    env = {**os.environ, "VERIFIER_DATABASE_URL": url}
    done = subprocess.run(
        [*VERIFIER, "verify", str(report), "--config", str(cfg)], env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    before = {p.name: p.read_bytes() for p in store_dir.iterdir()}
    script = (
        f"mount --bind {store_dir} {store_dir} && mount -o remount,ro,bind {store_dir} && "
        f"{sys.executable} -m verifier list --format json && "
        f"{sys.executable} -m verifier show s-1 --format json"
    )
    ro = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env, capture_output=True)
    assert ro.returncode == 0, ro.stderr
    listed, _, shown = ro.stdout.decode().partition("\n}\n")
    assert json.loads(listed + "\n}")["rates"]["delivered"] == 1
    assert json.loads(shown)["delivery_status"] == "delivered"
    assert {p.name: p.read_bytes() for p in store_dir.iterdir()} == before


def test_the_demo_keeps_its_store_in_its_folder_and_refuses_a_folder_it_did_not_make(
    tmp_path: Path,
) -> None:
    user_store = tmp_path / "user.sqlite3"
    env = {**os.environ, "VERIFIER_DATABASE_URL": f"sqlite:///{user_store}"}
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    refused = subprocess.run(
        [*VERIFIER, "demo", "--dir", str(foreign)], env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2
    assert "not made by the demo" in refused.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    out = tmp_path / "demo"
    for _ in range(2):  # a folder the demo made is the demo's to rewrite
        done = subprocess.run(
            [*VERIFIER, "demo", "--dir", str(out), "--format", "json"], env=env, capture_output=True
        )
        assert done.returncode == 0, done.stderr
    assert (out / "verifier.sqlite3").is_file()
    assert not user_store.exists()


def test_config_show_names_the_file_and_masks_the_password(tmp_path: Path) -> None:
    cfg = tmp_path / "v.toml"
    cfg.write_text('[verifier]\ndatabase_url = "postgresql+psycopg://bob:hunter2@db/v"\n')
    env = {k: v for k, v in os.environ.items() if k != "VERIFIER_DATABASE_URL"}
    env["VERIFIER_CONFIG"] = str(cfg)
    done = subprocess.run(
        [*VERIFIER, "config", "show", "--format", "json"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["file"] == str(cfg)
    assert data["settings"]["database_url"] == "postgresql+psycopg://bob:***@db/v"
    text = subprocess.run(
        [*VERIFIER, "config", "show"], env=env, capture_output=True, text=True
    ).stdout
    assert f"file: {cfg}" in text and "hunter2" not in text


def test_a_signals_exception_python_swallowed_is_not_printed_and_others_are() -> None:
    """The signal's exception landing in a finalizer is swallowed by Python, which prints
    it (the cancel stops the work all the same): the command line does not print it; an
    error of any other kind swallowed there is printed as Python would."""
    script = (
        "import sys\n"
        "from verifier import cli\n"
        "from verifier.errors import Interrupted\n"
        "sys.unraisablehook = cli._unraisable\n"
        "class Signal:\n"
        "    def __del__(self):\n"
        "        raise Interrupted(15)\n"
        "class Bug:\n"
        "    def __del__(self):\n"
        "        raise ValueError('a bug in a finalizer')\n"
        "Signal()\n"
        "Bug()\n"
        "print('went on')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == "went on\n"
    assert "Interrupted" not in done.stderr
    assert "ValueError: a bug in a finalizer" in done.stderr
