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

Which files, and which lines of them, are the run's and the session's:

* A path the run took from the base (`verifier.checks.tests.testinfra` put it
  back or removed it) is not scanned: the head's bytes never run. Every other
  changed file is code under test, whatever folder it lies in, unless the run
  uses the head's tests as they are (``test_infra_from_base = false``): then the
  repository's ``test_paths`` are test code, which the patterns for non-test
  code skip. There is no list of test folders here to differ from the run's.
* Only what the session added or changed is reported: a hit counts when its
  evidence (the statement, or the whole method for a comparison) holds a
  statement that is new relative to the base, or uses a name that an import
  now binds to something it did not bind at the base. A statement is keyed by its
  enclosing function or class and its text (whitespace folded), and counted:
  one that occurs more often at the head than at the base, in that scope, is
  new (each copy of it), so a line moved or copied into another function, or
  duplicated in its own, is new; a line moved within its own function is not.
  Files that are not Python are compared line by line, the same way.

The module is pure: bytes in, findings out. Python is read with `ast`, never
imported or run; a name is resolved through the file's own imports, so
``from _pytest.python import Function as F; F.runtest = f`` is seen as an
assignment to ``_pytest.python.Function.runtest``. A file that does not parse
is not a hit (Python could not import it either): it is skipped and noted.
"""

from __future__ import annotations

import ast
import functools
import operator
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
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
PYTHON_KINDS = (
    "import",
    "assign",
    "reference",
    "mutate",
    "near",
    "string",
    "comparison",
    "builtin-comparison",
)
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
    bases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Patterns:
    """Every pattern and the scan's limits."""

    patterns: tuple[Pattern, ...]
    max_file_bytes: int = 2_000_000
    max_findings: int = 20

    def applicable(self, path: str, *, test: bool = False) -> list[Pattern]:
        """The patterns that look at `path`, test code when `test` (callers read only
        files some pattern wants)."""
        return [
            p
            for p in self.patterns
            if (p.applies_to == "all" or not test)
            and any(glob_matches(glob, path) for glob in p.files)
        ]


@dataclass(frozen=True)
class _Hit:
    path: str
    line: int
    pattern: Pattern
    snippet: str
    why: str = ""


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
    if "test_code" in data:
        # The run says what is test code (what it took from the base), not a list here.
        raise PatternsError(
            f"{where}[test_code]: no longer read: the scan skips what the run took from "
            "the base (verifier/checks/tests/testinfra.py); remove the table"
        )
    unknown = sorted(set(data) - {"limits", "pattern"})
    if unknown:
        raise PatternsError(f"{where}[{unknown[0]}]: unknown table")
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
    return Patterns(tuple(patterns), max_bytes, max_findings)


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
        "bases",
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
        "comparison": "names",
        "builtin-comparison": "names",
    }
    modules = _strings(entry, "modules", where, required=needs.get(kind) == "modules")
    names = _strings(entry, "names", where, required=needs.get(kind) == "names")
    contains = _strings(entry, "contains", where, required=kind in ("near", "string"))
    within = _positive(entry, "within_lines", where, 5) if kind == "near" else 0
    files = _strings(entry, "files", where, required=kind == "regex") or ("*.py",)
    bases = _strings(entry, "bases", where, required=kind == "builtin-comparison")
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
        bases,
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
    files: Mapping[str, bytes],
    patterns: Patterns,
    *,
    base: Mapping[str, bytes] | None = None,
    exempt: Collection[str] = frozenset(),
    test_code: Collection[str] = frozenset(),
    notes: list[str] | None = None,
) -> list[Finding]:
    """One `tests.tampering_suspected` finding per hit in `files` (path -> bytes at head).

    `base` holds the base's bytes of the files that existed there: only hits on
    what is new relative to it count (a file absent from it is new whole).
    `exempt` are the paths the run took from the base or removed (never scanned:
    the head's bytes do not run); `test_code` the paths that run as the head has
    them and are tests, which the patterns for non-test code skip.
    Findings are sorted by path and line and capped at `patterns.max_findings`,
    the last one counting the rest. Files over `patterns.max_file_bytes` and
    Python that does not parse are skipped; `notes`, when given, gets a line for each.
    """
    hits: list[_Hit] = []
    at_base = base or {}
    for path in sorted(files):
        if path in exempt:
            continue
        hits.extend(
            _scan_file(path, files[path], at_base.get(path), patterns, path in test_code, notes)
        )
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


