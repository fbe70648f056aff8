"""gemini-cli 0.61's edit tools, reproduced: what ``replace`` and ``write_file`` write.

The replay check replays a model's edits the way the harness applied them; for
gemini-cli that is not a literal text replacement. Read from its source
(``packages/core/src/tools/edit.ts``, ``write-file.ts``, ``utils/editCorrector.ts``),
``replace`` (`replace`):

1. reads the file as UTF-8, remembers whether it holds any CRLF, and turns every
   CRLF into LF, in the file and in ``old_string`` / ``new_string``;
2. an empty ``old_string`` creates a missing file with ``new_string`` (an
   existing one is an error); a missing file is an error otherwise;
3. tries, in order, until one matches: **exact** (every occurrence replaced),
   **flexible** (whole lines equal once trimmed; the replacement re-indented
   like the first matched line), **regex** (the old text's tokens, split at
   whitespace and around ``( ) : [ ] { } > < =``, matched with any whitespace
   between them, from a line start; re-indented), **fuzzy** (an old text of 10
   UTF-16 units or more: windows of as many lines within a weighted Levenshtein
   distance of 10 %, the best non-overlapping ones replaced, re-indented);
4. refuses no match ("could not find"), more than one without
   ``allow_multiple`` ("expected 1 occurrence"), and an old text equal to the
   new one; keeps the file's trailing newline as it was;
5. writes the result with every line ending CRLF when the file held a CRLF.

The LLM self-correction step is off by default (``disableLLMCorrection``) and
is not reproduced. ``write_file`` (`write`) writes its content, unescaped
(``\\n`` and friends turned into the characters) for Gemini models neither 2
nor 3 (``aggressiveUnescape``), with CRLF line endings when the file
it replaces held one.

Every tolerant step (all but exact), the unescaping, and CRLF forced onto
lines the edit did not touch apply something other than what the model
asked: each `Applied` says so (`tolerance`), and the replay check reports it
under the repository's ``tolerant_edits`` policy. Strings are Python's (code
points) where gemini-cli's are UTF-16: lengths and distances are counted in
UTF-16 units, as there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz.distance import Levenshtein

from verifier.contract.profiles import MATCHERS  # the rules a function may name: these

__all__ = [
    "MATCHERS",
    "Applied",
    "Replacement",
    "crlf_written",
    "replace",
    "replace_bytes",
    "write_bytes",
]


FUZZY_MATCH_THRESHOLD = 0.1
WHITESPACE_PENALTY_FACTOR = 0.1
# JavaScript's WhiteSpace and LineTerminator: what `trim()` and `\s` take.
_JS_SPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_S = "[" + re.escape(_JS_SPACE) + "]"
# `/.*(?:\n|$)/g`: JavaScript's `.` stops at \n, \r, U+2028 and U+2029; `$` is the end.
_LINE = re.compile(r"[^\n\r\u2028\u2029]*(?:\n|\Z)")
_DELIMITERS = ("(", ")", ":", "[", "]", "{", "}", ">", "<", "=")
_UNESCAPE = re.compile(r"\\+(n|t|r|'|\"|`|\\|\n)")
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "`": "`", "\\": "\\", "\n": "\n"}


@dataclass(frozen=True)
class Replacement:
    """What ``replace`` computes on LF text: the new text, or the error it answers."""

    content: str | None
    occurrences: int
    strategy: str  # "exact", "flexible", "regex", "fuzzy", "create"; "" on an error
    error: str | None = None


@dataclass(frozen=True)
class Applied:
    """An edit applied to a file's bytes: the bytes written (None: the tool refused), why
    not, and what it applied other than what the model asked (`tolerance`), if anything."""

    data: bytes | None
    error: str | None = None
    strategy: str = ""
    tolerance: str | None = None
    # The replay finding the tolerance is: "replay.tolerant_match" (a match or line endings
    # other than asked) or "replay.corrected_edit" (the model's text itself was changed).
    code: str = "replay.tolerant_match"


def _trim(text: str) -> str:
    return text.strip(_JS_SPACE)


def _lines(text: str) -> list[str]:
    """``text.match(/.*(?:\\n|$)/g).slice(0, -1)``: a lone CR and what precedes it are lost,
    as there."""
    return [m.group(0) for m in _LINE.finditer(text)][:-1]


def _units(text: str) -> int:
    """The length JavaScript gives `text` (UTF-16 code units)."""
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


def _utf16(text: str) -> str | list[int]:
    if all(ord(c) <= 0xFFFF for c in text):
        return text
    raw = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def _restore_trailing_newline(original: str, modified: str) -> str:
    if original.endswith("\n") and not modified.endswith("\n"):
        return modified + "\n"
    if not original.endswith("\n") and modified.endswith("\n"):
        return modified[:-1]
    return modified


def _indent(lines: list[str], target: str) -> list[str]:
    """gemini-cli's `applyIndentation`."""
    if not lines:
        return []
    reference = re.match(r"[ \t]*", lines[0])
    ref = reference.group(0) if reference else ""
    out = []
    for line in lines:
        if _trim(line) == "":
            out.append("")
        elif line.startswith(ref):
            out.append(target + line[len(ref) :])
        else:
            out.append(target + line.lstrip(_JS_SPACE))
    return out


