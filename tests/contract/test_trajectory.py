"""The trajectory, loaded with google-genai's own types."""

from __future__ import annotations

import copy
import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from google.genai import types

from verifier.contract.trajectory import gc_paused, load_trajectory
from verifier.errors import InvalidReport

SIG = b"\x01\x02sig\xfe\xff\x00"


def _call_turn(**part_extra: Any) -> dict[str, Any]:
    return {
        "role": "model",
        "parts": [{"function_call": {"name": "read_file", "args": {"path": "a"}}, **part_extra}],
    }


@pytest.mark.parametrize(
    "encoded",
    ["AQJzaWf+/wA=", "AQJzaWf+/wA", "AQJzaWf-_wA=", "AQJzaWf-_wA"],
    ids=["standard-padded", "standard-unpadded", "urlsafe-padded", "urlsafe-unpadded"],
)
def test_thought_signature_in_every_base64_variant_is_the_same_bytes(encoded: str) -> None:
    trajectory = load_trajectory([_call_turn(thought_signature=encoded)])
    assert trajectory.contents[0].parts is not None
    assert trajectory.contents[0].parts[0].thought_signature == SIG


def test_thought_signature_that_is_not_base64_names_its_field() -> None:
    with pytest.raises(InvalidReport) as info:
        load_trajectory([_call_turn(thought_signature="not base64 at all!")])
    assert info.value.field == "trajectory.contents.0.parts.0.thought_signature"


def test_camel_case_rest_form_loads_like_snake_case() -> None:
    snake = load_trajectory(
        [
            _call_turn(thought_signature="AQJzaWf-_wA"),
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "read_file", "response": {"output": "x"}}}
                ],
            },
        ]
    )
    camel = load_trajectory(
        [
            {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "read_file", "args": {"path": "a"}},
                        "thoughtSignature": "AQJzaWf+/wA=",
                    }
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "x"}}}],
            },
        ]
    )
    assert snake.contents == camel.contents
    assert snake.calls[0].response_object == camel.calls[0].response_object == {"output": "x"}


def test_sdk_model_dump_round_trips() -> None:
    content = types.Content(
        role="model",
        parts=[
            types.Part(
                function_call=types.FunctionCall(name="search", args={"pattern": "x"}),
                thought_signature=SIG,
            )
        ],
    )
    dumped = content.model_dump(mode="json", exclude_none=True)
    assert load_trajectory([dumped]).contents[0] == content


def test_unknown_keys_are_stripped_and_recorded_not_fatal() -> None:
    trajectory = load_trajectory(
        [
            {
                "role": "model",
                "futureField": 1,
                "parts": [
                    {
                        "function_call": {
                            "name": "read_file",
                            "args": {"path": "a"},
                            "newCallField": True,
                        },
                        "partExtra": "x",
                    }
                ],
            }
        ]
    )
    assert trajectory.calls[0].name == "read_file"
    assert set(trajectory.ignored_keys) == {
        "trajectory.contents.0.futureField",
        "trajectory.contents.0.parts.0.partExtra",
        "trajectory.contents.0.parts.0.function_call.newCallField",
    }


def test_stripping_keeps_the_known_keys_around_unknown_ones_and_leaves_the_input_alone() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [
                {"text": "thinking"},
                {
                    "thought": True,
                    "odd": 1,
                    "function_call": {"id": "c1", "name": "read_file", "args": {"path": "a"}},
                    "thought_signature": "AQJzaWf-_wA",
                    "later": 2,
                },
            ],
            "zz": None,
        },
    ]
    before = copy.deepcopy(contents)
    trajectory = load_trajectory(contents)
    assert contents == before
    assert trajectory.ignored_keys == (
        "trajectory.contents.1.parts.1.odd",
        "trajectory.contents.1.parts.1.later",
        "trajectory.contents.1.zz",
    )
    parts = trajectory.contents[1].parts
    assert parts is not None
    part = parts[1]
    assert (part.thought, part.thought_signature) == (True, SIG)
    assert part.function_call is not None and part.function_call.id == "c1"
    assert trajectory.contents[0] == types.Content(role="user", parts=[types.Part(text="go")])


def test_bad_signature_deep_in_a_list_names_its_place() -> None:
    turn = {"role": "model", "parts": [{"text": "a"}, {"text": "b", "thoughtSignature": "!!"}]}
    with pytest.raises(InvalidReport) as info:
        load_trajectory([_call_turn(), turn])
    assert info.value.field == "trajectory.contents.1.parts.1.thoughtSignature"


def test_args_keep_unknown_looking_keys() -> None:
    """args is free-form: nothing inside it is ever stripped."""
    trajectory = load_trajectory([_call_turn()])
    loaded = load_trajectory(
        [
            {
                "role": "model",
                "parts": [
                    {"function_call": {"name": "x", "args": {"weirdKey": {"nested_unknown": 1.5}}}}
                ],
            }
        ]
    )
    assert trajectory.ignored_keys == ()
    assert loaded.calls[0].args == {"weirdKey": {"nested_unknown": 1.5}}


