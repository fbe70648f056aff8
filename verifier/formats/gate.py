"""The merge gate's formats: pure functions from a `verifier.app.gate.Decision` to text.

text (a table for people), json (for scripts), junit (one testcase per
session), github (workflow commands for annotations, and a Markdown table for
the step summary) and sarif (2.1.0, one rule per finding code). None of them
does I/O: the command writes what they return.

Everything a session wrote (its id, branch, repository name, findings' paths,
messages and values) reaches a format with its control characters escaped
(`verifier.controls.escape_controls`): one line each, nothing that moves a
cursor or reorders text. GitHub reads workflow commands from every step's log,
so the text is `render.inert` (no line of it starts one), JSON and SARIF are
`render.inert_json` (losslessly), and `github` writes its own annotations, then
everything else between ``::stop-commands::`` and an end token drawn at random
for the run, which nothing a session wrote can know.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import hashlib
import json
import re
import secrets
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from verifier import __version__
from verifier.app.gate import (
    MISSING,
    Decision,
    SessionDecision,
    Verdict,
    repository_path,
)
from verifier.controls import escape_controls
from verifier.findings import Finding
from verifier.formats.render import (
    VERDICT_STYLE,
    finding_message,
    finding_short,
    finding_text,
    inert,
    inert_json,
)

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
# GitHub shows at most 10 annotations of each kind (error, warning, notice) per step,
# and 50 per job: one gate step stays within both at 10 of each.
GITHUB_PER_KIND = 10
# A step summary may hold 1 MiB; a row shows this many findings, the summary this many rows.
SUMMARY_FINDINGS = 5
SUMMARY_ROWS = 300
# Findings listed per session in the text view (all of them are in json and sarif).
TEXT_FINDINGS = 20
# Rule ids of what the gate says about a session that has no finding to show.
GATE_RULES = {
    "gate.not_delivered": "The session is not delivered.",
    "gate.inconclusive": "The session's verification could not conclude.",
    "gate.pending": "The session is not verified yet.",
    "gate.missing": "The session was named, but no store or server holds it.",
    "gate.no_session": "No session was selected.",
    "gate.unavailable": "The verdicts could not be read: the gate decided nothing.",
}
# Sessions the next steps name one by one (the rest: --format json lists them).
NEXT_SESSIONS = 3


def __getattr__(name: str) -> Any:
    """`CHECK_OF_PREFIX`, made on first use (`check_of_prefix`)."""
    if name == "CHECK_OF_PREFIX":
        return check_of_prefix()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def check_of_prefix() -> dict[str, str]:
    """What found a finding, by the first part of its code: each check declares its own.
    Read from the checks' registry when SARIF first names a rule: importing the checks
    loads the whole verification stack, which no other format of the gate needs."""
    from verifier.checks import registered

    return {
        prefix.removesuffix("."): found_by
        for check in registered()
        for prefix, found_by in check.prefixes.items()
    }


def shown(text: str) -> str:
    """`text` with its control characters escaped (`escape_controls`); text that has none
    (nearly all: each of them is a character Python does not print) is given back as it
    is after one scan, without the regular expression (a thousand sessions: 5 ms)."""
    return text if text.isprintable() else escape_controls(text)


def status_words(status: str) -> str:
    return "not stored" if status == MISSING else status.replace("_", " ")


def verdict_words(decision: SessionDecision) -> str:
    """The status, and the computed verdict beside it when an override decided."""
    session = decision.session
    if session.override is None:
        return status_words(session.computed_status)
    computed = status_words(session.computed_status)
    return f"{status_words(session.override.status)} (override; computed: {computed})"


def describe_selection(decision: Decision) -> str:
    s = decision.selection
    parts = [f"--session {i}" for i in s.session_ids]
    parts += [f"--commit {c[:12]}" for c in s.commits]
    parts += [f"--branch {b}" for b in s.branches]
    parts += [f"--rev-range {r}" for r in s.rev_ranges]
    described = ", ".join(parts)
    if s.rev_ranges:  # the commits of every range, each once
        n = len(s.range_commits)
        described += f" ({n} commit{'' if n == 1 else 's'})"
    return shown(described)


def finding_line(finding: Finding) -> str:
    """One finding on one line: code, path, message, expected and found."""
    line = finding_text(finding)
    if finding.expected is not None or finding.found is not None:
        line += f" (expected {_short(finding.expected)}, found {_short(finding.found)})"
    return shown(line)


def _short(value: str | None, limit: int = 120) -> str:
    if value is None:
        return "-"
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def summary_line(decision: Decision) -> str:
    line = f"gate: {decision.outcome} (exit {decision.exit_code}): {shown(decision.reason)}"
    if decision.overridden:
        n = decision.overridden
        line += f"; {n} {'session' if n == 1 else 'sessions'} decided by an override"
    if decision.waited_s:
        line += f"; waited {decision.waited_s:.0f}s"
    return line


def next_steps(decision: Decision) -> list[str]:
    """What a person does next when the gate did not pass: the command that shows why,
    the override and who may record it, or what to check when nothing could be read."""
    if decision.passed:
        return []
    server = decision.server
    if decision.unavailable is not None:
        if server is not None:
            return [
                f"check that {server} answers and that $VERIFIER_TOKEN holds one of its "
                "read tokens (verifier token create --scope read, on the service's host)"
            ]
        return [
            "verifier config show: the store this configuration names (database_url) is "
            "the one the gate reads; it must be where the verifier records the sessions",
            "verifier list: the sessions that store holds",
        ]
    if not decision.sessions:
        return [
            "no session claims this change: post its report (verifier ingest REPORT, or "
            "POST /v1/sessions), or give --allow-empty where changes without a session "
            "may merge"
        ]
    stuck = [d for d in decision.sessions if d.blocks]
    steps: list[str] = []
    for d in stuck[:NEXT_SESSIONS]:
        quoted = shlex.quote(shown(d.session.session_id))
        if server is None:
            steps.append(f"verifier show {quoted}: its findings and runs")
        else:
            page = f"{server}/sessions/{quote(d.session.session_id, safe='')}"
            steps.append(f"{shown(page)}: its findings and runs (the dashboard, a read token)")
    if len(stuck) > NEXT_SESSIONS:
        steps.append(f"… and {len(stuck) - NEXT_SESSIONS} more blocking sessions (--format json)")
    if any(d.verdict is Verdict.FAIL and d.status != MISSING for d in stuck):
        first = shlex.quote(shown(stuck[0].session.session_id))
        how = (
            "by a person who may write the verifier's store (recorded as cli:<user>)"
            if server is None
            else f"on the service's host, or POST {server}/v1/sessions/ID/override with an "
            "admin token"
        )
        steps.append(
            f"verifier override {first} --status delivered --reason TEXT: when a person "
            f"knows better; {how}, kept beside the computed verdict"
        )
    if any(d.status == "pending" for d in stuck):
        steps.append("--wait SECONDS gives the verifier time to finish the pending sessions")
    return steps


def _shown(decision: SessionDecision) -> bool:
    """Whether a session's findings are worth showing: it did not simply pass."""
    return decision.verdict is not Verdict.PASS or decision.decided_by == "override"


