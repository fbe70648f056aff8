"""The fast path of `canonicalize` (orjson) against the `rfc8785` library.

`audit.jcs` writes a value with orjson only when
`_encoder_agrees` says the result is the library's, byte for byte. These tests
hold that promise on seeded random values built to reach every rule of RFC 8785
that the two could disagree on: every control character, quotes and
backslashes, DEL, non-BMP characters, lone surrogates, the integer limits,
nesting, and key order; and they check that what the fast path must not take
(floats, larger integers, non-ASCII keys, other types) goes to the library.
"""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from enum import IntEnum
from types import MappingProxyType
from typing import Any

import orjson
import pytest
import rfc8785

from audit import jcs
from audit.chain import entry_hash
from audit.jcs import CanonicalizationError, canonicalize
from tests.support.paths import VECTORS

VECTORS = json.loads((VECTORS / "audit-chain-v1.json").read_text(encoding="utf-8"))
MAX = 2**53 - 1
# 8 x 50 seeds: 4,000 plain values and 2,000 poisoned ones.
SEED_BLOCKS = [range(i, i + 50) for i in range(0, 400, 50)]

# Every character class the string rules of RFC 8785 name, and their neighbours.
CONTROLS = [chr(c) for c in range(0x20)]
SPECIAL = ['"', "\\", "/", "\x7f", "\x80", "\xa0", "é", "\u2028", "\u2029", "\ufeff"]
WIDE = ["\ud7ff", "\ue000", "\uff21", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff"]
ASCII = [chr(c) for c in range(0x20, 0x7F)]
ALPHABET = CONTROLS + SPECIAL + WIDE + ASCII


class Size(IntEnum):
    SMALL = 1


def random_string(rng: random.Random, alphabet: list[str] = ALPHABET) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))


def random_int(rng: random.Random) -> int:
    return rng.choice([0, 1, -1, MAX, -MAX, MAX - 1, rng.randint(-MAX, MAX), rng.randrange(1000)])


def plain_value(rng: random.Random, depth: int = 0) -> Any:
    """A value the fast path must take: no floats, safe integers, ASCII string keys."""
    pick = rng.randrange(10 if depth < 4 else 6)
    if pick == 0:
        return None
    if pick == 1:
        return rng.random() < 0.5
    if pick == 2:
        return random_int(rng)
    if pick in (3, 4, 5):
        return random_string(rng)
    if pick in (6, 7):
        keys = [random_string(rng, CONTROLS + SPECIAL[:4] + ASCII) for _ in range(rng.randrange(6))]
        return {k: plain_value(rng, depth + 1) for k in keys}
    return [plain_value(rng, depth + 1) for _ in range(rng.randrange(6))]


def poison(rng: random.Random) -> Any:
    """Something the fast path must leave to the library."""
    return rng.choice(
        [
            rng.uniform(-1e6, 1e6),
            30.0,
            1e21,
            1e-7,
            -0.0,
            float("nan"),
            float("inf"),
            MAX + 1,
            -(MAX + 1),
            2**64,
            ("a", 1),
            {"\u00e9": 1},
            {"\U0001f600": 1, "\uff21": 2},
            {1: "int key"},
            {None: "null key"},
            OrderedDict(b=1, a=2),
            MappingProxyType({"b": 1}),
            b"bytes",
            {1, 2},
            Size.SMALL,
            "lone \ud800 surrogate",
            {"k": "\udfff"},
        ]
    )


def with_poison(rng: random.Random, value: Any) -> Any:
    """`value` with a poisoned leaf planted somewhere inside."""
    bad = poison(rng)
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        return {**value, key: with_poison(rng, value[key])}
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        return [*value[:i], with_poison(rng, value[i]), *value[i + 1 :]]
    return {"x": [bad]} if rng.random() < 0.5 else bad


