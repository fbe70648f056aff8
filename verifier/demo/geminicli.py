"""``verifier demo --gemini-cli``: scripted sessions of the real gemini-cli, recorded by our
hooks, verified: done versus delivered.

The sample repository of `make demo`, our hooks installed in it
(`verifier.app.geminicli_hooks.install`), then gemini-cli run headless once per
scenario with scripted model turns (its own tools really run: the edits, the
shell), its ``HOME`` a folder of the demo so the user's ``~/.gemini`` is never
touched. Each report the hooks wrote under the git directory is verified into
the demo's store. gemini-cli is looked for by `find_gemini_cli`; when it is not
installed the demo says how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.app import geminicli_hooks
from verifier.app.pipeline import verify_report
from verifier.demo import page
from verifier.demo.run import BUGGY, FIXED, TASK, demo_config, prepare, rates_of, sample_repository
from verifier.errors import ConfigError
from verifier.findings import Verification
from verifier.formats import render

__all__ = ["SCENARIOS", "run", "run_scripted", "turn"]

# A scripted gemini-cli session: its turns, given the repository's absolute path.
Turns = Callable[[Path], list[dict[str, Any]]]


def turn(*parts: str | Mapping[str, Any], prompt_tokens: int = 100) -> dict[str, Any]:
    """One scripted model turn for ``--fake-responses``: text parts, or function calls
    given as ``{name: args}``."""
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            content.append({"text": part})
        else:
            content += [{"functionCall": {"name": n, "args": dict(a)}} for n, a in part.items()]
    response = {
        "candidates": [{"content": {"role": "model", "parts": content}, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": 10,
            "totalTokenCount": prompt_tokens + 10,
        },
    }
    return {"method": "generateContentStream", "response": [response]}


def run_scripted(
    gemini: Path,
    repo: Path,
    home: Path,
    turns: Sequence[Mapping[str, Any]],
    *,
    prompt: str = TASK,
    model: str | None = None,
    timeout: float = 240,
    output: str = "json",
    approval: str = "yolo",
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """gemini-cli headless in `repo`, `turns` as the model, `home` as its ``HOME``, the
    project's hooks trusted (``GEMINI_CLI_TRUST_WORKSPACE``: ``--skip-trust`` alone does
    not load the project's settings in 0.61); `env` adds variables (a hook's token)."""
    home.mkdir(parents=True, exist_ok=True)
    script = home / "turns.jsonl"
    script.write_text("".join(json.dumps(t) + "\n" for t in turns), encoding="utf-8")
    args = [str(gemini), "-p", prompt, "-o", output, "--fake-responses-non-strict", str(script)]
    args += ["--yolo"] if approval == "yolo" else ["--approval-mode", approval]
    if model is not None:
        args += ["-m", model]
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GEMINI_API_KEY": "scripted",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        # Run in the one node process: without it gemini-cli relaunches itself in a child
        # (to raise the heap limit), loading its 16 MB bundle twice, about a second of CPU.
        "GEMINI_CLI_NO_RELAUNCH": "true",
        "NO_COLOR": "1",
        "GIT_AUTHOR_NAME": "gemini-cli",
        "GIT_AUTHOR_EMAIL": "gemini-cli@example.invalid",
        "GIT_COMMITTER_NAME": "gemini-cli",
        "GIT_COMMITTER_EMAIL": "gemini-cli@example.invalid",
        # As the reference agent's commands (`verifier.agent.tools`): where the caller says
        # the tests need no installed plugin, the session's `pytest` loads none.
        **{k: os.environ[k] for k in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD",) if k in os.environ},
        **(env or {}),
    }
    return subprocess.run(
        args, cwd=repo, env=environ, capture_output=True, text=True, timeout=timeout, check=False
    )


def _replace(repo: Path, new: str) -> dict[str, Any]:
    # A path relative to the workspace, which gemini-cli resolves: the tool profiles do not
    # map an absolute file_path to the repository yet.
    return {
        "replace": {
            "file_path": "calc.py",
            "old_string": "def subtract(a, b):\n" + BUGGY,
            "new_string": "def subtract(a, b):\n" + new,
            "instruction": "subtract must subtract",
        }
    }


PYTEST = {"run_shell_command": {"command": "python3 -m pytest -q -p no:cacheprovider"}}


@dataclass(frozen=True)
class Scenario:
    session: str  # a name for the table: the session id is gemini-cli's own
    story: str
    turns: Turns


SCENARIOS = [
    Scenario(
        "gemini-01-delivered",
        "replace fixes subtract(), the tests run, done: delivered",
        lambda repo: [turn(_replace(repo, FIXED)), turn(PYTEST), turn("Fixed subtract().")],
    ),
    Scenario(
        "gemini-02-rejected-edit",
        "the edit's old text is not in the file, so replace fails; the model says done anyway",
        lambda repo: [
            turn(
                {
                    "replace": {
                        "file_path": "calc.py",
                        "old_string": "class Calculator:\n    precision = 10\n",
                        "new_string": "class Calculator:\n    precision = 12\n",
                        "instruction": "fix it",
                    }
                }
            ),
            turn("Fixed subtract()."),
        ],
    ),
    Scenario(
        "gemini-03-tests-fail",
        "the edit breaks subtract() another way; done without running the tests",
        lambda repo: [turn(_replace(repo, "    return b - a\n")), turn("Fixed subtract().")],
    ),
    Scenario(
        "gemini-04-shell-commit",
        "sed fixes subtract() through the shell, then git commits: delivered (commit mode)",
        lambda repo: [
            turn({"run_shell_command": {"command": "sed -i '6s/a + b/a - b/' calc.py"}}),
            turn(
                {"run_shell_command": {"command": "git add -A && git commit -q -m 'fix subtract'"}}
            ),
            turn("Fixed and committed."),
        ],
    ),
]


def find_or_explain() -> Path:
    """gemini-cli's binary, or a `ConfigError` saying how to install it."""
    gemini = geminicli_hooks.find_gemini_cli()
    if gemini is None:
        raise ConfigError(
            f"demo --gemini-cli: gemini-cli {geminicli_hooks.GEMINI_CLI_VERSION} is not "
            "installed: npm install --prefix .tools/gemini-cli "
            f"@google/gemini-cli@{geminicli_hooks.GEMINI_CLI_VERSION} (in this folder), or "
            "set VERIFIER_GEMINI_CLI to its gemini binary"
        )
    return gemini


