"""The command line in process: `cli.run`, what the `verifier` script runs, its streams
captured. For tests of what a command does; a test of what a script sees of the process
(its exit status, signals, pipes) runs ``python -m verifier`` as a subprocess instead."""

from __future__ import annotations

import contextlib
import io
import subprocess

from verifier import cli


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`verifier ARGV`: its exit code and what it printed on each stream."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(list(argv))
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())
