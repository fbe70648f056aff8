"""The `default` profile's tools, run for real on a repository's working tree.

Each tool takes the working tree and the call's arguments and returns the
response object the model sees. Beside them: the permission policy for
commands (an allow-list of programs), the truncation of long outputs, the
checkpoint taken before a write, and the function declarations the model is
given, read from the profile itself (`config/profiles/default.toml`), so the
model is offered exactly what the verifier will read.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.genai import types

from verifier.contract.profiles import ActionKind, Profile

#: A tool: the working tree and the call's arguments in, the response object out.
Tool = Callable[[Path, Mapping[str, Any]], dict[str, Any]]

OUTPUT_LIMIT = 4000
COMMAND_TIMEOUT_S = 120
#: Programs a command may start; anything else is denied before it runs.
ALLOWED_PROGRAMS = frozenset(
    {"python", "python3", "pytest", "git", "chmod", "ls", "cat", "echo", "true", "false"}
)
#: The tools whose calls write files: each is preceded by a checkpoint.
WRITES = frozenset({"write_file", "replace_lines", "edit_file", "delete_file"})


def _target(root: Path, rel: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise PermissionError(f"{rel!r} is outside the repository")
    return path


def read_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    text = _target(root, args["path"]).read_text(encoding="utf-8")
    if "start_line" in args or "end_line" in args:
        lines = text.splitlines(keepends=True)
        start = int(args.get("start_line", 1))
        end = int(args.get("end_line", len(lines)))
        text = "".join(lines[start - 1 : end])
    return {"output": text}


def write_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = _target(root, args["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(str(args["content"]).encode("utf-8"))
    return {"ok": True}


def replace_lines(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Replace lines start..end (1-based, inclusive), if they hold `expected`."""
    path = _target(root, args["path"])
    lines = path.read_bytes().decode("utf-8").splitlines(keepends=True)
    start, end = int(args["start_line"]), int(args["end_line"])
    if "".join(lines[start - 1 : end]) != args["expected"]:
        return {"ok": False, "error": "expected text does not match the lines"}
    lines[start - 1 : end] = [args["replacement"]]
    path.write_bytes("".join(lines).encode("utf-8"))
    return {"ok": True}


def edit_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    path = _target(root, args["path"])
    text = path.read_text(encoding="utf-8")
    if text.count(args["old_text"]) != 1:
        return {"ok": False, "error": "old_text must occur exactly once"}
    path.write_text(text.replace(args["old_text"], args["new_text"]), encoding="utf-8")
    return {"ok": True}


