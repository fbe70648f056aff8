"""Repositories given by url: a worker's bare mirror, fetched on demand, one fetch at a time.

Real git throughout: the "remote" is a bare repository in a temp folder, reached
by a ``file://`` url, as a worker on another machine would reach a server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.gitrepo import GitRepo
from tests.support.sessions import PYTEST, fix_turns, fixed_session, to_bytes
from verifier._internal.mirror import Mirror, MirrorError
from verifier._internal.sandbox.runner import sandboxes_available
from verifier.app.pipeline import verify_report
from verifier.config import Config, RepositoryConfig, default_mirror_cache
from verifier.errors import ConfigError
from verifier.findings import CheckStatus, DeliveryStatus
from verifier.verify import Options

BROKEN = "    return b - a\n"


def bare_remote(repo: GitRepo, where: Path) -> str:
    """A bare copy of `repo` as a server would hold it; its ``file://`` url."""
    subprocess.run(["git", "clone", "-q", "--bare", str(repo.path), str(where)], check=True)
    return where.resolve().as_uri()


def by_path(repo: GitRepo, tmp_path: Path) -> Config:
    calc = RepositoryConfig("calc", path=repo.path, test_command=PYTEST, test_timeout_s=60)
    return Config(repositories={"calc": calc}, mirror_cache=tmp_path / "mirrors")


def by_url(url: str, tmp_path: Path, **keys: object) -> Config:
    calc = RepositoryConfig(
        "calc",
        url=url,
        test_command=PYTEST,
        test_timeout_s=60,
        **keys,  # type: ignore[arg-type]
    )
    return Config(repositories={"calc": calc}, mirror_cache=tmp_path / "mirrors")


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes: proof that nothing was written there."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# configuration --------------------------------------------------------------------------


