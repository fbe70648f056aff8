"""gemini-cli sessions: the command behind ``verifier gemini-cli import``.

`import_transcript` turns a transcript gemini-cli wrote without our hooks
(`audit.geminicli.transcript`) into a session report v1 with no audit trail
(``audit.trail = "none"``), in steps:

1. read the transcript (an unreadable line is a `TranscriptError` naming it);
2. resolve the repository: its root, the base (``--base``, default ``HEAD``),
   and the head: the ``HEAD`` commit when it moved past the base and the
   working tree is clean (commit mode), else the working tree (worktree mode);
3. the claims: each file a successful edit call (``replace``, ``write_file``)
   wrote, by its repository path, from its blob at the base to the last
   content the transcript says the tool wrote, the session's sub-agents' edits
   included (their transcripts beside the session's, `subagent_paths`, edits
   taken in time order); a shell command's effects are not in the transcript
   and so are not claimed (the changes check sees them);
4. the status: ``done`` when the last record is the model's answer (text and no
   tool call), else ``error`` (the transcript stops mid-work);
5. the report, checked with the contract's own parser before it is handed back.

The tool profile is the one of the model's family (`tool_profile`), as gemini-cli
chooses its declarations (`getToolFamily`: a Gemini 3 model, or the rest).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.geminicli import Transcript, read_transcript
from audit.geminicli.release import AGENT_NAME, tool_profile
from audit.geminicli.transcript import subagent_paths
from verifier._internal.git import Git
from verifier._internal.repository import Repository
from verifier.errors import ConfigError, InfrastructureError

# The import's own (the contract with the google-genai SDK, the checks' edit rules) are
# imported where it uses them: `gemini-cli install` and `uninstall` (`repo_name_of`) need neither.
if TYPE_CHECKING:
    from verifier.config import Config
    from verifier.contract.report import Report


@dataclass(frozen=True)
class Imported:
    """A report made from a transcript: its bytes, parsed, and what a reader should know."""

    report: Report
    notes: tuple[str, ...]

    @property
    def raw(self) -> bytes:
        return self.report.raw


def import_transcript(
    config: Config,
    transcript: Path,
    repo_path: Path,
    *,
    base: str | None = None,
    repo_name: str | None = None,
) -> Imported:
    """The report of the session `transcript` recorded in the repository at `repo_path`."""
    # 1. The transcript.
    record = read_transcript(transcript)
    notes: list[str] = []
    if record.truncated:
        notes.append("the transcript's last line was cut short (gemini-cli stopped mid-write)")

    # 2. The repository, the base and the head.
    try:
        repo = Repository(repo_path)
    except InfrastructureError as exc:
        raise ConfigError(f"--repo: {exc}") from None
    if repo.bare:
        raise ConfigError(f"--repo: {str(repo_path)!r} is a bare repository, with no work tree")
    git = Git(repo.root)
    base_commit = _commit(git, base or "HEAD", "--base")
    head = _commit(git, "HEAD", "HEAD")
    clean = not git.run("status", "--porcelain", "-z", "--untracked-files=all").strip(b"\0")
    head_commit = head if head != base_commit and clean else None
    if head != base_commit and not clean:
        notes.append(
            "HEAD moved past the base and the working tree holds changes: the work is "
            "taken from the working tree"
        )

    # 3. The claims, the sub-agents' edits with the session's.
    subagents = [(p, read_transcript(p)) for p in subagent_paths(transcript, record.session_id)]
    subagents = [(p, sub) for p, sub in subagents if sub.kind == "subagent"]
    notes += [
        f"sub-agent transcript {p}: its edits are claimed with the session's"
        for p, sub in subagents
        if any(c.edit is not None for c in sub.tool_calls)
    ]
    changes, outside = _claims([record, *(sub for _, sub in subagents)], repo, base_commit)
    notes += [f"an edit outside the repository, claimed as given: {p}" for p in outside]

    # 4. The status, and 5. the report.
    doc = _document(record, config, repo.root, repo_name, base_commit, head_commit, changes)
    doc["extensions"] = {
        "gemini_cli": {
            "transcript": str(transcript),
            "transcript_sha256": hashlib.sha256(record.raw).hexdigest(),
            "project_hash": record.project_hash,
            "truncated": record.truncated,
            "subagents": [
                {"transcript": str(p), "transcript_sha256": hashlib.sha256(sub.raw).hexdigest()}
                for p, sub in subagents
            ],
        }
    }
    raw = json.dumps(doc, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
    from verifier.contract.report import parse_report

    return Imported(parse_report(raw), tuple(notes))


def _commit(git: Git, rev: str, what: str) -> str:
    done = git.call("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if done.returncode != 0:
        raise ConfigError(f"{what}: {rev!r} names no commit of the repository")
    return done.stdout.decode("ascii").strip()


def _claims(
    records: list[Transcript], repo: Repository, base: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per file the successful edits of `records` (the session's transcript, then its
    sub-agents') wrote: its blob at the base, the last bytes written.

    The edits are taken in the order of their messages' times (a sub-agent runs inside
    the session's ``invoke_agent`` call), a transcript's own order where times are equal
    or missing. A tool's display holds the text it computed with LF line endings; the
    bytes written have CRLF ones where the file had a CRLF (`editmatch.crlf_written`), so
    each file is followed from its base blob, edit after edit.
    """
    from verifier.checks import editmatch

    root = repo.root.resolve()
    timed = [
        (m.timestamp or "", n, i, edit)
        for n, record in enumerate(records)
        for i, m in enumerate(record.messages)
        for call in m.tool_calls
        if (edit := call.edit) is not None
    ]
    edits: list[tuple[str, str]] = []
    outside: list[str] = []
    for *_, edit in sorted(timed, key=lambda t: t[:3]):
        given = Path(edit.file_path)
        target = (given if given.is_absolute() else root / given).resolve()
        try:
            path = target.relative_to(root).as_posix()
        except ValueError:
            path = edit.file_path
            if path not in outside:
                outside.append(path)
        edits.append((path, edit.new))
    tree = repo.tree(base)
    wanted = {
        p: tree[p].sha for p, _ in edits if p not in outside and p in tree and tree[p].is_file
    }
    blobs = dict(Git(root).read_objects([(sha, "blob") for sha in dict.fromkeys(wanted.values())]))
    at_base = {p: blobs[sha] for p, sha in wanted.items()}
    current: dict[str, bytes] = {}
    for path, text in edits:
        previous = current[path] if path in current else at_base.get(path)
        current[path] = editmatch.crlf_written(previous, text)
    changes: list[dict[str, Any]] = []
    for path, data in current.items():
        base_bytes = at_base.get(path)
        before = None if base_bytes is None else hashlib.sha256(base_bytes).hexdigest()
        after = hashlib.sha256(data).hexdigest()
        if before == after:
            continue  # written back as it was
        action = "create" if before is None else "modify"
        changes.append(
            {"path": path, "action": action, "sha256_before": before, "sha256_after": after}
        )
    return changes, outside


