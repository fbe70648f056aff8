"""Which runner a test command is, what ``{python}`` stands for, and the command rewritten
through our entries (`verifier.checks.tests.entries`) so that its results reach us.

How a run's results are read (docs/runners.md) is the repository's ``results``
(``{ junit = [globs] }`` or ``"exit-code"``), else decided by the command:

- pytest runs through our entry (`verifier.checks.tests.entries.pytest_entry`)
  with the same interpreter, which loads pytest before the repository's root is
  on the path, configures it with a file of ours written from the settings pytest's
  rules find in the copy (whose configuration files are the base's), loads only the
  plugins named (the repository's ``pytest_plugins``, else those the configuration
  asks for and those of the distributions the base declares as dependencies,
  `verifier.checks.tests.declared`) from distributions installed outside the copy,
  and registers our plugin
  (`verifier.checks.tests.entries.pytest_reporter`): it reports each test as it
  finishes, and the session's end, on a pipe whose read end only we hold; pytest
  also gets ``--junitxml=<tmp>/junit.xml`` and ``-p no:cacheprovider``.
- ``python -m unittest`` runs through our entry
  (`verifier.checks.tests.entries.unittest_entry`), which sends unittest's
  counts on such a pipe when the run stops.
- Any other command is ``uncounted``.

The entries are copied into the run's folder, outside the copy: the sandbox may
cover the folder our package lives in (when the checked repository holds it).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifier._internal.sandbox import runner
from verifier.config import RepositoryConfig

__all__ = [
    "child_env",
    "guarantee_notes",
    "interpreter",
    "not_loaded_note",
    "results_kind",
    "runs_pytest",
    "runs_unittest",
    "venv",
    "with_pytest_entry",
    "with_unittest_entry",
]

_ENTRIES = Path(__file__).resolve().parent / "entries"
_UNITTEST_ENTRY = _ENTRIES / "unittest_entry.py"
_PYTEST_ENTRY = (_ENTRIES / "pytest_entry.py", _ENTRIES / "pytest_reporter.py")


def results_kind(argv: Sequence[str], command: Sequence[str], repository: RepositoryConfig) -> str:
    """How this run's results are read: the repository's choice, else by the command."""
    if repository.results in ("junit", "exit-code"):
        return repository.results
    if runs_pytest(argv):
        return "pytest"
    if runs_unittest(argv, command):
        return "unittest"
    return "uncounted"


_WEAKER = {
    "unittest": "unittest is configured by its command alone (it reads no configuration "
    "file and loads no plugins) and no bytecode of the tree runs; unlike pytest's, its "
    "working folder comes first on the path, as under -m unittest",
    "other": "this runner is not configured by the verifier: it reads its own configuration "
    "files as the head has them (list them in protected_paths); a pytest it starts loads "
    "no plugin on its own (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1)",
}


def guarantee_notes(kind: str) -> tuple[str, ...]:
    """The note that says what a run of this kind guarantees less than pytest's: none for
    pytest through our entry (docs/runners.md)."""
    if kind == "pytest":
        return ()
    return (_WEAKER["unittest"] if kind == "unittest" else _WEAKER["other"],)


_NOT_LOADED = "plugins-not-loaded.json"  # the pytest entry's file, in its folder
_MAX_NOT_LOADED = 20


# What pytest prints when a plugin the suite relies on is missing: a fixture, an option, a
# marker or an ini key it would have added, an async test with no plugin to run it.
_MISSING_PLUGIN = re.compile(
    r"fixture '[^'\n]+' not found|unrecognized arguments: -|not found in `markers`"
    r"|Unknown pytest\.mark\.|Unknown config option|Missing required plugins"
    r"|async def functions are not natively supported"
)


def not_loaded_note(tmp: Path, output: str) -> tuple[str, ...]:
    """After a failed pytest run whose `output` shows a sign of a missing plugin
    (`_MISSING_PLUGIN`), the note naming the trusted plugins our entry did not load (its
    file in the run's folder `tmp`), and how to load them. None when every one was loaded,
    or the file is absent or not what the entry writes (it is only a note)."""
    if not _MISSING_PLUGIN.search(output):
        return ()
    try:
        with open(tmp / "runner" / _NOT_LOADED, encoding="utf-8") as fh:
            found = json.loads(fh.read(1 << 16))
        pairs = [(str(ep), str(dist)) for ep, dist in found]
    except (OSError, ValueError, TypeError):
        return ()
    if not pairs:
        return ()
    names = ", ".join(f"{ep} ({dist})" for ep, dist in pairs[:_MAX_NOT_LOADED])
    more = f" and {len(pairs) - _MAX_NOT_LOADED} more" if len(pairs) > _MAX_NOT_LOADED else ""
    return (
        f"pytest plugins installed but not loaded: {names}{more}; a plugin loads when the "
        "base declares its distribution as a dependency, or when the repository's "
        'pytest_plugins names it ("all": every one): docs/runners.md',
    )


def runs_pytest(argv: Sequence[str]) -> bool:
    """``pytest``, ``py.test`` (or a script named so), ``-m pytest`` or ``-mpytest``."""
    name = os.path.basename(argv[0])
    if name.startswith(("pytest", "py.test")):
        return True
    pairs = itertools.pairwise(argv)
    return "-mpytest" in argv or any(a == "-m" and b == "pytest" for a, b in pairs)


def runs_unittest(argv: Sequence[str], command: Sequence[str]) -> bool:
    """``{python} -m unittest ...`` or ``python[3[.x]] -m unittest ...``, exactly so."""
    if len(argv) < 2 or not (argv[1] == "-munittest" or argv[1:3] == ["-m", "unittest"]):
        return False
    return command[0] == "{python}" or os.path.basename(argv[0]).startswith("python")


def interpreter(repository: RepositoryConfig) -> tuple[str, list[Path]]:
    """What ``{python}`` stands for, and the folders to put first on the child's PATH."""
    if repository.venv is not None:
        bin_dir = repository.venv / "bin"
        return str(bin_dir / "python"), [bin_dir]
    if repository.python is not None:
        # Not resolved: a venv's python is a link, and the venv is found through it.
        return str(repository.python), [repository.python.parent]
    return sys.executable, []


def venv(repository: RepositoryConfig) -> list[Path]:
    """The repository's venv, as a list of the one folder the sandbox must not cover."""
    return [repository.venv] if repository.venv is not None else []


def child_env(
    home: Path, tmp: Path, bin_dirs: Sequence[Path], repository: RepositoryConfig
) -> dict[str, str]:
    """The minimal environment, with the repository's interpreter folder first on PATH.

    No ``PYTEST_*`` variable of ours reaches the run but the one that keeps pytest from
    loading the plugins of whatever is importable (the tree's metadata folders too), for
    every runner: a pytest the command starts loads only the plugins it is told to.
    """
    env = {k: v for k, v in runner.minimal_env(home, tmp).items() if not k.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if bin_dirs:
        env["PATH"] = os.pathsep.join([*(str(d) for d in bin_dirs), env["PATH"]])
    if repository.venv is not None:
        env["VIRTUAL_ENV"] = str(repository.venv)
    return env


def with_pytest_entry(
    argv: Sequence[str],
    tmp: Path,
    junit: Path,
    fd: int,
    search_path: str,
    plugins: Sequence[str] | str | None = None,
    untrusted: Sequence[Path] = (),
    declared: Sequence[str] = (),
    select: Sequence[str] | None = None,
) -> list[str]:
    """The same interpreter, its options and pytest's arguments, through our entry.

    ``PYTHON [OPTIONS] -m pytest ARGS`` becomes ``PYTHON [OPTIONS] -s ENTRY FD SPEC ARGS``,
    SPEC naming the `plugins` to load (None: those the configuration asks for and those
    of the distributions the base declares, `declared`; ``"all"``: every trusted one) and
    the folders besides the copy whose distributions never count (`untrusted`: the checked
    repository, which a venv's editable install may put on the path), and, for a rerun,
    the test ids to `select` (every other test is deselected);
    a ``pytest`` script found on the PATH runs with the Python its ``#!`` line
    names. A script inside the copy (``./pytest-x``) is the repository's own
    runner and runs as it is. The entry and our plugin are copied into a folder of
    their own outside the copy: the sandbox may cover our package.
    """
    folder = tmp / "runner"
    folder.mkdir()
    for source in _PYTEST_ENTRY:
        shutil.copyfile(source, folder / source.name)
    entry = str(folder / _PYTEST_ENTRY[0].name)
    spec = folder / "spec.json"
    settings: dict[str, Any] = {
        "plugins": plugins if plugins in (None, "all") else list(plugins or ()),
        "declared": list(declared),
        "untrusted": [str(p) for p in untrusted],
    }
    if select is not None:
        settings["select"] = list(select)
    spec.write_text(json.dumps(settings))
    module = next(
        (i for i, (a, b) in enumerate(itertools.pairwise(argv)) if a == "-m" and b == "pytest"),
        None,
    )
    if module is not None:
        launch, args = list(argv[:module]), list(argv[module + 2 :])
    elif "-mpytest" in argv:
        at = list(argv).index("-mpytest")
        launch, args = list(argv[:at]), list(argv[at + 1 :])
    else:
        python = _script_interpreter(argv[0], search_path)
        if python is None:
            # The repository's own runner, or not Python: it runs as configured, and
            # without our plugin its session can never be shown to have finished.
            return _with_pytest_options(list(argv), junit)
        launch, args = [python], list(argv[1:])
    ours = _with_pytest_options(["pytest", *args], junit)[1:]
    return [*launch, "-s", entry, str(fd), str(spec), *ours]


def _with_pytest_options(argv: list[str], junit: Path) -> list[str]:
    """Add our options last (pytest keeps the last --junitxml), but before a ``--``."""
    ours = [f"--junitxml={junit}", "-p", "no:cacheprovider"]
    at = argv.index("--") if "--" in argv[1:] else len(argv)
    return [*argv[:at], *ours, *argv[at:]]


def _script_interpreter(script: str, search_path: str) -> str | None:
    """The Python a script's ``#!`` line names (``env NAME`` looked up on the child's
    PATH); None for a path relative to the copy, or an interpreter that is not Python."""
    if "/" in script and not os.path.isabs(script):
        return None
    found = script if "/" in script else shutil.which(script, path=search_path)
    if found is None:
        return None
    try:
        with open(found, "rb") as fh:
            first = fh.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if len(words) >= 2 and os.path.basename(words[0]) == "env":
        python = shutil.which(words[1], path=search_path)
    else:
        python = words[0] if words and os.path.isabs(words[0]) else None
    if python is None or not os.path.basename(python).startswith(("python", "pypy")):
        return None
    return python


def with_unittest_entry(argv: Sequence[str], tmp: Path, fd: int) -> list[str]:
    """The same interpreter and arguments, through our entry, copied outside the copy.

    A copy, because the sandbox may cover the folder our package lives in (when the
    checked repository holds it).
    """
    entry = tmp / "unittest_entry.py"
    shutil.copyfile(_UNITTEST_ENTRY, entry)
    rest = argv[2:] if argv[1] == "-munittest" else argv[3:]
    return [argv[0], str(entry), str(fd), *rest]
