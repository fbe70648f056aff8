"""The code under test, run in the sandbox, reaches nothing of the host it was not given.

Each test runs a real child through `verifier._internal.sandbox.runner.run` in each sandbox that
works here: bubblewrap, and our unshare trampoline (what a laptop without
bubblewrap gets). The hog and the fork bomb run under tiny limits and short
timeouts, so they cannot hurt the machine even when a limit fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from verifier._internal.sandbox.runner import RunOutcome, minimal_env, run, sandboxes_available
from verifier.checks.tests.check import check
from verifier.config import Config, SandboxLimits
from verifier.findings import CheckStatus

WORKING = sandboxes_available()
SANDBOXES = [
    pytest.param(name, marks=pytest.mark.skipif(name not in WORKING, reason=f"no {name} here"))
    for name in ("bwrap", "unshare")
]


def _run(
    tmp_path: Path, sandbox: str, code: str, *args: str, limits: SandboxLimits | None = None
) -> RunOutcome:
    work = tmp_path / "run"
    for sub in ("home", "tmp"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    return run(
        [sys.executable, "-c", code, *args],
        cwd=work,
        timeout_s=30,
        env=minimal_env(work / "home", work / "tmp"),
        sandbox="required",
        excerpt_bytes=8192,
        writable=[work],
        limits=limits,
        only=sandbox,
    )


@pytest.fixture
def host_tmp_file() -> Iterator[Path]:
    """A file in the host's /tmp (not pytest's tmp_path: that may be bound for the run)."""
    path = Path("/tmp") / f"verifier-escape-{uuid.uuid4().hex}"
    path.write_text("host secret")
    yield path
    path.unlink()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_host_folders_and_the_host_tmp_are_out_of_reach(
    tmp_path: Path, sandbox: str, host_tmp_file: Path
) -> None:
    code = "import os, sys\nfor p in sys.argv[1:]:\n    print(p, os.path.exists(p))\n"
    checked = ["/home", "/run", "/var", "/srv", str(host_tmp_file), str(Path.home() / ".ssh")]
    out = _run(tmp_path, sandbox, code, *checked)
    assert out.exit_code == 0, out.output_excerpt
    assert out.sandbox == sandbox
    assert out.output_excerpt.split("\n")[:-1] == [f"{p} False" for p in checked]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_unix_socket_under_the_host_tmp_cannot_be_reached(tmp_path: Path, sandbox: str) -> None:
    path = f"/tmp/verifier-escape-{uuid.uuid4().hex[:8]}.sock"
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n"
    )
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen()
        try:
            control = run(
                [sys.executable, "-c", code, path], cwd=tmp_path, timeout_s=30,
                env=minimal_env(tmp_path, tmp_path), sandbox="off", excerpt_bytes=100,
            )  # fmt: skip
            out = _run(tmp_path, sandbox, code, path)
        finally:
            os.unlink(path)
    assert control.output_excerpt.startswith("connected")
    assert out.output_excerpt.startswith("refused"), out.output_excerpt


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_checked_repository_is_out_of_reach_and_the_copy_writable(
    tmp_path: Path, sandbox: str
) -> None:
    repo = GitRepo(tmp_path / "checked")
    test = (
        "import os\nfrom pathlib import Path\n\n\n"
        "def test_writes_into_its_tree_and_cannot_see_the_repository():\n"
        "    Path('out').mkdir()\n"
        "    Path('out/report.xml').write_text('<testsuite/>')\n"
        f"    assert not os.path.exists({str(repo.path)!r})\n"
        "    assert not os.path.exists('/home')\n"
    )
    commit = repo.commit({"test_a.py": test})
    config = Config(network_isolation="required")
    hidden_path = os.environ["PATH"]
    if sandbox == "unshare":
        # The fallback, as on a machine without bubblewrap: bwrap hidden from PATH.
        os.environ["PATH"] = _path_without("bwrap", tmp_path)
    try:
        result = check(repo.path, commit, ["{python}", "-m", "pytest", "-q"], 60, config)
    finally:
        os.environ["PATH"] = hidden_path
    assert result.status is CheckStatus.PASS, result.details.get("output_excerpt")
    assert result.details["sandbox"] == sandbox
    assert result.details["limits_not_applied"] == []
    assert result.details["limits"]["open_files"]["enforced_by"] == ["RLIMIT_NOFILE (per process)"]


def _path_without(program: str, tmp_path: Path) -> str:
    """PATH with the folders holding `program` replaced by links to everything else."""
    shadow = tmp_path / f"path-without-{program}"
    shadow.mkdir()
    folders = []
    for folder in os.environ["PATH"].split(os.pathsep):
        if not (Path(folder) / program).exists():
            folders.append(folder)
            continue
        for entry in Path(folder).iterdir():
            if entry.name != program and not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry)
        folders.append(str(shadow))
    return os.pathsep.join(dict.fromkeys(folders))


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_memory_hog_is_stopped(tmp_path: Path, sandbox: str) -> None:
    code = "x = bytearray(512 * 1024 * 1024)\nprint('allocated', len(x))\n"
    out = _run(tmp_path, sandbox, code, limits=SandboxLimits(memory_mb=128))
    assert out.exit_code != 0
    assert "allocated" not in out.output_excerpt
    assert out.limits["memory_mb"]["enforced_by"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_fork_bomb_is_stopped(tmp_path: Path, sandbox: str) -> None:
    code = (
        "import os, sys, time\n"
        "children = 0\n"
        "for _ in range(200):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    children += 1\n"
        "print('children', children, flush=True)\n"
    )
    out = _run(tmp_path, sandbox, code, limits=SandboxLimits(processes=20))
    if "cgroup" not in " ".join(out.limits["processes"]["enforced_by"]):
        pytest.skip("no pids cgroup here: processes are limited by RLIMIT_NPROC only")
    assert out.exit_code == 0, out.output_excerpt
    children = int(out.output_excerpt.split()[1])
    assert children < 20


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_interpreter_and_a_subprocess_work(tmp_path: Path, sandbox: str) -> None:
    code = (
        "import subprocess, sys\n"
        "print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True,"
        " text=True, check=True).stdout.strip())\n"
        "print(subprocess.run(['sh', '-c', 'echo shell'], capture_output=True, text=True).stdout)"
    )
    out = _run(tmp_path, sandbox, code)
    assert out.exit_code == 0, out.output_excerpt
    assert out.output_excerpt.split() == ["42", "shell"]


def test_bwrap_is_preferred_when_installed(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None or "bwrap" not in WORKING:
        pytest.skip("bubblewrap is not installed here")
    work = tmp_path / "w"
    work.mkdir()
    out = run(
        [sys.executable, "-c", "pass"], cwd=work, timeout_s=30, env=minimal_env(work, work),
        sandbox="auto", excerpt_bytes=100, writable=[work],
    )  # fmt: skip
    assert (out.sandbox, out.notes) == ("bwrap", ())
