"""Run pytest from our side: the runner is loaded, and configured, before the repository
is on the path, and only by us.

The tests check runs ``PYTHON [OPTIONS] -s pytest_entry.py FD SPEC ARGS...`` in place of
``PYTHON -m pytest ARGS...`` (or a ``pytest`` script, with its interpreter), from a
folder of ours outside the copy that holds this file, `pytest_reporter.py` and SPEC (a
JSON file of ours: ``{"plugins": null | "all" | [names], "declared": [distributions],
"untrusted": [folders], "select": null | [test ids]}``), with
the copy as the working folder. Standard library and pytest only.

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
3. the configuration is ours (`_configuration`): pytest's own rules
   (``_pytest.config.findpaths.determine_setup``) find the configuration file of
   the copy, whose configuration files are the base's (the tests check put them
   back), its settings are written into a file of ours beside this one, and pytest
   gets ``-c OURS --rootdir DIR --confcutdir DIR``: nothing above the copy, and no
   file the session added, is read. No ``PYTEST_*`` variable but
   ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` is left in the environment;
4. plugins are loaded by name only (`_trusted_plugins`): those SPEC names (``"all"``:
   every one), or by default those the configuration asks for (``-p NAME`` in
   ``addopts``, ``required_plugins``) and the plugins of the distributions SPEC says
   the base declares as dependencies, with the command's ``-p NAME``, from the
   ``pytest11`` entry points of distributions installed outside the copy, loaded now
   while the repository is not on the path; afterwards pytest loads nothing by entry
   point (`_Plugins`), so package metadata committed into the tree registers nothing.
   After a failed run the trusted plugins not loaded are written to a file of ours
   (`_report_not_loaded`), for a note;
5. no bytecode of the tree is read (`_source_only`): a module of the tree is
   compiled from its source (its ``__pycache__`` is never read) and a sourceless
   ``.pyc`` is not importable;
6. the working folder (the repository's root) is *appended* to ``sys.path``, so a
   flat layout (``calc.py`` at the root, ``tests/test_calc.py`` doing
   ``import calc``) imports as it does under ``-m pytest``, while a name the
   standard library or site-packages already has is never the repository's;
7. pytest runs with our reporter registered as a plugin object
   (``pytest.main(ARGS, plugins=[...])``): it writes each test's outcome to the
   descriptor FD (-1: none) as it finishes.

The exit status is pytest's own. When pytest cannot be imported the run exits 1
with a message, as ``-m pytest`` would; a configuration pytest cannot read exits 4,
pytest's usage error.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import json
import math
import os
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

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


# Written by us into the folder of this file: the configuration pytest runs with.
_SETTINGS = "pytest-settings.toml"
# The one setting of pytest's own whose values are paths, relative to the configuration
# file's folder: made absolute, since our file lies elsewhere.
_PATH_SETTINGS = ("pythonpath",)
_USAGE_ERROR = 4  # pytest's exit status for a usage error
# Written by us after a failed run: the trusted plugins that were not loaded.
_NOT_LOADED = "plugins-not-loaded.json"


def _reporter(folder: str) -> ModuleType:
    """Our plugin, loaded from the file beside this one (never searched for by name)."""
    path = os.path.join(folder, "pytest_reporter.py")
    spec = importlib.util.spec_from_file_location("_verifier_pytest_reporter", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _inside(path: str, root: str) -> bool:
    """Whether `path` is `root` (a real path) or lies under it, links resolved."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _clean_environment() -> None:
    """No options or plugins from the environment: every ``PYTEST_*`` variable goes, but the
    one that keeps pytest from loading plugins on its own (children inherit it too)."""
    for name in [n for n in os.environ if n.startswith("PYTEST_")]:
        del os.environ[name]
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"


# --- 3. the configuration -------------------------------------------------------------