def run(
    workdir: Path, fmt: str, progress: Callable[[str], None], gemini: Path | None = None
) -> list[Verification]:
    """Build, record with the real gemini-cli, verify, store, print; see the module."""
    gemini = gemini or find_or_explain()
    workdir = workdir.resolve()
    prepare(workdir)
    progress(f"building the sample repository in {workdir}/ and our hooks in it")
    repo, base = sample_repository(workdir)
    config_path = _config(workdir)
    config = demo_config(config_path)
    verifications: list[Verification] = []
    stories: dict[str, str] = {}
    for scenario in SCENARIOS:
        # The base again, with a clean tree (our settings file, ignored, is removed too).
        subprocess.run(["git", "checkout", "-q", "-f", "--detach", base], cwd=repo, check=True)
        subprocess.run(["git", "clean", "-q", "-fdx"], cwd=repo, check=True)
        geminicli_hooks.install(repo, repo_name="calc")
        progress(f"{scenario.session}: gemini-cli {scenario.story}")
        home = workdir / "gemini-home" / scenario.session
        if home.exists():
            shutil.rmtree(home)
        before = _sessions(repo)
        run_scripted(gemini, repo, home, scenario.turns(repo))
        added = [p for p in _sessions(repo) if p not in before]
        if len(added) != 1 or not (added[0] / "report.json").is_file():
            raise ConfigError(f"{scenario.session}: gemini-cli left no report of its session")
        report = added[0] / "report.json"
        progress(f"verifying {scenario.session} ({report})")
        outcome = verify_report(report.read_bytes(), config, source=str(report))
        verifications.append(outcome.verification)
        stories[outcome.verification.session_id] = f"{scenario.session}: {scenario.story}"
    rates = rates_of(verifications)
    (workdir / "gemini-cli.html").write_text(
        page.render(verifications, rates, stories), encoding="utf-8"
    )
    if fmt == "json":
        sys.stdout.write(
            render.dumps({"sessions": [v.to_dict() for v in verifications], "rates": rates})
        )
        return verifications
    rel = os.path.relpath(workdir)
    command = os.path.relpath(Path(sys.executable).with_name("verifier"))
    sys.stdout.write(
        render.demo_text(
            verifications,
            rates,
            store=f"{rel}/verifier.sqlite3",
            example=f"{command} show {verifications[1].session_id} --config {rel}/verifier.toml",
            page=f"{rel}/gemini-cli.html",
            browse=[f"{command} serve --config {rel}/verifier.toml"],
        )
    )
    return verifications


def _sessions(repo: Path) -> set[Path]:
    folder = repo / ".git" / "verifier"
    return {p for p in folder.iterdir() if p.is_dir()} if folder.is_dir() else set()


def _config(workdir: Path) -> Path:
    config = workdir / "verifier.toml"
    database_url = f"sqlite:///{workdir / 'verifier.sqlite3'}"
    config.write_text(
        "# The demo's own configuration: its store lives in this folder, never the user's.\n"
        f"[verifier]\ndatabase_url = {json.dumps(database_url)}\ntest_timeout = 120\n\n"
        '[repositories.calc]\npath = "repo"\n'
        'test_command = ["{python}", "-m", "pytest", "-q"]\n',
        encoding="utf-8",
    )
    return config
