"""What a message a person reads must not do: say its path twice, or repeat itself."""

from __future__ import annotations

import re

from verifier.findings import Finding

_WORD = re.compile(r"[\w'./-]+")
# A run of this many words said twice in one message is a message repeating itself
# ("after the head commit the head commit differs").
PHRASE_WORDS = 3
# Runs of words that read naturally twice (grammar, not content).
_COMMON = {("the", "base", "commit"), ("of", "the", "file")}


def repeated_phrase(text: str, words: int = PHRASE_WORDS) -> str | None:
    """The first run of `words` words that `text` says twice, or None."""
    tokens = [w.lower().strip("'.") for w in _WORD.findall(text)]
    seen: set[tuple[str, ...]] = set()
    for i in range(len(tokens) - words + 1):
        run = tuple(tokens[i : i + words])
        if run in seen and run not in _COMMON:
            return " ".join(run)
        seen.add(run)
    return None


def repetitions(line: str, finding: Finding) -> list[str]:
    """What is repeated in `line`, a rendering of `finding`: its path, or a phrase."""
    found = []
    if finding.path and line.count(finding.path) > 1:
        found.append(f"the path {finding.path!r} {line.count(finding.path)} times")
    phrase = repeated_phrase(line.replace(finding.path or "\0", " "))
    if phrase is not None:
        found.append(f"the phrase {phrase!r} twice")
    return found
