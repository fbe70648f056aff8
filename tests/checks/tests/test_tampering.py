"""verifier.checks.tests.tampering: every packaged pattern fires on code that reaches into the test
machinery, and stays quiet on an honest file that looks like it."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from verifier.checks.tests.tampering import CODE, Patterns, PatternsError, load_patterns, scan
from verifier.checks.tests.testinfra import is_test_infra
from verifier.resources import tampering_patterns_file

PATTERNS = load_patterns(tampering_patterns_file())


def src(text: str) -> bytes:
    return textwrap.dedent(text).lstrip("\n").encode("utf-8")


# pattern id -> (path, source that must trigger it, at this line)
TRIGGERS: dict[str, tuple[str, bytes, int]] = {
    "runner-internals-import": (
        "calc.py",
        src("""
            def add(a, b):
                return a + b
            from _pytest.python import Function as F
        """),
        3,
    ),
    "runner-import": ("calc.py", src("import pytest\n"), 1),
    "runner-attribute-assignment": (
        "calc.py",
        src("""
            import _pytest.python as p
            def runtest(self):
                pass
            p.Function.runtest = runtest
        """),
        4,
    ),
    "builtins-patching": (
        "calc.py",
        src("""
            import builtins
            builtins.open = lambda *a, **k: None
        """),
        2,
    ),
    "builtins-dict-surgery": ("calc.py", src("__builtins__['len'] = lambda x: 0\n"), 1),
    "sys-modules-surgery": (
        "calc.py",
        src("""
            import sys
            import types
            sys.modules["unittest"] = types.ModuleType("unittest")
        """),
        3,
    ),
    "import-hooks": (
        "calc.py",
        src("""
            import sys
            sys.meta_path.insert(0, object())
        """),
        2,
    ),
    "exit-hook": (
        "pkg/calc.py",
        src("""
            import atexit

            @atexit.register
            def rewrite():
                pass
        """),
        3,
    ),
    "hard-exit": (
        "calc.py",
        src("""
            from os import _exit as leave
            leave(0)
        """),
        1,
    ),
    "tracing-hook": (
        "calc.py",
        src("""
            import sys as s
            s.settrace(None)
        """),
        2,
    ),
    "object-hunting": (
        "calc.py",
        src("""
            import gc
            found = [o for o in gc.get_objects() if type(o).__name__ == "TestReport"]
        """),
        2,
    ),
    "descriptor-redirect": (
        "calc.py",
        src("""
            import os
            os.dup2(os.open("/dev/null", os.O_WRONLY), 1)
        """),
        2,
    ),
    "proc-fd-write": ("calc.py", src("PATH = '/proc/self/fd/3'\n"), 1),
    "junit-path-from-argv": (
        "calc.py",
        src("""
            import sys

            def report_path():
                for arg in sys.argv:
                    if "JUnit" in arg:
                        return arg
        """),
        4,
    ),
    "junit-option-string": ("calc.py", src("OPTION = '--junit-xml'\n"), 1),
    "pth-startup-code": ("site/evil.pth", b"import os; os.environ['X'] = '1'\n", 1),
    "shell-runner-steering": (
        "scripts/run.sh",
        b"#!/bin/sh\nexport PYTEST_PLUGINS=calc_plugin\nexec pytest\n",
        2,
    ),
    "always-equal-comparison": (
        "calc.py",
        src("""
            class Result:
                def __eq__(self, other):
                    return True
        """),
        2,
    ),
    "builtin-comparison-override": (
        "calc.py",
        src("""
            class Number(int):
                def __eq__(self, other):
                    return int(self) == int(other) or isinstance(other, int)
        """),
        2,
    ),
    "always-equal-object": (
        "calc.py",
        src("""
            from unittest import mock

            def subtract(a, b):
                return mock.ANY
        """),
        4,
    ),
}

# pattern id -> (path, an honest file that must not trigger anything)
HONEST: dict[str, tuple[str, bytes]] = {
    "runner-internals-import": (
        "tests/conftest.py",
        src("""
            from _pytest.monkeypatch import MonkeyPatch
            import unittest.mock
        """),
    ),
    "runner-import": (
        "tests/test_calc.py",
        src("""
            import pytest
            from calc import add

            @pytest.mark.parametrize("a", [1, 2])
            def test_add(a):
                assert add(a, 0) == a
        """),
    ),
    "runner-attribute-assignment": (
        "tests/test_calc.py",
        src("""
            import unittest

            class T(unittest.TestCase):
                def setUp(self):
                    self.maxDiff = None
                    self.result = unittest.TestResult()
        """),
    ),
    "builtins-patching": (
        "calc.py",
        src("""
            import builtins
            def show(x):
                builtins.print(x)
        """),
    ),
    "builtins-dict-surgery": ("calc.py", src("NAMES = dir(__builtins__)\n")),
    "sys-modules-surgery": (
        "calc.py",
        src("""
            import sys
            HAVE_NUMPY = "numpy" in sys.modules
            mod = sys.modules[__name__]
        """),
    ),
    "import-hooks": (
        "calc.py",
        src("""
            import sys
            sys.path.insert(0, "vendor")
            FINDERS = len(sys.meta_path)
        """),
    ),
    "exit-hook": (
        "tests/test_cleanup.py",
        src("""
            import atexit
            import tempfile
            tmp = tempfile.mkdtemp()
            atexit.register(print, "done")
        """),
    ),
    "hard-exit": (
        "calc.py",
        src("""
            import os
            import sys

            def main():
                sys.exit(os.EX_OK)
        """),
    ),
    "tracing-hook": (
        "tests/test_trace.py",
        src("""
            import sys
            def test_trace():
                sys.settrace(None)
                assert sys.gettrace() is None
        """),
    ),
    "object-hunting": (
        "calc.py",
        src("""
            import gc
            def collect():
                gc.collect()
                return gc.get_count()
        """),
    ),
    "descriptor-redirect": (
        "tests/test_capture.py",
        src("""
            import os
            def test_capture():
                saved = os.dup(1)
                os.dup2(saved, 1)
        """),
    ),
    "proc-fd-write": ("calc.py", src("STATUS = '/proc/self/status'\n")),
    "junit-path-from-argv": (
        "cli.py",
        src("""
            import sys

            def main():
                verbose = "--verbose" in sys.argv[1:]
                return verbose
        """),
    ),
    "junit-option-string": ("tests/test_runner.py", src("OPTION = '--junitxml=out.xml'\n")),
    "pth-startup-code": ("site/paths.pth", b"vendor\n../lib\n"),
    "shell-runner-steering": (
        "scripts/run.sh",
        b"#!/bin/sh\nset -e\nexec python -m pytest -q tests\n",
    ),
    "always-equal-comparison": (
        "calc.py",
        src("""
            class Point:
                def __init__(self, x, y):
                    self.x, self.y = x, y

                def __eq__(self, other):
                    if not isinstance(other, Point):
                        return NotImplemented
                    return (self.x, self.y) == (other.x, other.y)
        """),
    ),
    "builtin-comparison-override": (
        "calc.py",
        src("""
            class Money(int):
                def __repr__(self):
                    return f"Money({int(self)})"
        """),
    ),
    "always-equal-object": (
        "tests/test_calc.py",
        src("""
            from unittest import mock

            def test_call():
                m = mock.Mock()
                m(1)
                m.assert_called_with(mock.ANY)
        """),
    ),
}


def test_every_packaged_pattern_has_a_trigger_and_an_honest_counterpart() -> None:
    ids = {p.id for p in PATTERNS.patterns}
    assert ids == set(TRIGGERS) == set(HONEST)


@pytest.mark.parametrize("pattern_id", sorted(TRIGGERS))
def test_the_pattern_fires_on_tampering(pattern_id: str) -> None:
    path, data, line = TRIGGERS[pattern_id]
    findings = scan({path: data}, PATTERNS)
    hits = [f for f in findings if f.found and f.found.startswith(f"{pattern_id} at line ")]
    assert hits, findings
    assert hits[0].code == "tests.tampering_suspected" == CODE
    assert hits[0].path == path
    assert hits[0].found is not None
    assert re.match(rf"{pattern_id} at line {line}( \([^)]*\))?: ", hits[0].found)
    assert f"{path}:{line}:" in hits[0].message


@pytest.mark.parametrize("pattern_id", sorted(HONEST))
def test_the_honest_counterpart_is_clean(pattern_id: str) -> None:
    """A test file is test code when the run uses it as the head has it (no test
    infrastructure from the base): the patterns for code under test skip it."""
    path, data = HONEST[pattern_id]
    notes: list[str] = []
    test_code = {path} if is_test_infra(path) else set()
    assert scan({path: data}, PATTERNS, test_code=test_code, notes=notes) == []
    assert notes == []


def test_patching_the_runner_from_the_code_under_test_is_seen() -> None:
    """The attack the issue names: calc.py replaces pytest's runtest once imported."""
    calc = src("""
        import _pytest.python

        def add(a, b):
            return a - b

        _pytest.python.Function.runtest = lambda self: None
    """)
    findings = scan({"calc.py": calc}, PATTERNS)
    assert [f.found.split(" at ")[0] for f in findings if f.found] == [
        "runner-internals-import",
        "runner-attribute-assignment",
    ]


