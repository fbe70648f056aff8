"""JSON Canonicalization Scheme (RFC 8785) and the SHA-256 digests built on it.

The audit trail hashes arguments, responses and entries in their JCS form, so
two implementations that agree on RFC 8785 agree on every hash. The reference
canonicalization is the `rfc8785` library's; this module gives its errors one
type and adds the digests.

The library is pure Python and costs tens of microseconds per audit entry. For
the values that make up nearly every trail (no floats, safe integers, ASCII
keys) the JCS form is exactly what orjson (a compiled encoder, about ten times
the standard library's C encoder) writes with sorted keys, so `canonicalize`
takes that path when `_encoder_agrees` proves it may, and the library's
otherwise. Why the two agree on such values:

* strings: both escape ``"`` and ``\\``, write ``\\b \\t \\n \\f \\r`` short and
  the other controls below U+0020 as ``\\u00xx`` in lowercase hex, and leave
  everything else literal (``/``, DEL, U+2028...); a lone surrogate fails the
  strict UTF-8 encoding, and the library then reports it;
* integers within +-(2**53 - 1), ``true``, ``false`` and ``null`` are written alike;
* keys: for ASCII keys, code point order (Python's) is UTF-16 order (RFC 8785's).

Floats, larger integers, other keys and other types (subclasses included) go
to the library. tests/audit/test_jcs_fast_path.py holds the two paths to the
same bytes on generated values.

`canonicalize_plain` is the same fast path without the walk, for a caller that
has checked the value's types itself: the audit chain, which checks every
field of every entry anyway (tests/audit/test_chain_fast_path.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson
import rfc8785

from audit.errors import AuditError

__all__ = [
    "CanonicalizationError",
    "canonicalize",
    "canonicalize_plain",
    "jcs_sha256",
    "sha256_hex",
]

_MAX_SAFE_INT = 2**53 - 1
_SCALARS = frozenset((str, bool, type(None)))
_PLAIN_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_STRICT_INTEGER


class CanonicalizationError(AuditError, ValueError):
    """A value has no JCS form: NaN or infinite floats, integers beyond 2**53 - 1,
    non-string keys, lone surrogates, or types JSON does not have."""

    code = "canonicalization"


def _encode(value: Any) -> bytes:
    """orjson's compact form with sorted keys: JCS for the values `_encoder_agrees` admits."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of `value`.

    Raises `CanonicalizationError` when `value` has no JCS form.
    """
    try:
        if _encoder_agrees(value):
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)  # `_encode`, inlined
    except (orjson.JSONEncodeError, RecursionError):
        pass  # a lone surrogate or a deep value: the library says what is wrong
    return _library(value)


def canonicalize_plain(value: Any) -> bytes:
    """`canonicalize` for a value the caller has already proven plain enough.

    The audit chain checks every field of an entry anyway, so it proves there
    what the walk (`_encoder_agrees`) would, and the entry is not walked twice.
    The caller guarantees: dicts with ASCII string keys, lists, strings,
    booleans, None and integers only. Subclasses of str, int, dict and list and
    integers beyond +-(2**53 - 1) may remain: orjson is told to refuse them
    (`OPT_PASSTHROUGH_SUBCLASS`, `OPT_STRICT_INTEGER`), as it refuses a lone
    surrogate, and the library then decides, as it would in `canonicalize`.
    """
    try:
        return orjson.dumps(value, option=_PLAIN_OPTIONS)
    except (orjson.JSONEncodeError, RecursionError):
        return _library(value)


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def jcs_sha256(value: Any) -> str:
    """Lowercase hex SHA-256 of the JCS bytes of `value`."""
    return hashlib.sha256(canonicalize(value)).hexdigest()


def _encoder_agrees(value: Any) -> bool:
    """Whether orjson writes `value` byte for byte as RFC 8785 does.

    True when `value` holds only dicts with ASCII string keys, lists, strings,
    booleans, None and integers within +-(2**53 - 1), all of exactly those types.
    Scalars are tested inline: this walk runs once per hashed value.
    """
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                return False
            t = type(item)
            if t in _SCALARS:
                continue
            if t is int:
                if -_MAX_SAFE_INT <= item <= _MAX_SAFE_INT:
                    continue
                return False
            if not _encoder_agrees(item):
                return False
        return True
    if kind is list:
        for item in value:
            t = type(item)
            if t in _SCALARS:
                continue
            if t is int:
                if -_MAX_SAFE_INT <= item <= _MAX_SAFE_INT:
                    continue
                return False
            if not _encoder_agrees(item):
                return False
        return True
    if kind in _SCALARS:
        return True
    return kind is int and -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT


def _library(value: Any) -> bytes:
    """The `rfc8785` library's JCS bytes of `value`, with our error type."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        # The library accepts only `dict` and `list`/`tuple` containers; retry with
        # other mappings (e.g. a read-only proxy) turned into dicts before giving up.
        plain = _plain(value)
        if plain is value:
            raise CanonicalizationError(str(exc)) from exc
        try:
            return rfc8785.dumps(plain)
        except rfc8785.CanonicalizationError as exc2:
            raise CanonicalizationError(str(exc2)) from exc2
    except RecursionError as exc:
        raise CanonicalizationError("value is nested too deeply") from exc


def _plain(value: Any) -> Any:
    """`value` with every non-dict mapping replaced by a dict (the same object if none)."""
    if isinstance(value, dict):
        items = {k: _plain(v) for k, v in value.items()}
        changed = any(items[k] is not v for k, v in value.items())
        return items if changed else value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        elems = [_plain(v) for v in value]
        changed = any(a is not b for a, b in zip(elems, value, strict=True))
        return elems if changed else value
    return value