def delete_file(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    _target(root, args["path"]).unlink()
    return {"ok": True}


def list_files(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    prefix = str(args.get("path") or ".").strip("/")
    files = visible_files(root)
    if prefix not in ("", "."):
        files = [f for f in files if f == prefix or f.startswith(prefix + "/")]
    return {"files": sorted(files)}


def visible_files(root: Path) -> list[str]:
    """The files git would see: tracked, or untracked and not ignored."""
    out = _git(root, None, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted({p for p in out.split("\0") if p})


def search(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Lines matching `pattern` (a substring, or a regular expression with `regex`)."""
    pattern = str(args["pattern"])
    match: Callable[[str], bool]
    if args.get("regex"):
        compiled = re.compile(pattern)
        match = lambda line: compiled.search(line) is not None  # noqa: E731
    else:
        match = lambda line: pattern in line  # noqa: E731
    hits = []
    for rel in list_files(root, {"path": args.get("path")})["files"]:
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        hits += [f"{rel}:{n}: {line}" for n, line in enumerate(text.splitlines(), 1) if match(line)]
    return {"output": "\n".join(hits)}


def run_command(root: Path, args: Mapping[str, Any]) -> dict[str, Any]:
    """Run an argument list (or a string split as a shell would, never given to one)."""
    argv = command_argv(args)
    done = subprocess.run(
        argv,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
        env=_command_env(),
    )
    return {"exit_code": done.returncode, "output": done.stdout + done.stderr}


DEFAULT_TOOLS: dict[str, Tool] = {
    "read_file": read_file,
    "list_files": list_files,
    "search": search,
    "write_file": write_file,
    "replace_lines": replace_lines,
    "edit_file": edit_file,
    "delete_file": delete_file,
    "run_command": run_command,
}
#: The file tools whose effects are confined to their `path` argument.
SCOPED = {name: DEFAULT_TOOLS[name] for name in WRITES | {"read_file"}}


def command_argv(args: Mapping[str, Any]) -> list[str]:
    command = args.get("command")
    if isinstance(command, list):
        return [str(a) for a in command]
    return shlex.split(str(command or ""))


def _command_env() -> dict[str, str]:
    """A command's environment: no secrets (API keys, tokens) handed to code it runs.

    ``PYTEST_DISABLE_PLUGIN_AUTOLOAD`` passes through when it is set: where the harness's
    caller says the tests need no installed plugin (the test suite does), the command's
    ``pytest`` loads none, about a second of CPU less each run."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "SYSTEMROOT",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    )
    return {k: os.environ[k] for k in keep if k in os.environ}


# -- policy, truncation, checkpoints ---------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """Which commands may run: their program is on the allow-list (by name, or this Python)."""

    allowed_programs: frozenset[str] = ALLOWED_PROGRAMS

    def refusal(self, name: str, args: Mapping[str, Any]) -> str | None:
        """Why the call may not run, or None when it may."""
        if name != "run_command":
            return None
        argv = command_argv(args)
        if not argv:
            return "got an empty command, expected a program and its arguments"
        if argv[0] in self.allowed_programs or argv[0] == sys.executable:
            return None
        allowed = ", ".join(sorted(self.allowed_programs))
        return f"command not allowed: got {argv[0]!r}, expected one of {allowed}"


def truncate(response: Mapping[str, Any], limit: int = OUTPUT_LIMIT) -> dict[str, Any]:
    """Every string of the response cut to `limit` characters, the cut said in the text.

    A command's output keeps its end (where the failure is), other text its start.
    """
    out: dict[str, Any] = {}
    for key, value in response.items():
        if isinstance(value, str) and len(value) > limit:
            note = f"\n[... {len(value)} characters, cut to {limit} ...]\n"
            keep = max(limit - len(note), 0)
            tail = key == "output" and "exit_code" in response
            value = (note + value[len(value) - keep :]) if tail else (value[:keep] + note)
        out[key] = value
    return out


def checkpoint(root: Path) -> str:
    """A restore point of the whole working tree (tracked and untracked files git sees).

    The tree is written into the repository's object store through a scratch
    index, so neither the index nor the working tree is touched;
    ``git read-tree -u --reset TREE`` restores it.
    """
    git_dir = Path(_git(root, None, "rev-parse", "--absolute-git-dir").strip())
    with tempfile.TemporaryDirectory() as scratch:
        index = Path(scratch) / "index"
        if (git_dir / "index").is_file():
            # Its stat cache makes `add` fast; its mtime kept, so that git still hashes
            # again the files changed in the same tick as the index was written ("racy git").
            shutil.copy2(git_dir / "index", index)
        _git(root, index, "add", "-A")
        tree = _git(root, index, "write-tree").strip()
    return f"tree:{tree}"


def _git(root: Path, index: Path | None, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    done = subprocess.run(
        ["git", *args], cwd=root, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


# -- what the model is offered -----------------------------------------------------------

_SCHEMA_TYPES = {
    "string": types.Schema(type=types.Type.STRING),
    "integer": types.Schema(type=types.Type.INTEGER),
    "boolean": types.Schema(type=types.Type.BOOLEAN),
    "string_list": types.Schema(type=types.Type.ARRAY, items=types.Schema(type=types.Type.STRING)),
}
_DESCRIPTIONS = {
    ActionKind.READ: "Read a file of the repository (optionally lines start..end, 1-based).",
    ActionKind.LIST: "List the repository's files under a folder ('.' for all).",
    ActionKind.SEARCH: "Search the repository's files for a text (or a regex).",
    ActionKind.WRITE: "Write a whole file (create or overwrite).",
    ActionKind.REPLACE: "Replace text in a file; the expected text must match exactly.",
    ActionKind.DELETE: "Delete a file.",
    ActionKind.RUN: "Run a command (an argument list, no shell) in the repository.",
}


def declarations(profile: Profile, names: Sequence[str]) -> list[types.FunctionDeclaration]:
    """The function declarations of `names`, from the profile's own argument names and types."""
    out = []
    for name in names:
        spec = profile.functions[name]
        props = {}
        for ours, theirs in spec.args.items():
            kinds = spec.types.get(ours, ("string",))
            # A parameter accepting several types is offered in its most structured one.
            props[theirs] = _SCHEMA_TYPES["string_list" if "string_list" in kinds else kinds[0]]
        required = [spec.args[p] for p in spec.required]
        out.append(
            types.FunctionDeclaration(
                name=name,
                description=_DESCRIPTIONS.get(spec.action, name),
                parameters=types.Schema(
                    type=types.Type.OBJECT, properties=props, required=required
                ),
            )
        )
    return out
