"""Tool profiles: the harness's function names, normalised into internal actions.

A profile is data (``config/profiles/NAME.toml``), not code. Per external
function name it declares the internal action, each parameter's external names
(aliases: ``path``, ``filePath``, ``file_path``), their types, which are
required, how line numbers count (0- or 1-based, end inclusive or not) and the
permission the action needs; per profile, what a failed response looks like.

`Profile.normalise` keeps the raw call beside the action, validates fields and
types, and normalises: after it, a bounded replace always carries 1-based
inclusive ``start_line`` / ``end_line``. What it cannot prove safe it refuses
with a reason (`Action.problems`); it never drops a call (an unknown one is an
``unknown`` action) and never changes a call's kind (a bounded replace stays a
bounded replace, never a whole-file write).
"""

from __future__ import annotations

import enum
import fnmatch
import posixpath
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.errors import ConfigError

if TYPE_CHECKING:  # the trajectory module loads the SDK (half a second); profiles need not
    from verifier.contract.trajectory import ToolCall


class ActionKind(enum.StrEnum):
    READ = "read"
    LIST = "list"
    SEARCH = "search"
    WRITE = "write"
    REPLACE = "replace"
    DELETE = "delete"
    RUN = "run"
    WEB = "web"
    # A call with no effect on the repository (a todo list, a plan, a question, a topic).
    SESSION = "session"
    UNKNOWN = "unknown"


class Permission(enum.StrEnum):
    """What an action needs from the harness's policy."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"
    NETWORK = "network"


# The permission each action needs unless its function declares another.
DEFAULT_PERMISSION = {
    ActionKind.READ: Permission.READ,
    ActionKind.LIST: Permission.READ,
    ActionKind.SEARCH: Permission.READ,
    ActionKind.WRITE: Permission.WRITE,
    ActionKind.REPLACE: Permission.WRITE,
    ActionKind.DELETE: Permission.WRITE,
    ActionKind.RUN: Permission.EXECUTE,
    ActionKind.WEB: Permission.NETWORK,
}
FILE_ACTIONS = frozenset({ActionKind.WRITE, ActionKind.REPLACE, ActionKind.DELETE})
TYPES = ("string", "integer", "boolean", "string_list")
# The internal parameters that are line numbers; `normalise` makes them 1-based inclusive.
LINE_PARAMS = ("start_line", "end_line")
BOUNDED = ("path", "start_line", "end_line", "expected", "replacement")
BY_TEXT = ("path", "old_text", "new_text")


@dataclass(frozen=True)
class FunctionSpec:
    """One external function: its action and how its arguments map onto ours.

    `args` maps each internal parameter onto its first external name (the
    form profiles had before aliases); `aliases` gives every external name,
    in the order they are looked up.
    """

    action: ActionKind
    args: Mapping[str, str]
    required: tuple[str, ...] = ()
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    types: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    line_base: int = 1
    end_inclusive: bool = True
    permission: Permission | None = None
    # The harness's own rules for applying the call (`verifier.checks.editmatch.MATCHERS`):
    # None is the contract's literal ones (a replace by text matches exactly once).
    match: str | None = None

    def __post_init__(self) -> None:
        # A spec built with `args` alone: each parameter has that one name.
        aliases = dict(self.aliases) or {ours: (theirs,) for ours, theirs in self.args.items()}
        object.__setattr__(self, "aliases", aliases)
        object.__setattr__(self, "external", frozenset(n for ns in aliases.values() for n in ns))

    external: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def names(self, param: str) -> tuple[str, ...]:
        """Every external name of the internal parameter `param`."""
        return self.aliases.get(param) or (self.args[param],)

    @property
    def needs(self) -> Permission | None:
        return self.permission or DEFAULT_PERMISSION.get(self.action)


@dataclass(frozen=True)
class ResponseRule:
    """What a failed response looks like: a key present (not null), or a flag set or unset."""

    error_keys: tuple[str, ...] = ("error",)
    false_keys: tuple[str, ...] = ("ok",)
    true_keys: tuple[str, ...] = ()

    def failed(self, response: Mapping[str, Any]) -> bool:
        return (
            any(response.get(k) is not None for k in self.error_keys)
            or any(response.get(k) is False for k in self.false_keys)
            or any(response.get(k) is True for k in self.true_keys)
        )


@dataclass(frozen=True)
class Action:
    """A call in the verifier's vocabulary; `problems` say why it cannot be trusted as is."""

    kind: ActionKind
    params: Mapping[str, Any]
    call: ToolCall
    problems: tuple[str, ...] = ()
    permission: Permission | None = None
    # The call's arguments the profile does not declare (kept in `call.args`).
    extra: tuple[str, ...] = ()
    # The function's matching rules (`FunctionSpec.match`).
    match: str | None = None

    @property
    def path(self) -> str | None:
        value = self.params.get("path")
        return value if isinstance(value, str) else None

    @property
    def bounded(self) -> bool:
        """A replace of a line range (as opposed to a replace by text)."""
        return self.kind is ActionKind.REPLACE and "start_line" in self.params