def test_names_are_resolved_through_the_files_own_imports() -> None:
    calc = src("""
        import importlib
        m = importlib.import_module("_pytest.python")
        setattr(m.Function, "runtest", None)
        getattr(__import__("os"), "_exit")(0)
    """)
    found = {f.found.split(" at ")[0] for f in scan({"calc.py": calc}, PATTERNS) if f.found}
    assert {"runner-internals-import", "runner-attribute-assignment", "hard-exit"} <= found


def test_unparseable_python_is_not_a_hit_but_is_noted() -> None:
    notes: list[str] = []
    findings = scan({"calc.py": b"def add(:\n    import _pytest\n"}, PATTERNS, notes=notes)
    assert findings == []
    assert len(notes) == 1
    assert notes[0].startswith("calc.py: not scanned for tampering, not parseable Python")


def test_a_file_over_the_size_cap_is_noted_not_read() -> None:
    notes: list[str] = []
    big = b"import _pytest\n" + b"#" * PATTERNS.max_file_bytes
    assert scan({"calc.py": big}, PATTERNS, notes=notes) == []
    assert notes == [
        f"calc.py: not scanned for tampering, larger than {PATTERNS.max_file_bytes} bytes"
    ]


def test_files_no_pattern_looks_at_are_ignored() -> None:
    assert scan({"README.md": b"import _pytest\nos._exit(0)\n"}, PATTERNS) == []


