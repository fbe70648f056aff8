"""The model behind the loop: which one the environment selects, what the Gemini one
sends, and `verifier demo --live` without a key. No test calls the real API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from verifier import cli
from verifier.agent.loop import Loop
from verifier.agent.model import (
    DEFAULT_GEMINI_MODEL,
    GeminiModel,
    ScriptedModel,
    as_response,
    gemini_from_env,
    load_turns,
    model_turn,
)
from verifier.demo import run as demo
from verifier.errors import ConfigError, InfrastructureError

KEY = "not-a-real-key"


def test_without_gemini_api_key_there_is_no_live_model() -> None:
    with pytest.raises(ConfigError, match="GEMINI_API_KEY: got nothing, expected a Gemini API key"):
        gemini_from_env({})
    with pytest.raises(ConfigError):
        gemini_from_env({"GEMINI_API_KEY": ""})


def test_the_key_selects_gemini_and_gemini_model_or_the_option_names_it() -> None:
    model = gemini_from_env({"GEMINI_API_KEY": KEY})
    assert (model.name, type(model.client)) == (DEFAULT_GEMINI_MODEL, genai.Client)
    assert gemini_from_env({"GEMINI_API_KEY": KEY, "GEMINI_MODEL": "gemini-x"}).name == "gemini-x"
    chosen = gemini_from_env({"GEMINI_API_KEY": KEY, "GEMINI_MODEL": "gemini-x"}, "gemini-y")
    assert chosen.name == "gemini-y"


class _Models:
    """Stands in for ``client.models`` (the network): records the request, answers `reply`."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []

    def generate_content(self, **request: Any) -> Any:
        self.requests.append(request)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


class _Client:
    def __init__(self, reply: Any) -> None:
        self.models = _Models(reply)


def test_gemini_sends_the_history_and_the_loops_config_with_automatic_calling_off() -> None:
    model = GeminiModel("gemini-x", api_key=KEY)
    answer = as_response(model_turn("hello"))
    model.client = _Client(answer)  # type: ignore[assignment]
    history = [types.Content(role="user", parts=[types.Part(text="Fix.")])]
    config = Loop(model).config()
    assert model.generate(history, config) is answer
    (request,) = model.client.models.requests  # type: ignore[attr-defined]
    assert (request["model"], request["contents"]) == ("gemini-x", history)
    assert request["config"].automatic_function_calling.disable is True


def test_an_api_failure_is_an_infrastructure_error_the_loop_ends_on() -> None:
    model = GeminiModel("gemini-x", api_key=KEY)
    down = errors.ServerError(503, {"error": {"code": 503, "message": "overloaded"}})
    model.client = _Client(down)  # type: ignore[assignment]
    with pytest.raises(InfrastructureError, match="answered 503: overloaded"):
        model.generate([], Loop(model).config())


def test_recorded_turns_load_from_json_and_a_bad_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "turns.json"
    path.write_text(
        json.dumps([{"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}]}])
    )
    (turn,) = load_turns(path)
    assert ScriptedModel([turn]).generate([], Loop(ScriptedModel([])).config()).text == "hi"
    path.write_text("{}")
    with pytest.raises(ConfigError, match="got dict, expected a JSON array"):
        load_turns(path)


def test_demo_live_without_a_key_says_so_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    out = tmp_path / "live"
    assert cli.run(["demo", "--live", "--dir", str(out)]) == 2
    assert "verifier: GEMINI_API_KEY: got nothing" in capsys.readouterr().err
    assert not out.exists()


def test_the_live_demo_runs_each_scenarios_task_honestly(tmp_path: Path, capsys: Any) -> None:
    """The live path, with a scripted model standing in for Gemini: every task done with
    the reference tools, no faulty dispatcher, so every session is delivered."""
    turns = [t for _ in demo.SCENARIOS for t in demo._fix()]
    verifications = demo.run(tmp_path / "live", "json", ScriptedModel(turns))
    assert [v.session_id.split("-", 2)[2] for v in verifications] == [
        s.session_id.removeprefix("demo-") for s in demo.SCENARIOS
    ]
    assert {v.delivery_status.value for v in verifications} == {"delivered"}
    assert all(v.session_id.startswith("live-") for v in verifications)