@dataclass(frozen=True)
class Profile:
    name: str
    functions: Mapping[str, FunctionSpec] = field(default_factory=dict)
    response: ResponseRule = field(default_factory=ResponseRule)
    # Function names by glob (`mcp_*`: gemini-cli's MCP tools), for names `functions` lacks.
    patterns: Mapping[str, FunctionSpec] = field(default_factory=dict)
    # An absolute path in a call: "refuse" (never a repository path) or "workspace" (one
    # under the report's `repo.path` is the repository path below it; `workspace_path`).
    absolute_paths: str = "refuse"

    def spec(self, name: str) -> FunctionSpec | None:
        """The declaration of the function `name`: by its name, else by the first pattern."""
        found = self.functions.get(name)
        if found is None:
            for pattern, spec in self.patterns.items():
                if fnmatch.fnmatchcase(name, pattern):
                    return spec
        return found

    def workspace_path(self, path: str, workspace: str | None) -> str | None:
        """`path` as a repository path: a relative one as it is; an absolute one under
        `workspace` (with ``absolute_paths = "workspace"``) relative to it; None when an
        absolute path is outside it, or the profile refuses absolute paths."""
        if not path.startswith("/"):
            return path
        if self.absolute_paths != "workspace" or not workspace or not workspace.startswith("/"):
            return None
        root = posixpath.normpath(workspace)
        full = posixpath.normpath(path)
        if full == root or not full.startswith(root.rstrip("/") + "/"):
            return None
        return full[len(root.rstrip("/")) + 1 :]

    def response_failed(self, response: Mapping[str, Any]) -> bool:
        """Whether the harness answered `response` to say the call failed."""
        return self.response.failed(response)

    def normalise(self, call: ToolCall) -> Action:
        spec = self.spec(call.name)
        if spec is None:
            return Action(ActionKind.UNKNOWN, {}, call, (f"unknown function {call.name!r}",))
        problems: list[str] = []
        params: dict[str, Any] = {}
        invalid: set[str] = set()  # given, but not usable: not "missing" as well
        args = call.args
        for ours, names in spec.aliases.items():
            given: tuple[str, ...]
            if len(names) == 1:  # most parameters: one name, looked up once
                if names[0] not in args:
                    continue
                given, value = names, args[names[0]]
            else:
                given = tuple(n for n in names if n in args)
                if not given:
                    continue
                values = [args[n] for n in given]
                if any(v != values[0] for v in values[1:]):
                    problems.append(f"arguments {list(given)} (all {ours!r}) differ")
                    invalid.add(ours)
                    continue
                value = values[0]
            types = spec.types.get(ours)
            if types:
                value, problem = _typed(value, types)
                if problem is not None:
                    problems.append(f"argument {given[0]!r}: {problem}")
                    invalid.add(ours)
                    continue
            params[ours] = value
        problems += [
            f"missing argument {spec.names(p)[0]!r}"
            for p in spec.required
            if p not in params and p not in invalid
        ]
        problems += _lines(spec, params)
        if spec.action is ActionKind.REPLACE and not problems:
            problems += _replace_problems(params)
        known = spec.external
        extra = tuple(k for k in args if k not in known)
        return Action(spec.action, params, call, tuple(problems), spec.needs, extra, spec.match)


