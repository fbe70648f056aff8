"""Cancel tokens: `select`-able, and `cancel_all`, the signal's stop of a whole process.

`cancel_all` is for good (tokens made after it are born set), so it runs in a
process of its own here, never in the test worker."""

from __future__ import annotations

import select
import subprocess
import sys

from verifier._internal.cancel import CancelToken

CANCEL_ALL = """
import os, select
from verifier._internal.cancel import CancelToken, cancel_all
open_, closed = CancelToken(), CancelToken()
closed.close()
cancel_all()
later = CancelToken()
assert open_.is_set() and select.select([open_], [], [], 0)[0] == [open_]
assert later.is_set() and select.select([later], [], [], 0)[0] == [later]
assert not closed.is_set()  # closed before: its pipe was not written
print("ok")
"""


def test_a_token_wakes_select_once_set() -> None:
    with CancelToken() as token:
        assert select.select([token], [], [], 0)[0] == []
        assert not token.is_set()
        token.set()
        token.set()  # twice: still one state
        assert token.is_set()
        assert select.select([token], [], [], 0)[0] == [token]


def test_cancel_all_sets_every_open_token_and_every_later_one() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CANCEL_ALL], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