def test_findings_are_capped_and_the_last_counts_the_rest() -> None:
    files = {f"m{i:02}.py": b"import _pytest\n" for i in range(30)}
    findings = scan(files, PATTERNS)
    assert len(findings) == PATTERNS.max_findings == 20
    assert [f.path for f in findings] == sorted(files)[:20]
    assert findings[-1].message.endswith("(and 10 more hits not shown)")


def test_control_characters_of_the_agent_are_escaped_in_the_finding() -> None:
    findings = scan({"calc.py": b"import _pytest  # \x1b[2J\n"}, PATTERNS)
    assert findings[0].found == "runner-internals-import at line 1: import _pytest  # \\x1b[2J"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tampering.toml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


GOOD = """
    [[pattern]]
    id = "p-one"
    description = "one"
    applies_to = "all"
    kind = "import"
    modules = ["_pytest"]
"""


def test_a_small_patterns_file_loads(tmp_path: Path) -> None:
    patterns = load_patterns(write(tmp_path, GOOD))
    assert isinstance(patterns, Patterns)
    assert [p.id for p in patterns.patterns] == ["p-one"]


def test_a_list_of_test_folders_is_refused(tmp_path: Path) -> None:
    """What is test code is what the run took from the base, never a list of its own."""
    with pytest.raises(PatternsError, match=r"\[test_code\]: no longer read"):
        load_patterns(write(tmp_path, '[test_code]\npaths = ["tests/"]\n' + GOOD))
    with pytest.raises(PatternsError, match=r"\[tests\]: unknown table"):
        load_patterns(write(tmp_path, "[tests]\nx = 1\n" + GOOD))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('kind = "import"', 'kind = "grep"'), "pattern 'p-one': kind: expected one of"),
        (('applies_to = "all"', 'applies_to = "tests"'), "pattern 'p-one': applies_to:"),
        (('modules = ["_pytest"]', ""), "pattern 'p-one': modules: required"),
        (('description = "one"', 'description = ""'), "pattern 'p-one': description:"),
        (('id = "p-one"', 'id = "P One"'), "pattern #1: id: expected lower-case"),
        (('modules = ["_pytest"]', 'modules = ["_pytest"]\ncolour = 1'), "colour: unknown"),
        (
            ('kind = "import"', 'kind = "regex"\nregex = "("\nfiles = ["*.sh"]'),
            "pattern 'p-one': regex: does not compile",
        ),
    ],
)
def test_a_wrong_pattern_is_refused_naming_the_pattern_and_field(
    change: tuple[str, str], message: str, tmp_path: Path
) -> None:
    with pytest.raises(PatternsError, match=re.escape(message)):
        load_patterns(write(tmp_path, GOOD.replace(*change)))


