"""docs/ci.md works: its pre-push hook refuses a push in a real repository, and its GitHub
Actions workflow's gate step, run with a GitHub-like environment against a real server,
fails the job, annotates and summarises, for each trigger."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.gate import Live, Project, doc_block

ZERO = "0" * 40
BIN = str(Path(sys.executable).parent)


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment: this verifier first on PATH, no GIT_* or verifier variable."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GIT_", "VERIFIER_", "GITHUB_")) and k not in ("PATH", "HOME")
    }
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**keep, "PATH": BIN + os.pathsep + os.environ["PATH"], "HOME": str(home), **extra}


# -- the pre-push hook --------------------------------------------------------------------


def _push(project: Project, env: dict[str, str], *refspec: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "origin", *refspec],
        cwd=project.repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _remote_tip(remote: Path, branch: str) -> str | None:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
        cwd=remote,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or None


@pytest.mark.parametrize("source", ["store", "server"])
def test_the_pre_push_hook_refuses_an_undelivered_push_and_lets_it_through_once_delivered(
    source: str, tmp_path: Path, project: Project, request: pytest.FixtureRequest
) -> None:
    hook = project.repo.path / ".git" / "hooks" / "pre-push"
    hook.write_text(doc_block("pre-push"), encoding="utf-8")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    project.repo.git("remote", "add", "origin", str(remote))
    config = tmp_path / "verifier.toml"
    config.write_text(f'[verifier]\ndatabase_url = "{project.database_url}"\n', encoding="utf-8")
    if source == "store":
        env = _environment(tmp_path, VERIFIER_CONFIG=str(config))
    else:  # the store is the server's; the user's own configuration has none
        live: Live = request.getfixturevalue("live")
        env = _environment(tmp_path, VERIFIER_SERVER=live.url, VERIFIER_TOKEN=live.tokens["read"])

    # A store with no session of this repository at all: the wrong store, or a repository
    # never verified into it. --allow-empty does not let that through (exit 3).
    refused = _push(project, env, f"{project.base}:refs/heads/main")
    assert refused.returncode != 0
    said = " ".join(refused.stdout.split())
    assert "gate: undecided (exit 3): the verdicts cannot be read" in said
    assert "holds no session of the repository" in said
    assert _remote_tip(remote, "main") is None

    # The agent's commit, its session not delivered: the push is refused.
    project.ingest("s1")
    project.record("s1", "not_delivered")
    refused = _push(project, env, "main")
    assert refused.returncode != 0
    assert "change.missing calc.py: calc.py is not at head" in refused.stdout + refused.stderr
    assert "pre-push: refs/heads/main is not pushed to refs/heads/main" in refused.stderr
    assert "failed to push" in refused.stderr
    assert _remote_tip(remote, "main") is None

    project.record("s1", "delivered")
    pushed = _push(project, env, "main")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "gate: passed (exit 0): 1 of 1 session delivered" in pushed.stdout + pushed.stderr
    where = f"server {live.url}" if source == "server" else f"store {project.database_url}"
    assert f"from {where}" in " ".join((pushed.stdout + pushed.stderr).split())
    assert _remote_tip(remote, "main") == project.head

    # A person's commit on top: no session claims it, and the store holds this
    # repository's sessions, so --allow-empty lets it through.
    person = project.repo.commit({"NOTES.md": "by hand\n"}, msg="person: notes")
    pushed = _push(project, env, "main")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "gate: passed (exit 0): no session selected (--allow-empty)" in pushed.stdout
    assert _remote_tip(remote, "main") == person

    # A new branch: its tip is gated; inconclusive blocks too, delivered goes through.
    project.repo.git("checkout", "-q", "-b", "agent/next")
    tip = project.repo.commit({"next.py": "y = 2\n"}, msg="agent: next")
    project.ingest("s2", head=tip, branch="agent/next")
    project.record("s2", "inconclusive")
    refused = _push(project, env, "agent/next")
    assert refused.returncode != 0
    assert "gate: undecided (exit 3)" in refused.stdout + refused.stderr
    assert _remote_tip(remote, "agent/next") is None
    project.record("s2", "delivered")
    assert _push(project, env, "agent/next").returncode == 0
    assert _remote_tip(remote, "agent/next") == tip


# -- the GitHub Actions workflow ------------------------------------------------------------

WAIT_S = 2.0
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def evaluate(value: str, context: dict[str, Any]) -> str:
    """GitHub's ``${{ a.b || c.d }}`` for the property paths and ``||`` the workflow uses:
    the first value that is set and not empty, else ''."""

    def one(match: re.Match[str]) -> str:
        for alternative in match.group(1).split("||"):
            found: Any = context
            for part in alternative.strip().split("."):
                found = found.get(part) if isinstance(found, dict) else None
            if found:
                return str(found)
        return ""

    return EXPRESSION.sub(one, value)


def workflow() -> dict[str, Any]:
    parsed = yaml.safe_load(doc_block("workflow"))
    assert isinstance(parsed, dict)
    return parsed


def gate_step() -> dict[str, Any]:
    [job] = workflow()["jobs"].values()
    [step] = [s for s in job["steps"] if s.get("id") == "gate"]
    return step


def test_the_workflow_runs_on_pull_requests_pushes_and_the_merge_queue_with_the_history() -> None:
    parsed = workflow()
    triggers = parsed.get("on", parsed.get(True))  # YAML 1.1 reads a bare `on` as true
    assert {"pull_request", "push", "merge_group"} <= set(triggers)
    [job] = parsed["jobs"].values()
    [checkout] = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    assert checkout["with"]["fetch-depth"] == 0  # git rev-list needs the range's commits
    step = gate_step()
    assert "verifier gate" in step["run"] and "--format github" in step["run"]
    # The token comes from a secret, through the environment, never a flag.
    assert step["env"]["VERIFIER_TOKEN"].startswith("${{ secrets.")
    assert "VERIFIER_TOKEN" not in step["run"]


def run_gate_step(
    project: Project, live: Live, tmp_path: Path, event_name: str, event: dict[str, Any], sha: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """The gate step's script as the runner would run it: bash -eo pipefail, in the checkout,
    with the step's env evaluated for this event. Returns the run and the step summary."""
    step = gate_step()
    context = {
        "github": {"event": event, "sha": sha, "event_name": event_name},
        "vars": {"VERIFIER_SERVER": live.url},
        "secrets": {"VERIFIER_READ_TOKEN": live.tokens["read"]},
    }
    summary = tmp_path / f"summary-{event_name}.md"
    summary.write_text("", encoding="utf-8")
    script = tmp_path / "step.sh"
    # The documented --wait 600 also waits for a report on an empty selection (a person's
    # commit): a few seconds here judge the same way.
    assert step["run"].count("--wait 600") == 1
    script.write_text(step["run"].replace("--wait 600", f"--wait {WAIT_S:g}"), encoding="utf-8")
    pr = event.get("pull_request", {})
    env = _environment(
        tmp_path,
        CI="true",
        GITHUB_ACTIONS="true",
        GITHUB_EVENT_NAME=event_name,
        GITHUB_SHA=sha,
        GITHUB_WORKSPACE=str(project.repo.path),
        GITHUB_STEP_SUMMARY=str(summary),
        GITHUB_BASE_REF=pr.get("base", {}).get("ref", ""),
        GITHUB_HEAD_REF=pr.get("head", {}).get("ref", ""),
        **{name: evaluate(str(value), context) for name, value in step["env"].items()},
    )
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=project.repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, summary.read_text(encoding="utf-8")


