"""Debian's Chromium driven by Playwright, for the tests of pages: the dashboard's and
the API's documentation.

Chromium missing is a failure (CI installs it: see .ci/run), unless the machine opts
out with VERIFIER_TEST_NO_BROWSER=1. Screenshots go to VERIFIER_TEST_ARTIFACTS
(default: test-artifacts/ at the repository's root).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def artifacts() -> Path:
    where = Path(os.environ.get("VERIFIER_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    where.mkdir(parents=True, exist_ok=True)
    return where


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium; skipped only where the machine opted out."""
    if os.environ.get("VERIFIER_TEST_NO_BROWSER") == "1":
        pytest.skip("VERIFIER_TEST_NO_BROWSER=1: this machine opted out of the browser tests")
    if not CHROMIUM.exists() or shutil.which(str(CHROMIUM)) is None:
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: install it with "
            "`apt-get install chromium` (Debian's package; .ci/run does), or set "
            "VERIFIER_TEST_NO_BROWSER=1 on a machine without it"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