# -- text ---------------------------------------------------------------------------------


def render_text(decision: Decision, width: int | None = None) -> str:
    """A table of the selected sessions, the lines of those not delivered, the answer.

    Written line by line as plain text (bold and colours when stdout is a terminal), so
    a thousand sessions cost milliseconds: the table is laid out as rich lays out one
    that fits the width (`Table`'s heavy head), and only one that does not fit is left
    to rich to shrink. A line is never wrapped: a finding or a command stays on one
    line for grep and copy, however long.
    """
    from verifier.formats import render

    out = _Text(width)
    out.line(f"selected by {describe_selection(decision)} from {shown(decision.source)}")
    rows: list[tuple[str, ...]] = []
    styles: list[str] = []  # of the verdict column
    for d in decision.sessions:
        s = d.session
        status = s.computed_status if s.override is None else s.override.status
        rows.append(
            (
                shown(s.session_id),
                (s.head_commit or "-")[:12],
                verdict_words(d),
                "verifier" if s.override is None else "override",
                shown(finding_short(s.findings[0])) if s.findings else "",
            )
        )
        styles.append(_verdict_style(status))
    if rows:
        out.table(("session", "head", "verdict", "decided by", "first finding"), rows, {2: styles})
    for d in decision.sessions:
        s = d.session
        if not (_shown(d) or s.trail_note):
            continue
        blocks = "blocks" if d.blocks else "does not block"
        out.line(
            out.styled(shown(s.session_id), "bold") + f": {shown(verdict_words(d))} ({blocks})"
        )
        if s.override is not None:
            by = f" by {s.override.author}" if s.override.author else ""
            why = f": {s.override.reason}" if s.override.reason else ""
            out.line(f"  override {shown(s.override.status)}{shown(by)}{shown(why)}")
        if s.trail_note:
            out.line(f"  note: {shown(s.trail_note)}")
        if s.classification is not None:
            classified = render.classification_line({"classification": s.classification})
            if classified:
                out.line(f"  tests {shown(classified)}")
        for finding in s.findings[:TEXT_FINDINGS]:
            out.line(f"  - {finding_line(finding)}")
        if len(s.findings) > TEXT_FINDINGS:
            out.line(f"  … and {len(s.findings) - TEXT_FINDINGS} more findings (--format json)")
    style = "bold green" if decision.passed else "bold red"
    out.line(out.styled(summary_line(decision), style))
    for n, step in enumerate(next_steps(decision)):
        out.line(f"{'next:' if n == 0 else '     '} {shown(step)}")
    return _inert(out.text())


