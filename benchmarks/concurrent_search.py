"""Several processes searching one study at once: configurations measured twice, and trials past the target.

    python benchmarks/concurrent_search.py [--recording benchmarks/data/replay_gemm_h200_2048.json.gz]
        [--trials 300] [--processes 2,4] [--repeats 1] [--postgres postgresql://user@host/db]

Each run starts N processes (`autotune.tune` on the replay recording: recorded H200 measurements, no GPU, the
search's default settings) on one fresh database, all into the same study, and counts, once they are done:
the measured trials, those that repeat a configuration measured before in the study ("repeated"), and how
many the study holds beyond ``--trials`` ("over"). SQLite always; PostgreSQL with ``--postgres`` (or
$AUTOTUNE_TEST_POSTGRES_URL): each run creates a database of its own on that server and drops it after.
Prints one line per backend and process count.

Measured on a 2-core CPU machine (600 trials, the 2048^3 recording, 3 runs each; repeated / over):

    backend     processes   before claims          with claims (autotune.tuning.claims)
    SQLite      2           137-156 / 32-88        0 / 0
    SQLite      4           262-329 / 104-172      0 / 0
    PostgreSQL  2           127-153 / 27-40        0 / 0
    PostgreSQL  4           301-307 / 40-75        0 / 0
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import optuna  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from autotune.results import studies  # noqa: E402
from autotune.results.storage import resolve_url  # noqa: E402
from autotune.spaces import config_key  # noqa: E402

SEARCH = "from autotune.tuning.tune import tune; import sys; tune('gemm', trials=int(sys.argv[1]), db=sys.argv[2], " \
         "seed=int(sys.argv[3]), replay=sys.argv[4])"  # fmt: skip


def count(url: str, target: int) -> dict[str, int]:
    """Measured trials of the database's one study, repeats of a configuration, trials beyond the target."""
    (summary,) = optuna.get_all_study_summaries(url)
    study = optuna.load_study(study_name=summary.study_name, storage=url)
    keys = [config_key(t.params) for t in sorted(study.trials, key=lambda t: t.number) if studies.is_measured(t)]
    running = sum(t.state == optuna.trial.TrialState.RUNNING for t in study.trials)
    return {"measured": len(keys), "repeated": len(keys) - len(set(keys)), "over": max(0, len(keys) - target),
            "running": running}  # fmt: skip


def run(url: str, processes: int, trials: int, recording: str, seed: int) -> tuple[dict[str, int], float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", SEARCH, str(trials), url, str(seed + i), recording], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(processes)]  # fmt: skip
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"a search process failed:\n{err[-3000:]}")
    return count(url, trials), time.perf_counter() - start


def postgres_database(server_url: str) -> tuple[str, callable]:
    """A fresh database on the server of ``server_url``, and the function that drops it."""
    base = sa.engine.make_url(resolve_url(server_url))
    name = f"autotune_concurrent_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return base.set(database=name).render_as_string(hide_password=False), drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recording", default=str(ROOT / "benchmarks" / "data" / "replay_gemm_h200_2048.json.gz"))
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--processes", default="2,4")
    parser.add_argument("--repeats", type=int, default=1, help="runs per backend and process count")
    parser.add_argument("--postgres", default=os.environ.get("AUTOTUNE_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    backends = ["sqlite"] + (["postgresql"] if args.postgres else [])
    print(f"{args.trials} trials per study, recording {Path(args.recording).name}")
    print(f"{'backend':<11} {'procs':>5} {'run':>3} {'measured':>8} {'repeated':>8} {'over':>5} {'running':>7} "
          f"{'wall s':>7}")  # fmt: skip
    for backend in backends:
        for processes in (int(p) for p in args.processes.split(",")):
            for repeat in range(args.repeats):
                with tempfile.TemporaryDirectory() as tmp:
                    drop = None
                    if backend == "sqlite":
                        url = resolve_url(Path(tmp) / "shared.db")
                    else:
                        url, drop = postgres_database(args.postgres)
                    try:
                        c, wall = run(url, processes, args.trials, args.recording, seed=100 * repeat)
                    finally:
                        if drop is not None:
                            drop()
                print(f"{backend:<11} {processes:>5} {repeat:>3} {c['measured']:>8} {c['repeated']:>8} "
                      f"{c['over']:>5} {c['running']:>7} {wall:>7.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
