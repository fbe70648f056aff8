"""Our recorder in gemini-cli's hooks: ``verifier gemini-cli install`` and ``uninstall``.

`install` merges one hook entry per event we record into the repository's
``.gemini/settings.json`` (every setting and hook already there kept), adds
exactly ``/.gemini/settings.json`` to ``.git/info/exclude`` so that our file is
never counted as the agent's change, and keeps what it found under the git
directory (``<git-dir>/verifier/install.json``). `uninstall` puts both files
back as they were: byte for byte when nobody changed them since, otherwise by
removing only our entries and our line.

The hook itself is `audit.geminicli.hook`, run as ``python -I -m
audit.geminicli.hook`` by this interpreter: ``-I`` so that nothing in the
repository (an ``audit`` package in its root, ``PYTHON*`` variables) can stand
in for it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.errors import SignatureError
from audit.geminicli.server import load_signer
from verifier._internal.git import Git
from verifier.app.geminicli import repo_name_of
from verifier.config import Config
from verifier.errors import ConfigError, InfrastructureError

__all__ = [
    "EVENTS",
    "EXCLUDE_LINE",
    "GEMINI_CLI_VERSION",
    "HOOK_NAME",
    "Installed",
    "find_gemini_cli",
    "gemini_cli_version",
    "hook_command",
    "install",
    "install_notes",
    "uninstall",
    "verify_command",
]

#: The release of gemini-cli the hook and the profiles are written for.
GEMINI_CLI_VERSION = "0.61.0"
#: The gemini-cli events the hook records (docs/gemini-cli.md says what each gives).
EVENTS = (
    "SessionStart",
    "BeforeAgent",
    "BeforeTool",
    "AfterTool",
    "BeforeModel",
    "AfterAgent",
    "SessionEnd",
)
#: The name our hook entries carry: how `uninstall` tells them from the user's.
HOOK_NAME = "verifier-recorder"
SETTINGS = Path(".gemini") / "settings.json"
EXCLUDE_LINE = "/.gemini/settings.json"
#: The hook's settings, beside the install state: what the reports name the repository.
HOOK_SETTINGS = "hook.json"
# gemini-cli waits this long for a hook (ms): ours records a whole-tree snapshot for a
# shell call, a few seconds on a very large tree; gemini-cli's default is 60 s.
HOOK_TIMEOUT_MS = 60_000
# ...and at the end of a session with --verify, the tests run: the hook's own limit on the
# verification (audit.geminicli.hook.VERIFY_TIMEOUT_S) and a minute more.
VERIFY_TIMEOUT_MS = 960_000


@dataclass(frozen=True, slots=True)
class Installed:
    """What `install` or `uninstall` did: the files, and what changed in each."""

    root: Path
    settings: Path
    exclude: Path
    state: Path
    settings_action: str  # "created", "merged", "restored", "removed", "unchanged"
    exclude_action: str  # "added", "present", "restored", "removed", "unchanged"
    repo_name: str | None = None  # what the reports will name the repository (install)
    server: str | None = None  # where entries are witnessed and reports posted (install)
    token_env: str | None = None  # the variable holding the ingest token (its name only)
    signing_key: Path | None = None  # the Ed25519 key the reports are signed with
    hmac_env: str | None = None  # or the variable holding their HMAC secret (its name only)

    @property
    def reports(self) -> Path:
        """Where the hook writes each session's folder (its report, trail and transcript)."""
        return self.state.parent

    def as_dict(self) -> dict[str, str | None]:
        return {
            "repo_name": self.repo_name,
            "server": self.server,
            "token_env": self.token_env,
            "signing_key": None if self.signing_key is None else str(self.signing_key),
            "hmac_env": self.hmac_env,
            "reports": str(self.reports),
            "root": str(self.root),
            "settings": str(self.settings),
            "settings_action": self.settings_action,
            "exclude": str(self.exclude),
            "exclude_action": self.exclude_action,
            "state": str(self.state),
        }


def find_gemini_cli(
    environ: Mapping[str, str] | None = None, folder: Path | None = None
) -> Path | None:
    """The ``gemini`` binary of the supported release: ``$VERIFIER_GEMINI_CLI`` when set,
    else ``.tools/gemini-cli`` of `folder` (the current one: where ``.ci/run`` installs
    it), else ``gemini`` on the PATH; None when none is of that release."""
    env = os.environ if environ is None else environ
    named = env.get("VERIFIER_GEMINI_CLI")
    if named:
        candidates = [Path(named)]
    else:
        candidates = [
            (folder or Path.cwd()) / ".tools" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
        ]
        found = shutil.which("gemini", path=env.get("PATH"))
        if found:
            candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and gemini_cli_version(path) == GEMINI_CLI_VERSION:
            return path
    return None