def _inert(text: str) -> str:
    """`render.inert`, skipped for text that holds neither ``::`` nor ``##[`` (its regular
    expression over 1,700 lines: 0.6 ms)."""
    return inert(text) if "::" in text or "##[" in text else text


def _verdict_style(status: str) -> str:
    return VERDICT_STYLE.get(status, "dim" if status != MISSING else "red")


# SGR sequences of the styles the text view uses, as rich writes them.
_SGR = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "bold red": "1;31",
    "bold green": "1;32",
    "bold yellow": "1;33",
}
# A cell: its text, or its text and style.
Cell = str | tuple[str, str]


class _Text:
    """Lines of text for stdout: styled only on a terminal, as `render._console` decides
    (rich's own console), 120 columns wide off a terminal (pipes and CI logs)."""

    def __init__(self, width: int | None) -> None:
        import os
        import shutil
        import sys

        tty = sys.stdout.isatty()
        self.colour = tty and os.environ.get("TERM", "") not in ("dumb", "unknown")
        self.width = width or (shutil.get_terminal_size().columns if tty else 120)
        self._lines: list[str] = []

    def styled(self, text: str, style: str) -> str:
        return f"\x1b[{_SGR[style]}m{text}\x1b[0m" if self.colour and style in _SGR else text

    def line(self, text: str) -> None:
        self._lines.append(text)

    def text(self) -> str:
        return "\n".join(self._lines) + "\n" if self._lines else ""

    def table(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        styles: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        """Rows of plain cells under `header`, boxed as rich's `Table` boxes them
        (``box.HEAVY_HEAD``); ``styles[n]`` the style of each row's cell in column n."""
        styles = styles or {}
        columns = list(zip(header, *rows, strict=True))
        # Each column measured at once: most are ASCII, whose columns are its characters.
        ascii_only = all("".join(column).isascii() for column in columns)
        measure = len if ascii_only else _cells
        widths = [max(map(measure, column)) for column in columns]
        if sum(widths) + 3 * len(widths) + 1 > self.width:
            marked: list[list[Cell]] = [
                [cell if n not in styles else (cell, styles[n][r]) for n, cell in enumerate(row)]
                for r, row in enumerate(rows)
            ]
            self._lines += _rich_table(header, marked, self.width, self.colour).splitlines()
            return
        add = self._lines.append
        add("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓")
        bold = [
            self.styled(" ", "bold") + self.styled(h, "bold") + self.styled(" ", "bold")
            for h in header
        ]
        add(
            "┃"
            + "┃".join(
                b + " " * (w - _cells(h)) for b, h, w in zip(bold, header, widths, strict=True)
            )
            + "┃"
        )
        add("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩")
        if ascii_only and not self.colour:
            # Plain cells of one character a column: padded by `str.format` in one call a row.
            template = "│" + "│".join(f" {{:<{w}}} " for w in widths) + "│"
            self._lines += [template.format(*row) for row in rows]
        else:
            for r, row in enumerate(rows):
                cells = []
                for n, (plain, w) in enumerate(zip(row, widths, strict=True)):
                    shown_cell = plain if n not in styles else self.styled(plain, styles[n][r])
                    cells.append(f" {shown_cell}{' ' * (w - measure(plain))} ")
                add("│" + "│".join(cells) + "│")
        add("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")


def _cells(text: str) -> int:
    """The columns `text` takes on a terminal (wide characters take two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _rich_table(
    header: Sequence[str], rows: Sequence[Sequence[Cell]], width: int, colour: bool
) -> str:
    """A table too wide for `width`, shrunk and wrapped by rich (the first column folds)."""
    from rich.table import Table

    from verifier.formats import render

    console, out = render._console(width)
    if not colour:
        console.no_color = True
    table = Table(*header)
    table.columns[0].overflow = "fold"
    for row in rows:
        table.add_row(
            *(
                render._escape(c)
                if isinstance(c, str)
                else f"[{c[1]}]{render._escape(c[0])}[/{c[1]}]"
                for c in row
            )
        )
    console.print(table)
    return out.getvalue()


# -- json ---------------------------------------------------------------------------------


def decision_dict(decision: Decision) -> dict[str, Any]:
    """The ``--format json`` object: every session as `_session_dict` writes it."""
    counts = dict.fromkeys(("delivered", "not_delivered", "inconclusive", "pending", MISSING), 0)
    overridden = 0
    sessions = []
    for d in decision.sessions:
        counted = d.session.override
        status = d.session.computed_status if counted is None else counted.status
        if status in counts:
            counts[status] += 1
        overridden += counted is not None
        sessions.append(_session_dict(d))
    return {
        "outcome": decision.outcome,
        "exit_code": decision.exit_code,
        "reason": decision.reason,
        "inconclusive": decision.inconclusive,
        "allow_empty": decision.allow_empty,
        "source": decision.source,
        "waited_s": decision.waited_s,
        "unavailable": decision.unavailable,
        "selection": decision.selection.to_dict(),
        "counts": {"selected": len(decision.sessions), **counts, "overridden": overridden},
        "sessions": sessions,
        "next": next_steps(decision),
    }


def _session_dict(d: SessionDecision) -> dict[str, Any]:
    s = d.session
    override = s.override
    return {
        "session_id": s.session_id,
        "status": s.computed_status if override is None else override.status,
        "computed_status": s.computed_status,
        "decided_by": "verifier" if override is None else "override",
        "override": None
        if override is None
        else {"status": override.status, "author": override.author, "reason": override.reason},
        "verdict": d.verdict.value,
        "blocks": d.blocks,
        "repo": s.repo_name,
        "head_commit": s.head_commit,
        "branch": s.branch,
        "agent_status": s.agent_status,
        "done": s.done,
        "ended_at": None if s.ended_at is None else s.ended_at.isoformat(),
        "run_id": s.run_id,
        "findings": [_finding_dict(f) for f in s.findings],
        "classification": s.classification,
        "trail_note": s.trail_note,
    }


_FINDING_FIELDS = tuple(f.name for f in dataclasses.fields(Finding))


def _finding_dict(finding: Finding) -> dict[str, Any]:
    """`Finding.to_dict` (the fields that are not None, in order) without `asdict`'s deep
    copy of each: its strings need none."""
    return {
        name: value for name in _FINDING_FIELDS if (value := getattr(finding, name)) is not None
    }


def render_json(decision: Decision) -> str:
    return inert_json(_json_text(decision_dict(decision))) + "\n"


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    """The error handler `_ASCII_JSON` of orjson's UTF-8 read as ASCII: each run of bytes
    past ASCII (whole characters: orjson writes valid UTF-8) as json.dumps escapes its
    characters (``\\u2026``; a surrogate pair past the BMP)."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    data = error.object
    end = error.start
    while end < len(data) and data[end] >= 0x80:
        end += 1
    escaped = []
    for char in data[error.start : end].decode("utf-8"):
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), end