def _split_command(args: Sequence[str]) -> tuple[list[str], str | None, str | None, bool]:
    """The command's arguments without its ``-c``/``--config-file`` and ``--rootdir`` (the
    operator's own choice, taken as the source of the configuration and its root), and
    whether it names a ``--confcutdir``."""
    rest: list[str] = []
    inifile = rootdir = None
    confcutdir = False
    it = iter(args)
    for arg in it:
        if arg == "--":
            rest += [arg, *it]
            break
        if arg in ("-c", "--config-file", "--rootdir"):
            value = next(it, None)
            if arg == "--rootdir":
                rootdir = value
            else:
                inifile = value
        elif arg.startswith(("--config-file=", "--rootdir=")):
            name, _, value = arg.partition("=")
            if name == "--rootdir":
                rootdir = value
            else:
                inifile = value
        elif arg.startswith("-c") and not arg.startswith("--"):
            inifile = arg[2:]
        else:
            confcutdir = confcutdir or arg == "--confcutdir" or arg.startswith("--confcutdir=")
            rest.append(arg)
    return rest, inifile, rootdir, confcutdir


def _determine_setup(
    root: Path, args: list[str], inifile: str | None, rootdir: str | None
) -> tuple[Path, Path | None, dict[str, Any]]:
    """pytest's own discovery (`determine_setup`): the rootdir, config file and settings."""
    from _pytest.config import findpaths

    kwargs: dict[str, Any] = {
        "inifile": inifile,
        "args": args,
        "rootdir_cmd_arg": rootdir,
        "invocation_dir": root,
    }
    try:
        found = findpaths.determine_setup(override_ini=None, **kwargs)
    except TypeError:  # pytest 8 has no override_ini there
        found = findpaths.determine_setup(**kwargs)
    return found[0], found[1], dict(found[2])


