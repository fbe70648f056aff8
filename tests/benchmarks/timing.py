"""Timing: medians of interleaved repetitions after a warm-up, and the rows they give."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


def measure(
    runs: Mapping[str, Callable[[], object]],
    repeat: int,
    setup: Mapping[str, Callable[[], object]] | None = None,
) -> dict[str, float]:
    """The median wall time of each run, in seconds.

    Each run is called once untimed (warm-up), then the runs take turns `repeat`
    times, so that a change in the machine's load hits the subject and its
    baseline alike and their ratio stays fair. `setup[name]`, when given, is called
    untimed before each call of that run (an empty store, say).
    """
    before = setup or {}
    for name, run in runs.items():
        if name in before:
            before[name]()
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            if name in before:
                before[name]()
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


@dataclass(frozen=True)
class Row:
    """One ratio: `subject` against `baseline`, measured on the same data in the same run."""

    benchmark: str
    subject: str
    subject_s: float
    baseline: str
    baseline_s: float
    target: str = "-"
    # The largest `subject_s` that meets the target; None for a row that only informs.
    bound_s: float | None = None

    @property
    def ratio(self) -> float:
        return self.subject_s / self.baseline_s

    @property
    def verdict(self) -> str:
        if self.bound_s is None:
            return "-"
        return "met" if self.subject_s <= self.bound_s else "missed"


@dataclass(frozen=True)
class Result:
    """A benchmark's rows, and facts about its data for the write-up."""

    rows: list[Row]
    facts: dict[str, str] = field(default_factory=dict)