def _load(tmp_path: Path, table: str) -> Config:
    path = tmp_path / "v.toml"
    path.write_text("[repositories.calc]\n" + table, encoding="utf-8")
    return Config.load(path, environ={})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('path = "r"\nurl = "https://git.example/calc.git"\n', "give path or url, not both"),
        ('url = "--upload-pack=touch /tmp/x"\n', "repositories.calc.url: expected a git url"),
        ('url = "ext::sh -c touch% /tmp/x"\n', "repositories.calc.url: the ext:: transport"),
        ('url = ""\n', "repositories.calc.url: expected a git url"),
        ("url = 3\n", "repositories.calc.url"),
    ],
)
def test_a_bad_url_or_a_path_beside_it_is_a_config_error_naming_the_key(
    tmp_path: Path, table: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _load(tmp_path, table)
    assert "repositories.calc" in str(info.value)


def test_the_mirror_cache_defaults_to_the_users_cache_and_is_relative_to_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    assert default_mirror_cache() == tmp_path / "xdg-cache" / "verifier" / "mirrors"
    assert Config().mirror_cache == tmp_path / "xdg-cache" / "verifier" / "mirrors"
    path = tmp_path / "v.toml"
    path.write_text('[verifier]\nmirror_cache = "m"\nfetch_timeout = 5\n', encoding="utf-8")
    config = Config.load(path, environ={})
    assert (config.mirror_cache, config.fetch_timeout_s) == (tmp_path / "m", 5)


# verdicts through the mirror -------------------------------------------------------------


@pytest.mark.parametrize(
    ("replacement", "verdict"),
    [(None, DeliveryStatus.DELIVERED), (BROKEN, DeliveryStatus.NOT_DELIVERED)],
)
def test_a_session_verified_through_the_mirror_gets_the_verdict_it_gets_through_the_path(
    repo: GitRepo, tmp_path: Path, replacement: str | None, verdict: DeliveryStatus
) -> None:
    turns = fix_turns() if replacement is None else fix_turns(replacement=replacement)
    raw = to_bytes(fixed_session(repo, turns=turns).report())
    url = bare_remote(repo, tmp_path / "remote.git")
    before = files_of(tmp_path / "remote.git")

    through_path = verify_report(raw, by_path(repo, tmp_path), store=False).verification
    through_url = verify_report(raw, by_url(url, tmp_path), store=False).verification

    assert through_path.delivery_status is verdict
    assert through_url.delivery_status is verdict
    statuses = {name: r.status for name, r in through_url.checks.items()}
    assert statuses == {name: r.status for name, r in through_path.checks.items()}
    changes = through_url.checks["changes"].details
    assert changes == through_path.checks["changes"].details  # same commits, same changes
    assert files_of(tmp_path / "remote.git") == before  # the remote is only read
    (mirror,) = (tmp_path / "mirrors").glob("*.git")
    assert mirror == Mirror(url, tmp_path / "mirrors").path


def test_a_head_commit_not_on_the_remote_is_inconclusive_not_a_failure(
    repo: GitRepo, tmp_path: Path
) -> None:
    url = bare_remote(repo, tmp_path / "remote.git")  # before the session: never pushed
    raw = to_bytes(fixed_session(repo).report())
    verification = verify_report(raw, by_url(url, tmp_path), store=False).verification
    assert verification.delivery_status is DeliveryStatus.INCONCLUSIVE
    changes = verification.checks["changes"]
    assert changes.status is CheckStatus.ERROR
    assert [f.code for f in changes.findings] == ["change.fetch_failed"]
    assert "is not in" in changes.findings[0].message
    assert verification.checks["tests"].status is CheckStatus.SKIPPED


def test_a_remote_that_cannot_be_reached_is_inconclusive(repo: GitRepo, tmp_path: Path) -> None:
    raw = to_bytes(fixed_session(repo).report())
    url = (tmp_path / "no-such-remote.git").as_uri()
    verification = verify_report(raw, by_url(url, tmp_path), store=False).verification
    assert verification.delivery_status is DeliveryStatus.INCONCLUSIVE
    (finding,) = verification.checks["changes"].findings
    assert finding.code == "change.fetch_failed"
    assert "git fetch" in finding.message and "does not appear to be a git repository" in (
        finding.message
    )


def test_worktree_mode_on_a_bare_repository_is_inconclusive(repo: GitRepo, tmp_path: Path) -> None:
    """Uncommitted work is in the agent's working tree; a mirror holds none."""
    url = bare_remote(repo, tmp_path / "remote.git")
    raw = to_bytes(fixed_session(repo, commit=False).report())
    verification = verify_report(raw, by_url(url, tmp_path), store=False).verification
    assert verification.delivery_status is DeliveryStatus.INCONCLUSIVE
    (finding,) = verification.checks["changes"].findings
    assert finding.code == "change.repo_unavailable"
    assert "bare repository" in finding.message and "worktree mode" in finding.message


def test_repo_names_a_bare_repository_in_commit_mode(repo: GitRepo, tmp_path: Path) -> None:
    """``--repo`` may point at a bare repository (a server's copy) for committed work."""
    raw = to_bytes(fixed_session(repo).report())
    bare_remote(repo, tmp_path / "remote.git")
    options = Options(repo_path=tmp_path / "remote.git")
    config = Config(repositories={"calc": RepositoryConfig("calc", test_command=PYTEST)})
    outcome = verify_report(raw, config, options, store=False)
    assert outcome.verification.delivery_status is DeliveryStatus.DELIVERED


# the mirror itself ----------------------------------------------------------------------


def test_commits_already_in_the_mirror_are_not_fetched_again(repo: GitRepo, tmp_path: Path) -> None:
    base = repo.head()
    head = repo.commit({"calc.py": "x = 1\n"})
    remote = tmp_path / "remote.git"
    url = bare_remote(repo, remote)
    mirror = Mirror(url, tmp_path / "mirrors")
    assert mirror.ensure([base, head[:12]]) == mirror.path
    remote.rename(tmp_path / "gone.git")  # any fetch would now fail
    assert mirror.ensure([base, head]) == mirror.path
    with pytest.raises(MirrorError, match="does not appear to be a git repository"):
        mirror.ensure([head], refresh=True)  # a trusted_ref: the tip must be the remote's


def test_a_commit_no_branch_holds_is_fetched_by_its_id(repo: GitRepo, tmp_path: Path) -> None:
    """A branch deleted after the session was pushed: its commit is still on the server."""
    repo.git("checkout", "-q", "-b", "agent")
    head = repo.commit({"calc.py": "x = 2\n"})
    repo.git("checkout", "-q", "main")
    url = bare_remote(repo, tmp_path / "remote.git")
    subprocess.run(
        ["git", "-C", str(tmp_path / "remote.git"), "update-ref", "refs/pull/1/head", head],
        check=True,
    )
    subprocess.run(["git", "-C", str(tmp_path / "remote.git"), "branch", "-D", "agent"], check=True)
    mirror = Mirror(url, tmp_path / "mirrors")
    mirror.ensure([head])
    kind = subprocess.run(
        ["git", "-C", str(mirror.path), "cat-file", "-t", head], capture_output=True, text=True
    )
    assert kind.stdout.strip() == "commit"
    with pytest.raises(MirrorError, match=f"commit {'0' * 40} is not in"):
        mirror.ensure(["0" * 40])


_CHILD = """
import logging, sys
from pathlib import Path
from verifier._internal.mirror import Mirror
logging.basicConfig(filename=sys.argv[3], level=logging.INFO, format="%(process)d %(message)s")
Mirror(sys.argv[1], Path(sys.argv[2])).ensure([sys.argv[4]], refresh=True)
"""


def _waiters(lock: Path) -> int:
    """How many processes wait for the flock on `lock` (``->`` lines of /proc/locks)."""
    inode = f":{os.stat(lock).st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and "FLOCK" in line and inode in line)


def test_two_workers_never_fetch_into_one_mirror_at_once(repo: GitRepo, tmp_path: Path) -> None:
    """Two processes released at the same instant: their fetches run one after the other."""
    url = bare_remote(repo, tmp_path / "remote.git")
    mirror = Mirror(url, tmp_path / "mirrors")
    mirror.ensure([repo.head()])
    log = tmp_path / "fetches.log"
    with mirror.locked():
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, url, str(mirror.cache), str(log), repo.head()]
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 60  # a barrier, not an assertion on time
        while _waiters(mirror.lock_path) < 2:
            assert all(c.poll() is None for c in children), "a worker ended without the lock"
            assert time.monotonic() < deadline, "the workers never waited for the lock"
            time.sleep(0.01)
    assert [c.wait(timeout=120) for c in children] == [0, 0]
    events = [line.split(" ", 2)[:2] for line in log.read_text().splitlines()]
    pids = [pid for pid, _ in events]
    assert [what for _, what in events] == ["fetching", "fetched", "fetching", "fetched"]
    assert pids[0] == pids[1] and pids[2] == pids[3] and pids[0] != pids[2]