def _configuration(root: str, args: Sequence[str], folder: str) -> tuple[list[str], dict[str, Any]]:
    """Our configuration file, written beside this one from the settings pytest's rules find
    in the copy (the base's configuration files); the arguments that make pytest use it,
    and the settings.

    Only a file inside the copy counts, or one the command names: the folders above the
    copy are not the repository's. Raises what pytest raises for a file it cannot read.
    """
    rest, inifile, rootdir_arg, has_confcutdir = _split_command(args)
    rootdir, inipath, settings = _determine_setup(Path(root), rest, inifile, rootdir_arg)
    real_root = os.path.realpath(root)
    if inipath is not None and inifile is None and not _inside(str(inipath), real_root):
        inipath, settings = None, {}
    if rootdir_arg is None and not _inside(str(rootdir), real_root):
        rootdir = Path(root)
    if inipath is not None and rootdir_arg is None and inifile is None:
        rootdir = inipath.parent
    mode = "ini"
    values: dict[str, Any] = {}
    for key, item in settings.items():
        value = getattr(item, "value", item)
        mode = getattr(item, "mode", "ini")
        if key in _PATH_SETTINGS:
            where = inipath.parent if inipath is not None else Path(root)
            paths = shlex.split(value) if isinstance(value, str) else list(value)
            value = [str(where / p) for p in paths]
        values[key] = value
    table = "tool.pytest" if mode == "toml" else "tool.pytest.ini_options"
    lines = [f"[{table}]", *(f"{_toml(k)} = {_toml(v)}" for k, v in values.items())]
    ours = os.path.join(folder, _SETTINGS)
    with open(ours, "x", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    confcutdir = [] if has_confcutdir else [f"--confcutdir={rootdir}"]
    return ["-c", ours, f"--rootdir={rootdir}", *confcutdir, *rest], values


def _toml(value: Any) -> str:
    """`value` (a setting as TOML gave it, or an INI string) as a TOML value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    if not isinstance(value, str):
        return value.isoformat() if hasattr(value, "isoformat") else _toml(str(value))
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped) + '"'


# --- 4. the plugins -------------------------------------------------------------------


def _asked_for(settings: dict[str, Any], args: Sequence[str]) -> list[str]:
    """The plugins the configuration (``-p NAME`` in ``addopts``, ``required_plugins``)
    and the command (``-p NAME``) ask for, by name."""

    def words(key: str) -> list[str]:
        value = settings.get(key, [])
        return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]

    names: list[str] = []
    for options in (words("addopts"), list(args)):
        for at, word in enumerate(options):
            name = options[at + 1] if word == "-p" and at + 1 < len(options) else None
            if word.startswith("-p") and len(word) > 2:
                name = word[2:]
            if name and not name.startswith("no:"):
                names.append(name)
    for requirement in words("required_plugins"):
        match = re.match(r"[A-Za-z0-9._-]+", requirement)
        if match:
            names.append(match.group())
    return names


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _trusted_entry_points(root: str, untrusted: Sequence[str] = ()) -> list[tuple[Any, Any, str]]:
    """(entry point, distribution, its normalised name) of every ``pytest11`` entry point of
    a distribution installed outside `root` and `untrusted`, each entry point name once: a
    distribution inside `root` (the copy) or an `untrusted` folder (the checked repository)
    never counts."""
    from importlib import metadata

    outside = [os.path.realpath(p) for p in (root, *untrusted)]
    found: list[tuple[Any, Any, str]] = []
    seen: set[str] = set()
    for dist in metadata.distributions():
        try:
            # Most distributions have no plugin: their METADATA is never parsed.
            if "pytest11" not in (dist.read_text("entry_points.txt") or ""):
                continue
            where = str(dist.locate_file(""))
            dist_name = _canonical(dist.metadata["Name"] or "")
            points = [ep for ep in dist.entry_points if ep.group == "pytest11"]
        except Exception:  # unreadable metadata: not a plugin we can name
            continue
        if not points or any(_inside(where, folder) for folder in outside):
            continue
        for ep in points:
            if ep.name not in seen:
                seen.add(ep.name)
                found.append((ep, dist, dist_name))
    return found


def _trusted_plugins(
    names: Sequence[str] | str,
    root: str,
    untrusted: Sequence[str] = (),
    declared: Sequence[str] = (),
) -> list[tuple[Any, Any, Any]]:
    """(entry point, distribution, loaded plugin) of each trusted ``pytest11`` entry point
    (`_trusted_entry_points`) named in `names` (an entry point's or its distribution's
    name; ``"all"``: every one), or whose distribution `declared` names (normalised
    distribution names the base declares). Called while the repository is not on the path."""
    if not names and not declared:
        return []
    everything = names == "all"
    wanted = set() if everything else {_canonical(n) for n in names}
    dists = {_canonical(n) for n in declared} | wanted
    return [
        (ep, dist, ep.load())
        for ep, dist, dist_name in _trusted_entry_points(root, untrusted)
        if everything or _canonical(ep.name) in wanted or dist_name in dists
    ]


def _report_not_loaded(folder: str, root: str, untrusted: Sequence[str], loaded: Any) -> None:
    """After a failed run, the trusted plugins that were not loaded, into a file of ours
    beside this one (``plugins-not-loaded.json``): the tests check names them in a note."""
    with contextlib.suppress(Exception):  # only a note: never a reason to fail otherwise
        names = {ep.name for ep, _, _ in loaded}
        missing = [
            [ep.name, dist.metadata["Name"] or dist_name]
            for ep, dist, dist_name in _trusted_entry_points(root, untrusted)
            if ep.name not in names
        ]
        with open(os.path.join(folder, _NOT_LOADED), "w", encoding="utf-8") as fh:
            json.dump(missing, fh)


def _for_workers(
    loaded: Sequence[tuple[Any, Any, Any]], settings: dict[str, Any], args: Sequence[str]
) -> list[str]:
    """``-p NAME`` of each plugin we loaded, when pytest-xdist is one: its workers start
    pytest without our entry and load the plugins the controller's arguments name (for
    us a no-op: each is registered under that name already). None the configuration or
    the command blocks (``-p no:NAME``)."""
    if not any(ep.name == "xdist" for ep, _, _ in loaded):
        return []
    text = " ".join([*_words(settings.get("addopts", [])), *args])
    blocked = set(re.findall(r"(?:^|\s)-p\s*no:(\S+)", text))
    return [a for ep, _, _ in loaded if ep.name not in blocked for a in ("-p", ep.name)]


def _words(value: Any) -> list[str]:
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _no_entry_points(group: str, name: str | None = None) -> int:
    """pytest's loading by entry point, after ours: nothing more is loaded that way."""
    return 0


