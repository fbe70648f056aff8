"""Disk is bounded in the sandbox too: a file past `limits.file_size_mb` cannot be
written, and the private /tmp holds at most `limits.tmp_mb`. Tiny limits, so a
failing limit costs a few MB."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verifier._internal.sandbox.runner import RunOutcome, minimal_env, run, sandboxes_available
from verifier.config import SandboxLimits

WORKING = sandboxes_available()
SANDBOXES = [
    pytest.param(name, marks=pytest.mark.skipif(name not in WORKING, reason=f"no {name} here"))
    for name in ("bwrap", "unshare")
]
# Writes 8 MiB in 1 MiB chunks to sys.argv[1]; prints how far it got and why it stopped.
WRITER = (
    "import signal, sys\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "written = 0\n"
    "try:\n"
    "    with open(sys.argv[1], 'wb') as fh:\n"
    "        for _ in range(8):\n"
    "            fh.write(bytes(1 << 20))\n"
    "            fh.flush()\n"
    "            written += 1\n"
    "    print('wrote', written)\n"
    "except OSError as exc:\n"
    "    print('stopped', written, exc.errno)\n"
)


def _write(tmp_path: Path, sandbox: str, target: str, limits: SandboxLimits) -> RunOutcome:
    work = tmp_path / "run"
    for sub in ("home", "tmp"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    return run(
        [sys.executable, "-c", WRITER, target], cwd=work, timeout_s=30,
        env=minimal_env(work / "home", work / "tmp"), sandbox="required", excerpt_bytes=1024,
        writable=[work], limits=limits, only=sandbox,
    )  # fmt: skip


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_file_past_the_file_size_limit_is_not_written(tmp_path: Path, sandbox: str) -> None:
    out = _write(tmp_path, sandbox, "big.bin", SandboxLimits(file_size_mb=2))
    assert out.output_excerpt.split()[:2] == ["stopped", "2"], out.output_excerpt
    assert (tmp_path / "run" / "big.bin").stat().st_size <= 2 << 20
    assert out.limits["file_size_mb"]["enforced_by"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_the_private_tmp_holds_at_most_its_cap(tmp_path: Path, sandbox: str) -> None:
    out = _write(tmp_path, sandbox, "/tmp/fill.bin", SandboxLimits(tmp_mb=3))
    words = out.output_excerpt.split()
    assert words[0] == "stopped" and int(words[1]) <= 3, out.output_excerpt
