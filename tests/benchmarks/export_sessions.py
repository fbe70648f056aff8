"""Benchmark: `verifier export sessions --format csv --out FILE` against a raw SELECT to csv.

The data: SQLite stores of 10,000 and 100,000 sessions filled by
`tests.benchmarks.fill` (three agents, three models, twelve repositories, a
year of end times; 92 % verified, each with one run, its three check results
and a finding when not delivered or inconclusive).

The subject is the CLI's own path without click: the store opened read-only,
`verifier.app.export.lines(store, SessionFilter(), "csv")` (every row, pages of
500 through `Store.export_lines`, one query a page handing over plain tuples,
each cell made spreadsheet-safe) written by `verifier.cli.export.write_file` (a
``.partial`` file, renamed). The raw operation: one sqlite3 ``SELECT`` of the same 19 columns
(sessions joined to their verdict run, the first finding by a subquery, times
turned to ISO text in SQL), written with the stdlib `csv` module to a file.
Target: <= 3x.

The 10,000-session store is timed in this process (`measure`, `--repeat`
turns); the 100,000-session store in a child process per side, one run each
(a run took about 40 s through the store before issue 19), which also gives each side's
resident memory before the export (imports done) and its peak during the
export (``VmHWM`` of /proc/self/status, reset with /proc/self/clear_refs just
before; `ru_maxrss` would not do, Linux carries it over from the parent): what
an export adds, at 10,000 against 100,000 rows, is the streaming claim.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.benchmarks.fill import fill_sqlite
from tests.benchmarks.timing import Result, Row, measure

SIZES = (10_000, 100_000)
TARGET = 3.0
RAW_SELECT = """
SELECT s.session_id, s.agent_name, s.agent_version, s.agent_model, s.repo_name, s.base_commit,
    s.head_commit, s.branch, s.status, s.done,
    replace(substr(s.started_at, 1, 19), ' ', 'T') || 'Z',
    replace(substr(s.ended_at, 1, 19), ' ', 'T') || 'Z',
    s.delivery_status, s.override_status, coalesce(s.override_status, s.delivery_status),
    r.id, replace(substr(r.finished_at, 1, 19), ' ', 'T') || 'Z',
    (SELECT f.code FROM findings f WHERE f.run_id = coalesce(s.verdict_run_id, s.latest_run_id)
        ORDER BY f.id LIMIT 1),
    s.report_sha256
FROM sessions s LEFT JOIN verification_runs r ON r.id = s.verdict_run_id
ORDER BY s.ended_at DESC, s.session_id DESC
"""


def subject(url: str, out: Path) -> None:
    """What `verifier export sessions --format csv --out FILE` does once the options are read."""
    from verifier.app import export
    from verifier.cli.export import write_file
    from verifier.store import SessionFilter, Store

    with Store.open(url, read_only=True) as store:
        write_file(export.lines(store, SessionFilter(), "csv"), out)


def raw(path: Path, out: Path) -> None:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        with out.open("w", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(range(19))
            writer.writerows(connection.execute(RAW_SELECT))
    finally:
        connection.close()


_CHILD = """
import json, sys, time
from pathlib import Path
from tests.benchmarks import export_sessions as e
import verifier.cli, verifier.cli.export  # imports before the first reading
from verifier.store import Store
def status(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
side, db, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
before = status("VmRSS")
Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
start = time.perf_counter()
e.subject(f"sqlite:///{db}", out) if side == "subject" else e.raw(db, out)
took = time.perf_counter() - start
print(json.dumps({"s": took, "before_kb": before, "after_kb": status("VmHWM")}))
"""


def _child(side: str, db: Path, out: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, side, str(db), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(tmp: Path, repeat: int) -> Result:
    dbs = {n: tmp / f"sessions-{n}.sqlite3" for n in SIZES}
    for n, db in dbs.items():
        fill_sqlite(db, n)
    small = SIZES[0]
    url = f"sqlite:///{dbs[small]}"
    out_s, out_r = tmp / "subject.csv", tmp / "raw.csv"
    t = measure(
        {"subject": lambda: subject(url, out_s), "raw": lambda: raw(dbs[small], out_r)}, repeat
    )
    _same_rows(out_s, out_r, small)
    rows = [
        Row(
            "export",
            f"export sessions --format csv --out, {small:,} sessions (SQLite)",
            t["subject"],
            "sqlite3 SELECT of the same columns + csv.writer to a file",
            t["raw"],
            f"<= {TARGET:g}x",
            t["raw"] * TARGET,
        )
    ]
    facts: dict[str, str] = {}
    memory = []
    for n in SIZES:
        s = _child("subject", dbs[n], out_s)
        r = _child("raw", dbs[n], out_r)
        _same_rows(out_s, out_r, n)
        if n != small:
            rows.append(
                Row(
                    "export",
                    f"export sessions --format csv --out, {n:,} sessions (SQLite, one run)",
                    s["s"],
                    "sqlite3 SELECT of the same columns + csv.writer to a file",
                    r["s"],
                    f"<= {TARGET:g}x",
                    r["s"] * TARGET,
                )
            )
        added = (s["after_kb"] - s["before_kb"]) / 1024
        memory.append(
            f"{n:,} rows: peak {s['after_kb'] / 1024:.0f} MB RSS, {added:+.1f} MB over the "
            f"{s['before_kb'] / 1024:.0f} MB before the export (raw: "
            f"{(r['after_kb'] - r['before_kb']) / 1024:+.1f} MB)"
        )
        facts[f"per row, {n:,} sessions"] = (
            f"{s['s'] / n * 1e6:.0f} us through the store, {r['s'] / n * 1e6:.1f} us raw "
            "(one run each, child process)"
        )
    facts["peak memory (child process, VmHWM)"] = "; ".join(memory)
    facts["data"] = (
        "fill.py: 92 % verified with one run each, 3 checks per run, a finding per run "
        "not delivered or inconclusive"
    )
    return Result(rows, facts)


def _same_rows(subject_csv: Path, raw_csv: Path, n: int) -> None:
    """Both files hold the header and one line per session, with the same ids in order."""
    with (
        subject_csv.open(encoding="utf-8", newline="") as a,
        raw_csv.open(encoding="utf-8", newline="") as b,
    ):
        ids_a = [r[0] for r in csv.reader(a)][1:]
        ids_b = [r[0] for r in csv.reader(b)][1:]
    assert len(ids_a) == n and ids_a == ids_b, (len(ids_a), len(ids_b), ids_a[:3], ids_b[:3])