def _scan_file(
    path: str,
    data: bytes,
    base: bytes | None,
    patterns: Patterns,
    test: bool,
    notes: list[str] | None,
) -> list[_Hit]:
    wanted = patterns.applicable(path, test=test)
    if not wanted:
        return []
    if len(data) > patterns.max_file_bytes:
        _note(
            notes, f"{path}: not scanned for tampering, larger than {patterns.max_file_bytes} bytes"
        )
        return []
    hits: list[_Hit] = []
    lines = _lines(data)
    regexes = [p for p in wanted if p.kind == "regex"]
    if regexes:
        new: set[int] | None = None  # what is new: only asked once a pattern matched
        text = "\n".join(lines)
        for pattern in regexes:
            assert pattern.regex is not None
            for match in pattern.regex.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                if new is None:
                    new = _new_lines_of_text(lines, base)
                if line in new:
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
            matches = [sorted(found.hits(p), key=lambda h: h.line) for p in python]
            # What is new relative to the base decides only among matches: a file that
            # matches nothing (most) needs neither the base parsed nor its statements.
            changed: set[int] = set()
            rebound: set[str] = set()
            if any(matches):
                base_tree = _parsed(base)
                changed = _new_lines_of_python(tree, lines, base_tree, base)
                rebound = found.rebound(None if base_tree is None else _PythonFile(base_tree))
            for pattern, matched in zip(python, matches, strict=True):
                seen: set[int] = set()
                for hit in matched:
                    evidence = list(hit.evidence)
                    fresh = not changed.isdisjoint(evidence) or found.uses(evidence, rebound)
                    if hit.line in seen or not fresh:
                        continue
                    seen.add(hit.line)
                    snippet = _snippet(lines, hit.line)
                    hits.append(_Hit(path, hit.line, pattern, snippet, _escaped(hit.why, 80)))
    hits.sort(key=lambda h: (h.line, h.pattern.id))
    return hits


# -- what is new relative to the base ----------------------------------------------------


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _lines(data: bytes) -> list[str]:
    """The lines as Python numbers them: only LF, CR LF and CR end one (a form feed or
    a ``\\x1c`` in a comment must not shift the text a line number stands for)."""
    lines = _NEWLINE.split(data.decode("utf-8", "replace"))
    return lines[:-1] if lines and lines[-1] == "" else lines


def _fold(text: str) -> str:
    return " ".join(text.split())


def _new_lines_of_text(lines: Sequence[str], base: bytes | None) -> set[int]:
    """The 1-based numbers of `lines` new relative to `base`: a line whose text (whitespace
    folded) occurs more often here than there, each occurrence of it."""
    numbers = set(range(1, len(lines) + 1))
    if base is None:
        return numbers
    before = Counter(_fold(t) for t in _lines(base))
    now = Counter(_fold(t) for t in lines)
    return {n for n in numbers if now[_fold(lines[n - 1])] > before[_fold(lines[n - 1])]}


def _parsed(base: bytes | None) -> ast.Module | None:
    """The base's file parsed; None when it is absent or does not parse."""
    if base is None:
        return None
    try:
        return ast.parse(base, filename="<base>")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _new_lines_of_python(
    tree: ast.Module, lines: Sequence[str], base_tree: ast.Module | None, base: bytes | None
) -> set[int]:
    """The lines of the head file that belong to a new statement, or to none (the safe side).

    A statement is new when its key (enclosing scope, folded text of its lines,
    the header only for a compound statement) occurs more often at the head than
    at the base; without a base tree (a new file, or one that did not parse),
    every line is new.
    """
    everything = set(range(1, len(lines) + 2))
    if base_tree is None or base is None:
        return everything
    before = Counter(key for key, _ in _statements(base_tree, _lines(base)))
    head = list(_statements(tree, lines))
    now = Counter(key for key, _ in head)
    old: set[int] = set()
    new: set[int] = set()
    for key, span in head:
        (new if now[key] > before[key] else old).update(span)
    return everything - (old - new)


