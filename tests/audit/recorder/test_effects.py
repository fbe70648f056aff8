"""Effects as git would see the files: line-ending attributes, modes, ignored files, folders."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

from audit._worktree import HashCache, Seen, snapshot
from audit.recorder import dumps
from tests.support.gitrepo import GitRepo, sha256
from tests.support.recording import call, commit, delivered, fix
from tests.support.scripted import ScriptedClient, recorder, response, run_session
from tests.support.sessions import CALC


def record(repo: GitRepo, tmp_path: Path, replies: list[Any]) -> dict[str, Any]:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    status = run_session(rec, ScriptedClient(replies))
    return rec.finish(status, head_commit=commit(repo))


def test_crlf_files_are_hashed_as_git_stores_them_where_attributes_convert(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.commit({".gitattributes": "*.txt text eol=crlf\n", "notes.txt": "one\r\n"}, "eol")
    report = record(
        repo,
        tmp_path,
        [
            fix(),
            response(call("write_file", "c1", path="notes.txt", content="one\r\ntwo\r\n")),
            response(call("write_file", "c2", path="raw.bin", content="x\r\n")),
            response({"text": "Noted."}),
        ],
    )
    claims = {c["path"]: c for c in report["changes"]}
    assert claims["notes.txt"]["sha256_before"] == sha256(b"one\n")
    assert claims["notes.txt"]["sha256_after"] == sha256(b"one\ntwo\n")
    assert claims["raw.bin"]["sha256_after"] == sha256(b"x\r\n")  # no attribute: raw bytes
    delivered(dumps(report), repo, tmp_path)


def test_a_command_making_a_file_executable_is_a_mode_effect_the_verifier_accepts(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.commit({"run.sh": "#!/bin/sh\necho hi\n"}, "script")
    report = record(
        repo,
        tmp_path,
        [
            fix(),
            response(call("run_command", "c1", command="chmod +x run.sh")),
            response({"text": "ok"}),
        ],
    )
    (effect,) = report["audit"]["entries"][2]["effects"]
    assert (effect["path"], effect["mode_before"], effect["mode_after"]) == (
        "run.sh",
        "100644",
        "100755",
    )
    assert effect["sha256_before"] == effect["sha256_after"]
    claims = {c["path"]: c for c in report["changes"]}
    assert (claims["run.sh"]["mode_before"], claims["run.sh"]["mode_after"]) == ("100644", "100755")
    delivered(dumps(report), repo, tmp_path)


def test_files_git_ignores_are_no_effects_even_when_a_command_writes_them(
    repo: GitRepo, tmp_path: Path
) -> None:
    script = "import os; os.makedirs('build', exist_ok=True); open('build/out.o', 'w').write('x')"
    report = record(
        repo,
        tmp_path,
        [
            fix(),
            response(call("run_command", "c1", command=f'python -c "{script}"')),
            response({"text": "built"}),
        ],
    )
    assert (repo.path / "build" / "out.o").exists()
    assert report["audit"]["entries"][2]["effects"] == []
    delivered(dumps(report), repo, tmp_path)


def test_a_folder_tool_sees_the_files_under_the_folder(repo: GitRepo, tmp_path: Path) -> None:
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    (pending,) = rec.reply(response(call("make_two", "c1", path=".")))

    def make_two(args: Any) -> dict[str, Any]:
        (repo.path / "docs").mkdir()
        (repo.path / "docs" / "a.md").write_text("a\n")
        (repo.path / "b.md").write_text("b\n")
        return {"ok": True}

    rec.execute(pending, make_two, paths=["."])
    rec.respond()
    effects = rec.finish("done")["audit"]["entries"][1]["effects"]
    assert [e["path"] for e in effects] == ["b.md", "docs/a.md"]


def test_a_link_leading_outside_is_no_file_of_the_repository(repo: GitRepo, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    os.symlink(tmp_path, repo.path / "out")
    rec = recorder(repo.path, tmp_path / "s-1.jsonl")
    (pending,) = rec.reply(response(call("read_file", "c1", path="out/secret.txt")))
    answer = rec.execute(pending, lambda args: {"output": "never run"}, paths=["out/secret.txt"])
    assert "link leading outside" in answer["error"]
    rec.respond()
    entry = rec.finish("done")["audit"]["entries"][1]
    assert (entry["decision"], entry["effects"]) == ("deny", [])


def test_a_hash_is_reused_only_for_a_file_unchanged_since_well_before_it_was_hashed() -> None:
    cache = HashCache()
    seen = Seen("a" * 64, "100644")
    old = (1, 2, 0o100644, 10, 5_000_000_000, 5_000_000_000)
    cache.put("x.py", None, old, seen, at=5_000_000_000 + HashCache.RACY_NS + 1)
    assert cache.get("x.py", None, old) == seen
    assert cache.get("x.py", "text", old) is None  # another conversion: hashed again
    assert cache.get("x.py", None, (*old[:-1], old[-1] + 1)) is None  # changed since
    racy = (1, 2, 0o100644, 10, 9_000_000_000, 9_000_000_000)
    cache.put("y.py", None, racy, seen, at=9_500_000_000)  # written in the hashing's tick
    assert cache.get("y.py", None, racy) is None


def test_a_file_rewritten_at_the_same_size_after_it_was_cached_is_seen_changed(
    repo: GitRepo,
) -> None:
    cache = HashCache(clock=lambda: time.time_ns() + 10 * HashCache.RACY_NS)
    first = snapshot(repo.path, repo.head(), cache=cache)
    (repo.path / "calc.py").write_text(CALC.replace("a + b", "a * b", 1))
    second = snapshot(repo.path, repo.head(), cache=cache)
    assert second["calc.py"].sha256 == sha256(CALC.replace("a + b", "a * b", 1).encode())
    assert first["calc.py"] != second["calc.py"]
    assert {k: v for k, v in first.items() if k != "calc.py"} == {
        k: v for k, v in second.items() if k != "calc.py"
    }


def test_a_few_named_files_ask_git_their_attributes_only_when_one_holds_a_crlf(
    repo: GitRepo, tmp_path: Path, monkeypatch: Any
) -> None:
    # What the gemini-cli hook snapshots around a file tool: no hash cache, one file.
    repo.commit({".gitattributes": "*.txt text eol=crlf\n", "notes.txt": "one\r\n"}, "eol")
    head = repo.head()
    shim, log = tmp_path / "bin", tmp_path / "git.log"
    shim.mkdir()
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout
    (shim / "git").write_text(f'#!/bin/sh\necho "$3" >> {log}\nexec {real.strip()} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    (repo.path / "plain.txt").write_text("no carriage return\n")
    assert snapshot(repo.path, head, ["plain.txt"])["plain.txt"].sha256 == sha256(
        b"no carriage return\n"
    )
    assert log.read_text().split() == ["ls-files"]  # no check-attr
    (repo.path / "notes.txt").write_bytes(b"one\r\ntwo\r\n")
    assert snapshot(repo.path, head, ["notes.txt"])["notes.txt"].sha256 == sha256(
        b"one\ntwo\n"
    )  # converted as git stores it
    assert log.read_text().split() == ["ls-files", "ls-files", "check-attr"]
