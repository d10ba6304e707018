"""Completion timeline of searches from their SQLite studies (session 2026-11-26c, call 4): when the 50th … 200th
measured trial finished, and the last trials to finish with their compile, queue and GPU seconds."""

import datetime as dt
import json
import sqlite3
import sys


def timeline(path: str, tail: int = 8) -> None:
    con = sqlite3.connect(path)
    rows = con.execute("select trial_id, number, datetime_start, datetime_complete from trials").fetchall()
    t0 = min(dt.datetime.fromisoformat(r[2]) for r in rows if r[2])
    at = lambda s: (dt.datetime.fromisoformat(s) - t0).total_seconds()  # noqa: E731
    m = {tid: json.loads(v) for tid, v in con.execute(
        "select trial_id, value_json from trial_user_attributes where key = 'measurement'")}
    done = sorted((r for r in rows if r[0] in m and r[3]), key=lambda r: r[3])
    asked = max(at(r[2]) for r in rows if r[2])
    marks = " ".join(f"{i}:{at(done[i - 1][3]):.1f}" for i in (50, 100, 150, 190, len(done)) if i <= len(done))
    print(f"{path}: {len(rows)} trials, {len(done)} measured, last asked at {asked:.1f} s; measured by s: {marks}")
    for r in done[-tail:]:
        x = m[r[0]]
        print(f"  #{r[1]:<4} asked {at(r[2]):5.2f} done {at(r[3]):5.2f}  compile {x.get('compile_s') or 0:5.2f}"
              f"  queue {x.get('queue_s') or 0:4.2f}  gpu {x.get('evaluate_s') or 0:4.2f}  raced {x.get('raced')}"
              f"  {'ok' if x['ok'] else x.get('reason')}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        timeline(p)