def library(value: Any) -> bytes | type[Exception]:
    """The library's bytes, or the error class when it refuses the value."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError):
        return CanonicalizationError


def ours(value: Any) -> bytes | type[Exception]:
    try:
        return canonicalize(value)
    except CanonicalizationError:
        return CanonicalizationError


@pytest.mark.parametrize("seeds", SEED_BLOCKS, ids=lambda r: f"seeds{r.start}-{r.stop - 1}")
def test_encoder_writes_plain_values_as_the_library_does(seeds: range) -> None:
    for seed in seeds:
        rng = random.Random(seed)
        for _ in range(10):
            value = plain_value(rng)
            assert jcs._encoder_agrees(value), value
            assert jcs._encode(value) == rfc8785.dumps(value), value
            assert canonicalize(value) == rfc8785.dumps(value), value


@pytest.mark.parametrize("seeds", SEED_BLOCKS, ids=lambda r: f"seeds{r.start}-{r.stop - 1}")
def test_values_the_encoder_may_not_write_are_left_to_the_library(seeds: range) -> None:
    for seed in seeds:
        rng = random.Random(seed)
        for _ in range(5):
            value = with_poison(rng, plain_value(rng))
            # The library refuses read-only mappings; `canonicalize` makes them dicts first.
            expected = library(jcs._plain(value))
            if jcs._encoder_agrees(value):
                # Only a lone surrogate may pass the walk; orjson refuses it.
                with pytest.raises(orjson.JSONEncodeError):
                    jcs._encode(value)
            assert ours(value) == expected, value


@pytest.mark.parametrize("char", ALPHABET, ids=lambda c: f"U+{ord(c[0]):04X}")
def test_each_character_is_escaped_as_rfc8785_says(char: str) -> None:
    value = {"k" + char if char.isascii() else "k": char + "x" + char}
    assert jcs._encoder_agrees(value) is True
    assert jcs._encode(value) == rfc8785.dumps(value) == canonicalize(value)


def test_control_characters_use_short_forms_then_lowercase_hex() -> None:
    assert (
        canonicalize('\b\t\n\f\r\x00\x1f\x7f/"\\') == b'"\\b\\t\\n\\f\\r\\u0000\\u001f\x7f/\\"\\\\"'
    )


def test_integer_limits_are_fast_inside_and_refused_outside() -> None:
    assert jcs._encoder_agrees([MAX, -MAX]) is True
    assert canonicalize([MAX, -MAX]) == b"[9007199254740991,-9007199254740991]"
    for big in (MAX + 1, -(MAX + 1)):
        assert jcs._encoder_agrees({"n": big}) is False
        with pytest.raises(CanonicalizationError):
            canonicalize({"n": big})


def test_floats_take_the_library_path_and_keep_the_ecmascript_form() -> None:
    value = {"a": 30.0, "b": 1e21, "c": 1e-7, "d": [0.5, -0.0]}
    assert jcs._encoder_agrees(value) is False
    assert canonicalize(value) == b'{"a":30,"b":1e+21,"c":1e-7,"d":[0.5,0]}'


def test_non_ascii_keys_take_the_library_path_and_sort_by_utf16() -> None:
    value = {"\uff21": 1, "\U0001f600": 2}
    assert jcs._encoder_agrees(value) is False
    assert canonicalize(value) == '{"\U0001f600":2,"\uff21":1}'.encode()


def test_lone_surrogate_passes_the_walk_but_is_still_refused() -> None:
    value = {"k": "a\ud800b"}
    assert jcs._encoder_agrees(value) is True
    with pytest.raises(CanonicalizationError):
        canonicalize(value)


def test_deep_nesting_is_refused_as_the_library_refuses_it() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(CanonicalizationError):
        canonicalize(value)


@pytest.mark.parametrize("case", VECTORS["jcs"], ids=[str(i) for i in range(len(VECTORS["jcs"]))])
def test_contract_vectors_match_whichever_path_they_take(case: dict[str, Any]) -> None:
    expected = case["jcs_utf8"].encode("utf-8")
    assert canonicalize(case["value"]) == expected == rfc8785.dumps(case["value"])
    if jcs._encoder_agrees(case["value"]):
        assert jcs._encode(case["value"]) == expected


def test_contract_chain_entries_take_the_fast_path_and_keep_their_hashes() -> None:
    for entry in VECTORS["entries"]:
        body = {k: v for k, v in entry.items() if k != "hash"}
        assert jcs._encoder_agrees(body)
        assert jcs._encode(body) == rfc8785.dumps(body)
        assert entry_hash(entry) == entry["hash"]