def test_a_pattern_id_used_twice_is_refused(tmp_path: Path) -> None:
    twice = GOOD + "\n    [[pattern]]" + GOOD.split("[[pattern]]")[1]
    with pytest.raises(PatternsError, match="pattern 'p-one': id: used twice"):
        load_patterns(write(tmp_path, twice))


def test_a_missing_patterns_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PatternsError, match="cannot read the tampering patterns"):
        load_patterns(tmp_path / "absent.toml")


def test_a_docstring_naming_the_junit_option_is_not_a_hit() -> None:
    """A bare string statement does nothing; the same text in an assignment does."""
    doc = src('''
        """Run pytest with --junitxml=report.xml to get a report."""
        import sys
        ARGS = sys.argv[1:]
    ''')
    assert scan({"runner.py": doc}, PATTERNS) == []
    assert scan({"runner.py": doc + b"OPT = '--junitxml'\n"}, PATTERNS) != []


# -- only what is new relative to the base ---------------------------------------------

# A lazy importer as `six` has it: sys.modules and sys.meta_path were there at the base.
IMPORTER = src("""
    import sys


    class _Importer:
        def __init__(self, name):
            self.name = name
            self.known = {}

        def load_module(self, fullname):
            try:
                return sys.modules[fullname]
            except KeyError:
                pass
            mod = self.known[fullname]
            sys.modules[fullname] = mod
            return mod

        def is_package(self, fullname):
            return False


    sys.meta_path.append(_Importer(__name__))
""")


def found_ids(findings: list[Any]) -> list[tuple[str, int]]:
    return [
        (f.found.split(" at line ")[0], int(re.split(r"[ :]", f.found.split(" at line ")[1])[0]))
        for f in findings
    ]


def test_hits_the_file_already_had_at_the_base_are_not_reported() -> None:
    assert found_ids(scan({"six.py": IMPORTER}, PATTERNS)) == [
        ("sys-modules-surgery", 15),
        ("import-hooks", 22),
    ]
    honest = IMPORTER.replace(b"return False", b"return hasattr(self.known[fullname], '__path__')")
    assert scan({"six.py": honest}, PATTERNS, base={"six.py": IMPORTER}) == []