def _typed(value: Any, types: tuple[str, ...]) -> tuple[Any, str | None]:
    """`value` as the first of `types` it is (an integral float is an integer), or why not."""
    kind = types[0]
    if (kind == "string" and type(value) is str) or (kind == "integer" and type(value) is int):
        return value, None  # the common case, first
    for kind in types:
        if kind == "string" and isinstance(value, str):
            return value, None
        if kind == "boolean" and isinstance(value, bool):
            return value, None
        if kind == "integer" and not isinstance(value, bool):
            if isinstance(value, int):
                return value, None
            if isinstance(value, float) and value.is_integer():  # JSON numbers from protobuf
                return int(value), None
        if (
            kind == "string_list"
            and isinstance(value, list)
            and all(isinstance(v, str) for v in value)
        ):
            return value, None
    return value, f"expected {' or '.join(types)}, got {type(value).__name__}"


def _lines(spec: FunctionSpec, params: dict[str, Any]) -> list[str]:
    """Make the line numbers 1-based and the end inclusive; a range that cannot be is a problem."""
    shift = 1 - spec.line_base
    for name in LINE_PARAMS:
        value = params.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            params[name] = value + shift - (name == "end_line" and not spec.end_inclusive)
    start, end = params.get("start_line"), params.get("end_line")
    problems = []
    if isinstance(start, int) and start < 1:
        problems.append(f"start line {start - shift} is before the first line")
    if isinstance(start, int) and isinstance(end, int) and end < start - 1:
        problems.append(f"the range ends before it starts (lines {start}..{end}, 1-based)")
    return problems


def _replace_problems(params: Mapping[str, Any]) -> list[str]:
    """A replace is bounded (a range and its expected text) or by text; nothing in between."""
    bounded = [p for p in BOUNDED if p in params]
    by_text = [p for p in BY_TEXT if p in params]
    if len(bounded) == len(BOUNDED) or len(by_text) == len(BY_TEXT):
        if "start_line" in params and "old_text" in params:
            return ["both a line range and an old text: which one applies cannot be told"]
        return []
    if "start_line" in params or "end_line" in params:
        missing = [p for p in BOUNDED if p not in params]
        return [f"a bounded replace without {', '.join(missing)} cannot be proved safe"]
    missing = [p for p in BY_TEXT if p not in params]
    return [f"a replace by text without {', '.join(missing)} cannot be proved safe"]


# A release in a name (`gemini-cli-0.61-legacy`) needs its dot; no name is a path.
_PROFILE_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")


def load_profile(profiles_dir: Path, name: str | None) -> Profile:
    """Read ``profiles_dir/NAME.toml`` (``default`` when the report names none)."""
    name = name or "default"
    if not _PROFILE_NAME.fullmatch(name):
        raise ConfigError(
            f"tool profile {name!r}: a name is letters, digits, '-', '_' and '.' "
            "(not first, never two in a row)"
        )
    path = profiles_dir / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"tool profile {name!r}: no file {str(path)!r}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"tool profile {name!r}: cannot read {str(path)!r}: {exc}") from None
    where = f"tool profile {name!r}"
    unknown = sorted(set(data) - {"name", "response", "functions", "patterns", "absolute_paths"})
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]}: unknown key")
    absolute = data.get("absolute_paths", "refuse")
    if absolute not in ("refuse", "workspace"):
        raise ConfigError(f"{where}: absolute_paths: expected 'refuse' or 'workspace'")
    return Profile(
        name,
        _functions(data, name),
        _response(data, name),
        _functions(data, name, "patterns"),
        absolute,
    )