_ASCII_JSON = "verifier.formats.gate.json"
codecs.register_error(_ASCII_JSON, _json_escapes)


def _json_text(data: Any) -> str:
    """`json.dumps(data, ensure_ascii=True, indent=2)`, byte for byte, written by orjson
    (ten times faster on a thousand sessions): DEL and its non-ASCII characters, which
    can only stand inside strings, escaped as json.dumps escapes them (`_json_escapes`).
    What orjson refuses (a lone surrogate, an integer past 64 bits) goes to json.dumps."""
    import orjson

    try:
        raw = orjson.dumps(data, option=orjson.OPT_INDENT_2)
    except (orjson.JSONEncodeError, TypeError, ValueError):
        return json.dumps(data, ensure_ascii=True, indent=2)
    # Read as ASCII, what is not escaped by `_json_escapes` as the decoder meets it: one
    # pass in C (a regular expression over the text took 3 ms of 570 kB).
    text = raw.decode("ascii", _ASCII_JSON)
    return text.replace("\x7f", "\\u007f") if "\x7f" in text else text


# -- junit --------------------------------------------------------------------------------

# Characters XML 1.0 cannot hold, even escaped: a finding may quote any bytes.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """`text` shown (`shown`), and what XML cannot hold written as ``\\xNN``; text Python
    prints holds none of those (each is a control, a surrogate or a noncharacter)."""
    if text.isprintable():
        return text
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", shown(text))


# What ElementTree escapes in an attribute's value (`ET._escape_attrib`), in its order.
_XML_ATTRIBUTE = (
    ("&", "&amp;"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ('"', "&quot;"),
    ("\r", "&#13;"),
    ("\n", "&#10;"),
    ("\t", "&#09;"),
)


def _xml_attribute(text: str) -> str:
    """An attribute's value as ElementTree writes it."""
    for char, entity in _XML_ATTRIBUTE:
        if char in text:
            text = text.replace(char, entity)
    return text