def test_a_new_hit_in_a_file_that_had_others_is_reported() -> None:
    head = IMPORTER.replace(
        b"        return False\n",
        b"        sys.modules.pop('_pytest.python')\n        return False\n",
    )
    assert found_ids(scan({"six.py": head}, PATTERNS, base={"six.py": IMPORTER})) == [
        ("sys-modules-surgery", 19)
    ]


def test_a_base_line_copied_or_moved_into_another_function_is_new() -> None:
    """The key of a statement is its scope and its text: the same line elsewhere is new."""
    copied = IMPORTER.replace(
        b"        return False\n",
        b"        return False\n\n    def swap(self, fullname, mod):\n"
        b"        sys.modules[fullname] = mod\n",
    )
    assert found_ids(scan({"six.py": copied}, PATTERNS, base={"six.py": IMPORTER})) == [
        ("sys-modules-surgery", 22)
    ]
    twice = IMPORTER.replace(
        b"        sys.modules[fullname] = mod\n",
        b"        sys.modules[fullname] = mod\n        sys.modules[fullname] = mod\n",
    )
    lines = found_ids(scan({"six.py": twice}, PATTERNS, base={"six.py": IMPORTER}))
    assert lines == [("sys-modules-surgery", 15), ("sys-modules-surgery", 16)]


def test_a_line_moved_within_its_own_function_is_not_new() -> None:
    """The documented limit: reordering a function's own statements is not reported."""
    merged = IMPORTER.replace(
        b"        mod = self.known[fullname]\n        sys.modules[fullname] = mod\n",
        b"        sys.modules[fullname] = mod = self.known[fullname]\n",
    )
    assert merged != IMPORTER
    assert found_ids(scan({"six.py": merged}, PATTERNS, base={"six.py": IMPORTER})) == [
        ("sys-modules-surgery", 14)
    ]  # its text changed: new
    reordered = IMPORTER.replace(
        b"        mod = self.known[fullname]\n        sys.modules[fullname] = mod\n",
        b"        sys.modules[fullname] = mod\n        mod = self.known[fullname]\n",
    )
    assert reordered != IMPORTER
    assert scan({"six.py": reordered}, PATTERNS, base={"six.py": IMPORTER}) == []


def test_a_changed_continuation_line_makes_its_statement_new() -> None:
    base = src("""
        import sys
        sys.modules.update(
            {"calc_extra": object()}
        )
    """)
    head = base.replace(b'"calc_extra"', b'"_pytest.python"')
    assert found_ids(scan({"calc.py": head}, PATTERNS, base={"calc.py": base})) == [
        ("sys-modules-surgery", 2)
    ]
    assert scan({"calc.py": base + b"X = 1\n"}, PATTERNS, base={"calc.py": base}) == []


def test_a_base_that_does_not_parse_makes_every_line_new() -> None:
    findings = scan({"six.py": IMPORTER}, PATTERNS, base={"six.py": b"def (:\n"})
    assert len(findings) == 2


def test_a_new_string_near_an_old_use_is_reported() -> None:
    base = src("""
        import sys

        def options():
            for arg in sys.argv:
                if arg:
                    return arg
    """)
    head = base.replace(b"if arg:", b'if "junit" in arg:')
    assert found_ids(scan({"cli.py": head}, PATTERNS, base={"cli.py": base})) == [
        ("junit-path-from-argv", 4)
    ]


def test_files_that_are_not_python_are_compared_line_by_line() -> None:
    base = b"#!/bin/sh\nexport PYTEST_ADDOPTS=-q\nexec pytest\n"
    assert scan({"run.sh": base + b"echo done\n"}, PATTERNS, base={"run.sh": base}) == []
    head = base + b"export PYTEST_PLUGINS=x\n"
    assert found_ids(scan({"run.sh": head}, PATTERNS, base={"run.sh": base})) == [
        ("shell-runner-steering", 4)
    ]