def _strings(value: Any) -> tuple[str, ...] | None:
    """A string or a non-empty list of strings, as a tuple; None otherwise."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _response(data: Mapping[str, Any], name: str) -> ResponseRule:
    table = data.get("response", {})
    where = f"tool profile {name!r}: response"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table")
    rule = ResponseRule()
    values: dict[str, tuple[str, ...]] = {}
    for key in ("error_keys", "false_keys", "true_keys"):
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}.{key}: expected a list of strings")
        values[key] = tuple(value)
    unknown = sorted(set(table) - {"error_keys", "false_keys", "true_keys"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key")
    return ResponseRule(**{**rule.__dict__, **values})


# The matching rules a function may declare (`verifier.checks.editmatch.MATCHERS`, which
# the profiles cannot import: the checks are a layer above).
MATCHERS = ("gemini-cli-0.61",)
_FUNCTION_KEYS = {
    "match",
    "action",
    "args",
    "required",
    "types",
    "line_base",
    "end_inclusive",
    "permission",
}


def _functions(
    data: Mapping[str, Any], name: str, key: str = "functions"
) -> dict[str, FunctionSpec]:
    functions: dict[str, FunctionSpec] = {}
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise ConfigError(f"tool profile {name!r}: {key}: expected a table")
    for fname, spec in table.items():
        where = f"tool profile {name!r}: {key}.{fname}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected a table")
        unknown = sorted(set(spec) - _FUNCTION_KEYS)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown key")
        try:
            kind = ActionKind(spec["action"])
        except (KeyError, ValueError, TypeError):
            raise ConfigError(
                f"{where}.action: expected one of {[k.value for k in ActionKind]}"
            ) from None
        args = spec.get("args", {})
        if not isinstance(args, dict):
            raise ConfigError(f"{where}.args: expected a table of strings or lists of strings")
        aliases: dict[str, tuple[str, ...]] = {}
        for ours, theirs in args.items():
            names = _strings(theirs)
            if names is None:
                raise ConfigError(
                    f"{where}.args.{ours}: expected a string or a list of strings"
                    " (the argument's external names)"
                )
            aliases[ours] = names
        required = spec.get("required", [])
        if not isinstance(required, list) or any(r not in args for r in required):
            raise ConfigError(f"{where}.required: expected a list of keys of args")
        types_table = spec.get("types", {})
        if not isinstance(types_table, dict):
            raise ConfigError(f"{where}.types: expected a table")
        types: dict[str, tuple[str, ...]] = {}
        for ours, declared in types_table.items():
            names = _strings(declared)
            if ours not in args:
                raise ConfigError(f"{where}.types.{ours}: not a key of args")
            if names is None or any(t not in TYPES for t in names):
                raise ConfigError(f"{where}.types.{ours}: expected one or more of {list(TYPES)}")
            types[ours] = names
        base = spec.get("line_base", 1)
        if base not in (0, 1) or isinstance(base, bool):
            raise ConfigError(f"{where}.line_base: expected 0 or 1")
        inclusive = spec.get("end_inclusive", True)
        if not isinstance(inclusive, bool):
            raise ConfigError(f"{where}.end_inclusive: expected true or false")
        permission = None
        if "permission" in spec:
            try:
                permission = Permission(spec["permission"])
            except (ValueError, TypeError):
                raise ConfigError(
                    f"{where}.permission: expected one of {[p.value for p in Permission]}"
                ) from None
        match = spec.get("match")
        if match is not None and match not in MATCHERS:
            raise ConfigError(f"{where}.match: expected one of {list(MATCHERS)}")
        if match is not None and kind not in (ActionKind.REPLACE, ActionKind.WRITE):
            raise ConfigError(f"{where}.match: only a replace or a write has matching rules")
        functions[fname] = FunctionSpec(
            kind,
            {ours: names[0] for ours, names in aliases.items()},
            tuple(required),
            aliases,
            types,
            base,
            inclusive,
            permission,
            match,
        )
    return functions