_Key = tuple[tuple[str, ...], str]
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(tree: ast.Module, lines: Sequence[str]) -> Iterator[tuple[_Key, range]]:
    """Every statement's key and the lines it covers (a compound statement: its header)."""
    stack: list[tuple[list[Any], tuple[str, ...]]] = [(list(tree.body), ())]
    while stack:
        body, scope = stack.pop()
        for node in body:
            first = _first_line(node)
            blocks = [b for f in _BLOCKS for b in [getattr(node, f, None)] if b]
            inner = [n for block in blocks for n in block]
            if inner:
                last = max(first, min(_first_line(n) for n in inner) - 1)
            else:
                last = getattr(node, "end_lineno", None) or first
            span = range(first, last + 1)
            yield (scope, "\n".join(_fold(lines[n - 1]) for n in span if n <= len(lines))), span
            named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            for block in blocks:
                stack.append((list(block), (*scope, node.name) if named else scope))


def _first_line(node: Any) -> int:
    if isinstance(node, ast.match_case):
        return int(node.pattern.lineno)
    decorators = getattr(node, "decorator_list", ())
    return min([int(node.lineno), *(int(d.lineno) for d in decorators)])


def _note(notes: list[str] | None, line: str) -> None:
    if notes is not None:
        notes.append(line)


def _snippet(lines: Sequence[str], line: int) -> str:
    """The source line, trimmed, with control characters escaped (it is the agent's text)."""
    return _escaped(lines[line - 1].strip() if 0 < line <= len(lines) else "", _SNIPPET)


