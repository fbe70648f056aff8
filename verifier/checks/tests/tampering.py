"""Code that reaches into the test machinery, found in the files a session changed.

The code under test runs in the same process as an in-process runner such as
pytest, so it can always patch the runner (replace
``_pytest.python.Function.runtest`` from ``calc.py``, rewrite the JUnit file
from an ``atexit`` hook, end with ``os._exit(0)``). No channel fully defeats
that; what we can do is make it visible. `scan` looks at the changed files for
the patterns of ``config/tampering.toml`` and returns one
``tests.tampering_suspected`` finding per hit, with the file, the line and the
pattern: the tests check then makes the verdict inconclusive, for a person to
judge. It is a tripwire, not a proof: obfuscated code (``getattr`` on computed
strings, ``exec``, encoded payloads) and languages other than Python (matched
by regex only) get through; docs/security.md says so.

The module is pure: bytes in, findings out. Python is read with `ast`, never
imported or run; a name is resolved through the file's own imports, so
``from _pytest.python import Function as F; F.runtest = f`` is seen as an
assignment to ``_pytest.python.Function.runtest``. A file that does not parse
is not a hit (Python could not import it either): it is skipped and noted.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier._internal.paths import glob_matches
from verifier.errors import ConfigError
from verifier.findings import Finding

__all__ = [
    "CODE",
    "KINDS",
    "Pattern",
    "Patterns",
    "PatternsError",
    "load_patterns",
    "parse_patterns",
    "scan",
]

CODE = "tests.tampering_suspected"
PYTHON_KINDS = ("import", "assign", "reference", "mutate", "near", "string")
KINDS = (*PYTHON_KINDS, "regex")
APPLIES_TO = ("non-test", "all")
EXPECTED = "no code reaching into the test machinery"
# Methods that change a dict or a list in place: sys.modules, sys.meta_path.
MUTATORS = frozenset(
    {
        "__setitem__",
        "__delitem__",
        "pop",
        "popitem",
        "update",
        "setdefault",
        "clear",
        "insert",
        "append",
        "extend",
        "remove",
        "__iadd__",
    }
)
_SNIPPET = 120
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class PatternsError(ConfigError):
    """The tampering patterns file is wrong; the message names the pattern and field."""

    code = "tampering_patterns"


@dataclass(frozen=True)
class Pattern:
    """One thing to look for: see the header of config/tampering.toml for the fields."""

    id: str
    description: str
    applies_to: str
    kind: str
    modules: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    within_lines: int = 0
    files: tuple[str, ...] = ("*.py",)
    regex: re.Pattern[str] | None = None


@dataclass(frozen=True)
class Patterns:
    """Every pattern, the paths that are test code, and the scan's limits."""

    patterns: tuple[Pattern, ...]
    test_paths: tuple[str, ...]
    max_file_bytes: int = 2_000_000
    max_findings: int = 20

    def is_test(self, path: str) -> bool:
        return any(glob_matches(glob, path) for glob in self.test_paths)

    def applicable(self, path: str) -> list[Pattern]:
        """The patterns that look at `path` (callers read only files some pattern wants)."""
        is_test = self.is_test(path)
        return [
            p
            for p in self.patterns
            if (p.applies_to == "all" or not is_test)
            and any(glob_matches(glob, path) for glob in p.files)
        ]


@dataclass(frozen=True)
class _Hit:
    path: str
    line: int
    pattern: Pattern
    snippet: str


# -- loading -----------------------------------------------------------------------------


