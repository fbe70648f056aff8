"""Mangled reports never crash the verifier: each is refused naming a field, or judged."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

from gitrepo import GitRepo
from sessions import fixed_session

from verifier.checks import audit as audit_check
from verifier.config import Config
from verifier.contract.profiles import load_profile
from verifier.contract.report import parse_report
from verifier.errors import InvalidReport

VALUES: list[Any] = [None, 0, -1, 1.5, 2**70, "", "x", "../x", [], {}, [1], {"a": 1}, True, "é"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        yield from _paths(item, (*prefix, key))


def _mutate(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One to three random edits: drop a key, add a key, or replace a value."""
    mangled = copy.deepcopy(doc)
    places = [p for p in _paths(mangled) if p]
    for _ in range(rng.randint(1, 3)):
        place = rng.choice(places)
        parent: Any = mangled
        try:
            for key in place[:-1]:
                parent = parent[key]
            roll = rng.random()
            if roll < 0.3 and isinstance(parent, dict):
                parent.pop(place[-1], None)
            elif roll < 0.4 and isinstance(parent, dict):
                parent["zz_extra"] = rng.choice(VALUES)
            else:
                parent[place[-1]] = rng.choice(VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed the way there
    return mangled


def test_mangled_reports_are_refused_or_judged_never_crash(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    profile = load_profile(Config().profiles_dir, None)
    rng = random.Random(2026)
    refused = judged = 0
    for _ in range(400):
        raw = json.dumps(_mutate(report, rng)).encode()
        try:
            parsed = parse_report(raw)
        except InvalidReport as exc:
            assert exc.field and exc.problem
            refused += 1
            continue
        result = audit_check.check(parsed, profile)
        json.dumps(result.to_dict())  # storable and printable
        judged += 1
    assert refused > 50 and judged > 50  # both paths were exercised