def test_a_comparison_whose_body_changed_is_new_though_its_def_line_is_not() -> None:
    base = src("""
        class Result:
            def __eq__(self, other):
                return self.value == other.value
    """)
    head = base.replace(b"return self.value == other.value", b"return True")
    assert found_ids(scan({"calc.py": head}, PATTERNS, base={"calc.py": base})) == [
        ("always-equal-comparison", 2)
    ]
    other = base + b"\n\ndef helper():\n    return 1\n"
    assert scan({"calc.py": other}, PATTERNS, base={"calc.py": base}) == []


def test_what_the_run_took_from_the_base_is_not_scanned_at_all() -> None:
    """Its head bytes never run: not even the patterns for all files look at it."""
    patching = b"import _pytest.python\n_pytest.python.Function.runtest = None\n"
    assert scan({"tests/test_x.py": patching}, PATTERNS, exempt={"tests/test_x.py"}) == []
    assert len(scan({"tests/test_x.py": patching}, PATTERNS, test_code={"tests/test_x.py"})) == 1
    assert len(scan({"tests/test_x.py": patching}, PATTERNS)) == 2


# -- comparisons that always succeed: each rule, and what must not trip -------------------

ALWAYS_EQUAL: dict[str, tuple[bytes, str]] = {
    "returns-true": (
        src("""
            class R:
                def __eq__(self, other):
                    return True
        """),
        "always-equal-comparison at line 2 (__eq__ always returns True)",
    ),
    "not-false": (
        src("""
            class R:
                def __eq__(self, other):
                    if other is None:
                        return not False
                    return 1
        """),
        "always-equal-comparison at line 2 (__eq__ always returns not False)",
    ),
    "self-identity": (
        src("""
            class R:
                def __eq__(self, other):
                    return other is other
        """),
        "always-equal-comparison at line 2 (__eq__ always returns other is other)",
    ),
    "or-true": (
        src("""
            class R:
                def __ge__(self, other):
                    return self.n >= other or True
        """),
        "always-equal-comparison at line 2 (__ge__ always returns self.n >= other or True)",
    ),
    "ignores-argument": (
        src("""
            class R:
                def __eq__(self, other):
                    return self.n == 2
        """),
        "always-equal-comparison at line 2 (__eq__ ignores its argument 'other')",
    ),
    "ne-false": (
        src("""
            class R:
                def __ne__(self, other):
                    return False
        """),
        "always-equal-comparison at line 2 (__ne__ always returns False)",
    ),
    "contains": (
        src("""
            class R:
                def __contains__(self, item):
                    return True
        """),
        "always-equal-comparison at line 2 (__contains__ always returns True)",
    ),
    "lambda": (
        src("""
            class R:
                __eq__ = lambda *args: True
        """),
        "always-equal-comparison at line 2 (__eq__ always returns True)",
    ),
    "alias": (
        src("""
            class R:
                __eq__ = object.__ne__
        """),
        "always-equal-comparison at line 2 (__eq__ is bound to __ne__)",
    ),
    "function-of-the-file": (
        src("""
            def _yes(*_):
                return True

            class R:
                __le__ = _yes
        """),
        "always-equal-comparison at line 5 (__le__ always returns True)",
    ),
    "type-call": (
        src("""
            R = type("R", (), {"__eq__": lambda s, o: True})
        """),
        "always-equal-comparison at line 1 (__eq__ always returns True)",
    ),
    "type-call-dict": (
        src("""
            R = type("R", (), dict(__eq__=lambda s, o: 1))
        """),
        "always-equal-comparison at line 1 (__eq__ always returns 1)",
    ),
    "setattr": (
        src("""
            class R:
                pass
            setattr(R, "__eq__", lambda self, other: True)
        """),
        "always-equal-comparison at line 3 (__eq__ always returns True)",
    ),
    "attribute-assignment": (
        src("""
            class R:
                pass
            R.__lt__ = lambda self, other: not None
        """),
        "always-equal-comparison at line 3 (__lt__ always returns not None)",
    ),
    "declines-only-another-class": (
        src("""
            class R:
                def __eq__(self, other):
                    if not isinstance(other, str):
                        return NotImplemented
                    return True
        """),
        "always-equal-comparison at line 2 (__eq__ always returns True)",
    ),
    "ignores-its-own-object": (
        src("""
            class R:
                def __eq__(self, other):
                    return other is not None
        """),
        "always-equal-comparison at line 2 (__eq__ ignores its own object 'self')",
    ),
    "isinstance-of-object": (
        src("""
            class R:
                def __eq__(self, other):
                    return isinstance(other, object)
        """),
        "always-equal-comparison at line 2 (__eq__ always returns isinstance(other, object))",
    ),
    "set-at-run-time-to-a-mock": (
        src("""
            from unittest import mock
            class R:
                pass
            R.__eq__ = mock.Mock(return_value=True)
        """),
        "always-equal-comparison at line 4 "
        "(__eq__ set at run time to mock.Mock(return_value=True))",
    ),
    "a-mocks-answer": (
        src("""
            from unittest import mock
            RESULT = mock.MagicMock()
            RESULT.__eq__.return_value = True
        """),
        "always-equal-comparison at line 3 (a mock's __eq__ is given its return_value)",
    ),
    "str-subclass": (
        src("""
            class Text(str):
                def __eq__(self, other):
                    return str.__eq__(self.lower(), other.lower())
        """),
        "builtin-comparison-override at line 2 (a subclass of str overrides __eq__)",
    ),
    "builtins-int-subclass": (
        src("""
            import builtins
            class N(builtins.int):
                __eq__ = int.__eq__
        """),
        "builtin-comparison-override at line 3 (a subclass of int overrides __eq__)",
    ),
    "type-call-of-a-builtin": (
        src("""
            N = type("N", (float,), {"__lt__": float.__gt__})
        """),
        "builtin-comparison-override at line 1 (a subclass of float overrides __lt__)",
    ),
}

