"""verifier._internal.sandbox.runner: argument lists, a closed stdin, a minimal environment,
a group killed whole."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from verifier._internal.sandbox.runner import (
    RunnerNotFound,
    RunOutcome,
    SandboxUnavailable,
    minimal_env,
    network_isolation_available,
    run,
)
from verifier.config import SandboxLimits

needs_isolation = pytest.mark.skipif(
    not network_isolation_available(), reason="`unshare -rn` does not work on this machine"
)


def _run(
    tmp_path: Path,
    *argv: str,
    timeout_s: float = 30,
    isolate_network: bool = False,
    excerpt_bytes: int = 8192,
) -> RunOutcome:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return run(
        argv,
        cwd=tmp_path,
        timeout_s=timeout_s,
        env=minimal_env(home, tmp),
        sandbox="required" if isolate_network else "off",
        excerpt_bytes=excerpt_bytes,
        writable=[tmp_path],
    )


def _none_running(token: str, within_s: float = 5.0) -> bool:
    """True once no live process has `token` in its command line."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        alive = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes()
                state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if token.encode() in cmdline and state not in ("Z", "X"):
                alive.append(proc.name)
        if not alive:
            return True
        time.sleep(0.05)
    return False


def _command_running(token: str, code: str) -> bool:
    """True once `python -c code token` itself runs: not the trampoline that will exec it,
    whose command line holds the same words after its own."""
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args[1:4] == [b"-c", code.encode(), token.encode()]:
            return True
    return False


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """True once `pid` no longer runs (absent, or a zombie nobody reaped yet)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_exit_code_and_output_are_recorded(tmp_path: Path) -> None:
    out = _run(tmp_path, sys.executable, "-c", "print('hello'); raise SystemExit(3)")
    assert out.exit_code == 3
    assert not out.timed_out
    assert out.output_excerpt == "hello\n"
    assert out.output_bytes == 6
    assert out.output_sha256 == hashlib.sha256(b"hello\n").hexdigest()
    assert out.executable == os.path.abspath(sys.executable)


def test_stderr_is_merged_into_the_log(tmp_path: Path) -> None:
    code = "import sys; print('out', flush=True); print('err', file=sys.stderr)"
    out = _run(tmp_path, sys.executable, "-c", code)
    assert out.output_excerpt == "out\nerr\n"


def test_shell_metacharacters_are_literal_arguments(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print(sys.argv[1:])", "a;b", "$(echo x)", "|", "*"]
    out = _run(tmp_path, *argv)
    assert out.output_excerpt.strip() == repr(["a;b", "$(echo x)", "|", "*"])
    assert out.argv == tuple(argv)


def test_semicolon_argument_starts_no_second_command(tmp_path: Path) -> None:
    out = _run(tmp_path, sys.executable, "-c", "pass", "; touch pwned", "&& touch pwned2")
    assert out.exit_code == 0
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


def test_stdin_is_closed(tmp_path: Path) -> None:
    out = _run(tmp_path, sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))")
    assert out.output_excerpt == "''\n"


def test_missing_binary_raises_runner_not_found_naming_binary_and_path(tmp_path: Path) -> None:
    with pytest.raises(RunnerNotFound) as caught:
        _run(tmp_path, "verifier-no-such-test-runner-xyz", "-q")
    assert caught.value.binary == "verifier-no-such-test-runner-xyz"
    assert "verifier-no-such-test-runner-xyz" in str(caught.value)
    assert caught.value.search_path in str(caught.value)


@needs_isolation
def test_missing_binary_is_found_missing_before_unshare_runs(tmp_path: Path) -> None:
    with pytest.raises(RunnerNotFound):
        _run(tmp_path, "verifier-no-such-test-runner-xyz", isolate_network=True)


def test_relative_program_that_is_not_executable_is_runner_not_found(tmp_path: Path) -> None:
    (tmp_path / "run-tests").write_text("#!/bin/sh\nexit 0\n")
    with pytest.raises(RunnerNotFound):
        _run(tmp_path, "./run-tests")


@pytest.mark.parametrize(
    "isolate", [False, pytest.param(True, marks=needs_isolation)], ids=["plain", "unshare"]
)
def test_timeout_kills_the_whole_process_group(tmp_path: Path, isolate: bool) -> None:
    token = f"verifier-grandchild-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {token!r}])\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    out = _run(tmp_path, sys.executable, "-c", code, timeout_s=1.5, isolate_network=isolate)
    assert time.monotonic() - started < 10
    assert out.timed_out
    assert out.exit_code is None
    assert 1.5 <= out.duration_s < 10
    assert "started" in out.output_excerpt
    assert _none_running(token)


def test_a_grandchild_that_leaves_the_group_dies_with_the_sandbox(tmp_path: Path) -> None:
    if not network_isolation_available():
        pytest.skip("the unshare sandbox does not work on this machine")
    token = f"verifier-setsid-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {token!r}],"
        " start_new_session=True)\n"
        "print('started', flush=True)\n"
    )
    out = _run(tmp_path, sys.executable, "-c", code, timeout_s=30, isolate_network=True)
    assert out.exit_code == 0
    assert _none_running(token)


def test_background_process_left_behind_is_killed_when_the_command_exits(
    tmp_path: Path,
) -> None:
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
    )
    started = time.monotonic()
    out = _run(tmp_path, sys.executable, "-c", code, timeout_s=30)
    assert time.monotonic() - started < 10
    assert out.exit_code == 0
    assert not out.timed_out
    assert _gone(int(out.output_excerpt.split()[0]))


def test_large_output_is_bounded_in_the_excerpt_and_hashed_whole(tmp_path: Path) -> None:
    # 3 MB, far more than a pipe buffer: the run must keep reading to finish.
    code = (
        "import sys\nfor i in range(100000):\n    sys.stdout.write(f'line {i:08d} of the log\\n')\n"
    )
    expected = b"".join(f"line {i:08d} of the log\n".encode() for i in range(100000))
    out = _run(tmp_path, sys.executable, "-c", code, excerpt_bytes=1000)
    assert out.exit_code == 0
    assert out.output_bytes == len(expected)
    assert out.output_sha256 == hashlib.sha256(expected).hexdigest()
    assert out.output_excerpt.startswith("line 00000000 of the log\n")
    assert out.output_excerpt.endswith("line 00099999 of the log\n")
    assert f"[... {len(expected) - 1000} bytes omitted ...]" in out.output_excerpt
    assert len(out.output_excerpt.encode()) < 1100


def test_invalid_utf8_output_is_replaced_not_fatal(tmp_path: Path) -> None:
    out = _run(tmp_path, sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'a\\xffb')")
    assert out.output_excerpt == "a\ufffdb"
    assert out.output_sha256 == hashlib.sha256(b"a\xffb").hexdigest()


def test_minimal_env_holds_only_the_listed_variables(tmp_path: Path) -> None:
    env = minimal_env(tmp_path / "home", tmp_path / "tmp")
    assert set(env) == {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONHASHSEED",
    }
    assert env["HOME"] == str(tmp_path / "home")
    assert env["TMPDIR"] == str(tmp_path / "tmp")


def test_secrets_in_the_parent_environment_do_not_reach_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "VERIFIER_DATABASE_URL": "postgresql://u:pw@db/verifier",
        "DATABASE_URL": "postgresql://u:pw@db/app",
        "GEMINI_API_KEY": "gemini-secret",
        "GOOGLE_API_KEY": "google-secret",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "GITHUB_TOKEN": "ghp_secret",
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    out = _run(
        tmp_path, sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"
    )
    child_env = json.loads(out.output_excerpt)
    assert not set(secrets) & set(child_env)
    assert not any(value in out.output_excerpt for value in secrets.values())
    assert child_env["HOME"] == str(tmp_path / "home")


def _listener() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server


_CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2).close()\n"
    "    print('connected')\n"
    "except OSError as exc:\n"
    "    print('refused', exc)\n"
)


@needs_isolation
def test_isolated_run_cannot_reach_a_local_listener(tmp_path: Path) -> None:
    with _listener() as server:
        port = str(server.getsockname()[1])
        control = _run(tmp_path, sys.executable, "-c", _CONNECT, port)
        isolated = _run(tmp_path, sys.executable, "-c", _CONNECT, port, isolate_network=True)
    assert control.output_excerpt.startswith("connected")
    assert not control.network_isolated
    assert isolated.output_excerpt.startswith("refused")
    assert isolated.network_isolated
    assert isolated.exit_code == 0


def test_network_isolation_probe_is_run_once() -> None:
    network_isolation_available()
    hits = network_isolation_available.cache_info().hits
    network_isolation_available()
    assert network_isolation_available.cache_info().hits == hits + 1


def test_auto_falls_back_to_no_sandbox_when_it_cannot_start(tmp_path: Path) -> None:
    """No probe: a sandbox that never reported ready means the command never ran, so
    `auto` runs it again without one, and `required` refuses."""
    (tmp_path / "bin").mkdir()
    for name in ("unshare", "bwrap"):  # sandboxes that fail as a kernel refusal would
        fake = tmp_path / "bin" / name
        fake.write_text(
            f"#!/bin/sh\necho '{name}: unshare failed: Operation not permitted' >&2\nexit 1\n"
        )
        fake.chmod(0o755)
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = minimal_env(home, tmp)
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'a').write('x')"
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    saved = os.environ["PATH"]
    os.environ["PATH"] = path  # where the runner looks for unshare
    try:
        out = run(
            [sys.executable, "-c", code], cwd=tmp_path, timeout_s=30, env=env,
            sandbox="auto", excerpt_bytes=1024,
        )  # fmt: skip
        assert (out.exit_code, out.network_isolated, out.sandbox) == (0, False, "none")
        assert [n.split(":")[0] for n in out.notes] == [
            "the bwrap sandbox did not start",
            "the unshare sandbox did not start",
            "the command ran without a sandbox",
        ]
        assert marker.read_text() == "x"  # ran once, not three times
        with pytest.raises(SandboxUnavailable):
            run(
                [sys.executable, "-c", code], cwd=tmp_path, timeout_s=30, env=env,
                sandbox="required", excerpt_bytes=1024,
            )  # fmt: skip
        assert marker.read_text() == "x"
    finally:
        os.environ["PATH"] = saved


def test_terminal_control_characters_are_stripped_from_the_excerpt(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stdout.write('\\x1b[2J\\x1b]0;title\\x07ok\\x1b[31m red\\x1b[0m\\r\\n"
        "tab\\there\\x08\\x9b\\x00\\n')\n"
    )
    out = _run(tmp_path, sys.executable, "-c", code)
    assert out.output_excerpt == "ok red\ntab\there\n"
    assert out.output_bytes > len(out.output_excerpt)  # the hash and size are of the raw log


def test_limits_in_force_are_recorded_even_without_a_sandbox(tmp_path: Path) -> None:
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    out = run(
        [sys.executable, "-c", code], cwd=tmp_path, timeout_s=30,
        env=minimal_env(tmp_path, tmp_path), sandbox="off", excerpt_bytes=100,
        limits=SandboxLimits(open_files=77),
    )  # fmt: skip
    assert out.output_excerpt.strip() == "77"
    assert out.sandbox == "none"
    assert out.limits["open_files"] == {"value": 77, "enforced_by": ["RLIMIT_NOFILE (per process)"]}
    assert set(out.limits_not_applied) <= {"processes"}


def test_kill_all_ends_a_run_under_way_at_once(tmp_path: Path) -> None:
    """What a second signal does before the verifier exits without unwinding."""
    import threading

    from verifier._internal.sandbox.runner import kill_all

    token = f"verifier-killall-{uuid.uuid4().hex}"
    outcome: list[RunOutcome] = []
    started = threading.Event()
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()

    code = "import time; time.sleep(120)"

    def go() -> None:
        outcome.append(
            run(
                [sys.executable, "-c", code, token],
                cwd=tmp_path, timeout_s=110, env=minimal_env(home, tmp), sandbox="off",
                excerpt_bytes=1024, on_start=started.set,
            )
        )  # fmt: skip

    thread = threading.Thread(target=go)
    thread.start()
    assert started.wait(30)
    deadline = time.monotonic() + 30
    while not _command_running(token, code):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    kill_all()
    thread.join(60)
    assert not thread.is_alive()
    (out,) = outcome
    assert out.exit_code == -9 and not out.timed_out
    assert out.stopped  # said, so that no cache keeps what a stopped run "failed"
    assert _none_running(token)
    again = run(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
        cwd=tmp_path, timeout_s=30, env=minimal_env(home, tmp), sandbox="off", excerpt_bytes=64,
    )  # fmt: skip
    assert again.exit_code == -9 and not again.stopped  # killed by what it ran, not by us


def test_kill_all_before_the_command_started_is_a_stop_not_a_failure_to_start(
    tmp_path: Path,
) -> None:
    """A second signal may come while the trampoline is still starting the command."""
    from verifier._internal.sandbox.runner import kill_all

    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    out = run(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        cwd=tmp_path, timeout_s=110, env=minimal_env(home, tmp), sandbox="off",
        excerpt_bytes=1024, on_start=kill_all,
    )  # fmt: skip
    assert out.stopped and out.exit_code == -9 and not out.timed_out