def _xml_element(tag: str, attributes: Sequence[tuple[str, str]], text: str = "") -> str:
    """One element without children, as ElementTree writes it (`ET.tostring`): its
    attributes in order, its text escaped (`ET._escape_cdata`), ``<tag ... />`` when it
    has none."""
    written = _xml_attributes(attributes)
    if not text:
        return f"<{tag}{written} />"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<{tag}{written}>{text}</{tag}>"


def render_junit(decision: Decision) -> str:
    """One testcase per session: a failure when not delivered, an error when inconclusive
    or pending and that blocks, skipped when it does not (--inconclusive=pass).

    Written as text, element by element, as ElementTree writes the tree and ``ET.indent``
    indents it (two spaces a level; a test holds it to ElementTree's bytes): building
    and writing a tree of a thousand testcases cost 15 ms."""
    cases: list[str] = []
    tests = failures = errors = skipped = 0
    for d in decision.sessions:
        s = d.session
        tests += 1
        # Its lines joined as `shown` writes a newline (``\\x0a``): junit has always shown
        # them so, the newline escaped with the rest; joined so, no regex escapes it.
        detail = _xml_text("\\x0a".join(_session_lines(d)))
        message = _xml_text(_session_headline(d))
        if d.verdict is Verdict.FAIL:
            failures += 1
            child = _xml_element("failure", (("message", message), ("type", d.status)), detail)
        elif d.verdict is Verdict.UNDECIDED and d.blocks:
            errors += 1
            child = _xml_element("error", (("message", message), ("type", d.status)), detail)
        elif d.verdict is Verdict.UNDECIDED:
            skipped += 1
            child = _xml_element("skipped", (("message", message),), detail)
        else:
            child = _xml_element("system-out", (), detail)
        named = (
            ("classname", f"verifier.gate.{_xml_text(s.repo_name or 'unknown')}"),
            ("name", _xml_text(s.session_id)),
        )
        cases.append(_xml_case(named, child))
    if decision.unavailable is not None:
        tests += 1
        errors += 1
        child = _xml_element(
            "error",
            (("message", _xml_text(decision.reason)), ("type", "unavailable")),
            _xml_text("\n".join(next_steps(decision))),
        )
        cases.append(_xml_case((("classname", "verifier.gate"), ("name", "source")), child))
    elif not decision.sessions and not decision.allow_empty:
        tests += 1
        failures += 1
        text = f"no session selected by {describe_selection(decision)}"
        child = _xml_element("failure", (("message", _xml_text(text)), ("type", "no_session")))
        cases.append(_xml_case((("classname", "verifier.gate"), ("name", "selection")), child))
    counted = (
        ("name", "verifier gate"),
        ("tests", str(tests)),
        ("failures", str(failures)),
        ("errors", str(errors)),
    )
    suites = _xml_attributes(counted)
    suite = _xml_attributes((*counted, ("skipped", str(skipped))))
    cases.append(_xml_element("system-out", (), _xml_text(summary_line(decision))))
    body = (
        f"<testsuites{suites}>\n  <testsuite{suite}>\n    "
        + "\n    ".join(cases)
        + "\n  </testsuite>\n</testsuites>"
    )
    # `##[` can only be text here: as a character reference it reads back the same, and
    # a log that shows the file reads no legacy workflow command in it.
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body.replace("##[", "#&#35;[") + "\n"


def _xml_case(attributes: Sequence[tuple[str, str]], child: str) -> str:
    """A testcase and its one child, indented as ``ET.indent`` indents them."""
    return f"<testcase{_xml_attributes(attributes)}>\n      {child}\n    </testcase>"


def _xml_attributes(attributes: Sequence[tuple[str, str]]) -> str:
    return "".join(f' {name}="{_xml_attribute(value)}"' for name, value in attributes)


