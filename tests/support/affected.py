"""``python -m tests.support.affected [BASE]``: the test files a change touches, one a line.

`make check` runs them. The change is what differs from BASE (default ``HEAD``: the
work not yet committed; with nothing uncommitted, the last commit), new files
included. A changed file touches:

- itself, when it is a test module;
- its mirror: ``verifier/store/db.py`` → ``tests/store/test_db*.py`` and the folder
  ``tests/store/db/`` (``tests/`` mirrors the package);
- every test module that imports it directly (`grimp`, the graph import-linter uses);
- for a helper in ``tests/support/`` or a ``conftest.py``, the tests that import it or
  sit under it.

A change to anything else (the configuration, the migrations, pyproject.toml) touches
the tests of the folder of the same name when there is one, else nothing: `make test`
is the whole answer, and CI runs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("verifier", "audit")


def changed(base: str) -> list[Path]:
    """The files that differ from `base` (committed or not), and the untracked ones."""

    def git(*args: str) -> list[str]:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        return [line for line in out.splitlines() if line]

    names = git("diff", "--name-only", base) + git("ls-files", "--others", "--exclude-standard")
    if not names and base == "HEAD":
        names = git("diff", "--name-only", "HEAD~1", "HEAD")
    return [ROOT / name for name in dict.fromkeys(names) if (ROOT / name).exists()]


def module_of(path: Path) -> str | None:
    """The dotted name of a Python file of ours, None for anything else."""
    rel = path.relative_to(ROOT)
    if path.suffix != ".py" or rel.parts[0] not in (*PACKAGES, "tests"):
        return None
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_test(path: Path) -> bool:
    rel = path.relative_to(ROOT)
    return rel.parts[0] == "tests" and path.name.startswith("test_") and path.suffix == ".py"


def mirror(path: Path) -> list[Path]:
    """The tests that mirror a file of the package: by name, then by folder."""
    rel = path.relative_to(ROOT)
    folder = _mirror_folder(rel)
    stem = path.stem
    if stem == "__init__":
        return sorted(folder.glob("test_*.py")) if folder.is_dir() else []
    found = sorted(folder.glob(f"test_{stem}*.py"))
    if (folder / stem).is_dir():
        found += sorted((folder / stem).rglob("test_*.py"))
    return found


def _importers(graph: grimp.ImportGraph, module: str) -> set[str]:
    """What imports `module`, or a package that imports it (a name it re-exports)."""
    direct = graph.find_modules_that_directly_import(module)
    packages = {m for m in direct if graph.find_children(m) and module.startswith(m + ".")}
    for package in packages:
        direct |= graph.find_modules_that_directly_import(package)
    return direct


def _importing_tests(graph: grimp.ImportGraph, module: str | None) -> list[Path]:
    """The test modules that import `module`, themselves or through one helper of
    ``tests/support/``."""
    if module is None or module not in graph.modules:
        return []
    importers = _importers(graph, module)
    for helper in [m for m in importers if m.startswith("tests.support.")]:
        importers |= graph.find_modules_that_directly_import(helper)
    paths = (ROOT / (m.replace(".", "/") + ".py") for m in sorted(importers))
    return [p for p in paths if is_test(p)]


def _mirror_folder(rel: Path) -> Path:
    inner = Path(*rel.parts[1:]).parent
    return ROOT / "tests" / ("audit" if rel.parts[0] == "audit" else "") / inner


def affected(paths: list[Path]) -> list[Path]:
    graph = grimp.build_graph("tests", *PACKAGES)
    tests: list[Path] = []
    for path in paths:
        rel = path.relative_to(ROOT)
        if is_test(path):
            tests.append(path)
            continue
        module = module_of(path)
        if rel.parts[0] in PACKAGES:
            found = mirror(path) + _importing_tests(graph, module)
            # Nothing by name: the tests of the mirrored folder (tests/store/ for store/db.py).
            tests += found or sorted(_mirror_folder(rel).glob("test_*.py"))
            continue
        elif rel.parts[0] == "tests" and (path.name == "conftest.py" or "support" in rel.parts):
            if path.name == "conftest.py":
                tests += sorted(path.parent.rglob("test_*.py"))
        elif (ROOT / "tests" / rel.parts[0]).is_dir():
            tests += sorted((ROOT / "tests" / rel.parts[0]).rglob("test_*.py"))
        tests += _importing_tests(graph, module)
    return [p for p in dict.fromkeys(tests) if p.exists() and "benchmarks" not in p.parts]


def main(argv: list[str]) -> int:
    base = argv[0] if argv else "HEAD"
    for path in affected(changed(base)):
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