def load_patterns(path: Path) -> Patterns:
    """The patterns of a TOML file; `PatternsError` names the pattern and field that is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PatternsError(f"cannot read the tampering patterns {str(path)!r}: {exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PatternsError(f"{str(path)!r} is not valid TOML: {exc}") from None
    return parse_patterns(data, source=str(path))


def parse_patterns(data: Mapping[str, Any], source: str = "<patterns>") -> Patterns:
    """`Patterns` from parsed TOML (a mapping), checked field by field."""
    where = f"{source}: "
    test = data.get("test_code", {})
    if not isinstance(test, Mapping):
        raise PatternsError(f"{where}[test_code] must be a table")
    test_paths = _strings(test, "paths", f"{where}test_code", required=True)
    limits = data.get("limits", {})
    if not isinstance(limits, Mapping):
        raise PatternsError(f"{where}[limits] must be a table")
    max_bytes = _positive(limits, "max_file_bytes", f"{where}limits", 2_000_000)
    max_findings = _positive(limits, "max_findings", f"{where}limits", 20)
    raw = data.get("pattern")
    if not isinstance(raw, list) or not raw:
        raise PatternsError(f"{where}no [[pattern]] entries")
    patterns: list[Pattern] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        pattern = _pattern(entry, f"{where}pattern #{index + 1}")
        if pattern.id in seen:
            raise PatternsError(f"{where}pattern {pattern.id!r}: id: used twice")
        seen.add(pattern.id)
        patterns.append(pattern)
    return Patterns(tuple(patterns), test_paths, max_bytes, max_findings)


def _pattern(entry: object, where: str) -> Pattern:
    if not isinstance(entry, Mapping):
        raise PatternsError(f"{where}: must be a table")
    pid = entry.get("id")
    if not isinstance(pid, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", pid):
        raise PatternsError(
            f"{where}: id: expected lower-case letters, digits and '-', got {pid!r}"
        )
    where = f"{where.rsplit('pattern #', 1)[0]}pattern {pid!r}"
    known = {
        "id",
        "description",
        "applies_to",
        "kind",
        "modules",
        "names",
        "contains",
        "within_lines",
        "files",
        "regex",
    }
    unknown = sorted(set(entry) - known)
    if unknown:
        raise PatternsError(f"{where}: {unknown[0]}: unknown field")
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip():
        raise PatternsError(f"{where}: description: expected a non-empty string")
    applies_to = entry.get("applies_to")
    if applies_to not in APPLIES_TO:
        raise PatternsError(
            f"{where}: applies_to: expected one of {', '.join(APPLIES_TO)}, got {applies_to!r}"
        )
    kind = entry.get("kind")
    if kind not in KINDS:
        raise PatternsError(f"{where}: kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    needs = {
        "import": "modules",
        "assign": "modules",
        "reference": "names",
        "mutate": "names",
        "near": "names",
    }
    modules = _strings(entry, "modules", where, required=needs.get(kind) == "modules")
    names = _strings(entry, "names", where, required=needs.get(kind) == "names")
    contains = _strings(entry, "contains", where, required=kind in ("near", "string"))
    within = _positive(entry, "within_lines", where, 5) if kind == "near" else 0
    files = _strings(entry, "files", where, required=kind == "regex") or ("*.py",)
    regex = None
    if kind == "regex":
        text = entry.get("regex")
        if not isinstance(text, str) or not text:
            raise PatternsError(f"{where}: regex: expected a regular expression")
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise PatternsError(f"{where}: regex: does not compile: {exc}") from None
    elif "regex" in entry:
        raise PatternsError(f'{where}: regex: only for kind = "regex"')
    return Pattern(
        pid,
        description.strip(),
        str(applies_to),
        str(kind),
        modules,
        names,
        tuple(c.lower() for c in contains),
        within,
        files,
        regex,
    )


def _strings(table: Mapping[str, Any], key: str, where: str, *, required: bool) -> tuple[str, ...]:
    value = table.get(key)
    if value is None:
        if required:
            raise PatternsError(f"{where}: {key}: required, a list of strings")
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PatternsError(f"{where}: {key}: expected a list of non-empty strings, got {value!r}")
    if required and not value:
        raise PatternsError(f"{where}: {key}: must not be empty")
    return tuple(value)


def _positive(table: Mapping[str, Any], key: str, where: str, default: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PatternsError(f"{where}: {key}: expected a positive integer, got {value!r}")
    return value


# -- scanning ----------------------------------------------------------------------------


def scan(
    files: Mapping[str, bytes], patterns: Patterns, *, notes: list[str] | None = None
) -> list[Finding]:
    """One `tests.tampering_suspected` finding per hit in `files` (path -> bytes at head).

    Findings are sorted by path and line and capped at `patterns.max_findings`,
    the last one counting the rest. Files over `patterns.max_file_bytes` and
    Python that does not parse are skipped; `notes`, when given, gets a line for each.
    """
    hits: list[_Hit] = []
    for path in sorted(files):
        hits.extend(_scan_file(path, files[path], patterns, notes))
    findings = [_finding(hit) for hit in hits]
    cap = patterns.max_findings
    if len(findings) > cap:
        rest = len(findings) - cap
        last = findings[cap - 1]
        findings = findings[: cap - 1]
        findings.append(
            Finding(
                last.code,
                f"{last.message} (and {rest} more hits not shown)",
                path=last.path,
                expected=last.expected,
                found=last.found,
            )
        )
    return findings


def _scan_file(path: str, data: bytes, patterns: Patterns, notes: list[str] | None) -> list[_Hit]:
    wanted = patterns.applicable(path)
    if not wanted:
        return []
    if len(data) > patterns.max_file_bytes:
        _note(
            notes, f"{path}: not scanned for tampering, larger than {patterns.max_file_bytes} bytes"
        )
        return []
    hits: list[_Hit] = []
    lines = data.decode("utf-8", "replace").splitlines()
    regexes = [p for p in wanted if p.kind == "regex"]
    for pattern in regexes:
        assert pattern.regex is not None
        text = "\n".join(lines)
        for match in pattern.regex.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            hits.append(_Hit(path, line, pattern, _snippet(lines, line)))
    python = [p for p in wanted if p.kind in PYTHON_KINDS]
    if python:
        try:
            tree = ast.parse(data, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
            _note(notes, f"{path}: not scanned for tampering, not parseable Python ({reason})")
        else:
            found = _PythonFile(tree)
            for pattern in python:
                for line in sorted(set(found.lines(pattern))):
                    hits.append(_Hit(path, line, pattern, _snippet(lines, line)))
    hits.sort(key=lambda h: (h.line, h.pattern.id))
    return hits


def _note(notes: list[str] | None, line: str) -> None:
    if notes is not None:
        notes.append(line)


def _snippet(lines: Sequence[str], line: int) -> str:
    """The source line, trimmed, with control characters escaped (it is the agent's text)."""
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= _SNIPPET else text[: _SNIPPET - 1] + "…"


def _finding(hit: _Hit) -> Finding:
    return Finding(
        CODE,
        f"{hit.path}:{hit.line}: {hit.pattern.description} ({hit.pattern.id}): a person "
        "should judge whether this tampers with the test run",
        path=hit.path,
        expected=EXPECTED,
        found=f"{hit.pattern.id} at line {hit.line}: {hit.snippet}",
    )


def _under(name: str | None, prefixes: Collection[str]) -> bool:
    """Whether the dotted `name` is one of `prefixes` or inside one (``a.b`` is under ``a``)."""
    if name is None:
        return False
    if name in prefixes:
        return True
    dot = name.find(".")
    while dot != -1:
        if name[:dot] in prefixes:
            return True
        dot = name.find(".", dot + 1)
    return False


class _PythonFile:
    """One parsed file: its imports as aliases, and the questions the kinds ask."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        # Each pattern walks the same nodes: what they ask is computed once per file.
        self._resolved: dict[int, str | None] = {}
        self.calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        # Local name -> the dotted name it stands for, from every import in the file
        # (whatever the scope: a tripwire prefers a false alarm to a miss).
        self.aliases: dict[str, str] = {}
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, imported = node.targets[0], self._dynamic_import(node.value, bound=True)
                if isinstance(target, ast.Name) and imported is not None:
                    self.aliases[target.id] = imported

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression stands for, through the file's imports."""
        key = id(node)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(node)
        return self._resolved[key]

    def _resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Subscript):  # sys.modules["_pytest.python"]
            key = node.slice
            if self.resolve(node.value) == "sys.modules" and isinstance(key, ast.Constant):
                return key.value if isinstance(key.value, str) else None
            return None
        if isinstance(node, ast.Call):
            imported = self._dynamic_import(node, bound=True)
            if imported is not None:
                return imported
            # getattr(x, "y") with a literal name is x.y
            if self._is(node.func, "getattr") and len(node.args) >= 2:
                base, attr = self.resolve(node.args[0]), node.args[1]
                if base and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                    return f"{base}.{attr.value}"
        return None

    @functools.cached_property
    def loads(self) -> list[tuple[str, int]]:
        """(dotted name, line) of every name or attribute read."""
        found: list[tuple[str, int]] = []
        for node in self.nodes:
            if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
                name = self.resolve(node)
                if name is not None:
                    found.append((name, node.lineno))
        return found

    @functools.cached_property
    def imported_names(self) -> list[tuple[str, int]]:
        """(dotted name, line) of every name a ``from m import name`` imports."""
        return [
            (f"{node.module}.{alias.name}", node.lineno)
            for node in self.nodes
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
            for alias in node.names
        ]

    @functools.cached_property
    def written(self) -> list[tuple[ast.AST, int]]:
        return list(self._targets())

    @functools.cached_property
    def constants(self) -> list[tuple[str, int]]:
        """(lower-cased text, line) of every string constant that is not a bare statement
        (a docstring or a string on its own line does nothing)."""
        inert = {
            id(n.value)
            for n in self.nodes
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        }
        found: list[tuple[str, int]] = []
        for node in self.nodes:
            if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
                if id(node) in inert:
                    continue
                value = node.value
                text = value.decode("latin-1") if isinstance(value, bytes) else value
                found.append((text.lower(), node.lineno))
        return found

    def _is(self, node: ast.AST, name: str) -> bool:
        return self.resolve(node) in (name, f"builtins.{name}")

    def _dynamic_import(self, node: ast.AST, *, bound: bool = False) -> str | None:
        """The module ``__import__("m")`` or ``importlib.import_module("m")`` imports;
        with `bound`, the one it returns (``__import__("a.b")`` returns ``a``)."""
        if not isinstance(node, ast.Call) or not node.args:
            return None
        first = node.args[0]
        if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
            return None
        if self._is(node.func, "__import__"):
            fromlist = node.args[3:] or [k.value for k in node.keywords if k.arg == "fromlist"]
            return first.value.split(".")[0] if bound and not fromlist else first.value
        if self.resolve(node.func) == "importlib.import_module":
            return first.value
        return None

    def lines(self, pattern: Pattern) -> Iterator[int]:
        """The lines where `pattern` matches."""
        modules, names = frozenset(pattern.modules), frozenset(pattern.names)
        match pattern.kind:
            case "import":
                return self._imports(modules)
            case "assign":
                return self._assignments(modules)
            case "reference":
                return self._references(names)
            case "mutate":
                return self._mutations(names)
            case "near":
                return self._near(names, pattern.contains, pattern.within_lines)
            case "string":
                return self._strings(pattern.contains)
        raise AssertionError(f"not a Python kind: {pattern.kind}")

    def _imports(self, modules: Collection[str]) -> Iterator[int]:
        for node in self.nodes:
            if isinstance(node, ast.Import):
                if any(_under(a.name, modules) for a in node.names):
                    yield node.lineno
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                if any(_under(n, modules) for n in names):
                    yield node.lineno
            elif isinstance(node, ast.Call) and _under(self._dynamic_import(node), modules):
                yield node.lineno

    def _targets(self) -> Iterator[tuple[ast.AST, int]]:
        """Every expression written or deleted, and its line."""
        for node in self.nodes:
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.NamedExpr | ast.For | ast.AsyncFor | ast.comprehension):
                targets = [node.target]
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                targets = [node.optional_vars]
            while targets:
                target = targets.pop()
                if isinstance(target, ast.Tuple | ast.List):
                    targets.extend(target.elts)
                elif isinstance(target, ast.Starred):
                    targets.append(target.value)
                else:
                    yield target, getattr(target, "lineno", getattr(node, "lineno", 0))

    def _assignments(self, modules: Collection[str]) -> Iterator[int]:
        for target, line in self.written:
            if isinstance(target, ast.Attribute) and _under(self.resolve(target), modules):
                yield line
        for node in self.calls:
            if not node.args:
                continue
            setter = self._is(node.func, "setattr") or self._is(node.func, "delattr")
            if setter and _under(self.resolve(node.args[0]), modules):
                yield node.lineno

    def _uses(self, names: Collection[str]) -> Iterator[int]:
        for name, line in self.loads:
            if _under(name, names):
                yield line
        # `from os import _exit`: the import names it even if the use is hidden
        for name, line in self.imported_names:
            if _under(name, names):
                yield line
        for node in self.calls:
            if self._is(node.func, "getattr") and _under(self.resolve(node), names):
                yield node.lineno

    def _references(self, names: Collection[str]) -> Iterator[int]:
        return self._uses(names)

    def _mutations(self, names: Collection[str]) -> Iterator[int]:
        for target, line in self.written:
            written = target.value if isinstance(target, ast.Subscript) else target
            if isinstance(target, ast.Subscript | ast.Attribute) and _under(
                self.resolve(written), names
            ):
                yield line
        for node in self.calls:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                if _under(self.resolve(func.value), names):
                    yield node.lineno
            elif (
                (self._is(func, "setattr") or self._is(func, "delattr"))
                and node.args
                and _under(self.resolve(node.args[0]), names)
            ):
                yield node.lineno

    def _strings(self, contains: Sequence[str]) -> Iterator[int]:
        for text, line in self.constants:
            if any(c in text for c in contains):
                yield line

    def _near(self, names: Collection[str], contains: Sequence[str], within: int) -> Iterator[int]:
        marked = sorted(set(self._strings(contains)))
        if not marked:
            return
        for line in self._uses(names):
            if any(abs(line - m) <= within for m in marked):
                yield line