def _document(
    record: Transcript,
    config: Config,
    root: Path,
    repo_name: str | None,
    base: str,
    head: str | None,
    changes: list[dict[str, Any]],
) -> dict[str, Any]:
    gemini = [m for m in record.messages if m.type == "gemini"]
    last = record.last
    done = last is not None and last.type == "gemini" and not last.tool_calls and bool(last.text)
    model = gemini[-1].model if gemini else None
    started = record.start_time or (record.messages[0].timestamp if record.messages else None)
    ended = (last.timestamp if last is not None else None) or record.last_updated or started
    if started is None or ended is None:
        raise ConfigError("the transcript holds no time: neither startTime nor a message's")
    tokens = [m.tokens for m in gemini]

    def total(key: str) -> int:
        return sum(v for t in tokens if type(v := t.get(key)) is int)

    return {
        "schema_version": "1",
        "session_id": f"{AGENT_NAME}-{record.session_id}",
        "agent": {"name": AGENT_NAME, "model": model, "tool_profile": tool_profile(model)},
        "task": record.task,
        "repo": {
            "name": repo_name or repo_name_of(config, root),
            "path": str(root),
            "base_commit": base,
            "head_commit": head,
        },
        "started_at": started,  # gemini-cli writes `toISOString()`: UTC, ending in Z
        "ended_at": ended,
        "status": "done" if done else "error",
        "final_text": next((m.text for m in reversed(gemini) if m.text), None),
        "usage": {
            "turns": len(gemini),
            "tool_calls": len(record.tool_calls),
            "prompt_tokens": total("input"),
            "output_tokens": total("output") + total("thoughts"),
            "thoughts_tokens": total("thoughts"),
            "cached_tokens": total("cached"),
        },
        "changes": changes,
        "trajectory": {"format": "gemini-contents", "contents": record.contents()},
        "audit": {"trail": "none", "entries": [], "count": 0, "head": None},
    }


def repo_name_of(config: Config, root: Path) -> str:
    """The configured repository whose path is `root`, else the folder's name."""
    for name, repo in sorted(config.repositories.items()):
        if repo.path is not None and repo.path.resolve() == root.resolve():
            return name
    return root.name


def save(imported: Imported, out: Path) -> None:
    """Write the report's bytes to `out`; `ConfigError` when it cannot be written."""
    try:
        out.write_bytes(imported.raw)
    except OSError as exc:
        raise ConfigError(f"--out: cannot write {str(out)!r}: {exc.strerror}") from None
