"""Mangled reports never crash the verifier: each is refused naming a field, or judged."""

from __future__ import annotations

import json
import random

from tests.support.gitrepo import GitRepo
from tests.support.mangle import mutate
from tests.support.sessions import fixed_session
from verifier.checks import audit as audit_check
from verifier.config import Config
from verifier.contract.profiles import load_profile
from verifier.contract.report import parse_report
from verifier.errors import InvalidReport


def test_mangled_reports_are_refused_or_judged_never_crash(repo: GitRepo) -> None:
    report = fixed_session(repo).report()
    profile = load_profile(Config().profiles_dir, None)
    rng = random.Random(2026)
    refused = judged = 0
    for _ in range(400):
        raw = json.dumps(mutate(report, rng)).encode()
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