def test_a_trusted_ref_is_read_at_the_remotes_current_tip(repo: GitRepo, tmp_path: Path) -> None:
    """The same trusted_ref as for a clone; fetched afresh each time, so a base the remote's
    main has moved past by more than trusted_max_behind is refused."""
    remote = tmp_path / "remote.git"
    url = bare_remote(repo, remote)
    raw = to_bytes(fixed_session(repo).report())  # head committed in the agent's checkout
    subprocess.run(
        ["git", "-C", str(repo.path), "push", "-q", url, "HEAD:refs/heads/agent"], check=True
    )
    cfg = by_url(url, tmp_path, trusted_ref="refs/remotes/origin/main", trusted_max_behind=0)
    assert verify_report(raw, cfg, store=False).verification.delivery_status is (
        DeliveryStatus.DELIVERED
    )
    # Someone merges to main on the server: the session's base is now one commit behind.
    subprocess.run(
        ["git", "-C", str(repo.path), "push", "-q", url, "HEAD:refs/heads/main"], check=True
    )
    verification = verify_report(raw, cfg, store=False).verification
    assert verification.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert [f.code for f in verification.checks["changes"].findings] == ["change.base_untrusted"]


@pytest.mark.skipif(not sandboxes_available(), reason="no sandbox works here")
def test_the_mirrors_are_out_of_the_tests_reach(repo: GitRepo, tmp_path: Path) -> None:
    """The mirror cache lies in a folder every run is shown: only hiding keeps it out, and
    it keeps out every mirror, not only the one of the repository under test."""
    shown = tmp_path / "shown"
    url = bare_remote(repo, tmp_path / "remote.git")
    mirror = Mirror(bare_remote(repo, tmp_path / "another.git"), shown / "mirrors")
    mirror.ensure([repo.head()])  # another repository's mirror on this worker
    needs = f"    open({str(mirror.path / 'HEAD')!r}, 'rb').close()\n    return a - b\n"
    raw = to_bytes(fixed_session(repo, turns=fix_turns(replacement=needs)).report())
    subprocess.run(
        ["git", "-C", str(repo.path), "push", "-q", url, "HEAD:refs/heads/s"], check=True
    )
    calc = RepositoryConfig("calc", url=url, test_command=PYTEST, test_timeout_s=60)
    config = Config(
        repositories={"calc": calc}, mirror_cache=shown / "mirrors", sandbox_read_only=[str(shown)]
    )
    verification = verify_report(raw, config, store=False).verification
    assert verification.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert [f.code for f in verification.checks["tests"].findings] == ["tests.failed"]
    assert (mirror.path / "HEAD").is_file()  # it is there: the run could not see it


def test_a_worker_verifies_a_stored_session_through_the_mirror_and_reuses_its_test_result(
    repo: GitRepo, tmp_path: Path
) -> None:
    """The queue's step (`verify_session`), not only the command line's, resolves a url."""
    from dataclasses import replace

    from verifier.app.pipeline import submit, verify_session
    from verifier.store import Store

    raw = to_bytes(fixed_session(repo, turns=fix_turns()).report())
    url = bare_remote(repo, tmp_path / "remote.git")
    config = replace(by_url(url, tmp_path), database_url=f"sqlite:///{tmp_path / 's.sqlite3'}")
    with Store.open(config.database_url) as store:
        row, _ = submit(store, raw, "test")
        first = verify_session(store, row.session_id, config, reason="ingest").verification
        again = verify_session(store, row.session_id, config, reason="reverify").verification
    assert first.delivery_status is again.delivery_status is DeliveryStatus.DELIVERED
    assert list((tmp_path / "mirrors").glob("*.git"))
    assert "cached_from" not in first.checks["tests"].details
    assert again.checks["tests"].details["cached_from"] == row.session_id
