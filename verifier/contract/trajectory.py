"""The trajectory: the model's turns as google-genai `types.Content`.

Two recorded forms load into the same structures (`Trajectory`, `ToolCall`),
so every check reads them the same way: ``gemini-contents`` (a list of
``types.Content``, `load_trajectory`) and ``gemini-interaction`` (the steps of
an Interactions API ``Interaction``, `load_interaction`).

Loading ``gemini-contents`` follows the contract:

1. every element of ``contents`` is a JSON object, in snake_case (the SDK's
   ``model_dump``) or camelCase (the REST form);
2. keys the installed SDK does not know are stripped, recursively, and their
   locations recorded (the raw report keeps them byte for byte);
3. ``thought_signature`` in any base64 variant (standard or URL-safe, padded or
   not) is decoded to bytes, so signatures compare as bytes;
4. the result is validated with ``types.Content``;
5. function calls get their call id (``FunctionCall.id``, or ``t<i>.p<j>``
   when absent) and are paired with the responses of the following turn.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import types as pytypes
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
from google.genai import types

from verifier.contract._gc import gc_paused
from verifier.errors import InvalidReport

__all__ = [
    "OtherStep",
    "ToolCall",
    "Trajectory",
    "gc_paused",
    "load_interaction",
    "load_trajectory",
]


@dataclass(frozen=True, slots=True)  # slots: one per call, thousands per report
class ToolCall:
    """One function call of the model, with the response the harness sent back."""

    call_id: str
    name: str
    args: Mapping[str, Any]
    turn: int
    part: int
    call: types.FunctionCall
    response: types.FunctionResponse | None
    # An interaction's function_result can say `is_error` beside its result; None when
    # the trajectory has no such flag (gemini-contents) or the step did not set it.
    is_error: bool | None = None

    @property
    def response_object(self) -> dict[str, Any] | None:
        """The ``response`` object the model saw (``{}`` when the SDK had none)."""
        if self.response is None:
            return None
        return dict(self.response.response or {})


@dataclass(frozen=True)
class OrphanResponse:
    """A function_response that answers no call of the previous turn."""

    turn: int
    part: int
    name: str | None
    id: str | None


@dataclass(frozen=True)
class OtherStep:
    """An interaction step that is neither the model's words nor a function call or
    result (a server-side tool's step, or a type the SDK does not know): kept raw."""

    index: int
    type: str
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class Trajectory:
    """The turns, the calls paired with their responses, and what loading set aside.

    `steps` is None for ``gemini-contents``; for ``gemini-interaction`` it maps each
    (turn, part) of `contents` onto the index of the step it came from, so that a
    finding can name the place in the report (`location`).
    """

    contents: tuple[types.Content, ...]
    calls: tuple[ToolCall, ...]
    orphan_responses: tuple[OrphanResponse, ...]
    ignored_keys: tuple[str, ...]
    misplaced_calls: tuple[ToolCall, ...] = ()
    format: str = "gemini-contents"
    steps: Mapping[tuple[int, int], int] | None = None
    other_steps: tuple[OtherStep, ...] = ()

    def location(self, turn: int, part: int) -> str:
        """Where part `part` of turn `turn` sits in the report, as a dotted field path."""
        if self.steps is None:
            return f"trajectory.contents.{turn}.parts.{part}"
        step = self.steps.get((turn, part))
        return "trajectory.interaction.steps" + ("" if step is None else f".{step}")


@gc_paused()
def load_trajectory(contents: Sequence[Any], *, release: bool = False) -> Trajectory:
    """Load the contents with the SDK's types and pair calls with responses.

    With `release`, `contents` must be a list, and each element is replaced by
    None once its `Content` is built. Why: the raw JSON of a turn costs a
    third of what its SDK objects cost, and keeping both for the whole list
    made loading a dense report cost 35 times its size instead of 20 or so.
    """
    loaded: list[types.Content] = []
    ignored: list[str] = []
    validate = types.Content.model_validate
    owned = typing.cast("list[Any]", contents) if release else None
    for i, item in enumerate(contents):
        if owned is not None:
            owned[i] = None  # `item` holds it until the next turn replaces it
        if not isinstance(item, dict):
            raise InvalidReport(
                f"trajectory.contents.{i}", f"expected an object, got {type(item).__name__}"
            )
        cleaned = _strip(item, types.Content, ("trajectory.contents", i), ignored)
        try:
            loaded.append(validate(cleaned))
        except pydantic.ValidationError as exc:
            where = f"trajectory.contents.{i}"
            error = exc.errors()[0]
            loc = ".".join(str(p) for p in error["loc"])
            raise InvalidReport(f"{where}.{loc}" if loc else where, error["msg"]) from None
    calls, orphans, misplaced = _pair(loaded)
    return Trajectory(tuple(loaded), tuple(calls), tuple(orphans), tuple(ignored), tuple(misplaced))


# Which side of the conversation each interaction step speaks for; steps of other
# types (server-side tools, types the SDK does not know) are kept raw as `OtherStep`.
_MODEL_STEPS = ("thought", "function_call", "model_output")
_USER_STEPS = ("user_input", "function_result")


@gc_paused()
def load_interaction(steps: Sequence[Any], *, release: bool = False) -> Trajectory:
    """Load the steps of an Interactions API ``Interaction`` into turns and paired calls.

    1. each step is validated with the SDK's own ``Step`` types
       (``google.genai.interactions``): ``function_call`` (``id``, ``name``,
       ``arguments``), ``function_result`` (``call_id``, ``result``, optional
       ``name``, ``is_error``), ``thought``, ``model_output``, ``user_input``; a
       type it does not know, and a server-side tool's step, is kept raw;
    2. consecutive model steps (thought, function_call, model_output) make one
       model turn, consecutive user steps (user_input, function_result) one user
       turn, as ``types.Content``, so the checks read them like any contents;
    3. calls are paired with results by id (`_pair`, as for contents). The
       response object of a result is its ``result`` when that is a JSON
       object, else ``{"result": <result>}``; ``is_error`` goes on the call.

    With `release`, `steps` must be a list, and each element is replaced by None
    once read (see `load_trajectory`).
    """
    adapter = _step_adapter()
    owned = typing.cast("list[Any]", steps) if release else None
    # Each turn is validated from dicts once it is complete, as `load_trajectory` does:
    # building its parts with the SDK's constructors made loading a fifth slower.
    validate = types.Content.model_validate
    contents: list[types.Content] = []
    role: str | None = None
    parts: list[dict[str, Any]] = []
    where_of: dict[tuple[int, int], int] = {}
    ignored: list[str] = []
    others: list[OtherStep] = []
    errors: dict[tuple[int, int], bool] = {}
    for n, item in enumerate(steps):
        if owned is not None:
            owned[n] = None
        where = f"trajectory.interaction.steps.{n}"
        if not isinstance(item, dict):
            raise InvalidReport(where, f"expected an object, got {type(item).__name__}")
        try:
            step = adapter.validate_python(item)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            loc = ".".join(str(p) for p in error["loc"])
            problem = "required field is missing" if error["type"] == "missing" else error["msg"]
            raise InvalidReport(f"{where}.{loc}" if loc else where, problem) from None
        kind = item.get("type")
        if kind not in _MODEL_STEPS and kind not in _USER_STEPS:
            others.append(OtherStep(n, str(kind), item))
            continue
        ignored.extend(f"{where}.{key}" for key in step.model_extra or ())
        part = _step_part(kind, step, item, where)
        if part is None:
            continue
        side = "model" if kind in _MODEL_STEPS else "user"
        if side != role:
            if role is not None:
                contents.append(validate({"role": role, "parts": parts}))
            role, parts = side, []
        place = (len(contents), len(parts))
        if kind == "function_result" and item.get("is_error") is not None:
            errors[place] = bool(item["is_error"])
        where_of[place] = n
        parts.append(part)
    if role is not None:
        contents.append(validate({"role": role, "parts": parts}))
    calls, orphans, misplaced = _pair(contents)
    if errors:
        calls = _flag_errors(contents, calls, errors)
    return Trajectory(
        tuple(contents),
        tuple(calls),
        tuple(orphans),
        tuple(ignored),
        tuple(misplaced),
        format="gemini-interaction",
        steps=where_of,
        other_steps=tuple(others),
    )


@functools.cache
def _step_adapter() -> pydantic.TypeAdapter[Any]:
    """The SDK's ``Step`` union (loaded on first use: only interaction reports need it)."""
    from google.genai import interactions

    return pydantic.TypeAdapter(interactions.Step)


def _step_part(kind: str, step: Any, raw: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The ``types.Part`` (as a dict) a validated step stands for; None for one with no text.

    Arguments and results are taken from the raw step, not the SDK's object:
    their hashes are over the JSON exactly as it was recorded.
    """
    if kind == "function_call":
        return {"function_call": {"id": step.id, "name": step.name, "args": raw["arguments"]}}
    if kind == "function_result":
        result = raw["result"]
        response = result if isinstance(result, dict) else {"result": result}
        return {"function_response": {"id": step.call_id, "name": step.name, "response": response}}
    if kind == "thought":
        summary = [getattr(c, "text", None) for c in step.summary or ()]
        part: dict[str, Any] = {"thought": True}
        text = "".join(t for t in summary if isinstance(t, str))
        if text:
            part["text"] = text
        signature = raw.get("signature")
        if isinstance(signature, str):
            part["thought_signature"] = _b64decode(signature, f"{where}.signature")
        return part
    texts = [c.text for c in step.content or () if getattr(c, "type", None) == "text"]
    return {"text": "".join(texts)} if texts else None


def _flag_errors(
    contents: list[types.Content], calls: list[ToolCall], errors: dict[tuple[int, int], bool]
) -> list[ToolCall]:
    """Set `is_error` on each call whose result (at turn, part) said it."""
    at = {
        id(p.function_response): (i, k)
        for i, content in enumerate(contents)
        for k, p in enumerate(content.parts or ())
        if p.function_response
    }
    out = []
    for call in calls:
        place = at.get(id(call.response)) if call.response is not None else None
        flag = errors.get(place) if place is not None else None
        out.append(call if flag is None else dataclasses.replace(call, is_error=flag))
    return out


def _pair(
    contents: list[types.Content],
) -> tuple[list[ToolCall], list[OrphanResponse], list[ToolCall]]:
    """Give each call its id and its response from the next user/tool turn.

    A response with an id answers the call with that id; a call without an id
    is answered by the response of the same name at the same rank among those
    without an id. Returns the calls of model turns, the responses that answer
    none of them, and the calls found outside model turns (never executed by a
    harness that follows the contract, so they cannot be paired).
    """
    calls: list[ToolCall] = []
    misplaced: list[ToolCall] = []
    used: set[tuple[int, int]] = set()
    for i, content in enumerate(contents):
        found = [(j, p.function_call) for j, p in enumerate(content.parts or ()) if p.function_call]
        if not found:
            continue
        if content.role != "model":
            misplaced.extend(_call(i, j, fc, None) for j, fc in found)
            continue
        following = contents[i + 1] if i + 1 < len(contents) else None
        responses: list[tuple[int, types.FunctionResponse]] = []
        if following is not None and following.role in ("user", "tool", None):
            responses = [
                (k, p.function_response)
                for k, p in enumerate(following.parts or ())
                if p.function_response
            ]
        by_id: dict[str, tuple[int, types.FunctionResponse]] = {}
        by_name: dict[str | None, list[tuple[int, types.FunctionResponse]]] = {}
        for k, r in responses:
            if r.id:
                by_id[r.id] = (k, r)
            else:
                by_name.setdefault(r.name, []).append((k, r))
        for j, fc in found:
            match = by_id.pop(fc.id, None) if fc.id else None
            if match is None and not fc.id:
                queue = by_name.get(fc.name)
                if queue:
                    match = queue.pop(0)
            if match is not None:
                used.add((i + 1, match[0]))
            calls.append(_call(i, j, fc, match[1] if match else None))
    orphans = [
        OrphanResponse(i, k, p.function_response.name, p.function_response.id)
        for i, content in enumerate(contents)
        for k, p in enumerate(content.parts or ())
        if p.function_response and (i, k) not in used
    ]
    return calls, orphans, misplaced


def _call(
    i: int, j: int, fc: types.FunctionCall, response: types.FunctionResponse | None
) -> ToolCall:
    return ToolCall(
        call_id=fc.id or f"t{i}.p{j}",
        name=fc.name or "",
        args=fc.args if fc.args is not None else {},  # no copy: one per call adds up
        turn=i,
        part=j,
        call=fc,
        response=response,
    )


# Where a value sits, built only when a key is ignored or a signature is bad: a
# dotted string, or (the parent's place, a key or list index).
_Where = str | tuple[Any, str | int]


def _strip(value: Any, model: type[pydantic.BaseModel], where: _Where, ignored: list[str]) -> Any:
    """Drop keys `model` does not know, recursively; decode thought signatures.

    Copy on write: a dict in which nothing changes is returned as it is, and
    locations are only spelled out for what is reported. This runs on every
    part of every turn, and nearly all of them are left as they are.
    """
    if not isinstance(value, dict):
        return value
    spec = _spec(model)
    out: dict[str, Any] | None = None
    for key, item in value.items():
        field = spec.get(key)
        if field is None:
            if out is None:
                out = _keys_before(value, key)
            ignored.append(_spell(where, key))
            continue
        name, sub = field
        new = item
        if sub is not None:
            if isinstance(item, list):
                new = _strip_list(item, sub, (where, key), ignored)
            elif isinstance(item, dict):
                new = _strip(item, sub, (where, key), ignored)
        elif name == "thought_signature" and isinstance(item, str):
            new = _b64decode(item, _spell(where, key))
        if out is not None:
            out[key] = new
        elif new is not item:
            out = _keys_before(value, key)
            out[key] = new
    return value if out is None else out


def _strip_list(
    items: list[Any], model: type[pydantic.BaseModel], where: _Where, ignored: list[str]
) -> list[Any]:
    """`_strip` of each element; the same list when none changes."""
    out: list[Any] | None = None
    for n, item in enumerate(items):
        new = _strip(item, model, (where, n), ignored)
        if out is not None:
            out.append(new)
        elif new is not item:
            out = items[:n]
            out.append(new)
    return items if out is None else out


def _keys_before(value: dict[str, Any], stop: str) -> dict[str, Any]:
    """A copy of `value`'s items that come before the key `stop`."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == stop:
            break
        out[key] = item
    return out


def _spell(where: _Where, key: str | int) -> str:
    """The dotted location of `key` under `where`."""
    names = [str(key)]
    while isinstance(where, tuple):
        where, step = where
        names.append(str(step))
    names.append(where)
    return ".".join(reversed(names))


@functools.cache
def _spec(
    model: type[pydantic.BaseModel],
) -> dict[str, tuple[str, type[pydantic.BaseModel] | None]]:
    """Each spelling of `model`'s fields: the field's name and the SDK model inside it.

    One lookup per key: `_strip` runs on every part of every turn.
    """
    return {key: (name, _submodel(model, name)) for key, name in _fields(model).items()}


@functools.cache
def _fields(model: type[pydantic.BaseModel]) -> dict[str, str]:
    """Both spellings of every field: snake_case name and camelCase alias."""
    names: dict[str, str] = {}
    for name, info in model.model_fields.items():
        names[name] = name
        if info.alias:
            names[info.alias] = name
    return names


@functools.cache
def _submodel(model: type[pydantic.BaseModel], name: str) -> type[pydantic.BaseModel] | None:
    """The SDK model inside field `name` (through Optional and list), if any.

    Free-form fields (``FunctionCall.args``, ``FunctionResponse.response``) are
    dicts, not models, and are kept whole.
    """
    annotation = model.model_fields[name].annotation
    stack = [annotation]
    while stack:
        current = stack.pop()
        if isinstance(current, type) and issubclass(current, pydantic.BaseModel):
            return current
        origin = typing.get_origin(current)
        if origin in (typing.Union, pytypes.UnionType, list, tuple):
            stack.extend(typing.get_args(current))
    return None


def _b64decode(text: str, where: str) -> bytes:
    """Standard or URL-safe base64, padded or not."""
    cleaned = text.strip().replace("-", "+").replace("_", "/").rstrip("=")
    try:
        return base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidReport(where, f"not base64: {text[:40]!r}") from None