class _Plugins:
    """Registers the plugins we loaded, each under its entry point's name and with its
    distribution (so ``required_plugins`` sees it), as soon as pytest's plugin manager
    exists; then makes pytest's own loading by entry point (``-p NAME``,
    ``PYTEST_PLUGINS``, ``pytest_plugins``) load nothing: the tree's metadata folders
    are on the path by then."""

    def __init__(self, loaded: Sequence[tuple[Any, Any, Any]]) -> None:
        self._loaded = list(loaded)

    def pytest_addhooks(self, pluginmanager: Any) -> None:
        for ep, dist, plugin in self._loaded:
            if pluginmanager.get_plugin(ep.name) is not None or pluginmanager.is_blocked(ep.name):
                continue
            pluginmanager.register(plugin, name=ep.name)
            with contextlib.suppress(ImportError, AttributeError):
                facade = importlib.import_module("pluggy._manager").DistFacade
                pluginmanager._plugin_distinfo.append((plugin, facade(dist)))
        pluginmanager.load_setuptools_entrypoints = _no_entry_points


# --- 5. no bytecode of the tree --------------------------------------------------------


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Python's loader of source files, which never reads bytecode inside `root`: a module
    of the tree is compiled from the source that was hashed and scanned."""

    root = ""

    def get_data(self, path: str) -> bytes:
        suffixes = tuple(importlib.machinery.BYTECODE_SUFFIXES)
        if path.endswith(suffixes) and _SourceOnlyLoader.root and _inside(path, self.root):
            raise OSError(f"{path}: bytecode of the tree under test is not read")
        return super().get_data(path)


def _source_only(root: str) -> None:
    """Every folder's finder from now on: extension modules and sources, no sourceless
    ``.pyc`` (Python's own order, without its bytecode loader)."""
    machinery = importlib.machinery
    _SourceOnlyLoader.root = os.path.realpath(root)
    hook = machinery.FileFinder.path_hook(
        (machinery.ExtensionFileLoader, machinery.EXTENSION_SUFFIXES),
        (_SourceOnlyLoader, machinery.SOURCE_SUFFIXES),
    )
    sys.path_hooks[:] = [
        hook if "FileFinder" in getattr(h, "__qualname__", "") else h for h in sys.path_hooks
    ]
    sys.path_importer_cache.clear()


def _open_the_tree(root: str) -> None:
    """The repository's root goes on the path: from here on, files of the tree can be
    imported. Whatever must be in place before that happens goes right before this call."""
    sys.path.append(root)


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
    fd, spec_path, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        import pytest
        from _pytest.config import default_plugins
    except ImportError as exc:
        sys.stderr.write(f"{sys.executable}: cannot import pytest: {exc}\n")
        sys.exit(1)
    for name in (*(f"_pytest.{p}" for p in default_plugins), *_LATE_STDLIB):
        with contextlib.suppress(ImportError):  # a part this Python or pytest lacks
            importlib.import_module(name)
    _clean_environment()
    root = os.getcwd()
    try:
        args, settings = _configuration(root, args, folder)
        plugins, untrusted = spec.get("plugins"), spec.get("untrusted", [])
        declared = spec.get("declared", []) if plugins is None else []
        names = plugins if plugins is not None else _asked_for(settings, [])
        asked = "all" if names == "all" else [*names, *_asked_for({}, args)]
        loaded = _trusted_plugins(asked, root, untrusted, declared)
    except Exception as exc:  # pytest's UsageError, a file it cannot parse, a plugin's import
        sys.stderr.write(f"ERROR: pytest's configuration: {type(exc).__name__}: {exc}\n")
        sys.exit(_USAGE_ERROR)
    args = [*_for_workers(loaded, settings, args), *args]
    _source_only(root)
    reporter = _reporter(folder)
    if isinstance(spec.get("select"), list):  # a rerun of failed tests, by their ids
        reporter.select(spec["select"])
    if fd >= 0:  # the monitor, before any file of the tree is importable
        _monitor(folder).install(fd, folder)
        reporter.channel()
    _open_the_tree(root)
    sys.argv = [sys.argv[0], *args]
    status = int(pytest.main(args, plugins=[_Plugins(loaded), reporter]))
    if status != 0:
        _report_not_loaded(folder, root, untrusted, loaded)
    sys.exit(status)


if __name__ == "__main__":
    main()
