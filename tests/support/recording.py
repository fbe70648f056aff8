"""What the recorder's tests share: scripted replies, a verifier configuration, verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.gitrepo import GitRepo
from tests.support.paths import TURNS
from tests.support.scripted import ScriptedClient, recorder, response, run_session
from tests.support.sessions import CALC, PYTEST
from verifier.app.pipeline import verify_report
from verifier.config import Config, RepositoryConfig
from verifier.findings import DeliveryStatus

FIX_CALC = TURNS / "fix_calc.json"
FIXED = CALC.replace("    return a + b\n\n\n", "@").replace(
    "    return a + b\n", "    return a - b\n"
)
FIXED = FIXED.replace("@", "    return a + b\n\n\n")


def config(repo: GitRepo, tmp_path: Path) -> Config:
    repo_cfg = RepositoryConfig(
        "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
    )
    return Config(
        database_url=f"sqlite:///{tmp_path / 'rec.sqlite3'}", repositories={"calc": repo_cfg}
    )


def commit(repo: GitRepo) -> str:
    repo.git("add", "-A")
    repo.git("commit", "-q", "--allow-empty", "-m", "agent")
    return repo.head()


def call(name: str, call_id: str | None = None, **args: Any) -> dict[str, Any]:
    fc: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        fc["id"] = call_id
    return {"functionCall": fc}


def fix(call_id: str = "c0") -> Any:
    """The reply that fixes subtract(), so that the repository's tests pass."""
    return response(
        call(
            "replace_lines",
            call_id,
            path="calc.py",
            start_line=6,
            end_line=6,
            expected="    return a + b\n",
            replacement="    return a - b\n",
        )
    )


def delivered(raw: bytes, repo: GitRepo, tmp_path: Path) -> None:
    v = verdict(raw, repo, tmp_path)
    assert v.delivery_status is DeliveryStatus.DELIVERED, findings(v)


def record(
    repo: GitRepo, tmp_path: Path, replies: list[Any], **kw: Any
) -> tuple[dict[str, Any], Path]:
    """One session of `replies`, committed; the report and the trail's path."""
    trail = tmp_path / "s-1.jsonl"
    rec = recorder(repo.path, trail, **kw)
    status = run_session(rec, ScriptedClient(replies))
    report = rec.finish(status, head_commit=commit(repo))
    return report, trail


def verdict(raw: bytes, repo: GitRepo, tmp_path: Path) -> Any:
    return verify_report(raw, config(repo, tmp_path)).verification


def findings(verification: Any) -> list[str]:
    return [f.code for c in verification.checks.values() for f in c.findings]
