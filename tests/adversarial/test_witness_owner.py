"""Class 10: a witness another agent owns.

A token bound to one agent ("intruder") posts trail entries under the session id of
another agent's session (the recorder's "rec-agent", whose reports are signed). Before,
the first poster held the trail: the honest recorder got 403 and its signed report
ended not_delivered (`audit.witness_mismatch`). Now each agent's tokens witness a trail
of their own, a bound token may not post the trail of a session whose stored report
names another agent, and a report is held only to its own agent's trail. A real
uvicorn server, a real recorder, real repositories, both stores; the default
configuration (a test command) plus the agent's key and, where said, `require_witness`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit.chain import seal
from audit.jcs import canonicalize
from audit.recorder import dumps
from audit.signing import Ed25519Signer, sign
from audit.upload import post_report
from audit.witness import WitnessClient
from tests.support.api import bearer, make_tokens, serve
from tests.support.gitrepo import GitRepo
from tests.support.recording import FIX_CALC, commit, findings
from tests.support.scripted import ScriptedClient, load_turns, recorder, run_session
from tests.support.sessions import PYTEST
from tests.support.trust import evidence_key, public_b64
from verifier.app.pipeline import verify_session
from verifier.config import AgentConfig, Config, EvidenceConfig, RepositoryConfig
from verifier.findings import DeliveryStatus, Verification
from verifier.service.api import create_app
from verifier.store import Store
from verifier.store.tokens import create_token
from verifier.store.witness import witnessed

AGENT = "rec-agent"  # the agent of tests.support.scripted.recorder
TS = "2026-11-29T09:00:0{}Z"


def lines(*entries: dict[str, Any]) -> bytes:
    return b"".join(canonicalize(e) + b"\n" for e in entries)


def forged_trail(session_id: str = "s-1", **start: Any) -> list[dict[str, Any]]:
    """A trail the intruder invents under the honest session's id: a start, a call."""
    return seal(
        session_id,
        [
            {"kind": "session_start", "ts": TS.format(0), **start},
            {
                "kind": "tool_call",
                "ts": TS.format(1),
                "call_id": "c1",
                "tool": "read_file",
                "args_sha256": "a" * 64,
                "decision": "allow",
                "checkpoint": None,
                "result_sha256": "b" * 64,
                "effects": [],
            },
        ],
    )


class World:
    """The service, the honest agent's signing key and bound token, an intruder's token."""

    def __init__(self, repo: GitRepo, tmp_path: Path, db_url: str, *, required: bool) -> None:
        self.repo, self.tmp_path, self.db_url = repo, tmp_path, db_url
        self.key = Ed25519PrivateKey.generate()
        agent = AgentConfig(
            AGENT, public_keys=(f"ed25519:{public_b64(self.key)}",), require_witness=required
        )
        calc = RepositoryConfig(
            "calc", path=repo.path, test_command=tuple(PYTEST), test_timeout_s=60
        )
        self.config = Config(
            database_url=db_url,
            repositories={"calc": calc},
            evidence=EvidenceConfig(signing_key=evidence_key(tmp_path)),
            agents={AGENT: agent},
        )
        self.tokens = make_tokens(db_url)
        with Store.open(db_url) as store:
            self.honest = create_token(store, name="h", scope="ingest", actor="t", agent=AGENT)[1]
            self.intruder = create_token(
                store, name="i", scope="ingest", actor="t", agent="intruder"
            )[1]

    def intrude(self, base_url: str, entries: list[dict[str, Any]]) -> httpx.Response:
        return httpx.post(
            f"{base_url}/v1/sessions/s-1/trail",
            content=lines(*entries),
            headers=bearer(self.intruder),
        )

    def record(self, base_url: str) -> dict[str, Any]:
        """The honest session, each entry witnessed with the honest agent's token."""
        client = WitnessClient(base_url, self.honest, attempts=1)
        rec = recorder(self.repo.path, self.tmp_path / "s-1.jsonl", witness=client)
        status = run_session(rec, ScriptedClient(load_turns(FIX_CALC)))
        return rec.finish(status, head_commit=commit(self.repo))

    def submit(self, base_url: str, report: dict[str, Any]) -> None:
        raw = dumps(sign(report, Ed25519Signer(self.key, key_id="h")))
        assert post_report(raw, base_url, self.honest, attempts=1).created

    def verdict(self) -> Verification:
        with Store.open(self.db_url) as store:
            return verify_session(store, "s-1", self.config, reason="ingest").verification


