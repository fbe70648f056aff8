"""verifier.checks.replay: the work is bounded, and follows the edits' size, not calls x file size.

Sessions here are built as the benchmark builds them (a real repository, a
trajectory and an audit trail whose effects are the states' hashes), so that a
file of megabytes can take thousands of calls without a harness writing it
each time.
"""

from __future__ import annotations

import hashlib
import random
import time
from pathlib import Path
from typing import Any

from verifier.agent.harness import agent_git
from verifier.checks.base import HeadState
from verifier.checks.replay import Budget, replay_session, split_lines
from verifier.contract.profiles import load_profile
from verifier.contract.trajectory import load_trajectory
from verifier.findings import CheckResult, CheckStatus
from verifier.resources import profiles_dir

PATH = "big.txt"


def big_file(lines: int, seed: int = 16) -> bytes:
    rng = random.Random(seed)
    return b"".join(b"line %d %08x\n" % (n, rng.getrandbits(32)) for n in range(lines))


class Built:
    """A committed session of `edits` on `PATH`: (function, args, bytes after the call)."""

    def __init__(
        self,
        tmp: Path,
        base: bytes,
        edits: list[tuple[str, dict[str, Any], bytes]],
        *,
        forge: dict[int, dict[str, str]] | None = None,
        head: bytes | None = None,
    ) -> None:
        root = tmp / "repo"
        root.mkdir(parents=True)
        agent_git(root, "init", "-q", "-b", "main")
        (root / PATH).write_bytes(base)
        agent_git(root, "add", "-A")
        agent_git(root, "commit", "-q", "-m", "base")
        base_commit = agent_git(root, "rev-parse", "HEAD").decode().strip()
        digests: dict[int, tuple[bytes, str]] = {}

        def sha(data: bytes) -> str:
            if id(data) not in digests:  # states repeat as the same objects: hashed once
                digests[id(data)] = (data, hashlib.sha256(data).hexdigest())
            return digests[id(data)][1]

        model, responses, entries = [], [], []
        before = base
        for n, (name, args, after) in enumerate(edits):
            cid = f"c{n}"
            model.append({"function_call": {"id": cid, "name": name, "args": args}})
            responses.append(
                {"function_response": {"id": cid, "name": name, "response": {"ok": True}}}
            )
            effect = {"path": PATH, "sha256_before": sha(before), "sha256_after": sha(after)}
            effect.update((forge or {}).get(n, {}))
            entries.append({"kind": "tool_call", "call_id": cid, "effects": [effect]})
            before = after
        (root / PATH).write_bytes(before if head is None else head)
        agent_git(root, "add", "-A")
        agent_git(root, "commit", "-q", "--allow-empty", "-m", "head")
        head_commit = agent_git(root, "rev-parse", "HEAD").decode().strip()
        blob = agent_git(root, "rev-parse", f"HEAD:{PATH}").decode().strip()
        self.root = root
        self.state = HeadState(
            "commit", base_commit, head_commit, changed=(PATH,), changed_blobs={PATH: blob}
        )
        contents = [{"role": "model", "parts": model}, {"role": "user", "parts": responses}]
        self.calls = load_trajectory(contents).calls
        self.entries = entries

    def replay(self, budget: Budget) -> CheckResult:
        profile = load_profile(profiles_dir(), "default")
        return replay_session(
            self.root, self.state, profile, self.calls, self.entries, budget=budget
        )


def toggles(base: bytes, count: int, at: int = 1000) -> list[tuple[str, dict[str, Any], bytes]]:
    """`count` one-line bounded replaces that change line `at` and change it back, in turn."""
    lines = split_lines(base)
    old, new = lines[at - 1], b"changed " + lines[at - 1]
    changed = b"".join(lines[: at - 1]) + new + b"".join(lines[at:])
    edits = []
    for n in range(count):
        expected, replacement, after = (old, new, changed) if n % 2 == 0 else (new, old, base)
        args = {
            "path": PATH,
            "start_line": at,
            "end_line": at,
            "expected": expected.decode(),
            "replacement": replacement.decode(),
        }
        edits.append(("replace_lines", args, after))
    return edits


