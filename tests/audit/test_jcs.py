"""RFC 8785 canonicalization and digests, against the contract's test vectors."""

from __future__ import annotations

import json
import math
from types import MappingProxyType
from typing import Any

import pytest

from audit.jcs import CanonicalizationError, canonicalize, jcs_sha256, sha256_hex
from tests.support.paths import VECTORS

VECTORS = json.loads((VECTORS / "audit-chain-v1.json").read_text(encoding="utf-8"))
JCS_CASES = VECTORS["jcs"]


@pytest.mark.parametrize("case", JCS_CASES, ids=[str(i) for i in range(len(JCS_CASES))])
def test_vector_value_canonicalizes_to_its_jcs_bytes(case: dict[str, Any]) -> None:
    assert canonicalize(case["value"]) == case["jcs_utf8"].encode("utf-8")


@pytest.mark.parametrize("case", JCS_CASES, ids=[str(i) for i in range(len(JCS_CASES))])
def test_vector_value_hashes_to_its_sha256(case: dict[str, Any]) -> None:
    assert jcs_sha256(case["value"]) == case["sha256"]
    assert sha256_hex(case["jcs_utf8"].encode("utf-8")) == case["sha256"]


def test_integral_float_and_large_float_use_ecmascript_form() -> None:
    assert canonicalize({"a": 30.0, "b": 1e21, "c": 1e-7, "d": 0.5}) == (
        b'{"a":30,"b":1e+21,"c":1e-7,"d":0.5}'
    )


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is a surrogate pair (D83D DE00) in UTF-16, so it sorts before U+FF21.
    assert canonicalize({"\uff21": 1, "\U0001f600": 2}) == ('{"\U0001f600":2,"\uff21":1}'.encode())


def test_read_only_mapping_canonicalizes_like_a_dict() -> None:
    value = {"b": [MappingProxyType({"y": 1, "x": None})], "a": "é"}
    assert canonicalize(MappingProxyType(value)) == canonicalize(
        {"a": "é", "b": [{"x": None, "y": 1}]}
    )


@pytest.mark.parametrize(
    "value",
    [
        math.nan,
        {"x": math.inf},
        [-math.inf],
        2**53,
        {"n": -(2**53)},
        {1: "non-str key"},
        "lone \ud800 surrogate",
        {"x": b"bytes"},
        {"x": {1, 2}},
    ],
    ids=["nan", "inf", "-inf", "int-above", "int-below", "int-key", "surrogate", "bytes", "set"],
)
def test_value_without_jcs_form_raises_canonicalization_error(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize(value)
    with pytest.raises(ValueError):
        jcs_sha256(value)


def test_largest_safe_integer_is_canonicalized() -> None:
    assert canonicalize([2**53 - 1, -(2**53) + 1]) == b"[9007199254740991,-9007199254740991]"
