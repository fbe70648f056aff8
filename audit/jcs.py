"""JSON Canonicalization Scheme (RFC 8785) and the SHA-256 digests built on it.

The audit trail hashes arguments, responses and entries in their JCS form, so
two implementations that agree on RFC 8785 agree on every hash. The
canonicalization itself is the `rfc8785` library's; this module only gives its
errors one type and adds the digests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import rfc8785

__all__ = ["CanonicalizationError", "canonicalize", "jcs_sha256", "sha256_hex"]


class CanonicalizationError(ValueError):
    """A value has no JCS form: NaN or infinite floats, integers beyond 2**53 - 1,
    non-string keys, lone surrogates, or types JSON does not have."""


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of `value`.

    Raises `CanonicalizationError` when `value` has no JCS form.
    """
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


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def jcs_sha256(value: Any) -> str:
    """Lowercase hex SHA-256 of the JCS bytes of `value`."""
    return hashlib.sha256(canonicalize(value)).hexdigest()


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
