"""Control characters in text an agent wrote: one definition, for every reader.

A session writes paths, messages, ids and branch names that end up in a
terminal, a CI log or a file; a control character among them can move the
cursor, clear the screen, end a line where none was meant (and start a GitHub
workflow command on the next one) or reorder what a reader sees. Three uses:

* `first_control` finds the first one, for the contract to refuse it at ingest
  (`CONTROL`: C0, DEL, C1 and the Unicode line and paragraph separators);
* `escape_controls` makes a string one visible line for display: each of those,
  and the bidirectional formatting characters (`BIDI`), becomes ``\\xNN`` or
  ``\\uNNNN``;
* `strip_controls` takes them out of a program's output kept as an excerpt
  (escape sequences whole), newline and tab kept.
"""

from __future__ import annotations

import re

__all__ = ["BIDI", "CONTROL", "codepoint", "escape_controls", "first_control", "strip_controls"]

# C0 (tab, newline and carriage return included), DEL, C1 (NEL U+0085 among them), and
# U+2028/U+2029, which JavaScript and many viewers read as line ends.
CONTROL = "\x00-\x1f\x7f-\x9f\u2028\u2029"
# The characters that reorder text as it is shown (Trojan Source): the Arabic letter
# mark, LRM/RLM, the embeddings and overrides, the isolates.
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"

_CONTROL = re.compile(f"[{CONTROL}]")
_SHOWN = re.compile(f"[{CONTROL}{BIDI}]")
# ESC sequences (CSI, OSC, two-byte) and the C0/C1 controls but newline and tab.
_OUTPUT = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def first_control(text: str) -> tuple[int, str] | None:
    """The offset and the character of the first control character in `text` (`CONTROL`)."""
    found = _CONTROL.search(text)
    return None if found is None else (found.start(), found.group())


def codepoint(char: str) -> str:
    """A character as people name it: ``U+000A``."""
    return f"U+{ord(char):04X}"


def _escaped(match: re.Match[str]) -> str:
    n = ord(match.group())
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def escape_controls(text: str) -> str:
    """`text` as one visible line: every control and bidirectional formatting character
    written as an escape (a newline as ``\\x0a``, U+202E as ``\\u202e``); idempotent."""
    return _SHOWN.sub(_escaped, text)


def strip_controls(text: str) -> str:
    """`text` without ESC sequences and C0/C1 control characters, newline and tab kept."""
    return _OUTPUT.sub("", text)