def _session_headline(d: SessionDecision) -> str:
    s = d.session
    first = f": {finding_line(s.findings[0])}" if s.findings else ""
    return f"{verdict_words(d)}{first}"


def _session_lines(d: SessionDecision) -> list[str]:
    """What junit says of a session, line by line, each shown."""
    s = d.session
    lines = [f"session {s.session_id}: {verdict_words(d)}"]
    if s.head_commit:
        lines.append(f"head commit {s.head_commit}" + (f" on {s.branch}" if s.branch else ""))
    if s.override is not None:
        by = f" by {s.override.author}" if s.override.author else ""
        lines.append(
            f"override {s.override.status}{by}: {s.override.reason or '(no reason given)'}"
        )
    if s.trail_note:
        lines.append(f"note: {s.trail_note}")
    lines += [f"- {finding_line(f)}" for f in s.findings]
    return [shown(line) for line in lines]


# -- github -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Annotation:
    level: str  # error, warning, notice
    title: str
    message: str
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class GithubOutput:
    """What `--format github` writes: workflow commands on stdout, Markdown for the summary."""

    stdout: str
    summary: str
    annotations: tuple[Annotation, ...]
    left_out: dict[str, int]
    # What ends ``::stop-commands::`` around everything but the annotations.
    end_token: str = ""


def escape_data(text: str) -> str:
    """A workflow command's message, as @actions/core escapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: also `:` and `,`, which end it."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(annotation: Annotation) -> str:
    """One annotation as a workflow command, its values escaped as GitHub unescapes them.

    The annotations' texts hold no control character a session wrote
    (`github_annotations` escapes them): the newlines left are ours."""
    properties = [("file", annotation.file), ("line", annotation.line), ("title", annotation.title)]
    given = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties if v is not None)
    return f"::{annotation.level} {given}::{escape_data(annotation.message)}"


def github_annotations(decision: Decision) -> list[Annotation]:
    """Every annotation the decision deserves, before GitHub's limits."""
    found: list[Annotation] = []
    for d in decision.sessions:
        s = d.session
        if d.decided_by == "override" and d.verdict is Verdict.PASS:
            computed = status_words(s.computed_status)
            by = f" by {s.override.author}" if s.override and s.override.author else ""
            why = f": {s.override.reason}" if s.override and s.override.reason else ""
            found.append(
                Annotation(
                    "notice",
                    shown(f"verdict overridden: {s.session_id}"),
                    shown(
                        f"session {s.session_id} is {status_words(d.status)} by an override{by}"
                        f"{why} (computed: {computed})"
                    ),
                )
            )
            continue
        if d.verdict is Verdict.PASS:
            continue
        level = "error" if d.blocks else "warning"
        if not s.findings:
            found.append(
                Annotation(
                    level,
                    shown(f"{status_words(d.status)}: {s.session_id}"),
                    shown(f"session {s.session_id} is {verdict_words(d)}"),
                )
            )
        for finding in s.findings:
            message = shown(finding.message)
            if finding.expected is not None or finding.found is not None:
                expected, found_ = shown(str(finding.expected)), shown(str(finding.found))
                message += f"\nexpected: {expected}\nfound: {found_}"
            file = repository_path(finding)
            found.append(
                Annotation(
                    level,
                    shown(f"{finding.code} ({s.session_id}, {verdict_words(d)})"),
                    message,
                    file=None if file is None else shown(file),
                )
            )
    if decision.unavailable is not None:
        found.append(
            Annotation("error", "verdicts cannot be read", shown(decision.reason)),
        )
    elif not decision.sessions and not decision.allow_empty:
        found.append(
            Annotation(
                "error",
                "no session selected",
                f"no session selected by {describe_selection(decision)}: nothing shows that "
                "this change was delivered (--allow-empty lets it through)",
            )
        )
    return found


def capped(found: Sequence[Annotation]) -> tuple[list[Annotation], dict[str, int]]:
    """At most `GITHUB_PER_KIND` of each level: when there are more, the last one kept
    says how many were left out (they are in the step summary and the log)."""
    kept: list[Annotation] = []
    left_out: dict[str, int] = {}
    for level in ("error", "warning", "notice"):
        of_level = [a for a in found if a.level == level]
        if len(of_level) <= GITHUB_PER_KIND:
            kept += of_level
            continue
        shown = of_level[: GITHUB_PER_KIND - 1]
        left_out[level] = len(of_level) - len(shown)
        kept += shown
        kept.append(
            Annotation(
                level,
                f"{left_out[level]} more {level} annotations left out",
                f"GitHub shows {GITHUB_PER_KIND} {level} annotations per step: "
                f"{left_out[level]} more are in the step summary and the log",
            )
        )
    return kept, left_out


