"""Tool profiles: the harness's function names, normalised into internal actions.

A profile is data (``config/profiles/NAME.toml``), not code. Every call keeps
its raw form beside the action; a call the profile does not know becomes an
``unknown`` action and is reported, never dropped.
"""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.errors import ConfigError

if TYPE_CHECKING:  # the trajectory module loads the SDK (half a second); profiles need not
    from verifier.trajectory import ToolCall


class ActionKind(enum.StrEnum):
    READ = "read"
    LIST = "list"
    SEARCH = "search"
    WRITE = "write"
    REPLACE = "replace"
    DELETE = "delete"
    RUN = "run"
    WEB = "web"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FunctionSpec:
    action: ActionKind
    args: Mapping[str, str]
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class Action:
    """A call in the verifier's vocabulary; `problems` lists missing parameters."""

    kind: ActionKind
    params: Mapping[str, Any]
    call: ToolCall
    problems: tuple[str, ...] = ()

    @property
    def path(self) -> str | None:
        value = self.params.get("path")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Profile:
    name: str
    functions: Mapping[str, FunctionSpec] = field(default_factory=dict)

    def normalise(self, call: ToolCall) -> Action:
        spec = self.functions.get(call.name)
        if spec is None:
            return Action(ActionKind.UNKNOWN, {}, call, (f"unknown function {call.name!r}",))
        params = {
            ours: call.args[theirs] for ours, theirs in spec.args.items() if theirs in call.args
        }
        missing = tuple(
            f"missing argument {spec.args[p]!r}" for p in spec.required if p not in params
        )
        return Action(spec.action, params, call, missing)


def load_profile(profiles_dir: Path, name: str | None) -> Profile:
    """Read ``profiles_dir/NAME.toml`` (``default`` when the report names none)."""
    name = name or "default"
    if not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"tool profile {name!r}: a name is letters, digits, '-' and '_'")
    path = profiles_dir / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"tool profile {name!r}: no file {str(path)!r}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"tool profile {name!r}: cannot read {str(path)!r}: {exc}") from None
    return Profile(name, _functions(data, name))


def _functions(data: Mapping[str, Any], name: str) -> dict[str, FunctionSpec]:
    functions: dict[str, FunctionSpec] = {}
    for fname, spec in data.get("functions", {}).items():
        where = f"tool profile {name!r}: functions.{fname}"
        try:
            kind = ActionKind(spec["action"])
        except (KeyError, ValueError, TypeError):
            raise ConfigError(
                f"{where}.action: expected one of {[k.value for k in ActionKind]}"
            ) from None
        args = spec.get("args", {})
        required = spec.get("required", [])
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise ConfigError(f"{where}.args: expected a table of strings")
        if not isinstance(required, list) or any(r not in args for r in required):
            raise ConfigError(f"{where}.required: expected a list of keys of args")
        functions[fname] = FunctionSpec(kind, dict(args), tuple(required))
    return functions