ORDINARY_COMPARISONS: dict[str, bytes] = {
    "fields": src("""
        class P:
            def __eq__(self, other):
                return (self.a, self.b) == (other.a, other.b)
    """),
    "not-implemented": src("""
        class P:
            def __eq__(self, other):
                if not isinstance(other, P):
                    return NotImplemented
                return self.a == other.a

            def __lt__(self, other):
                return NotImplemented
    """),
    "isinstance-and": src("""
        class P:
            def __eq__(self, other):
                return isinstance(other, P) and self.a == other.a
    """),
    "identity-fast-path": src("""
        class P:
            def __eq__(self, other):
                if self is other:
                    return True
                return self.a == other.a
    """),
    "stateless-class-equal-to-its-own": src("""
        class SHA1:
            name = "sha1"

            def __eq__(self, other):
                if not isinstance(other, SHA1):
                    return NotImplemented
                return True

            def __ne__(self, other):
                if not isinstance(other, type(self)):
                    return NotImplemented
                return False
    """),
    "equal-by-its-class": src("""
        class Void:
            def __eq__(self, other):
                return isinstance(other, Void)
    """),
    "super": src("""
        class P(Base):
            def __eq__(self, other):
                return super().__eq__(other) and self.extra == other.extra

            def __ne__(self, other):
                return super().__ne__(other)
    """),
    "set-at-run-time-comparing-fields": src("""
        class P:
            pass
        P.__eq__ = lambda self, other: (self.a, self.b) == (other.a, other.b)
    """),
    "unorderable": src("""
        class P:
            def __lt__(self, other):
                raise TypeError("P is not ordered")
    """),
    "never-equal-sentinel": src("""
        class Missing:
            def __eq__(self, other):
                return False
    """),
    "dataclass": src("""
        import dataclasses

        @dataclasses.dataclass(frozen=True, order=True)
        class P:
            a: int
            b: int = 0
    """),
    "total-ordering": src("""
        import functools

        @functools.total_ordering
        class Version:
            def __init__(self, text):
                self.parts = tuple(int(p) for p in text.split("."))

            def __eq__(self, other):
                return self.parts == other.parts

            def __lt__(self, other):
                return self.parts < other.parts
    """),
    "unhashable-and-same-alias": src("""
        class P:
            __hash__ = None
            __eq__ = object.__eq__
    """),
    "builtin-subclass-without-comparison": src("""
        import enum

        class Color(str, enum.Enum):
            RED = "red"

        class Money(int):
            def __repr__(self):
                return f"Money({int(self)})"
    """),
}


