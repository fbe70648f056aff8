"""CPU time of a subprocess's whole tree, for the verify and real-project benchmarks.

Wall time on a shared machine moves with everyone's load; CPU time moves far less.
`resource.getrusage(RUSAGE_CHILDREN)` misses what the sandbox runs (its processes
are reaped inside its own PID namespace), so each run is put in a cgroup of its own
in the cgroup v1 ``cpuacct`` hierarchy, whose ``cpuacct.usage`` counts every
process in it and every process they start; None where we cannot make one (no v1
hierarchy, or no right to write it): the rows then give wall time only.

Also `compiled`: the project's own modules byte-compiled, as ``pip install`` leaves
an installed verifier (an editable install under ``PYTHONDONTWRITEBYTECODE``, as on
the machines these benchmarks ran on, compiles every module of ours at every start:
0.3–0.4 s of CPU per ``verifier verify``, which pytest's installed modules do not pay).
"""

from __future__ import annotations

import compileall
import contextlib
import os
import statistics
import subprocess
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("verifier", "audit")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def compiled() -> None:
    """Byte-compile our packages in place (``__pycache__``, ignored by git), quietly."""
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


def metered(body: Callable[[Path, int, CpuMeter], T], tmp: Path, repeat: int) -> T:
    """`body(tmp, repeat, meter)` with our modules compiled (`compiled`) and a `CpuMeter`,
    whose cgroup is removed afterwards."""
    compiled()
    meter = CpuMeter()
    try:
        return body(tmp, repeat, meter)
    finally:
        meter.close()


class CpuMeter:
    """The CPU seconds of each run, by name, from a cgroup of our own; `enabled` False
    when none can be made here."""

    def __init__(self) -> None:
        self.group: Path | None = CPUACCT / f"verifier-bench-{uuid.uuid4().hex[:8]}"
        try:
            self.group.mkdir()
        except OSError:
            self.group = None
        self.times: dict[str, list[float]] = {}

    @property
    def enabled(self) -> bool:
        return self.group is not None

    def _usage(self) -> float:
        assert self.group is not None
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def run(
        self, name: str, argv: Sequence[str], **kwargs: Any
    ) -> subprocess.CompletedProcess[bytes]:
        """`subprocess.run(argv, capture_output=True, **kwargs)`, its CPU kept as `name`'s."""
        if self.group is None:
            return subprocess.run(argv, capture_output=True, **kwargs)
        procs = str(self.group / "cgroup.procs")

        def join() -> None:  # in the child, before it runs argv: it and all it starts count
            Path(procs).write_text(str(os.getpid()))

        before = self._usage()
        done = subprocess.run(argv, capture_output=True, preexec_fn=join, **kwargs)
        self.times.setdefault(name, []).append(self._usage() - before)
        return done

    def median(self, name: str, timed: int) -> float | None:
        """The median of the last `timed` runs of `name` (the warm-up left out)."""
        kept = self.times.get(name, [])[-timed:]
        return statistics.median(kept) if kept else None

    def close(self) -> None:
        if self.group is not None:
            with contextlib.suppress(OSError):
                self.group.rmdir()
