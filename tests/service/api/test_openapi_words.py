"""The OpenAPI document's words are for API users: every operation described, every
parameter explained, and no note meant for the team (module paths, Python names,
issue numbers, plans) in any description or summary."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import make_config
from verifier.service.api import create_app, openapi

# What a note for the team looks like, and why an API user cannot act on it.
TEAM_NOTES = {
    r"\bverifier\.[a-z_]+": "a module path",
    r"\b(?:create_app|lifespan|run_in_threadpool|VerifierError|Store\.\w+)\b": "a Python name",
    r"``": "reStructuredText quoting",
    r"\bconfig\.\w+": "a configuration attribute",
    r"\b(?:issue|issues)\b\s*#?\d*": "an issue of ours",
    r"\b(?:later|TODO|FIXME|XXX|for now|pinned)\b": "a plan of the team",
    r"\bface\b|\bpipeline\b|\bthread pool\b": "how the code is built",
}


def texts(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every description and summary of the document, with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "summary", "title") and isinstance(value, str):
                yield f"{where}/{key}", value
            else:
                yield from texts(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from texts(value, f"{where}/{i}")


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    url = f"sqlite:///{tmp_path_factory.mktemp('doc') / 'doc.sqlite3'}"
    return openapi.document(create_app(make_config(url)))


def test_no_description_holds_a_note_meant_for_the_team(document: dict[str, Any]) -> None:
    found = [
        f"{where}: {why} ({match.group(0)!r})"
        for where, text in texts(document)
        for pattern, why in TEAM_NOTES.items()
        for match in [re.search(pattern, text, re.IGNORECASE)]
        if match
    ]
    assert not found, "\n".join(found)


def test_the_words_test_refuses_what_the_document_held_before() -> None:
    # The description the document carried: the API package's docstring, team notes and all.
    before = (Path(openapi.__file__).parent / "__init__.py").read_text(encoding="utf-8")
    held = {why for pattern, why in TEAM_NOTES.items() if re.search(pattern, before, re.I)}
    assert {"a module path", "a Python name", "reStructuredText quoting"} <= held


def test_every_operation_and_tag_is_described_and_every_parameter_explained(
    document: dict[str, Any],
) -> None:
    assert len(document["info"]["description"]) > 400
    tags = {t["name"]: t["description"] for t in document["tags"]}
    missing = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            name = f"{method.upper()} {path}"
            if len(operation.get("description", "")) < 40:
                missing.append(f"{name}: no description")
            if not operation.get("summary"):
                missing.append(f"{name}: no summary")
            missing += [f"{name}: tag {t} undescribed" for t in operation["tags"] if t not in tags]
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and not parameter.get("description"):
                    missing.append(f"{name}: parameter {parameter['name']} unexplained")
            for status, response in operation["responses"].items():
                if response["description"] in openapi.FASTAPI_WORDS:
                    missing.append(f"{name}: {status} says only {response['description']!r}")
    assert not missing, "\n".join(missing)