@pytest.mark.parametrize("case", sorted(ALWAYS_EQUAL))
def test_a_comparison_that_always_succeeds_is_flagged_naming_the_rule(case: str) -> None:
    source, expected = ALWAYS_EQUAL[case]
    found = [f.found for f in scan({"calc.py": source}, PATTERNS)]
    assert any(f and f.startswith(expected + ": ") for f in found), found


@pytest.mark.parametrize("case", sorted(ORDINARY_COMPARISONS))
def test_an_ordinary_comparison_is_not_flagged(case: str) -> None:
    assert scan({"calc.py": ORDINARY_COMPARISONS[case]}, PATTERNS) == []


def test_the_rule_named_is_the_agents_text_escaped_and_cut() -> None:
    source = (
        b"class R:\n    def __eq__(self, other):\n        return '\\x1b[2J" + b"x" * 90 + b"'\n"
    )
    (finding,) = scan({"calc.py": source}, PATTERNS)
    assert finding.found is not None and "\x1b" not in finding.found
    assert "…" in finding.found and len(finding.found) < 300


@pytest.mark.parametrize("separator", [b"\x1c", b"\x0c", b"\x85", b"\xe2\x80\xa8"])
def test_a_line_break_python_does_not_count_cannot_borrow_a_base_lines_text(
    separator: bytes,
) -> None:
    """``str.splitlines`` breaks on more than Python does: the text a line number keys
    must be the line Python numbers so, or a new statement would take an old one's text."""
    base = b"import sys\n\n\ndef load(name, mod):\n    sys.modules[name] = mod\n"
    head = (
        b"import sys\n\n\ndef load(name, mod):  # "
        + separator
        + b"    sys.modules[name] = mod\n    sys.modules['_pytest.python'] = None\n"
    )
    assert found_ids(scan({"calc.py": head}, PATTERNS, base={"calc.py": base})) == [
        ("sys-modules-surgery", 5)
    ]


def test_an_old_line_whose_names_an_import_now_binds_elsewhere_is_new() -> None:
    base = src("""
        import io as b


        def patch(f):
            b.open = f
    """)
    head = base.replace(b"import io as b", b"import builtins as b")
    assert found_ids(scan({"calc.py": head}, PATTERNS, base={"calc.py": base})) == [
        ("builtins-patching", 5)
    ]
    # Binding a name to what it already stood for changes nothing.
    again = IMPORTER + b"\n\ndef version():\n    import sys\n    return sys.version\n"
    assert scan({"six.py": again}, PATTERNS, base={"six.py": IMPORTER}) == []


def test_an_old_alias_of_a_function_whose_body_changed_is_new() -> None:
    base = src("""
        def _same(self, other):
            return self.key == other.key


        class Result:
            __eq__ = _same
    """)
    head = base.replace(b"return self.key == other.key", b"return True")
    assert found_ids(scan({"calc.py": head}, PATTERNS, base={"calc.py": base})) == [
        ("always-equal-comparison", 6)
    ]
    assert scan({"calc.py": base}, PATTERNS, base={"calc.py": base}) == []