def _annotations(out: str) -> list[str]:
    """The workflow commands before command processing stops (its end closes the output)."""
    commands = [line for line in out.splitlines() if line.startswith("::")]
    stop, end = commands[-2:]
    assert stop.startswith("::stop-commands::") and end == f"::{stop.split('::')[2]}::"
    return commands[:-2]


def test_the_workflow_gate_step_blocks_a_pull_request_then_lets_it_through(
    tmp_path: Path, project: Project, live: Live
) -> None:
    project.ingest("s1")
    project.record("s1", "not_delivered")
    event = {
        "pull_request": {
            "base": {"sha": project.base, "ref": "main"},
            "head": {"sha": project.head, "ref": "agent/fix"},
        }
    }
    done, summary = run_gate_step(project, live, tmp_path, "pull_request", event, "f00d" * 10)
    assert done.returncode == 1, done.stderr
    assert _annotations(done.stdout) == [
        "::error file=calc.py,title=change.missing (s1%2C not delivered)::calc.py is not at head"
    ]
    assert "### ❌ verifier gate: blocked (exit 1)" in summary
    assert f"--rev-range {project.base}..{project.head} (1 commit)" in summary
    assert "| ❌ | <code>s1</code> |" in summary

    project.record("s1", "delivered")
    done, summary = run_gate_step(project, live, tmp_path, "pull_request", event, "f00d" * 10)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _annotations(done.stdout) == []
    assert "### ✅ verifier gate: passed (exit 0)" in summary


@pytest.mark.parametrize("trigger", ["push", "push-new-branch", "merge_group"])
def test_the_workflow_gate_step_selects_the_right_commits_on_each_trigger(
    trigger: str, tmp_path: Path, project: Project, live: Live
) -> None:
    project.ingest("s1")
    project.record("s1", "not_delivered")
    event: dict[str, Any] = {
        "push": {"before": project.base, "after": project.head},
        "push-new-branch": {"before": ZERO, "after": project.head},
        "merge_group": {"merge_group": {"base_sha": project.base, "head_sha": project.head}},
    }[trigger]
    name = trigger.removesuffix("-new-branch")
    done, summary = run_gate_step(project, live, tmp_path, name, event, project.head)
    assert done.returncode == 1, done.stderr
    selected = (
        f"--commit {project.head[:12]}"
        if trigger == "push-new-branch"
        else f"--rev-range {project.base}..{project.head} (1 commit)"
    )
    assert selected in summary
    assert len(_annotations(done.stdout)) == 1

    # A range with no agent session in it (a person's commit) goes through: --allow-empty.
    human = project.repo.commit({"README": "hello\n"}, msg="a person's commit")
    event = {"before": project.head, "after": human}
    done, summary = run_gate_step(project, live, tmp_path, "push", event, human)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no session selected (--allow-empty)" in summary