def _exact(content: str, old: str, new: str, allow_multiple: bool) -> Replacement | None:
    count = content.count(old)
    if not allow_multiple and count > 1:
        return Replacement(content, count, "exact")
    if count > 0:
        replaced = _restore_trailing_newline(content, content.replace(old, new))
        return Replacement(replaced, count, "exact")
    return None


def _flexible(content: str, old: str, new: str, raw_new: str) -> Replacement | None:
    source = _lines(content)
    search = [_trim(line) for line in old.split("\n")]
    replace_lines = new.split("\n")
    found = 0
    i = 0
    while i <= len(source) - len(search):
        window = source[i : i + len(search)]
        if all(_trim(line) == search[n] for n, line in enumerate(window)):
            found += 1
            indentation = re.match(r"[ \t]*", window[0])
            text = "\n".join(_indent(replace_lines, indentation.group(0) if indentation else ""))
            if raw_new != "" and window[-1].endswith("\n") and not text.endswith("\n"):
                text += "\n"
            source[i : i + len(search)] = [text]
        i += 1
    if found:
        return Replacement(_restore_trailing_newline(content, "".join(source)), found, "flexible")
    return None


def _regex(content: str, old: str, new: str, allow_multiple: bool) -> Replacement | None:
    processed = old
    for delimiter in _DELIMITERS:
        processed = f" {delimiter} ".join(processed.split(delimiter))
    tokens = [t for t in re.split(_S + "+", processed) if t]
    if not tokens:
        return None
    # `^` with the m flag: the start, or after any JavaScript line terminator.
    pattern = re.compile(
        r"(?:(?<=[\n\r\u2028\u2029])|\A)([ \t]*)" + (_S + "*").join(re.escape(t) for t in tokens)
    )
    matches = pattern.findall(content)
    if not matches:
        return None
    new_lines = new.split("\n")

    def indented(match: re.Match[str]) -> str:
        return "\n".join(_indent(new_lines, match.group(1) or ""))

    modified = pattern.sub(indented, content, count=0 if allow_multiple else 1)
    return Replacement(_restore_trailing_newline(content, modified), len(matches), "regex")


def _fuzzy(content: str, old: str, new: str, raw_old: str) -> Replacement | None:
    if _units(raw_old) < 10:
        return None
    source = _lines(content)
    search_lines = [line.rstrip(_JS_SPACE) for line in _lines(old)]
    if len(source) * _units(raw_old) ** 2 > 4e8 or not search_lines:
        return None
    n = len(search_lines)
    block = "\n".join(search_lines)
    block_units = _units(block)
    block_seq, block_bare = _utf16(block), _utf16(re.sub(_S, "", block))
    candidates: list[tuple[float, int]] = []
    for i in range(len(source) - n + 1):
        window = "\n".join(line.rstrip(_JS_SPACE) for line in source[i : i + n])
        if abs(_units(window) - block_units) / block_units > (
            FUZZY_MATCH_THRESHOLD / WHITESPACE_PENALTY_FACTOR
        ):
            continue
        d_raw = Levenshtein.distance(_utf16(window), block_seq)
        d_norm = Levenshtein.distance(_utf16(re.sub(_S, "", window)), block_bare)
        score = (d_norm + (d_raw - d_norm) * WHITESPACE_PENALTY_FACTOR) / block_units
        if score <= FUZZY_MATCH_THRESHOLD:
            candidates.append((score, i))
    if not candidates:
        return None
    candidates.sort()
    selected: list[int] = []
    for _, index in candidates:
        if not any(abs(s - index) < n for s in selected):
            selected.append(index)
    new_lines = new.split("\n")
    for index in sorted(selected, reverse=True):
        indentation = re.match(r"[ \t]*", source[index])
        text = "\n".join(_indent(new_lines, indentation.group(0) if indentation else ""))
        if source[index + n - 1].endswith("\n"):
            text += "\n"
        source[index : index + n] = [text]
    return Replacement(_restore_trailing_newline(content, "".join(source)), len(selected), "fuzzy")