def test_positional_ids_and_parallel_calls_pair_by_name_and_rank() -> None:
    trajectory = load_trajectory(
        [
            {"role": "user", "parts": [{"text": "go"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "reading two files"},
                    {"function_call": {"name": "read_file", "args": {"path": "a"}}},
                    {"function_call": {"name": "list_files", "args": {"path": "."}}},
                    {"function_call": {"name": "read_file", "args": {"path": "b"}}},
                ],
            },
            {
                "role": "tool",
                "parts": [
                    {"function_response": {"name": "list_files", "response": {"files": []}}},
                    {"function_response": {"name": "read_file", "response": {"output": "A"}}},
                    {"function_response": {"name": "read_file", "response": {"output": "B"}}},
                ],
            },
        ]
    )
    assert [(c.call_id, c.name) for c in trajectory.calls] == [
        ("t1.p1", "read_file"),
        ("t1.p2", "list_files"),
        ("t1.p3", "read_file"),
    ]
    assert [c.response_object for c in trajectory.calls] == [
        {"output": "A"},
        {"files": []},
        {"output": "B"},
    ]
    assert trajectory.orphan_responses == ()


def test_ids_pair_calls_with_responses_in_any_order() -> None:
    trajectory = load_trajectory(
        [
            {
                "role": "model",
                "parts": [
                    {"function_call": {"id": "x", "name": "read_file", "args": {"path": "a"}}},
                    {"function_call": {"id": "y", "name": "read_file", "args": {"path": "b"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "function_response": {
                            "id": "y",
                            "name": "read_file",
                            "response": {"output": "B"},
                        }
                    },
                    {
                        "function_response": {
                            "id": "x",
                            "name": "read_file",
                            "response": {"output": "A"},
                        }
                    },
                ],
            },
        ]
    )
    assert {c.call_id: c.response_object for c in trajectory.calls} == {
        "x": {"output": "A"},
        "y": {"output": "B"},
    }


def test_calls_without_responses_are_kept_with_none() -> None:
    trajectory = load_trajectory([_call_turn(), _call_turn()])
    assert [c.call_id for c in trajectory.calls] == ["t0.p0", "t1.p0"]
    assert all(c.response is None for c in trajectory.calls)


def test_a_response_that_answers_no_call_is_an_orphan() -> None:
    trajectory = load_trajectory(
        [
            _call_turn(),
            {
                "role": "user",
                "parts": [
                    {"function_response": {"name": "read_file", "response": {}}},
                    {"function_response": {"name": "write_file", "response": {}}},
                ],
            },
        ]
    )
    assert len(trajectory.orphan_responses) == 1
    assert trajectory.orphan_responses[0].name == "write_file"


def test_a_content_of_the_wrong_shape_names_the_field() -> None:
    with pytest.raises(InvalidReport) as info:
        load_trajectory([{"role": "model", "parts": "not a list"}])
    assert info.value.field.startswith("trajectory.contents.0.parts")


def test_a_content_that_is_not_an_object_names_the_index() -> None:
    with pytest.raises(InvalidReport) as info:
        load_trajectory([{"role": "user", "parts": []}, "oops"])
    assert info.value.field == "trajectory.contents.1"


def test_released_turns_load_the_same_and_leave_no_raw_turn_behind() -> None:
    turns = [
        _call_turn(thought_signature="AQJzaWf+/wA=", future=1),
        {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {}}}]},
        {"role": "model", "parts": [{"text": "done"}]},
    ]
    kept = load_trajectory(copy.deepcopy(turns))
    owned = copy.deepcopy(turns)
    released = load_trajectory(owned, release=True)
    assert released == kept
    assert owned == [None, None, None]


def test_released_turns_report_errors_as_kept_ones_do() -> None:
    turns: list[Any] = [{"role": "user", "parts": []}, "oops", {"role": "user", "parts": []}]
    with pytest.raises(InvalidReport) as info:
        load_trajectory(turns, release=True)
    assert info.value.field == "trajectory.contents.1"
    assert turns[:2] == [None, None]  # released up to the turn that failed


# -- the collector paused while loading ------------------------------------------


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was:
            gc.disable()


@pytest.mark.usefixtures("collector_on")
def test_collector_is_paused_inside_and_running_again_after() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_collector_resumes_after_an_error_too() -> None:
    with pytest.raises(InvalidReport):
        load_trajectory([_call_turn(thought_signature="not base64 at all!")])
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_nested_pause_resumes_only_when_the_outer_block_ends() -> None:
    with gc_paused():
        load_trajectory([_call_turn()])  # paused itself, nested here
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_objects_built_while_paused_go_to_the_oldest_generation_unscanned() -> None:
    with gc_paused():
        marker = [{"built": "while paused"}]
    assert gc.get_freeze_count() == 0
    assert any(o is marker for o in gc.get_objects(generation=2))


@pytest.mark.usefixtures("collector_on")
def test_objects_the_process_froze_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            marker = [{"built": "while paused"}]
        assert gc.get_freeze_count() == frozen
        assert any(o is marker for o in gc.get_objects(generation=0))
    finally:
        gc.unfreeze()


def test_collector_stopped_by_the_caller_stays_stopped() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        load_trajectory([_call_turn()])
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


@pytest.mark.usefixtures("collector_on")
def test_overlapping_pauses_in_two_threads_resume_after_the_last() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with gc_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with gc_paused():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first thread has left; this one has not

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [False]
    assert gc.isenabled()
