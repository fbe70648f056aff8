"""`monitoring.changed_lines`: the head lines a diff from the base inserts or replaces,
with the lines both share at the start and the end taken as they are before `difflib`."""

from __future__ import annotations

import random
import time

from verifier.checks.tests.monitoring import changed_lines


def _unchanged_is_common(old: list[bytes], new: list[bytes], changed: list[int]) -> bool:
    """The head lines not reported, in order, are a subsequence of the base: a valid diff."""
    kept = iter(old)
    marked = set(changed)
    return all(any(line == o for o in kept) for n, line in enumerate(new, 1) if n not in marked)


def test_one_changed_line_of_a_long_file_is_that_line_and_cheap() -> None:
    old = [b"def f%d(x):" % (i // 3) if i % 3 == 0 else b"" for i in range(15_000)]
    new = list(old)
    new[7_000] = b"    return 1  # the session's"
    started = time.thread_time()
    assert changed_lines(old, new) == [7_001]
    # Through difflib whole, this took 0.18 s of CPU on a 5,000-line file.
    assert time.thread_time() - started < 0.05


def test_insertions_at_the_start_the_end_and_between_repeated_lines() -> None:
    old = [b"a", b"", b"", b"b"]
    assert changed_lines(old, [b"x", *old]) == [1]
    assert changed_lines(old, [*old, b"y"]) == [5]
    assert changed_lines(old, [b"a", b"", b"z", b"", b"b"]) == [3]
    assert changed_lines(old, old) == []
    assert changed_lines([], [b"a", b"b"]) == [1, 2]
    assert changed_lines(old, []) == []


def test_random_edits_give_a_valid_diff_that_reports_every_new_line() -> None:
    rng = random.Random(16)
    alphabet = [b"", b"    pass", b"x = 1", b"return y", b"# c"]
    for _ in range(400):
        old = [rng.choice(alphabet) for _ in range(rng.randint(0, 30))]
        new = list(old)
        fresh = set()
        for _ in range(rng.randint(0, 4)):
            at = rng.randint(0, len(new))
            new.insert(at, b"new %d" % rng.randint(0, 9**9))
        for _ in range(rng.randint(0, 2)):
            if new:
                del new[rng.randrange(len(new))]
        fresh = {n for n, line in enumerate(new, 1) if line.startswith(b"new ")}
        changed = changed_lines(old, new)
        assert fresh <= set(changed), (old, new, changed)
        assert _unchanged_is_common(old, new, changed), (old, new, changed)
