"""trusted_ref cannot be bent by the repository it vouches for."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml, fixed_session, to_bytes
from verifier.checks.changes import check
from verifier.config import RepositoryConfig
from verifier.findings import CheckResult, CheckStatus

REF = "refs/remotes/origin/main"
WEAK = {"tests/test_calc.py": "def test_subtract():\n    assert True\n"}


def codes(result: CheckResult) -> list[str]:
    return [f.code for f in result.findings]


def trusted(**keys: object) -> RepositoryConfig:
    return RepositoryConfig("calc", trusted_ref=REF, **keys)  # type: ignore[arg-type]


def test_a_graft_cannot_make_the_agents_base_an_ancestor(repo: GitRepo) -> None:
    tip = repo.head()
    repo.git("update-ref", REF, tip)
    weakened = repo.commit(WEAK, "weaken the tests")
    # .git/info/grafts: the trusted tip now claims the agent's commit as its parent.
    (repo.path / ".git" / "info").mkdir(exist_ok=True)
    (repo.path / ".git" / "info" / "grafts").write_text(f"{tip} {weakened}\n")
    plain = subprocess.run(
        ["git", "merge-base", "--is-ancestor", weakened, tip], cwd=repo.path, check=False
    )
    assert plain.returncode == 0  # git itself is fooled

    result = check(repo.path, weakened, weakened, [], trusted())

    assert result.status is CheckStatus.FAIL
    assert codes(result) == ["change.base_untrusted"]


def test_a_base_too_far_behind_the_trusted_tip_fails(repo: GitRepo) -> None:
    old = repo.head()
    for i in range(3):
        repo.commit({f"doc{i}.txt": f"{i}\n"}, f"upstream {i}")
    repo.git("update-ref", REF, repo.head())
    two_behind = repo.git("rev-parse", "HEAD~2")

    result = check(repo.path, old, old, [], trusted(trusted_max_behind=2))
    assert codes(result) == ["change.base_untrusted"]
    assert "more than 2 commits behind" in result.findings[0].message
    assert (
        check(repo.path, two_behind, two_behind, [], trusted(trusted_max_behind=2)).status
        is CheckStatus.PASS
    )
    tip_only = trusted(trusted_max_behind=0)
    assert codes(check(repo.path, two_behind, two_behind, [], tip_only)) == [
        "change.base_untrusted"
    ]
    assert check(repo.path, repo.head(), repo.head(), [], tip_only).status is CheckStatus.PASS


def test_worktree_mode_without_a_mirror_cannot_trust_the_ref(repo: GitRepo) -> None:
    """The agent writes this repository: it could have moved the ref to its own commit."""
    repo.git("update-ref", REF, repo.head())
    result = check(repo.path, repo.head(), None, [], trusted())
    assert result.status is CheckStatus.ERROR
    assert codes(result) == ["change.trusted_ref_untrustworthy"]


def test_worktree_mode_reads_the_ref_in_the_mirror(repo: GitRepo, tmp_path: Path) -> None:
    tip = repo.head()
    repo.git("update-ref", REF, tip)
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(repo.path), str(mirror)], check=True)
    weakened = repo.commit(WEAK, "weaken the tests")
    repo.git("update-ref", REF, weakened)  # the agent moves the ref in its own repository
    cfg = trusted(trusted_mirror=mirror)

    moved = check(repo.path, weakened, None, [], cfg)
    assert codes(moved) == ["change.base_untrusted"]
    honest = check(repo.path, tip, tip, [], cfg)
    assert honest.status is CheckStatus.PASS, honest.findings


def _verify_cli(report: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifier", "verify", str(report), "--config", str(config),
         "--no-store", "--format", "json", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_a_report_naming_a_laxer_repository_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    """--repo names the protected repository; repo.name names a lax one: a usage error."""
    report = fixed_session(repo).report()
    report["repo"]["name"] = "lax"
    (tmp_path / "report.json").write_bytes(to_bytes(report))
    config = config_toml(tmp_path, repo, protected_paths=["calc.py"])
    lax = tmp_path / "elsewhere"
    lax.mkdir()
    with config.open("a") as fh:
        fh.write(f'\n[repositories.lax]\npath = "{lax}"\ntest_command = ["true"]\n')

    refused = _verify_cli(tmp_path / "report.json", config, "--repo", str(repo.path))
    assert refused.returncode == 2, refused.stderr
    assert "'lax'" in refused.stderr and str(lax) in refused.stderr
    # --format json: stdout is the error object alone, never a verdict.
    error = json.loads(refused.stdout)
    assert set(error) == {"error"} and error["error"]["code"] == "config"
    assert "'lax'" in error["error"]["problem"]

    bound = _verify_cli(
        tmp_path / "report.json", config, "--repo", str(repo.path), "--repo-name", "calc"
    )
    verdict = json.loads(bound.stdout)
    assert bound.returncode == 1, bound.stderr
    assert [f["code"] for f in verdict["checks"]["changes"]["findings"]] == [
        "change.protected_path"
    ]


def test_a_path_configured_under_another_name_is_refused(repo: GitRepo, tmp_path: Path) -> None:
    report = fixed_session(repo).report()
    report["repo"]["name"] = "unconfigured"
    (tmp_path / "report.json").write_bytes(to_bytes(report))
    config = config_toml(tmp_path, repo)
    done = _verify_cli(tmp_path / "report.json", config, "--repo", str(repo.path))
    assert done.returncode == 2
    assert "configured as 'calc'" in done.stderr
    unknown = _verify_cli(tmp_path / "report.json", config, "--repo-name", "nope")
    assert unknown.returncode == 2
    assert "--repo-name: no repository 'nope'" in unknown.stderr


def _forge_first_parent(graph: Path, commit: str, parent: str) -> None:
    """Rewrite `commit`'s first parent in a commit-graph file (git reads it unverified)."""
    data = bytearray(graph.read_bytes())
    assert data[:4] == b"CGPH"
    chunks = {}
    for i in range(data[6] + 1):
        at = 8 + 12 * i
        chunks[bytes(data[at : at + 4])] = struct.unpack(">Q", data[at + 4 : at + 12])[0]
    count = struct.unpack(">I", data[chunks[b"OIDF"] + 255 * 4 : chunks[b"OIDF"] + 256 * 4])[0]
    listed = chunks[b"OIDL"]
    ids = [bytes(data[listed + 20 * i : listed + 20 * (i + 1)]).hex() for i in range(count)]
    struct.pack_into(">I", data, chunks[b"CDAT"] + 36 * ids.index(commit) + 20, ids.index(parent))
    graph.chmod(0o644)
    graph.write_bytes(bytes(data))


def test_a_forged_commit_graph_cannot_bring_an_old_base_closer(repo: GitRepo) -> None:
    """A commit-graph the agent wrote says the tip's parent is the old base: not believed."""
    old = repo.head()
    for i in range(3):
        repo.commit({f"doc{i}.txt": f"{i}\n"}, f"upstream {i}")
    tip = repo.head()
    repo.git("update-ref", REF, tip)
    repo.git("-c", "commitGraph.generationVersion=1", "commit-graph", "write", "--reachable")
    _forge_first_parent(repo.path / ".git" / "objects" / "info" / "commit-graph", tip, old)
    assert repo.git("rev-list", "--count", tip, f"^{old}") == "1"  # git itself is fooled

    result = check(repo.path, old, old, [], trusted(trusted_max_behind=1))

    assert codes(result) == ["change.base_untrusted"]
    assert "more than 1 commits behind" in result.findings[0].message
