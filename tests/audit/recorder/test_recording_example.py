"""The example of docs/recording.md, run as written against a scripted model."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.gitrepo import GitRepo
from tests.support.paths import ROOT
from tests.support.scripted import ScriptedClient, response
from tests.support.sessions import CALC, PYTEST
from verifier.app.pipeline import verify_report
from verifier.config import Config, RepositoryConfig
from verifier.findings import DeliveryStatus

PAGE = ROOT / "docs" / "recording.md"


def example() -> str:
    text = PAGE.read_text(encoding="utf-8")
    block = re.search(
        r"<!-- recorder-example:start -->\n```python\n(.*?)```\n<!-- recorder-example:end -->",
        text,
        re.S,
    )
    assert block is not None, "docs/recording.md lost its recorder example"
    return block.group(1)


def test_the_recording_example_records_a_report_that_is_delivered(
    repo: GitRepo, tmp_path: Path
) -> None:
    fixed = CALC[: CALC.rindex("a + b")] + "a - b\n"
    client = ScriptedClient(
        [
            response(
                {"functionCall": {"id": "c1", "name": "read_file", "args": {"path": "calc.py"}}}
            ),
            response(
                {
                    "functionCall": {
                        "id": "c2",
                        "name": "write_file",
                        "args": {"path": "calc.py", "content": fixed},
                    }
                }
            ),
            response({"text": "Fixed subtract()."}),
        ]
    )
    exec(compile(example(), str(PAGE), "exec"), {"root": repo.path, "client": client})

    raw = (repo.path.parent / "s-42.json").read_bytes()
    config = Config(
        database_url=f"sqlite:///{tmp_path / 'recording.sqlite3'}",
        repositories={"calc": RepositoryConfig("calc", path=repo.path, test_command=tuple(PYTEST))},
    )
    verification = verify_report(raw, config).verification
    assert verification.delivery_status is DeliveryStatus.DELIVERED, verification.checks
    assert (repo.path.parent / "s-42.jsonl").read_bytes().count(b"\n") == 4
