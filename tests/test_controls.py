"""Control characters: the one definition the contract refuses and the faces escape."""

from __future__ import annotations

import pytest

from verifier.controls import codepoint, escape_controls, first_control, strip_controls


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a\nb", (1, "\n")),
        ("src/\x7f.py", (4, "\x7f")),
        ("x\u0085", (1, "\u0085")),
        ("\x9b2J", (0, "\x9b")),
        ("a\u2028", (1, "\u2028")),
        ("a\u2029", (1, "\u2029")),
        ("tab\there", (3, "\t")),
        ("é/ü/日本.py", None),
        ("\u202eevil", None),  # shown escaped, but a legitimate (if odd) path
    ],
)
def test_first_control_finds_c0_del_c1_and_the_unicode_separators(
    text: str, found: tuple[int, str] | None
) -> None:
    assert first_control(text) == found


def test_escaping_makes_one_visible_line_and_is_idempotent() -> None:
    text = "a\nb\r\x1b[2J\u2028\u202e\x00é"
    once = escape_controls(text)
    assert once == "a\\x0ab\\x0d\\x1b[2J\\u2028\\u202e\\x00é"
    assert escape_controls(once) == once
    assert codepoint("\n") == "U+000A" and codepoint("\u2028") == "U+2028"


def test_stripping_takes_escape_sequences_whole_and_keeps_newlines_and_tabs() -> None:
    assert strip_controls("\x1b[31mred\x1b[0m\tok\n\x1b]0;t\x07\x07\x9bx") == "red\tok\nx"