def assert_delivered_on_its_own_trail(verdict: Verification, report: dict[str, Any]) -> None:
    assert verdict.delivery_status is DeliveryStatus.DELIVERED, findings(verdict)
    n = report["audit"]["count"]
    assert report["extensions"]["recorder"]["witness"]["failures"] == 0
    assert verdict.checks["audit"].details["witness"]["entries"] == f"{n} of {n}"


@pytest.mark.parametrize("required", [False, True], ids=["witness-optional", "witness-required"])
def test_an_intruders_trail_posted_first_neither_blocks_the_recorder_nor_holds_the_report(
    repo: GitRepo, tmp_path: Path, db_url: str, required: bool
) -> None:
    """The issue's example: the intruder's token posts the first entries of the honest
    session's id before the session starts."""
    world = World(repo, tmp_path, db_url, required=required)
    with serve(create_app(world.config)) as base_url:
        forged = forged_trail()
        assert world.intrude(base_url, forged).status_code == 200  # its own trail, kept
        report = world.record(base_url)
        world.submit(base_url, report)
    verdict = world.verdict()
    assert_delivered_on_its_own_trail(verdict, report)
    assert any("agent 'intruder'" in note and "not held to it" in note for note in verdict.notes)
    with Store.open(db_url) as store:
        assert witnessed(store, "s-1", "intruder")[0] == tuple(e["hash"] for e in forged)


def test_an_intruder_claiming_the_honest_agent_in_its_session_start_is_refused(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    """Variant: the forged session_start names the honest agent, to pass as its trail."""
    world = World(repo, tmp_path, db_url, required=True)
    with serve(create_app(world.config)) as base_url:
        answer = world.intrude(base_url, forged_trail(agent={"name": AGENT}))
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "foreign_trail"
        report = world.record(base_url)
        world.submit(base_url, report)
    assert_delivered_on_its_own_trail(world.verdict(), report)


def test_once_the_report_is_stored_an_intruder_may_not_post_its_trail_at_all(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    """Variant, the other order: the report arrives first, the intruder then."""
    world = World(repo, tmp_path, db_url, required=True)
    with serve(create_app(world.config)) as base_url:
        report = world.record(base_url)
        world.submit(base_url, report)
        answer = world.intrude(base_url, forged_trail())
        assert answer.status_code == 403
        error = answer.json()["error"]
        assert error["code"] == "foreign_trail"
        assert "stored report of session 's-1' names agent 'rec-agent'" in error["problem"]
        # The honest agent's own token may still post to its trail (idempotently).
        again = httpx.post(
            f"{base_url}/v1/sessions/s-1/trail",
            content=lines(*report["audit"]["entries"]),
            headers=bearer(world.honest),
        )
        assert again.status_code == 200, again.text
    verdict = world.verdict()
    assert_delivered_on_its_own_trail(verdict, report)
    assert not any("intruder" in note for note in verdict.notes)


def test_an_intruder_posting_the_honest_entries_again_while_the_session_runs_changes_nothing(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    """Variant: the intruder copies the honest trail as it is witnessed, then rewrites
    it, before the report is stored: its copy is its own trail, never the report's."""
    world = World(repo, tmp_path, db_url, required=False)
    with serve(create_app(world.config)) as base_url:
        report = world.record(base_url)
        entries = report["audit"]["entries"]
        assert world.intrude(base_url, entries[:2]).status_code == 200
        rewritten = seal("s-1", [{**e, "ts": TS.format(5)} for e in entries])
        assert world.intrude(base_url, rewritten[2:3]).status_code == 409  # its own chain
        world.submit(base_url, report)
    assert_delivered_on_its_own_trail(world.verdict(), report)


def test_honest_the_agents_own_witnessed_trail_still_catches_a_rewritten_report(
    repo: GitRepo, tmp_path: Path, db_url: str
) -> None:
    """Counterpart: binding trails to agents takes nothing from the witness: the honest
    agent's own trail, witnessed, still fails a report whose trail was rewritten."""
    world = World(repo, tmp_path, db_url, required=False)
    with serve(create_app(world.config)) as base_url:
        report = world.record(base_url)
        bodies = [{**e, "ts": TS.format(7)} for e in report["audit"]["entries"]]
        entries = seal("s-1", bodies)
        fake = {
            **report,
            "audit": {"entries": entries, "count": len(entries), "head": entries[-1]["hash"]},
        }
        world.submit(base_url, fake)
    verdict = world.verdict()
    assert verdict.delivery_status is DeliveryStatus.NOT_DELIVERED
    assert [f.code for f in verdict.checks["audit"].findings] == ["audit.witness_mismatch"]
