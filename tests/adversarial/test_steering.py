"""An agent steering the verifier through files it commits, rather than through the work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.gitrepo import GitRepo
from tests.support.sessions import config_toml, fix_turns, fixed_session, to_bytes


def test_a_verifier_toml_committed_into_the_checkout_does_not_steer_the_gate(
    repo: GitRepo, tmp_path: Path
) -> None:
    """The gate runs inside checkouts the agent wrote: a committed configuration that
    swaps the test command for `true` must not turn a failing fix into a delivery."""
    hostile = (
        '[verifier]\nnetwork_isolation = "off"\n\n[repositories.calc]\n'
        'path = "."\ntest_command = ["true"]\nresults = "exit-code"\n'
    )
    repo.write({"verifier.toml": hostile, "config/verifier.toml": hostile})
    repo.commit(msg="the agent's configuration")
    broken = fixed_session(repo, turns=fix_turns(replacement="    return b - a\n")).report()
    report = tmp_path / "report.json"
    report.write_bytes(to_bytes(broken))
    # Our configuration is where an operator keeps it: ~/.config/verifier/verifier.toml.
    xdg = tmp_path / "xdg"
    (xdg / "verifier").mkdir(parents=True)
    config_toml(xdg / "verifier", repo)
    env = {k: v for k, v in os.environ.items() if k != "VERIFIER_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(xdg)
    done = subprocess.run(
        [sys.executable, "-m", "verifier", "verify", str(report), "--format", "json"],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    verdict = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    assert verdict["delivery_status"] == "not_delivered"
    assert verdict["checks"]["tests"]["details"]["argv"][0] == sys.executable
    assert verdict["checks"]["tests"]["details"]["network_isolated"] is True
