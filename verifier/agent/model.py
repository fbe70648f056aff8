"""The model behind the loop: an interface, the Gemini API, and a scripted replay.

`GeminiModel` calls ``client.models.generate_content`` with automatic function
calling disabled (the loop executes and records every call itself) and keeps
its client referenced for the whole session (a client that is garbage
collected closes its HTTP connection under a running session).
`ScriptedModel` replays recorded replies in order, so the loop runs offline,
in seconds, with no key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from google.genai import types

from verifier.errors import ConfigError, InfrastructureError

DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"


class Model(Protocol):
    """What the loop asks of a model: a reply to the history, given the tools."""

    @property
    def name(self) -> str: ...

    def generate(
        self, contents: Sequence[types.Content], config: types.GenerateContentConfig
    ) -> types.GenerateContentResponse: ...


class GeminiModel:
    """The Gemini API through google-genai; the client is kept for the model's life."""

    def __init__(self, name: str = DEFAULT_GEMINI_MODEL, *, api_key: str) -> None:
        from google import genai  # the HTTP stack is loaded only for a live session

        self.name = name
        self.client = genai.Client(api_key=api_key)

    def generate(
        self, contents: Sequence[types.Content], config: types.GenerateContentConfig
    ) -> types.GenerateContentResponse:
        from google.genai import errors

        try:
            return self.client.models.generate_content(
                model=self.name, contents=list(contents), config=config
            )
        except errors.APIError as exc:
            raise InfrastructureError(f"the Gemini API answered {exc.code}: {exc.message}") from exc


def gemini_from_env(
    environ: Mapping[str, str] | None = None, name: str | None = None
) -> GeminiModel:
    """The Gemini model the environment selects: GEMINI_API_KEY, and GEMINI_MODEL or `name`."""
    env = os.environ if environ is None else environ
    key = env.get("GEMINI_API_KEY", "")
    if not key:
        raise ConfigError(
            "GEMINI_API_KEY: got nothing, expected a Gemini API key "
            "(a live session calls the real API; without one, run the scripted demo)"
        )
    return GeminiModel(name or env.get("GEMINI_MODEL") or DEFAULT_GEMINI_MODEL, api_key=key)


Turn = types.GenerateContentResponse | types.Content | Mapping[str, Any]


class ScriptedModel:
    """Replays recorded replies in order, in place of the Gemini API.

    A turn is a ``GenerateContentResponse``, its REST JSON (camelCase, usage
    metadata and thought signatures included), or a bare model ``Content``.
    Past the last turn, the model says it is out of turns (text, no call).
    """

    def __init__(self, turns: Iterable[Turn], name: str = "gemini-3.5-flash") -> None:
        self.name = name
        self._turns = [as_response(t) for t in turns]
        self.seen: list[int] = []  # the history's length at each call

    def generate(
        self, contents: Sequence[types.Content], config: types.GenerateContentConfig
    ) -> types.GenerateContentResponse:
        self.seen.append(len(contents))
        if not self._turns:
            return as_response(
                types.Content(role="model", parts=[types.Part(text="I am out of turns.")])
            )
        return self._turns.pop(0)


def as_response(turn: Turn) -> types.GenerateContentResponse:
    if isinstance(turn, types.GenerateContentResponse):
        return turn
    if isinstance(turn, types.Content):
        return types.GenerateContentResponse(candidates=[types.Candidate(content=turn, index=0)])
    return types.GenerateContentResponse.model_validate(dict(turn))


def load_turns(path: Path) -> list[types.GenerateContentResponse]:
    """Recorded replies: a JSON array of REST ``GenerateContentResponse`` objects."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"turns {str(path)!r}: cannot read: {exc}") from None
    if not isinstance(data, list):
        raise ConfigError(f"turns {str(path)!r}: got {type(data).__name__}, expected a JSON array")
    return [as_response(t) for t in data]


def call(name: str, call_id: str | None = None, **args: Any) -> types.Part:
    """A function_call part, as the model would send it."""
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def model_turn(*parts: types.Part | str) -> types.Content:
    """A model reply of parts (a string is a text part)."""
    return types.Content(
        role="model", parts=[types.Part(text=p) if isinstance(p, str) else p for p in parts]
    )
