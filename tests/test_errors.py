"""verifier.errors and audit.errors: every class carries a stable code of its own, and the
tree drawn in each root's docstring names every class there is."""

from __future__ import annotations

import importlib
import pkgutil

import audit
import audit.errors
import verifier
import verifier.errors


def _subclasses(root: type) -> set[type]:
    found: set[type] = set()
    todo = [root]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _import_all(package: object) -> None:
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):  # type: ignore[attr-defined]
        if ".entries." in info.name or info.name.endswith((".child", "__main__")):
            continue  # scripts run by path (inside the sandbox, or `python -m`), never imported
        importlib.import_module(info.name)


def test_every_verifier_error_has_a_code_of_its_own_and_is_drawn_in_the_tree() -> None:
    _import_all(verifier)
    classes = {
        c for c in _subclasses(verifier.errors.VerifierError) if not c.__name__.startswith("_")
    }
    codes = [c.__dict__.get("code") for c in classes]
    assert None not in codes, [c.__name__ for c in classes if "code" not in c.__dict__]
    assert len(set(codes)) == len(codes)
    tree = verifier.errors.__doc__ or ""
    for cls in classes:
        assert f"{cls.__name__} " in tree and cls.code in tree, cls.__name__
        assert 400 <= cls.http_status < 600 and cls.exit_code in (2, 3)


def test_every_audit_error_has_a_code_of_its_own_and_is_drawn_in_the_tree() -> None:
    _import_all(audit)
    classes = {c for c in _subclasses(audit.errors.AuditError) if not c.__name__.startswith("_")}
    codes = [c.__dict__.get("code") for c in classes]
    assert None not in codes, [c.__name__ for c in classes if "code" not in c.__dict__]
    assert len(set(codes)) == len(codes)
    for cls in classes:
        assert f"{cls.__name__} " in (audit.errors.__doc__ or ""), cls.__name__
