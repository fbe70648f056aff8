"""The reference agent's loop on the recorder: stop conditions, policy, truncation,
checkpoints, the scripted model's replay, and reports the verifier takes byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from google.genai import types

from audit.recorder import dumps
from audit.trailfile import check_trail_file
from tests.support.gitrepo import GitRepo
from tests.support.paths import TURNS
from tests.support.sessions import CALC, FIX, calc_repo
from verifier.agent.harness import Session, run_session
from verifier.agent.loop import Loop, SessionLimits
from verifier.agent.model import ScriptedModel, as_response, call, load_turns, model_turn
from verifier.agent.tools import OUTPUT_LIMIT, Policy, checkpoint, truncate
from verifier.app.pipeline import verify_report
from verifier.config import Config, RepositoryConfig
from verifier.demo.run import TOOLS as DEMO_TOOLS
from verifier.errors import InfrastructureError
from verifier.findings import DeliveryStatus
from verifier.store import Store

FIX_CALC = TURNS / "fix_calc.json"


def verify(repo: GitRepo, tmp_path: Path, raw: bytes) -> Any:
    cfg = RepositoryConfig(
        "calc",
        path=repo.path,
        test_command=(sys.executable, "-m", "pytest", "-q"),
        test_timeout_s=60,
    )
    config = Config(
        database_url=f"sqlite:///{tmp_path / 'agent.sqlite3'}", repositories={"calc": cfg}
    )
    return verify_report(raw, config).verification


def findings(v: Any) -> list[str]:
    return [f.code for c in v.checks.values() for f in c.findings]


def tool_calls(session: Session) -> list[dict[str, Any]]:
    return [b for b in session.bodies if b["kind"] == "tool_call"]


def reply(*parts: types.Part | str, prompt: int = 100, output: int = 20) -> Any:
    """A reply with usage metadata, as the API returns it."""
    response = as_response(model_turn(*parts))
    response.usage_metadata = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt, candidates_token_count=output, thoughts_token_count=5
    )
    return response


# -- stop conditions ----------------------------------------------------------------------


def test_a_model_that_never_stops_ends_turns_exhausted_at_max_turns(repo: GitRepo) -> None:
    turns = [model_turn(call("read_file", f"r{i}", path="calc.py", start_line=i)) for i in range(9)]
    session = run_session(repo.path, "s-turns", "Fix.", ScriptedModel(turns), max_turns=4)
    assert session.status == "turns_exhausted"
    assert session.recorded["usage"]["turns"] == 4
    assert [b["decision"] for b in tool_calls(session)] == ["allow"] * 4
    assert session.bodies[-1] == {**session.bodies[-1], "kind": "session_end"}


def test_the_default_limit_is_25_turns(repo: GitRepo) -> None:
    turns = [model_turn(call("list_files", None, path=f"d{i}")) for i in range(30)]
    session = run_session(repo.path, "s-25", "Fix.", ScriptedModel(turns))
    assert (session.status, session.recorded["usage"]["turns"]) == ("turns_exhausted", 25)


def test_spending_past_the_token_budget_ends_budget_exhausted_its_calls_denied(
    repo: GitRepo,
) -> None:
    turns = [
        reply(call("read_file", "c1", path="calc.py"), prompt=100, output=20),
        reply(call("replace_lines", "c2", **FIX), prompt=200, output=30),
        reply("never asked for"),
    ]
    limits = SessionLimits(token_budget=300)
    session = run_session(repo.path, "s-budget", "Fix.", ScriptedModel(turns), limits=limits)
    assert session.status == "budget_exhausted"
    # 125 tokens, then 360 (prompt + output, thoughts included): the second reply's call
    # is answered but never run, so the file is untouched and the trail has no effect.
    (read, edit) = tool_calls(session)
    assert (read["decision"], edit["decision"], edit["effects"]) == ("allow", "deny", [])
    assert repo.path.joinpath("calc.py").read_text() == CALC
    response = session.recorded["trajectory"]["contents"][-1]["parts"][0]["function_response"]
    assert "budget" in response["response"]["error"]


def test_past_max_seconds_on_an_injected_clock_ends_timeout(repo: GitRepo) -> None:
    now = iter([0.0, 10.0, 20.0, 31.0, 40.0, 50.0])  # the start, then one reading a check
    turns = [model_turn(call("read_file", f"c{i}", path="calc.py", start_line=i)) for i in range(5)]
    session = run_session(
        repo.path,
        "s-time",
        "Fix.",
        ScriptedModel(turns),
        limits=SessionLimits(max_seconds=30),
        elapsed=lambda: next(now),
    )
    assert session.status == "timeout"
    # Checks at 10 (before turn 1) and 20 (its call) ran; 31 (before turn 2) stopped it.
    assert [b["call_id"] for b in tool_calls(session)] == ["c0"]
    assert session.recorded["usage"]["turns"] == 1


def test_time_running_out_between_calls_denies_the_rest_of_the_reply(repo: GitRepo) -> None:
    now = iter([0.0, 1.0, 2.0, 99.0])
    both = model_turn(call("read_file", "a", path="calc.py"), call("replace_lines", "b", **FIX))
    model = ScriptedModel([both, model_turn("done")])
    session = run_session(
        repo.path,
        "s-t2",
        "Fix.",
        model,
        limits=SessionLimits(max_seconds=5),
        elapsed=lambda: next(now),
    )
    assert session.status == "timeout"
    assert [(b["call_id"], b["decision"]) for b in tool_calls(session)] == [
        ("a", "allow"),
        ("b", "deny"),
    ]


def test_three_identical_calls_in_a_row_end_loop_detected_the_third_not_run(
    repo: GitRepo,
) -> None:
    same = [model_turn(call("run_command", f"c{i}", command=["git", "status"])) for i in range(5)]
    session = run_session(repo.path, "s-loop", "Fix.", ScriptedModel(same))
    assert session.status == "loop_detected"
    assert [b["decision"] for b in tool_calls(session)] == ["allow", "allow", "deny"]
    assert session.recorded["usage"]["turns"] == 3


def test_calls_alike_but_for_an_argument_are_no_loop(repo: GitRepo) -> None:
    turns = [
        model_turn(call("read_file", None, path="calc.py", start_line=1 + i % 2)) for i in range(4)
    ]
    session = run_session(repo.path, "s-noloop", "Fix.", ScriptedModel([*turns, model_turn("ok")]))
    assert session.status == "done"


def test_a_model_out_of_reach_ends_error(repo: GitRepo, tmp_path: Path) -> None:
    class Down:
        name = "down"

        def generate(self, contents: Any, config: Any) -> Any:
            raise InfrastructureError("the Gemini API answered 503: overloaded")

    session = run_session(repo.path, "s-err", "Fix.", Down())
    assert session.status == "error"
    assert session.recorded["usage"]["turns"] == 0


# -- each call: policy, truncation, checkpoints ----------------------------------------------


def test_a_command_off_the_allow_list_is_denied_recorded_and_never_run(repo: GitRepo) -> None:
    turns = [
        model_turn(call("run_command", "c1", command=["rm", "-f", "calc.py"])),
        model_turn(call("run_command", "c2", command="curl http://example.invalid")),
        model_turn("I could not."),
    ]
    session = run_session(repo.path, "s-deny", "Fix.", ScriptedModel(turns))
    assert session.status == "done"
    assert repo.path.joinpath("calc.py").exists()
    assert [(b["decision"], b["effects"], b["checkpoint"]) for b in tool_calls(session)] == [
        ("deny", [], None),
        ("deny", [], None),
    ]
    answers = session.recorded["trajectory"]["contents"][2]["parts"][0]["function_response"]
    assert answers["response"]["error"].startswith("command not allowed: got 'rm'")


def test_a_policy_of_its_own_allows_what_it_lists() -> None:
    policy = Policy(frozenset({"make"}))
    assert policy.refusal("run_command", {"command": "make test"}) is None
    assert policy.refusal("run_command", {"command": ["git", "push"]}) is not None
    assert policy.refusal("run_command", {"command": []}) == (
        "got an empty command, expected a program and its arguments"
    )
    assert policy.refusal("write_file", {"path": "x"}) is None


def test_an_unknown_tool_is_denied(repo: GitRepo) -> None:
    turns = [model_turn(call("format_disk", "c1")), model_turn("ok")]
    session = run_session(repo.path, "s-unknown", "Fix.", ScriptedModel(turns))
    assert [b["decision"] for b in tool_calls(session)] == ["deny"]


def test_tool_output_is_truncated_to_4000_characters_and_says_so(repo: GitRepo) -> None:
    repo.path.joinpath("big.txt").write_text("x" * 9000 + "END", encoding="utf-8")
    loud = [sys.executable, "-c", "print('a' * 9000 + 'TAIL')"]
    turns = [
        model_turn(call("read_file", "c1", path="big.txt")),
        model_turn(call("run_command", "c2", command=loud)),
        model_turn("ok"),
    ]
    session = run_session(repo.path, "s-trunc", "Look.", ScriptedModel(turns))
    contents = session.recorded["trajectory"]["contents"]
    read = contents[2]["parts"][0]["function_response"]["response"]["output"]
    ran = contents[4]["parts"][0]["function_response"]["response"]["output"]
    assert len(read) == len(ran) == OUTPUT_LIMIT
    assert read.startswith("xxx") and "9003 characters, cut to 4000" in read
    assert ran.rstrip().endswith("TAIL")  # a command keeps its end, where failures show


def test_truncate_leaves_short_values_and_other_types_alone() -> None:
    response = {"ok": True, "output": "short", "n": 5}
    assert truncate(response) == response
    assert len(truncate({"output": "y" * 5000}, limit=100)["output"]) == 100


def test_a_checkpoint_restoring_the_tree_is_taken_before_every_write(repo: GitRepo) -> None:
    before = repo.path.joinpath("calc.py").read_text()
    turns = [
        model_turn(call("read_file", "c1", path="calc.py")),
        model_turn(call("replace_lines", "c2", **FIX)),
        model_turn(call("write_file", "c3", path="notes.md", content="n\n")),
        model_turn(call("delete_file", "c4", path="notes.md")),
        model_turn("Fixed."),
    ]
    session = run_session(repo.path, "s-ckpt", "Fix.", ScriptedModel(turns))
    calls = {b["call_id"]: b for b in tool_calls(session)}
    assert calls["c1"]["checkpoint"] is None  # a read writes nothing
    points = {cid: calls[cid]["checkpoint"] for cid in ("c2", "c3", "c4")}
    assert all(p and p.startswith("tree:") for p in points.values())

    def tree_file(point: str, rel: str) -> str | None:
        done = subprocess.run(
            ["git", "show", f"{point.removeprefix('tree:')}:{rel}"],
            cwd=repo.path,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout if done.returncode == 0 else None

    # Each restore point is the tree as it was just before that write.
    assert tree_file(points["c2"], "calc.py") == before
    assert (
        tree_file(points["c3"], "calc.py") != before and tree_file(points["c3"], "notes.md") is None
    )
    assert tree_file(points["c4"], "notes.md") == "n\n"
    # Taking them touched neither the index nor the working tree's state.
    assert repo.git("status", "--porcelain").strip() == "M calc.py"


def test_a_path_outside_the_repository_is_denied_before_anything_runs(repo: GitRepo) -> None:
    outside = repo.path.parent / "outside.txt"
    turns = [
        model_turn(call("write_file", "c1", path="../outside.txt", content="x")),
        model_turn("ok"),
    ]
    session = run_session(repo.path, "s-out", "Fix.", ScriptedModel(turns))
    assert [b["decision"] for b in tool_calls(session)] == ["deny"]
    assert not outside.exists()


# -- the model ---------------------------------------------------------------------------------


def test_the_scripted_model_replays_recorded_json_turns_into_a_delivered_session(
    repo: GitRepo, tmp_path: Path
) -> None:
    model = ScriptedModel(load_turns(FIX_CALC))
    session = run_session(
        repo.path, "s-json", "Fix subtract.", model, tools=DEMO_TOOLS, commit=True
    )
    assert session.status == "done"
    usage = session.recorded["usage"]
    # The replies' usage metadata, thought tokens counted as output.
    assert (usage["prompt_tokens"], usage["output_tokens"], usage["thoughts_tokens"]) == (
        1080,
        63 + 70,
        70,
    )
    first = session.recorded["trajectory"]["contents"][1]["parts"]
    assert first[0]["thought_signature"] and first[1]["thought_signature"]  # untouched
    assert model.seen == [1, 3, 5, 7]  # each call saw the whole history
    v = verify(repo, tmp_path, dumps(session.report()))
    assert v.delivery_status is DeliveryStatus.DELIVERED, findings(v)


def test_the_model_is_asked_with_the_profiles_tools_and_automatic_calling_off() -> None:
    config = Loop(ScriptedModel([])).config()
    assert config.automatic_function_calling is not None
    assert config.automatic_function_calling.disable is True
    assert config.tools is not None and config.tools[0].function_declarations is not None
    declared = {d.name: d for d in config.tools[0].function_declarations}
    assert set(declared) == {
        "read_file",
        "list_files",
        "search",
        "write_file",
        "replace_lines",
        "edit_file",
        "delete_file",
        "run_command",
    }
    params = declared["replace_lines"].parameters
    assert params is not None and params.required == [
        "path",
        "start_line",
        "end_line",
        "expected",
        "replacement",
    ]


# -- the report ----------------------------------------------------------------------------------


def test_the_harness_report_is_the_recorders_and_is_stored_byte_for_byte(
    repo: GitRepo, tmp_path: Path
) -> None:
    trail = tmp_path / "s-bytes.jsonl"
    turns = [
        model_turn(call("read_file", "c1", path="calc.py")),
        model_turn(call("replace_lines", "c2", **FIX)),
        model_turn(call("run_command", "c3", command=[sys.executable, "-m", "pytest", "-q"])),
        model_turn("Fixed subtract()."),
    ]
    session = run_session(
        repo.path, "s-bytes", "Fix.", ScriptedModel(turns), commit=True, trail=trail
    )
    report = session.report()
    assert report == session.recorded  # nothing rebuilt: the recorder's own report
    on_disk = check_trail_file(trail, session_id="s-bytes")  # its trail, whole on disk
    assert (on_disk.exit_code, on_disk.count) == (0, report["audit"]["count"])
    raw = dumps(report)
    v = verify(repo, tmp_path, raw)
    assert v.delivery_status is DeliveryStatus.DELIVERED, findings(v)
    with Store.open(f"sqlite:///{tmp_path / 'agent.sqlite3'}") as store:
        assert store.report_bytes("s-bytes") == raw


def test_a_second_run_of_the_same_turns_gives_the_same_bytes(tmp_path: Path) -> None:
    def once(where: str) -> bytes:
        repo = calc_repo(tmp_path / where)
        turns = [model_turn(call("replace_lines", "c2", **FIX)), model_turn("Fixed.")]
        return dumps(run_session(repo.path, "s-same", "Fix.", ScriptedModel(turns)).report())

    assert once("a") == once("b")


def test_a_session_stopped_short_is_not_delivered(repo: GitRepo, tmp_path: Path) -> None:
    same = [model_turn(call("read_file", f"c{i}", path="calc.py")) for i in range(3)]
    session = run_session(repo.path, "s-short", "Fix.", ScriptedModel(same), commit=True)
    v = verify(repo, tmp_path, dumps(session.report()))
    assert (session.status, v.done) == ("loop_detected", False)
    assert v.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert "audit" not in {c for c, r in v.checks.items() if r.findings}  # denials recorded


def test_a_checkpoint_sees_a_same_size_edit_made_in_the_tick_the_index_was_written(
    repo: GitRepo,
) -> None:
    """The scratch index keeps the real one's mtime, so git's racy-entry rule still has
    it hash a file whose size and times look unchanged (an edit in the index's tick)."""
    calc = repo.path / "calc.py"
    tick = int(time.time()) - 60
    index = repo.path / ".git" / "index"
    for op in "-*/":
        os.utime(calc, (tick, tick))
        repo.git("add", "-A")
        os.utime(index, (tick, tick))  # the index written in the file's own tick
        calc.write_text(CALC.replace("return a + b\n", f"return a {op} b\n", 1))
        os.utime(calc, (tick, tick))  # same size, same mtime: only the content differs
        tree = checkpoint(repo.path).removeprefix("tree:")
        assert repo.git("show", f"{tree}:calc.py").strip() == calc.read_text().strip()


def test_a_reply_with_no_content_ends_error(repo: GitRepo) -> None:
    blocked = types.GenerateContentResponse.model_validate(
        {"candidates": [{"finishReason": "SAFETY", "index": 0}]}
    )
    session = run_session(repo.path, "s-blocked", "Fix.", ScriptedModel([blocked]))
    assert session.status == "error"
    assert "SAFETY" in session.ending.reason
