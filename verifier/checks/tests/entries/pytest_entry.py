"""Run pytest from our side: the runner is loaded before the repository is on the path.

The tests check runs ``PYTHON [OPTIONS] -s _pytest_entry.py FD ARGS...`` in place of
``PYTHON -m pytest ARGS...`` (or a ``pytest`` script, with its interpreter), from a
folder of ours outside the copy that holds this file and `pytest_reporter.py`, with the
copy as the working folder. Standard library and pytest only.

``-m pytest`` would put the working folder first on ``sys.path``, before the
standard library, so a ``pytest/`` package or an ``argparse.py`` at the
repository's root would be what runs. Here:

1. ``python -s script`` puts the script's folder (ours) first, not the working
   folder, and ``-s`` leaves out the user's site-packages, so during start-up
   only the interpreter's own paths are searched: the repository's
   ``sitecustomize.py``/``usercustomize.py`` are never imported and its ``.pth``
   files never read (the root is not a site folder);
2. our folder is taken off the path again, and pytest, its built-in plugins and
   the standard-library modules pytest imports late are imported from the
   interpreter's paths;
3. the working folder (the repository's root) is *appended* to ``sys.path``, so a
   flat layout (``calc.py`` at the root, ``tests/test_calc.py`` doing
   ``import calc``) imports as it does under ``-m pytest``, while a name the
   standard library or site-packages already has is never the repository's;
4. pytest runs with our reporter registered as a plugin object
   (``pytest.main(ARGS, plugins=[...])``): it writes each test's outcome to the
   descriptor FD (-1: none) as it finishes.

The exit status is pytest's own. When pytest cannot be imported the run exits 1
with a message, as ``-m pytest`` would.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from types import ModuleType

# Imported late by pytest (inside functions): loaded now, while the repository, and
# the test folders pytest later puts first on the path, cannot shadow them.
_LATE_STDLIB = (
    "argparse",
    "bdb",
    "difflib",
    "doctest",
    "faulthandler",
    "importlib.metadata",
    "inspect",
    "json",
    "pdb",
    "pickle",
    "platform",
    "pprint",
    "shutil",
    "subprocess",
    "tempfile",
    "unittest",
    "xml.etree.ElementTree",
)


def _reporter(folder: str) -> ModuleType:
    """Our plugin, loaded from the file beside this one (never searched for by name)."""
    path = os.path.join(folder, "pytest_reporter.py")
    spec = importlib.util.spec_from_file_location("_verifier_pytest_reporter", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _monitor(folder: str) -> ModuleType:
    """The monitor (`monitor.py` beside this file), kept out of ``sys.modules``."""
    spec = importlib.util.spec_from_file_location("_verifier_monitor", f"{folder}/monitor.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    folder = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == folder:
        del sys.path[0]
    fd, args = int(sys.argv[1]), sys.argv[2:]
    try:
        import pytest
        from _pytest.config import default_plugins
    except ImportError as exc:
        sys.stderr.write(f"{sys.executable}: cannot import pytest: {exc}\n")
        sys.exit(1)
    for name in (*(f"_pytest.{p}" for p in default_plugins), *_LATE_STDLIB):
        with contextlib.suppress(ImportError):  # a part this Python or pytest lacks
            importlib.import_module(name)
    reporter = _reporter(folder)
    if fd >= 0:  # the monitor, before any file of the tree is importable
        _monitor(folder).install(fd, folder)
        reporter.channel()
    sys.path.append(os.getcwd())
    sys.argv = [sys.argv[0], *args]
    sys.exit(int(pytest.main(args, plugins=[reporter])))


if __name__ == "__main__":
    main()