def _escaped(text: str, limit: int) -> str:
    """`text` of the agent's with its control characters escaped, cut to `limit`."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _finding(hit: _Hit) -> Finding:
    why = f" ({hit.why})" if hit.why else ""
    return Finding(
        CODE,
        f"{hit.path}:{hit.line}: {hit.pattern.description}{why} ({hit.pattern.id}): a person "
        "should judge whether this tampers with the test run",
        path=hit.path,
        expected=EXPECTED,
        found=f"{hit.pattern.id} at line {hit.line}{why}: {hit.snippet}",
    )


@dataclass(frozen=True)
class _Found:
    """A match in one file: its line, the lines that must hold something new for it to
    count (`evidence`), and which rule of its pattern matched (`why`)."""

    line: int
    evidence: Iterable[int]
    why: str = ""


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
        # Local name -> every dotted name an import binds it to: a hit on a statement the
        # base had counts when what its names stand for changed.
        self.targets: dict[str, set[str]] = {}
        for node in self.nodes:
            bound: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                        bound.append(alias.asname)
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
                        bound.append(top)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                        bound.append(alias.asname or alias.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, imported = node.targets[0], self._dynamic_import(node.value, bound=True)
                if isinstance(target, ast.Name) and imported is not None:
                    self.aliases[target.id] = imported
                    bound.append(target.id)
            for name in bound:
                self.targets.setdefault(name, set()).add(self.aliases[name])

    @functools.cached_property
    def names_at(self) -> dict[int, set[str]]:
        """Line -> the names read or written on it."""
        found: dict[int, set[str]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Name):
                found.setdefault(node.lineno, set()).add(node.id)
        return found

    def rebound(self, base: _PythonFile | None) -> set[str]:
        """The names an import binds here to something it did not bind at `base`."""
        if base is None:
            return set(self.targets)
        return {n for n, t in self.targets.items() if not t <= base.targets.get(n, set())}

    def uses(self, evidence: Iterable[int], names: Collection[str]) -> bool:
        """Whether a line of `evidence` uses one of `names`."""
        return any(not self.names_at.get(line, set()).isdisjoint(names) for line in evidence)

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

    def hits(self, pattern: Pattern) -> Iterator[_Found]:
        """Where `pattern` matches, with the lines that must be new for the hit to count."""
        modules, names = frozenset(pattern.modules), frozenset(pattern.names)
        match pattern.kind:
            case "import":
                lines = self._imports(modules)
            case "assign":
                lines = self._assignments(modules)
            case "reference":
                lines = self._references(names)
            case "mutate":
                lines = self._mutations(names)
            case "near":
                within = pattern.within_lines
                for line in self._near(names, pattern.contains, within):
                    # the string may be what is new, not the use of the name
                    yield _Found(line, range(line - within, line + within + 1))
                return
            case "string":
                lines = self._strings(pattern.contains)
            case "comparison":
                yield from self._comparisons(names)
                return
            case "builtin-comparison":
                yield from self._builtin_comparisons(names, frozenset(pattern.bases))
                return
            case _:
                raise AssertionError(f"not a Python kind: {pattern.kind}")
        for line in lines:
            yield _Found(line, range(line, line + 1))

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

    # -- comparisons that always succeed ---------------------------------------------------

    @functools.cached_property
    def functions(self) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        """The file's functions by name (any scope, the last one wins): ``__eq__ = _always``."""
        return {
            n.name: n for n in self.nodes if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }

    def _comparisons(self, names: Collection[str]) -> Iterator[_Found]:
        """Comparison methods that ignore what they compare with or return a constant
        success: defined in a class body, assigned to a class (``C.__eq__ = f``,
        ``setattr(C, "__eq__", f)``) or given to ``type(name, bases, {...})``."""
        for node in self.nodes:
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    name, value = _member(stmt, names)
                    if name is not None:
                        why = self._always(name, value, names, owner=node.name)
                        if why is not None:
                            evidence = [*_lines_of(stmt), *self._defined(value)]
                            yield _Found(_first_line(stmt), evidence, why)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if not isinstance(target, ast.Attribute):
                        continue
                    if target.attr in names:
                        why = self._always(target.attr, node.value, names, at_run_time=True)
                        if why is not None:
                            evidence = [*_lines_of(node), *self._defined(node.value)]
                            yield _Found(node.lineno, evidence, why)
                    elif target.attr in _MOCK_ANSWERS:
                        # `m.__eq__.return_value = True`: a mock's comparison told what to say
                        configured = target.value
                        if isinstance(configured, ast.Attribute) and configured.attr in names:
                            why = f"a mock's {configured.attr} is given its {target.attr}"
                            yield _Found(node.lineno, _lines_of(node), why)
            elif isinstance(node, ast.Call):
                for name, value in self._set_members(node, names):
                    at_run_time = self._is(node.func, "setattr")
                    why = self._always(name, value, names, at_run_time=at_run_time)
                    if why is not None:
                        evidence = [*_lines_of(node), *self._defined(value)]
                        yield _Found(node.lineno, evidence, why)

    def _set_members(self, call: ast.Call, names: Collection[str]) -> Iterator[tuple[str, ast.AST]]:
        """The comparison methods a ``setattr(C, "__eq__", f)`` or ``type(n, b, {...})`` sets."""
        args = call.args
        if self._is(call.func, "setattr") and len(args) == 3:
            key = args[1]
            if isinstance(key, ast.Constant) and key.value in names:
                yield str(key.value), args[2]
        elif self._is(call.func, "type") and len(args) == 3:
            yield from _dict_members(args[2], names)

    def _defined(self, value: ast.AST | None) -> range:
        """The lines of the file's function `value` names (``__eq__ = _always``), if any."""
        if isinstance(value, ast.Name) and value.id in self.functions:
            return _lines_of(self.functions[value.id])
        return range(0)

    def _always(
        self,
        name: str,
        value: ast.AST | None,
        names: Collection[str],
        *,
        at_run_time: bool = False,
        owner: str | None = None,
    ) -> str | None:
        """Why `value`, bound as the comparison method `name`, always succeeds (None: no sign).

        `at_run_time`: set on a class or object after it was made (``C.__eq__ = v``),
        where anything but a function the file shows is suspect (``Mock(return_value=True)``).
        `owner` is the class whose body binds it.
        """
        if isinstance(value, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
            return _always_succeeds(name, value, owner)
        if isinstance(value, ast.Name) and value.id in self.functions:
            return _always_succeeds(name, self.functions[value.id], owner)
        target = value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", None)
        if target in names and target != name:
            return f"{name} is bound to {target}"
        if at_run_time and value is not None:
            return f"{name} set at run time to {ast.unparse(value)}"
        return None

    def _builtin_comparisons(
        self, names: Collection[str], bases: Collection[str]
    ) -> Iterator[_Found]:
        """Classes deriving from a built-in type (``int``, ``str``, ``list``...) that override
        one of its comparisons, by ``class`` or by ``type(n, (int,), {...})``."""
        for node in self.nodes:
            if isinstance(node, ast.ClassDef):
                builtin = next(filter(None, (self._builtin(b, bases) for b in node.bases)), None)
                if builtin is None:
                    continue
                header = range(_first_line(node), node.body[0].lineno)
                for stmt in node.body:
                    name, _ = _member(stmt, names)
                    if name is not None:
                        why = f"a subclass of {builtin} overrides {name}"
                        yield _Found(_first_line(stmt), [*header, *_lines_of(stmt)], why)
            elif isinstance(node, ast.Call) and self._is(node.func, "type") and len(node.args) == 3:
                given = node.args[1]
                elts = given.elts if isinstance(given, ast.Tuple | ast.List) else [given]
                builtin = next(filter(None, (self._builtin(b, bases) for b in elts)), None)
                if builtin is None:
                    continue
                for name, _ in _dict_members(node.args[2], names):
                    why = f"a subclass of {builtin} overrides {name}"
                    yield _Found(node.lineno, _lines_of(node), why)

    def _builtin(self, node: ast.AST, bases: Collection[str]) -> str | None:
        name = self.resolve(node)
        if name is None:
            return None
        name = name.removeprefix("builtins.")
        return name if name in bases else None


# What a mock answers when called: set on a comparison, it decides every comparison.
_MOCK_ANSWERS = frozenset({"return_value", "side_effect"})


def _lines_of(node: ast.AST) -> range:
    first = _first_line(node)
    return range(first, (getattr(node, "end_lineno", None) or first) + 1)


def _member(stmt: ast.stmt, names: Collection[str]) -> tuple[str | None, ast.AST | None]:
    """The comparison method a class-body statement defines, and its value (a function's
    definition, or what is assigned to the name); (None, None) for any other statement."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name in names:
        return stmt.name, stmt
    value: ast.expr | None
    if isinstance(stmt, ast.Assign):
        targets, value = stmt.targets, stmt.value
    elif isinstance(stmt, ast.AnnAssign):
        targets, value = [stmt.target], stmt.value
    else:
        return None, None
    for target in targets:
        if isinstance(target, ast.Name) and target.id in names:
            return target.id, value
    return None, None


def _dict_members(node: ast.AST, names: Collection[str]) -> Iterator[tuple[str, ast.AST]]:
    """The comparison methods in a namespace literal: ``{"__eq__": f}`` or ``dict(__eq__=f)``."""
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in names:
                yield str(key.value), value
    elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
        for keyword in node.keywords:
            if keyword.arg is not None and keyword.arg in names:
                yield keyword.arg, keyword.value


def _always_succeeds(
    name: str, func: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef, owner: str | None
) -> str | None:
    """Why the comparison method `name` defined by `func` always succeeds, or None.

    It returns only constants, each of which makes the comparison succeed (true,
    or false for ``__ne__``), unless it declines whatever is not of its own
    class `owner` (``if not isinstance(other, Owner): return NotImplemented``:
    a stateless class equal to its own instances); or it never reads the
    argument it compares with, or (an order) its own object, yet returns
    something other than ``NotImplemented``.
    """
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    compared = [a.arg for a in positional[1:2]]
    if args.vararg is not None and len(positional) < 2:
        compared.append(args.vararg.arg)
    if isinstance(func, ast.Lambda):
        body = [func.body]
    else:
        body = sorted(_returned(func.body), key=lambda v: (v.lineno, v.col_offset))
    values = [v for v in body if not (isinstance(v, ast.Name) and v.id == "NotImplemented")]
    if not values:
        return None
    truths = [_truth(v) for v in values]
    if not isinstance(func, ast.Lambda) and _falls_through(func.body):
        truths.append(False)  # the None of running off the end
    success = name != "__ne__"
    own = positional[0].arg if positional else None
    if all(t is not None for t in truths):
        if all(t is success for t in truths) and not _declines_others(func, compared, own, owner):
            return f"{name} always returns {ast.unparse(values[0])}"
        return None
    read = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)}
    if compared and not read & set(compared):
        return f"{name} ignores its argument {compared[0]!r}"
    # `return other is not None`: an equality or an order that never looks at its own
    # object holds for whatever that object is (super(), __class__ and the class's own
    # name look at what it is).
    looks = {own, "super", "__class__", owner}
    if own is not None and name in _ORDERS and not read & looks:
        return f"{name} ignores its own object {own!r}"
    return None


def _declines_others(
    func: ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef,
    compared: Sequence[str],
    own: str | None,
    owner: str | None,
) -> bool:
    """Whether `func` holds ``if not isinstance(<compared>, <its own class>): return
    NotImplemented``: then it compares equal only to its own class's objects."""
    if isinstance(func, ast.Lambda) or owner is None or not compared:
        return False
    for node in ast.walk(func):
        test = node.test if isinstance(node, ast.If) else None
        if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            continue
        check = test.operand
        if not (
            isinstance(check, ast.Call)
            and getattr(check.func, "id", None) == "isinstance"
            and len(check.args) == 2
            and isinstance(check.args[0], ast.Name)
            and check.args[0].id == compared[0]
            and _is_own_class(check.args[1], own, owner)
        ):
            continue
        assert isinstance(node, ast.If)
        if any(isinstance(r, ast.Name) and r.id == "NotImplemented" for r in _returned(node.body)):
            return True
    return False


def _is_own_class(node: ast.expr, own: str | None, owner: str) -> bool:
    """``Owner``, ``type(self)`` or ``self.__class__``."""
    if isinstance(node, ast.Name):
        return node.id == owner
    if isinstance(node, ast.Attribute) and node.attr == "__class__":
        return isinstance(node.value, ast.Name) and node.value.id == own
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "type" and node.args:
        first = node.args[0]
        return isinstance(first, ast.Name) and first.id == own
    return False


def _falls_through(body: Sequence[ast.stmt]) -> bool:
    """Whether running `body` may reach its end (and return None); when unsure, yes."""
    if not body:
        return True
    last = body[-1]
    if isinstance(last, ast.Return | ast.Raise):
        return False
    if isinstance(last, ast.If):
        return _falls_through(last.body) or _falls_through(last.orelse)
    if isinstance(last, ast.With | ast.AsyncWith):
        return _falls_through(last.body)
    if isinstance(last, ast.Try):
        tail = last.orelse or last.body
        return _falls_through(tail) or any(_falls_through(h.body) for h in last.handlers)
    return True


_ORDERS = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"})


def _returned(body: Sequence[ast.stmt]) -> Iterator[ast.expr]:
    """The values a function body returns (``return`` alone: None), nested scopes left out."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield (
                node.value
                if node.value is not None
                else ast.Constant(None, lineno=node.lineno, col_offset=node.col_offset)
            )
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _truth(node: ast.expr) -> bool | None:
    """The truth of an expression whose value does not depend on anything, or None."""
    if isinstance(node, ast.Constant):
        return bool(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _truth(node.operand)
        return None if inner is None else not inner
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.BoolOp):
        truths = [_truth(v) for v in node.values]
        decisive = isinstance(node.op, ast.Or)  # `x or True` is true whatever x is
        return decisive if decisive in truths else None
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "bool" and node.args:
        return _truth(node.args[0])
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
        kinds = node.args[1:2]
        if kinds and isinstance(kinds[0], ast.Name) and kinds[0].id == "object":
            return True  # everything is an object
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        same = isinstance(left, ast.Name) and isinstance(right, ast.Name) and left.id == right.id
        if same:  # `other is other`
            return isinstance(node.ops[0], ast.Eq | ast.Is | ast.LtE | ast.GtE)
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
            return _truth_of_constants(node.ops[0], left.value, right.value)
    return None


_OPERATORS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _truth_of_constants(op: ast.cmpop, left: object, right: object) -> bool | None:
    """``1 == 1``: two literals compared (never evaluated as code)."""
    compare = _OPERATORS.get(type(op))
    if compare is None:
        return None
    try:
        return bool(compare(left, right))
    except TypeError:  # `1 < "a"`: it raises, it is no constant truth
        return None
