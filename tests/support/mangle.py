"""Random edits of a report document, for tests that mangled reports never crash a reader."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

VALUES: list[Any] = [None, 0, -1, 1.5, 2**70, "", "x", "../x", [], {}, [1], {"a": 1}, True, "é"]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        yield from paths(item, (*prefix, key))


def mutate(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One to three random edits: drop a key, add a key, or replace a value."""
    mangled = copy.deepcopy(doc)
    places = [p for p in paths(mangled) if p]
    for _ in range(rng.randint(1, 3)):
        place = rng.choice(places)
        parent: Any = mangled
        try:
            for key in place[:-1]:
                parent = parent[key]
            roll = rng.random()
            if roll < 0.3 and isinstance(parent, dict):
                parent.pop(place[-1], None)
            elif roll < 0.4 and isinstance(parent, dict):
                parent["zz_extra"] = rng.choice(VALUES)
            else:
                parent[place[-1]] = rng.choice(VALUES)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed the way there
    return mangled
