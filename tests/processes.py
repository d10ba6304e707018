"""Searches in child processes, for the tests of interruption, resume and several processes on one study.

Each runs `tune` on the replay evaluator (recorded H200 measurements, a simulated GPU delay), so it can be killed at
any point like a real search. ``pause_after=N`` makes its evaluator stop answering at the candidate after the N-th
(it writes a marker first and then sleeps until it is signalled): a search paused so cannot reach its target, so a
signal sent after the marker, or after its first measured trial, surely lands in the middle of it, however loaded
the machine is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa

from autotune.results import studies
from autotune.results.storage import resolve_url
from autotune.spaces import config_key

SEARCH_SCRIPT = textwrap.dedent(
    """
    import faulthandler, os, signal, sys, time
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a search that hangs shows where (`finish`)
    # Ctrl-C as in a terminal, also where the tests run in the background (a shell's `&` ignores SIGINT, and
    # Python then never turns it into KeyboardInterrupt).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pathlib import Path
    from autotune.tuning.evaluation import RecordedMeasurements, ReplayEvaluator
    from autotune.tuning.search_report import SearchSettings
    from autotune.tuning.tune import tune

    recording, db, trials, seed, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    pause_after, marker = int(sys.argv[6]), Path(sys.argv[7]) / f"paused-{os.getpid()}"

    class Paused(ReplayEvaluator):
        def submit(self, config):
            if 0 <= pause_after <= self.submitted:
                marker.touch()
                while True:
                    time.sleep(1)
            return super().submit(config)

    rec = RecordedMeasurements.load(recording)
    tune("gemm", rec.shape, trials=trials, db=db, seed=seed, evaluator=Paused(rec, delay_s=delay),
         template_hash=rec.template_hash, domains=rec.domains,
         settings=SearchSettings(trials=trials, heartbeat_s=1, refresh_s=0.2, in_flight=4))
    print("done")
    """
)


def start_search(tmp_path: Path, recording: Path, db: str, trials: int, seed: int, delay: float = 0.02,
                 pause_after: int | None = None) -> subprocess.Popen:  # fmt: skip
    script = tmp_path / "search.py"
    script.write_text(SEARCH_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent.parent), *sys.path]))
    args = [str(recording), db, str(trials), str(seed), str(delay), str(-1 if pause_after is None else pause_after)]
    return subprocess.Popen(
        [sys.executable, str(script), *args, str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def paused(tmp_path: Path, proc: subprocess.Popen) -> bool:
    """Whether ``proc`` (started with ``pause_after``) has stopped at its pause."""
    return (tmp_path / f"paused-{proc.pid}").exists()


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Output of a search process that ends within ``timeout``; one that hangs fails with its threads' stacks."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # faulthandler prints every thread's stack to stderr
        time.sleep(2)
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"search process still running {timeout:.0f} s later; its stacks:\n{err[-6000:]}")


def measured(study: optuna.Study) -> dict[int, tuple]:
    return {t.number: (config_key(t.params), t.state, t.value) for t in study.trials if studies.is_measured(t)}


def repeated(study: optuna.Study) -> int:
    """Measured trials of a configuration measured before in the study."""
    keys = [key for key, _, _ in measured(study).values()]
    return len(keys) - len(set(keys))


def measured_now(db: str) -> int:
    try:
        return len(measured(only_study(db)))
    except Exception:  # not created yet, or being written
        return 0


def only_study(db: str) -> optuna.Study:
    (summary,) = optuna.get_all_study_summaries(resolve_url(db))
    return optuna.load_study(study_name=summary.study_name, storage=resolve_url(db))


def clean_postgres() -> str:
    """The test server's URL, its database emptied for this test; skips the test where there is none."""
    url = os.environ.get("AUTOTUNE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("no PostgreSQL server: .ci/run starts one and sets AUTOTUNE_TEST_POSTGRES_URL")
    engine = sa.create_engine(resolve_url(url))
    with engine.begin() as conn:
        conn.execute(sa.text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    return url