def gemini_cli_version(binary: Path) -> str | None:
    """The release of the npm package a ``gemini`` binary belongs to (its package.json)."""
    package = binary.resolve().parents[1] / "package.json"
    try:
        version = json.loads(package.read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return version if isinstance(version, str) else None


def hook_command(python: str | None = None) -> str:
    """The shell command gemini-cli runs for each event (it runs hooks through ``sh -c``)."""
    return shlex.join([python or sys.executable, "-I", "-m", "audit.geminicli.hook"])


def verify_command(config_path: Path | None, python: str | None = None) -> list[str]:
    """The ``verifier verify`` the hook runs on each report (``install --verify``)."""
    command = [python or sys.executable, "-I", "-m", "verifier", "verify"]
    return command + (["--config", str(config_path.resolve())] if config_path else [])


def install(
    repo: Path,
    *,
    config: Config | None = None,
    repo_name: str | None = None,
    verify: Sequence[str] | None = None,
    server: str | None = None,
    token_env: str | None = None,
    signing_key: Path | None = None,
    hmac_env: str | None = None,
    key_id: str | None = None,
    python: str | None = None,
) -> Installed:
    """Merge our hooks into `repo`'s ``.gemini/settings.json`` and exclude that file from git.

    `repo_name` is the ``repo.name`` the reports will give (the hook's settings,
    ``<git-dir>/verifier/hook.json``; default: the repository of `config` whose
    path is the root, else the root folder's name, as ``gemini-cli import`` names it). `verify`,
    a ``verifier verify`` command line (`verify_command`), has the hook verify each
    report as the session ends and show the verdict to the gemini-cli user. Installing
    twice replaces our entries, never duplicates them; the state kept from the
    first install (what the files held before us) stays.

    `server` (the service's base URL) and `token_env` (the *name* of the variable
    that will hold the ingest token when gemini-cli runs) have the hook post each
    trail entry to the witness and the report at the end; `signing_key` (an Ed25519
    PEM private key, mode 0600), or `hmac_env` (the name of the variable holding an
    HMAC secret), and `key_id` have it sign the report. Neither the token nor the
    secret is written: the hook reads the variables at run time.
    """
    hook_server = _server_settings(server, token_env)
    signing = _signing_settings(signing_key, hmac_env, key_id)
    if signing_key is not None:
        signing_key = signing_key.resolve()
    root, git_dir, exclude = _locate(repo)
    if repo_name is None:
        repo_name = root.name if config is None else repo_name_of(config, root)
    settings = root / SETTINGS
    _refuse_tracked(root, settings)
    state_dir = git_dir / "verifier"
    state_path = state_dir / "install.json"
    state = _read_state(state_path)
    original = _read_bytes(settings)
    document = _parse_settings(settings, original)
    merged = _merge(document, hook_command(python), verifying=verify is not None)
    written = (json.dumps(merged, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if state is None:
        exclude_before = _read_bytes(exclude)
        state = {
            "v": 1,
            "settings_before": _b64(original),
            "gemini_dir_existed": settings.parent.is_dir(),
            "exclude_before": _b64(exclude_before),
        }
    settings_action = "created" if original is None else "merged"
    if original == written:
        settings_action = "unchanged"
    settings.parent.mkdir(exist_ok=True)
    _write_atomic(settings, written)
    exclude_action = _add_exclude(exclude)
    state["settings_written_sha256"] = hashlib.sha256(written).hexdigest()
    state["exclude_written_sha256"] = hashlib.sha256(_read_bytes(exclude) or b"").hexdigest()
    state_dir.mkdir(exist_ok=True)
    _write_atomic(state_path, (json.dumps(state, indent=2) + "\n").encode("utf-8"))
    hook_settings: dict[str, Any] = {"v": 1, "repo_name": repo_name}
    if verify is not None:
        hook_settings["verify"] = list(verify)
    if hook_server is not None:
        hook_settings["server"] = hook_server
    if signing is not None:
        hook_settings["signing"] = signing
    _write_atomic(state_dir / HOOK_SETTINGS, (json.dumps(hook_settings) + "\n").encode())
    return Installed(
        root,
        settings,
        exclude,
        state_path,
        settings_action,
        exclude_action,
        repo_name,
        server=None if hook_server is None else hook_server["url"],
        token_env=token_env,
        signing_key=signing_key,
        hmac_env=hmac_env,
    )


def _server_settings(server: str | None, token_env: str | None) -> dict[str, str] | None:
    """The hook's ``server`` settings: the URL and the name of the token's variable."""
    if server is None and token_env is None:
        return None
    if server is None or not token_env:
        missing = "--server URL" if server is None else "--token-env VAR"
        raise ConfigError(
            f"{missing}: missing; --server and --token-env go together (the ingest token is "
            "read from the variable when gemini-cli runs the hook)"
        )
    _env_name("--token-env", token_env)
    parts = urllib.parse.urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        raise ConfigError(f"--server {server!r}: expected http(s)://host[:port][/path]")
    if parts.username or parts.password:
        raise ConfigError("--server: the URL holds credentials; the token goes in --token-env")
    return {"url": server.rstrip("/"), "token_env": token_env}


def _signing_settings(
    key: Path | None, hmac_env: str | None, key_id: str | None
) -> dict[str, str | None] | None:
    """The hook's ``signing`` settings, once the key loads as the hook will load it."""
    if key is not None and hmac_env is not None:
        raise ConfigError("--key and --hmac-env: one or the other signs the reports")
    if hmac_env is not None:
        _env_name("--hmac-env", hmac_env)
        return {"hmac_env": hmac_env, "key_id": key_id}
    if key is None:
        if key_id is not None:
            raise ConfigError("--key-id: needs --key PATH or --hmac-env VAR (the key it names)")
        return None
    path = key.resolve()
    try:
        load_signer(path, key_id)
    except SignatureError as exc:
        raise ConfigError(f"--key {str(key)!r}: {exc}") from None
    return {"key": str(path), "key_id": key_id}


def _env_name(option: str, name: str) -> None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ConfigError(f"{option} {name!r}: not an environment variable's name")


def install_notes(installed: Installed) -> list[str]:
    """What the user should know about what `install` configured."""
    return [
        f"note: gemini-cli {GEMINI_CLI_VERSION} withholds ${var} from its hooks when its "
        "environment redaction is on (security.environmentVariableRedaction, and always "
        "under GitHub Actions); a name starting with GEMINI_CLI_ is always passed"
        for var in (installed.token_env, installed.hmac_env)
        if var is not None and not var.upper().startswith("GEMINI_CLI_")
    ]


def uninstall(repo: Path) -> Installed:
    """Take our hooks out of `repo`: each file as it was before `install`, or, when it
    changed since, with only our entries (our exclude line) removed."""
    root, git_dir, exclude = _locate(repo)
    settings = root / SETTINGS
    state_path = git_dir / "verifier" / "install.json"
    state = _read_state(state_path)
    if state is None:
        raise ConfigError(
            f"{state_path}: not found: the gemini-cli hooks are not installed in {root} "
            "(verifier gemini-cli install)"
        )
    current = _read_bytes(settings)
    before = _unb64(state.get("settings_before"), "settings_before", state_path)
    if current is not None and _sha(current) == state.get("settings_written_sha256"):
        if before is None:
            settings.unlink()
            if not state.get("gemini_dir_existed", True):
                _remove_if_empty(settings.parent)
            settings_action = "removed"
        else:
            _write_atomic(settings, before)
            settings_action = "restored"
    elif current is None:
        settings_action = "unchanged"
    else:  # changed since: take out only ours
        document = _parse_settings(settings, current)
        kept = _without_ours(document)
        _write_atomic(settings, (json.dumps(kept, indent=2, ensure_ascii=False) + "\n").encode())
        settings_action = "merged"
    exclude_action = _restore_exclude(exclude, state, state_path)
    state_path.unlink()
    (state_path.parent / HOOK_SETTINGS).unlink(missing_ok=True)
    return Installed(root, settings, exclude, state_path, settings_action, exclude_action)


# -- the settings file ------------------------------------------------------------------


def _parse_settings(path: Path, data: bytes | None) -> dict[str, Any]:
    if data is None:
        return {}
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except ValueError as exc:
        # gemini-cli accepts comments in its settings; rewriting the file would lose them.
        raise ConfigError(
            f"{path}: not plain JSON ({exc}); comments cannot be kept when hooks are merged "
            "in: remove them, or add the hooks by hand (docs/gemini-cli.md)"
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: got a JSON {type(document).__name__}, expected an object")
    hooks = document.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: hooks: got a JSON {type(hooks).__name__}, expected an object")
    for event, definitions in hooks.items():
        if not isinstance(definitions, list):
            raise ConfigError(
                f"{path}: hooks.{event}: got a JSON {type(definitions).__name__}, expected an array"
            )
    return document


def _is_ours(definition: object) -> bool:
    if not isinstance(definition, dict):
        return False
    hooks = definition.get("hooks")
    return (
        isinstance(hooks, list)
        and bool(hooks)
        and all(isinstance(h, dict) and h.get("name") == HOOK_NAME for h in hooks)
    )


def _without_ours(document: dict[str, Any]) -> dict[str, Any]:
    out = dict(document)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    kept: dict[str, Any] = {}
    for event, definitions in hooks.items():
        rest = [d for d in definitions if not _is_ours(d)] if isinstance(definitions, list) else []
        if rest or (isinstance(definitions, list) and not definitions):
            kept[event] = rest
        elif not isinstance(definitions, list):
            kept[event] = definitions
    if kept:
        out["hooks"] = kept
    else:
        out.pop("hooks")
    return out


def _merge(document: dict[str, Any], command: str, *, verifying: bool) -> dict[str, Any]:
    out = _without_ours(document)
    hooks = dict(out.get("hooks", {}))
    for event in EVENTS:
        ours = {
            "matcher": "*",
            "hooks": [
                {
                    "type": "command",
                    "name": HOOK_NAME,
                    "command": command,
                    "timeout": VERIFY_TIMEOUT_MS
                    if verifying and event in ("AfterAgent", "SessionEnd")
                    else HOOK_TIMEOUT_MS,
                    "description": "verifier: records the session's audit trail "
                    "(verifier gemini-cli uninstall removes it)",
                }
            ],
        }
        hooks[event] = [*hooks.get(event, []), ours]
    out["hooks"] = hooks
    return out


def _refuse_tracked(root: Path, settings: Path) -> None:
    try:
        listed = Git(root).run("ls-files", "-z", "--", str(SETTINGS))
    except InfrastructureError as exc:
        raise ConfigError(f"{root}: cannot list its files ({exc})") from None
    if listed.strip(b"\0"):
        raise ConfigError(
            f"{settings}: the repository tracks this file: our hooks in it would show as a "
            "change of the session; install them in gemini-cli's user settings by hand "
            "instead (docs/gemini-cli.md)"
        )


# -- .git/info/exclude ----------------------------------------------------------------


def _add_exclude(exclude: Path) -> str:
    data = _read_bytes(exclude) or b""
    lines = data.decode("utf-8", "surrogateescape").splitlines()
    if EXCLUDE_LINE in (line.strip() for line in lines):
        return "present"
    prefix = b"" if not data or data.endswith(b"\n") else b"\n"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(exclude, data + prefix + EXCLUDE_LINE.encode() + b"\n")
    return "added"


def _restore_exclude(exclude: Path, state: dict[str, Any], state_path: Path) -> str:
    before = _unb64(state.get("exclude_before"), "exclude_before", state_path)
    current = _read_bytes(exclude)
    if current is None:
        return "unchanged"
    if _sha(current) == state.get("exclude_written_sha256"):
        if before is None:
            exclude.unlink()
        else:
            _write_atomic(exclude, before)
        return "restored"
    had_line = before is not None and EXCLUDE_LINE.encode() in before.splitlines()
    if had_line:
        return "unchanged"
    lines = current.split(b"\n")
    kept = [line for line in lines if line.strip() != EXCLUDE_LINE.encode()]
    if kept == lines:
        return "unchanged"
    _write_atomic(exclude, b"\n".join(kept))
    return "removed"


# -- plumbing -----------------------------------------------------------------------------


def _locate(repo: Path) -> tuple[Path, Path, Path]:
    """The work tree's root, the git directory and the exclude file of `repo`."""
    if not repo.is_dir():
        raise ConfigError(f"--repo {repo}: not a folder")
    git = Git(repo)
    try:
        out = git.run(
            "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-path", "info/exclude"
        )
    except InfrastructureError as exc:
        raise ConfigError(f"--repo {repo}: not a git work tree ({exc})") from None
    top, git_dir, exclude = out.decode("utf-8", "surrogateescape").splitlines()[:3]
    # --git-path is relative to the folder git ran in, unless absolute (a linked worktree).
    return Path(top), Path(git_dir), (repo / exclude).resolve()


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None


def _read_state(path: Path) -> dict[str, Any] | None:
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        state = json.loads(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}): remove it to install again") from None
    if not isinstance(state, dict) or state.get("v") != 1:
        raise ConfigError(f"{path}: not an install state of this verifier (v 1 expected)")
    return state


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.verifier-tmp")
    try:
        tmp.write_bytes(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot be written ({exc.strerror})") from None


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty: someone else's files are there
        folder.rmdir()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _unb64(value: object, name: str, state_path: Path) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{state_path}: {name}: got {type(value).__name__}, expected base64")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ConfigError(f"{state_path}: {name}: not base64") from None