def replace(current: str | None, old: str, new: str, allow_multiple: bool = False) -> Replacement:
    """``replace`` on a file's text (LF line endings; None: the file does not exist)."""
    old_n, new_n = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
    if current is None:
        if old == "":
            return Replacement(new, 1, "create")
        return Replacement(None, 0, "", "the file does not exist (gemini-cli: File not found)")
    if old == "":
        return Replacement(None, 0, "", "an empty old_string on an existing file")
    result = (
        _exact(current, old_n, new_n, allow_multiple)
        or _flexible(current, old_n, new_n, new)
        or _regex(current, old_n, new_n, allow_multiple)
        or _fuzzy(current, old_n, new_n, old)
    )
    if result is None:
        return Replacement(None, 0, "", "no match for old_string (Could not find an exact match)")
    if not allow_multiple and result.occurrences != 1:
        return Replacement(
            None, result.occurrences, "", f"expected 1 occurrence but found {result.occurrences}"
        )
    if old_n == new_n:
        return Replacement(None, result.occurrences, "", "old_string and new_string are identical")
    return result


def _mixed(text: str) -> bool:
    """Both CRLF and a lone LF: rewriting every ending as CRLF changes lines not edited."""
    return "\r\n" in text and re.search(r"(?<!\r)\n", text) is not None


def replace_bytes(
    previous: bytes | None, old: str, new: str, allow_multiple: bool = False
) -> Applied:
    """``replace`` on a file's bytes, line endings as gemini-cli writes them."""
    text = None if previous is None else previous.decode("utf-8", "replace")
    crlf = text is not None and "\r\n" in text
    result = replace(None if text is None else text.replace("\r\n", "\n"), old, new, allow_multiple)
    if result.content is None:
        return Applied(None, result.error)
    out = re.sub(r"\r?\n", "\r\n", result.content) if crlf else result.content
    tolerance = None
    if result.strategy in ("flexible", "regex", "fuzzy"):
        tolerance = (
            f"a {result.strategy} match, not the exact old_string: gemini-cli replaced text "
            "the model did not quote as given"
        )
    elif text is not None and _mixed(text):
        tolerance = "the file's LF line endings were all rewritten as CRLF, edited or not"
    return Applied(out.encode("utf-8"), None, result.strategy, tolerance)


def unescape(content: str) -> str:
    """gemini-cli's `unescapeStringForGeminiBug`."""
    return _UNESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), content)


def aggressive_unescape(model: str | None) -> bool:
    """Whether ``write_file`` unescapes a model's content: a Gemini model neither 2 nor 3
    (gemini-cli's `aggressiveUnescape`; a model not named ``gemini-*`` is a custom one)."""
    name = (model or "").strip()
    return (
        name.startswith("gemini-")
        and not re.match(r"^gemini-3(\.|-|$)", name)
        and not re.match(r"^gemini-2(\.|$)", name)
    )


def write_bytes(previous: bytes | None, content: str, model: str | None) -> Applied:
    """``write_file``'s bytes: the content (unescaped for some models), CRLF kept."""
    written = content
    tolerance = None
    code = "replay.tolerant_match"
    if aggressive_unescape(model):
        written = unescape(content)
        if written != content:
            tolerance = (
                f"the content was unescaped before it was written (model {model!r}): "
                "gemini-cli wrote other text than the model sent"
            )
            code = "replay.corrected_edit"
    original = None if previous is None else previous.decode("utf-8", "replace")
    if original and "\r\n" in original:
        converted = re.sub(r"\r?\n", "\r\n", written)
        if converted != written and tolerance is None:
            tolerance = "the content's LF line endings were rewritten as CRLF, as the file had"
        written = converted
    return Applied(written.encode("utf-8"), None, "write", tolerance, code)


def crlf_written(previous: bytes | None, text: str) -> bytes:
    """The bytes ``replace`` or ``write_file`` writes for the LF `text` it computed (what
    its display shows) over the file's `previous` bytes: every line ending CRLF when the
    file held one."""
    if previous is not None and b"\r\n" in previous:
        text = re.sub(r"\r?\n", "\r\n", text)
    return text.encode("utf-8")