def test_thousands_of_one_line_replaces_on_a_large_file_cost_a_few_file_sizes(
    tmp_path: Path,
) -> None:
    base = big_file(200_000)  # about 4 MB
    built = Built(tmp_path, base, toggles(base, 2000))
    budget = Budget()
    started = time.perf_counter()
    result = built.replay(budget)
    elapsed = time.perf_counter() - started
    assert result.status is CheckStatus.PASS, result.findings
    # Splitting once, hashing the base and the end, the head's id: never once per call.
    assert budget.spent <= 6 * len(base)
    assert elapsed < 30  # calls x file size would be 2,000 x 4 MB hashed: minutes here


def test_a_lie_in_a_long_chain_on_a_large_file_is_named_at_its_call(tmp_path: Path) -> None:
    base = big_file(50_000)
    forged = {"sha256_after": "0" * 64}  # call 7 claims other bytes; call 8 starts from the truth
    built = Built(tmp_path, base, toggles(base, 400), forge={7: forged})
    result = built.replay(Budget(exact_bytes=1))
    assert result.status is CheckStatus.FAIL
    (finding,) = result.findings
    assert finding.code == "replay.mismatch"
    assert "'c7'" in finding.message and "recorded effect" in finding.message


def test_a_head_other_than_the_replay_is_a_mismatch_on_the_quick_path(tmp_path: Path) -> None:
    base = big_file(10_000)
    edits = toggles(base, 401)
    built = Built(tmp_path, base, edits, head=base)  # the last change never landed
    result = built.replay(Budget(exact_bytes=1))
    assert [f.code for f in result.findings] == ["replay.mismatch"]
    assert "head commit" in result.findings[0].message


def test_joined_lines_are_replayed_as_the_whole_bytes_would_be(tmp_path: Path) -> None:
    """Replacements without a final LF join the next line, or the last line: edited in
    place, the lines must be those of the whole new file split again."""
    rng = random.Random(5)
    data = big_file(300)[:-1]  # the last line has no LF
    edits = []
    for _ in range(300):
        lines = split_lines(data)
        start = rng.randrange(1, len(lines) + 2)
        end = min(len(lines), start - 1 + rng.randrange(0, 3))
        expected = b"".join(lines[start - 1 : end])
        replacement = rng.choice([b"x", b"y\n", b"", b"a\nb", b"\n", b"z\r\n"])
        data = b"".join(lines[: start - 1]) + replacement + b"".join(lines[end:])
        args = {
            "path": PATH,
            "start_line": start,
            "end_line": end,
            "expected": expected.decode(),
            "replacement": replacement.decode(),
        }
        edits.append(("replace_lines", args, data))
    for exact in (1, Budget().exact_bytes):
        result = Built(tmp_path / f"e{exact}", big_file(300)[:-1], edits).replay(
            Budget(exact_bytes=exact)
        )
        assert result.status is CheckStatus.PASS, result.findings


def test_text_replaces_past_the_work_budget_are_inconclusive(tmp_path: Path) -> None:
    """Each replace by text scans the whole file: a budget of bytes bounds the calls."""
    base = big_file(50_000)  # about 1 MB
    old, new = b"line 7 ", b"LINE 7 "
    changed = base.replace(old, new, 1)
    edits = [
        ("edit_file", {"path": PATH, "old_text": a.decode(), "new_text": b.decode()}, after)
        for n in range(200)
        for a, b, after in [(old, new, changed) if n % 2 == 0 else (new, old, base)]
    ]
    result = Built(tmp_path, base, edits).replay(Budget(work_bytes=20 * len(base)))
    assert result.status is CheckStatus.ERROR
    (finding,) = result.findings
    assert (finding.code, finding.path, finding.found) == ("replay.budget_exceeded", PATH, "work")
    assert "replay_max_work_bytes" in finding.message


def test_a_file_grown_past_the_size_cap_is_inconclusive(tmp_path: Path) -> None:
    base = b"small\n"
    grown = b"x" * 5000
    edits = [("write_file", {"path": PATH, "content": grown.decode()}, grown)]
    result = Built(tmp_path, base, edits).replay(Budget(max_file_bytes=4096))
    assert [(f.code, f.found) for f in result.findings] == [("replay.budget_exceeded", "file size")]
    assert result.status is CheckStatus.ERROR


def test_replay_stops_at_its_deadline(tmp_path: Path) -> None:
    base = big_file(1000)
    result = Built(tmp_path, base, toggles(base, 10, at=5)).replay(
        Budget(deadline=time.monotonic() - 1)
    )
    assert [(f.code, f.found) for f in result.findings] == [("replay.budget_exceeded", "deadline")]
    assert result.status is CheckStatus.ERROR
