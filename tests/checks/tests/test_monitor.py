"""verifier.checks.tests.entries.monitor alone: each event of its table, raised by a real
Python process's tree code, and an honest counterpart that must not be reported.

The monitor runs as our entries run it: loaded by path from a folder of ours, installed
on a pipe before the tree is importable; the tree is a folder of files that the child
imports, and the channel it sealed is read with `verifier.checks.tests.results`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifier.checks.tests.entries import monitor
from verifier.checks.tests.monitoring import MONITOR
from verifier.checks.tests.results import MonitorEvent, read_monitor, unseal

# One trigger per event of the table: tree code that raises it.
TRIGGERS = {
    "sys._getframe": "import sys\nsys._getframe()\n",
    "sys._current_frames": "import sys\nsys._current_frames()\n",
    "object.__getattr__": (
        "try:\n    1 / 0\nexcept ZeroDivisionError as exc:\n    exc.__traceback__.tb_frame\n"
    ),
    "object.__setattr__": (
        "def f():\n    pass\n\n\ndef g():\n    pass\n\n\nf.__code__ = g.__code__\n"
    ),
    "code.__new__": "def f():\n    pass\n\n\nf.__code__.replace(co_name='h')\n",
    "compile": "compile('1', '<built>', 'eval')\n",
    "exec": "def f():\n    pass\n\n\nexec(f.__code__)\n",
    "gc.get_objects": "import gc\ngc.get_objects()\n",
    "gc.get_referrers": "import gc\ngc.get_referrers(gc)\n",
    "gc.get_referents": "import gc\ngc.get_referents(gc)\n",
    "sys.settrace": "import sys\nsys.settrace(None)\n",
    "sys.setprofile": "import sys\nsys.setprofile(None)\n",
    "sys.addaudithook": "import sys\nsys.addaudithook(lambda event, args: None)\n",
    "import": "import pluggy\n",
    "open": "open('/proc/self/cmdline', 'rb').close()\n",
    "os.listdir": "import os\nos.listdir('/proc/self/fd')\n",
    "os.scandir": "import os\nlist(os.scandir('/proc/self/fd'))\n",
    "os.kill": "import os\nos.kill(os.getpid(), 0)\n",
    "signal.pthread_kill": "import signal\nimport threading\n"
    "signal.pthread_kill(threading.get_ident(), 0)\n",
    "ctypes.addressof": "import ctypes\nctypes.addressof(ctypes.c_int(1))\n",
    "ctypes.cdata": (
        "import ctypes\n\n_at = ctypes.addressof(ctypes.c_int(1))\nctypes.c_int.from_address(_at)\n"
    ),
    "ctypes.cdata/buffer": "import ctypes\nctypes.c_char.from_buffer(bytearray(b'x'))\n",
    "ctypes.create_string_buffer": "import ctypes\nctypes.create_string_buffer(4)\n",
    "ctypes.create_unicode_buffer": "import ctypes\nctypes.create_unicode_buffer(4)\n",
    "ctypes.dlopen": "import ctypes\nctypes.CDLL(None)\n",
    "ctypes.dlsym": "import ctypes\nctypes.pythonapi.Py_IsInitialized\n",
    "ctypes.get_errno": "import ctypes\nctypes.get_errno()\n",
    "ctypes.set_errno": "import ctypes\nctypes.set_errno(0)\n",
    "ctypes.string_at": "import ctypes\nctypes.string_at(b'abc', 1)\n",
    "ctypes.wstring_at": "import ctypes\nctypes.wstring_at('abc', 1)\n",
}
# What each must not be confused with: the same module used as honest code uses it.
HONEST = {
    # The standard library reading frames for itself (KEEPERS): a caller, a summary, a name.
    "frame-walk": (
        "import asyncio\nimport collections\nimport enum\nimport inspect\nimport io\n"
        "import logging\nimport traceback\nimport typing\nimport warnings\n\n"
        "logging.getLogger('x').warning('logging finds its caller with a frame')\n"
        "traceback.format_exc()\n"
        "inspect.signature(len)\n"
        "traceback.extract_stack()\n"
        "traceback.print_stack(file=io.StringIO())\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError as exc:\n"
        "    traceback.TracebackException.from_exception(exc).format()\n"
        "    logging.getLogger('x').exception('with its traceback')\n"
        "warnings.warn('a warning', stacklevel=2)\n"
        "T = typing.TypeVar('T')\n"
        "N = typing.NamedTuple('N', [('a', int)])\n"
        "E = enum.Enum('E', 'a b')\n"
        "Q = collections.namedtuple('Q', 'a b')\n"
        "inspect.getgeneratorstate(x for x in ())\n\n\n"
        "async def main():\n    return repr(asyncio.current_task())\n\n\n"
        "asyncio.run(main())\n"
    ),
    # unittest.mock replaces a `__code__` of its own while it is imported.
    "code-replaced": (
        "from unittest import mock\n\n\ndef f():\n    pass\n\n\nf.__code__\nf.__doc__ = 'a doc'\n"
    ),
    "code-built": (
        "import collections\nimport dataclasses\n\n\n"
        "@dataclasses.dataclass\nclass P:\n    x: int\n\n\n"
        "Q = collections.namedtuple('Q', 'a b')\n"
    ),
    "object-enumeration": "import gc\ngc.collect()\ngc.is_tracked([])\n",
    "trace-hook": "import sys\nsys.gettrace()\nsys.getprofile()\n",
    "audit-hook": "import sys\nsys.audit('my.event', 1)\n",
    "runner-import": "import json\nimport importlib\n",
    "channel-open": (
        "import os\nos.listdir('.')\nopen(__file__).close()\nopen('/proc/self/status').close()\n"
    ),
    "signal": "import os\nimport signal\nsignal.getsignal(signal.SIGINT)\nos.getpid()\n",
    "ctypes": "import ctypes\nimport ctypes.util\n",
}


def run(
    tmp_path: Path,
    files: dict[str, str],
    *,
    tests: tuple[str, ...] = (),
    watch: tuple[str, ...] = (),
    extra: dict[str, object] | None = None,
) -> bytes:
    """Import `files`' ``target`` module as tree code, with the monitor installed; the
    channel's bytes. `tests` are the tree's test files, `watch` its changed data."""
    ours, tree = tmp_path / "ours", tmp_path / "tree"
    ours.mkdir()
    tree.mkdir()
    shutil.copyfile(MONITOR, ours / "monitor.py")
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    settings = {
        "root": str(tree),
        "tests": list(tests),
        "watch": list(watch),
        "junit": str(tmp_path / "junit.xml"),
        **(extra or {}),
    }
    (ours / "monitor.json").write_text(json.dumps(settings))
    driver = (
        "import importlib.util, os, sys\n"
        "spec = importlib.util.spec_from_file_location('m', os.path.join(FOLDER, 'monitor.py'))\n"
        "m = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(m)\n"
        "m.install(int(sys.argv[1]), FOLDER)\n"
        "del m, spec\n"
        "sys.path.append(os.getcwd())\n"
        "import target\n"
    ).replace("FOLDER", repr(str(ours)))
    (ours / "drive.py").write_text(driver)
    read, write = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-s", str(ours / "drive.py"), str(write)],
            cwd=tree,
            pass_fds=(write,),
            capture_output=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as fh:
        data = fh.read()
    assert done.returncode == 0, done.stderr.decode()
    return data


def test_every_event_of_the_table_has_a_trigger_and_its_kind_an_honest_counterpart() -> None:
    assert set(TRIGGERS) == set(monitor.EVENTS)
    assert {rule["what"] for rule in monitor.EVENTS.values()} == set(HONEST)


@pytest.mark.parametrize("event", sorted(TRIGGERS))
def test_each_event_raised_by_the_trees_code_is_reported(tmp_path: Path, event: str) -> None:
    rule = monitor.EVENTS[event]
    data = run(tmp_path, {"target.py": TRIGGERS[event]})

    assert unseal(data).problem is None
    seen = [e for e in read_monitor(data) if e.file == "target.py"]
    assert rule["what"] in {e.what for e in seen}, (event, seen)
    if event.startswith("ctypes."):
        assert any(e.detail.startswith(event + ":") for e in seen), seen


@pytest.mark.parametrize("what", sorted(HONEST))
def test_honest_code_of_each_kind_is_not_reported(tmp_path: Path, what: str) -> None:
    data = run(tmp_path, {"target.py": HONEST[what]})

    assert unseal(data).problem is None
    assert read_monitor(data) == ()


@pytest.mark.parametrize(
    "event", [e for e, rule in sorted(monitor.EVENTS.items()) if rule["scope"] == "code"]
)
def test_an_event_of_the_non_test_code_is_not_reported_from_the_bases_tests(
    tmp_path: Path, event: str
) -> None:
    files = {"tests/__init__.py": "", "tests/helper.py": TRIGGERS[event]}
    files["target.py"] = "import tests.helper\n"
    data = run(tmp_path, files, tests=("tests/__init__.py", "tests/helper.py"))

    assert read_monitor(data) == ()


def test_a_changed_data_file_opened_by_a_test_is_reported_and_one_by_the_code_is_not(
    tmp_path: Path,
) -> None:
    files = {
        "data/a.json": "[]",
        "data/b.json": "[]",
        "tests/__init__.py": "",
        "tests/test_a.py": "open('data/a.json').close()\n",
        "target.py": "import tests.test_a\nopen('data/b.json').close()\n",
    }
    tests = ("tests/__init__.py", "tests/test_a.py")
    data = run(tmp_path, files, tests=tests, watch=("data/a.json", "data/b.json"))

    assert read_monitor(data) == (
        MonitorEvent("data_read", "data/a.json", 1, "", "tests/test_a.py"),
    )


# target.py as the base had it (an `exec` of a constant, six's way of defining
# `raise_from`), and the session's line 8 after it.
OLD_EXEC = "exec('def raise_from(value):\\n    raise value')\n\n\ndef helper(src):\n    exec(src)\n"


def test_an_event_at_a_line_of_the_base_in_a_changed_file_is_not_reported(
    tmp_path: Path,
) -> None:
    """A changed file's old lines do what they did at the base (the static scan reports only
    new statements too): only the lines the session wrote count, `new_lines`."""
    target = OLD_EXEC + "\n\nANSWER = 42\n"
    settings = {"changed": ["target.py"], "new_lines": {"target.py": [8]}}
    data = run(tmp_path, {"target.py": target}, extra=settings)
    assert [e for e in read_monitor(data) if e.what == "code-built"] == []


def test_an_old_line_called_from_a_line_the_session_wrote_is_reported_at_that_line(
    tmp_path: Path,
) -> None:
    target = OLD_EXEC + "\n\nhelper('x = ' + '1')\n"
    settings = {"changed": ["target.py"], "new_lines": {"target.py": [8]}}
    data = run(tmp_path, {"target.py": target}, extra=settings)
    built = [e for e in read_monitor(data) if e.what == "code-built"]
    assert built and {(e.file, e.line) for e in built} == {("target.py", 8)}


@pytest.mark.parametrize("name", ["__defaults__", "__kwdefaults__"])
def test_a_library_functions_defaults_replaced_by_the_tree_are_reported(
    tmp_path: Path, name: str
) -> None:
    """What a library's function does with the arguments it is not given (`pytest.approx`'s
    `abs`); the tree's own functions' defaults, and namedtuple's, are theirs."""
    value = "(2,)" if name == "__defaults__" else "{'b': 2}"
    calc = (
        "import json\nimport collections\n\n\n"
        "def f(a=1, *, b=1):\n    pass\n\n\n"
        f"f.{name} = {value}\n"  # its own function's: not reported
        "P = collections.namedtuple('P', 'a b', defaults=(0,))\n"  # namedtuple's own
        f"json.dumps.{name} = {value}\n"  # a library's: reported
    )
    data = run(tmp_path, {"target.py": calc})

    seen = read_monitor(data)
    assert [(e.what, e.file, e.detail) for e in seen] == [
        ("code-replaced", "target.py", f"a function's {name} replaced")
    ]


def test_every_key_object_resolves_under_the_pytest_we_run() -> None:
    """A key object this pytest spells otherwise would be skipped, so never checked
    (`_pytest.python_api` is `_pytest.approx` and `_pytest.raises` since pytest 8.4/9)."""
    from _pytest.config import default_plugins

    for plugin in default_plugins:
        __import__(f"_pytest.{plugin}")
    ours = "_verifier_pytest_reporter:"  # ours, loaded by our entry only
    unresolved = set()
    for key in monitor.KEY_OBJECTS:
        where = monitor._resolve(key, sys.modules)
        if not key.startswith(ours) and (where is None or where[1] not in where[0]):
            unresolved.add(key)
    # Only older pytests have these (pytest 9 inlines the first, moved the second).
    assert unresolved == {
        "_pytest.runner:call_runtest_hook",
        "_pytest.terminal:build_summary_stats_line",
    }