def render_github(decision: Decision, end_token: str | None = None) -> GithubOutput:
    """The annotations as workflow commands, then the text view with command processing
    stopped: between ``::stop-commands::TOKEN`` and ``::TOKEN::``, with a token drawn
    for this run (`end_token` for tests), no line is read as a command."""
    token = end_token or secrets.token_hex(16)
    kept, left_out = capped(github_annotations(decision))
    lines = [workflow_command(a) for a in kept]
    lines.append(f"::stop-commands::{token}")
    for level, n in left_out.items():
        lines.append(f"{n} {level} annotations left out (GitHub shows {GITHUB_PER_KIND} per step)")
    text = render_text(decision, width=120)
    stdout = "\n".join(lines) + "\n" + text + f"::{token}::\n"
    return GithubOutput(stdout, render_markdown(decision), tuple(kept), left_out, token)


_ICON = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.UNDECIDED: "⚠️"}


def _cell(text: str) -> str:
    """Text for a Markdown table cell: no pipe, newline, control character or HTML gets
    through (a newline a session wrote is shown escaped, like any control character)."""
    text = shown(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def _code(text: str) -> str:
    return f"<code>{_cell(text)}</code>"


def render_markdown(decision: Decision) -> str:
    """The step summary: the answer, then one row per session."""
    icon = "✅" if decision.passed else ("❌" if decision.exit_code == 1 else "⚠️")
    lines = [
        f"### {icon} verifier gate: {decision.outcome} (exit {decision.exit_code})",
        "",
        f"{_cell(decision.reason)}. Selected by {_cell(describe_selection(decision))}"
        f" from {_cell(decision.source)}.",
        "",
    ]
    steps = next_steps(decision)
    if steps:
        lines += ["**Next:**", "", *(f"- {_cell(step)}" for step in steps), ""]
    if decision.sessions:
        lines += [
            "| | session | head | verdict | decided by | findings |",
            "|---|---|---|---|---|---|",
        ]
        for d in decision.sessions[:SUMMARY_ROWS]:
            s = d.session
            findings = "<br>".join(
                f"{_code(f.code)}{' ' + _cell(f.path) if f.path else ''}: "
                f"{_cell(_short(finding_message(f), 200))}"
                for f in s.findings[:SUMMARY_FINDINGS]
            )
            if len(s.findings) > SUMMARY_FINDINGS:
                findings += f"<br>… and {len(s.findings) - SUMMARY_FINDINGS} more"
            lines.append(
                f"| {_ICON[d.verdict]} | {_code(s.session_id)} | "
                f"{_code((s.head_commit or '-')[:12])} | {_cell(verdict_words(d))} | "
                f"{d.decided_by} | {findings} |"
            )
        if len(decision.sessions) > SUMMARY_ROWS:
            more = len(decision.sessions) - SUMMARY_ROWS
            lines.append(f"\n… and {more} more sessions (`--format json` lists them all).")
    return "\n".join(lines) + "\n\n"


# -- sarif --------------------------------------------------------------------------------


def _rule_id(d: SessionDecision, finding: Finding | None) -> str:
    return finding.code if finding is not None else f"gate.{d.status}"


def _rule(rule_id: str) -> dict[str, Any]:
    if rule_id in GATE_RULES:
        text = GATE_RULES[rule_id]
        full = text + " Reported by the merge gate (`verifier gate`)."
    else:
        prefix = rule_id.split(".", 1)[0]
        text = f"verifier finding {rule_id}"
        check = check_of_prefix().get(prefix, "a verifier check")
        full = f"A broken promise or a check that could not run, found by {check}. "
        full += "Every code is described in the verifier's docs/findings.md."
    return {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in re.split(r"[._]", rule_id)),
        "shortDescription": {"text": text},
        "fullDescription": {"text": full},
        "defaultConfiguration": {"level": "error"},
    }


def render_sarif(decision: Decision) -> str:
    """SARIF 2.1.0: one result per finding of a session that did not simply pass, one
    rule per finding code (its id is the code); an override is a suppression."""
    results: list[dict[str, Any]] = []
    rule_ids: list[str] = []
    for d in decision.sessions:
        if not _shown(d):
            continue
        for finding in d.session.findings or (None,):
            results.append(_result(d, finding))
            rule_ids.append(_rule_id(d, finding))
    if decision.unavailable is not None:
        rule_ids.append("gate.unavailable")
        results.append(
            {
                "ruleId": "gate.unavailable",
                "level": "error",
                "message": {"text": shown(decision.reason)},
            }
        )
    elif not decision.sessions and not decision.allow_empty:
        rule_ids.append("gate.no_session")
        results.append(
            {
                "ruleId": "gate.no_session",
                "level": "error",
                "message": {"text": f"No session selected by {describe_selection(decision)}."},
            }
        )
    rules = sorted(set(rule_ids))
    index = {rule_id: n for n, rule_id in enumerate(rules)}
    for result in results:
        result["ruleIndex"] = index[result["ruleId"]]
    run = {
        "tool": {
            "driver": {
                "name": "verifier",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule(r) for r in rules],
            }
        },
        "automationDetails": {"id": "verifier-gate/"},
        "invocations": [
            {
                "executionSuccessful": decision.unavailable is None,
                "exitCode": decision.exit_code,
                "exitCodeDescription": summary_line(decision),
            }
        ],
        "results": results,
        "properties": {
            "outcome": decision.outcome,
            "selection": describe_selection(decision),
            "source": decision.source,
        },
    }
    return (
        inert_json(_json_text({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]})) + "\n"
    )


def _result(d: SessionDecision, finding: Finding | None) -> dict[str, Any]:
    s = d.session
    rule_id = _rule_id(d, finding)
    if finding is None:
        text = shown(f"Session {s.session_id} is {verdict_words(d)}.")
    else:
        text = shown(f"Session {s.session_id} ({verdict_words(d)}): {finding_line(finding)}")
    level = "error" if d.blocks else ("note" if d.verdict is Verdict.PASS else "warning")
    result: dict[str, Any] = {"ruleId": rule_id, "level": level, "message": {"text": text}}
    path = None if finding is None else repository_path(finding)
    if path is not None:
        result["locations"] = [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri_path(path), "uriBaseId": "%SRCROOT%"}
                }
            }
        ]
    elif finding is not None and finding.path:
        # An audit or profile finding: a place in the session's report, not a file.
        result["locations"] = [
            {"logicalLocations": [{"fullyQualifiedName": finding.path, "kind": "element"}]}
        ]
    where = "" if finding is None else f"{finding.code}\0{finding.path or ''}\0{finding.message}"
    # surrogatepass: the same bytes as UTF-8 for any text, and a lone surrogate's too.
    named = f"{s.session_id}\0{rule_id}\0{where}".encode("utf-8", "surrogatepass")
    fingerprint = hashlib.sha256(named).hexdigest()
    result["partialFingerprints"] = {"verifierFinding/v1": fingerprint}
    result["properties"] = {
        "session_id": s.session_id,
        "status": d.status,
        "computed_status": s.computed_status,
        "decided_by": d.decided_by,
        "head_commit": s.head_commit,
        "blocks": d.blocks,
    }
    if d.decided_by == "override" and d.verdict is Verdict.PASS and s.override is not None:
        result["suppressions"] = [
            {
                "kind": "external",
                "status": "accepted",
                "justification": s.override.reason
                or f"the verdict was overridden to {s.override.status}",
            }
        ]
    return result


def _uri_path(path: str) -> str:
    """A repository path as a URI reference: percent-encoded UTF-8. A path that is not
    UTF-8 reaches here as git gave it, its bytes held as lone surrogates (U+DC80-U+DCFF,
    ``surrogateescape``): its URI is those bytes, the name of the very file. Any other lone
    surrogate is encoded as ``surrogatepass`` writes it (three bytes, lossless), where
    ``quote`` refused it and with it the whole output."""
    try:
        return quote(path, safe="/", errors="surrogateescape")
    except UnicodeEncodeError:
        return quote(path, safe="/", errors="surrogatepass")


def _github_stdout(decision: Decision) -> str:
    return render_github(decision).stdout


# Each format's stdout, by its name on the command line (github's step summary comes
# from `render_github`). A new format is a function and a line here.
RENDERERS: dict[str, Callable[[Decision], str]] = {
    "text": render_text,
    "json": render_json,
    "junit": render_junit,
    "github": _github_stdout,
    "sarif": render_sarif,
}
FORMATS = tuple(RENDERERS)


def render(decision: Decision, fmt: str) -> str:
    """The stdout of `fmt`, one of `FORMATS`."""
    return RENDERERS[fmt](decision)
