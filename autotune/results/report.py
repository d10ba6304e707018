"""`autotune report`: a study's plots and summary as files, through Optuna's visualization module.

    DIR/index.html              summary, top configurations, failures, and the interactive plots
    DIR/history.png             optimisation history (kernel time per measured trial, best so far)
    DIR/importances.png         parameter importances (fANOVA) for the kernel time
    DIR/metric_vs_params.png    the metric (TFLOP/s or GB/s) against each parameter

Only measured trials are plotted (not rejected proposals or duplicates). Needs plotly and matplotlib
(``pip install 'autotune[report]'``).
"""

from __future__ import annotations

import html
import warnings
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.trial import TrialState

from autotune.errors import InvalidArgument
from autotune.results import studies
from autotune.results.summary import Reader, StudyDetails


def _require(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise InvalidArgument(f"report needs {module}: pip install 'autotune[report]'") from None


def measured_study(study: optuna.Study) -> optuna.Study:
    """An in-memory copy holding only the measured, complete trials (what the plots are about)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    copy = optuna.create_study(direction="minimize", study_name=study.study_name)
    copy.add_trials([t for t in study.get_trials(states=(TrialState.COMPLETE,)) if studies.is_measured(t)])
    return copy


def write_report(reader: Reader, name: str, out: Path, top: int = 10) -> list[Path]:
    _require("plotly")
    _require("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    details = reader.details(name, top)
    study = measured_study(reader.study(name))
    if len(study.trials) < 2:
        raise InvalidArgument(f"study {name} has {len(study.trials)} complete measured trials: nothing to plot")
    if not out.parent.is_dir():
        raise InvalidArgument(f"cannot write to {out}: directory {out.parent} does not exist")
    if out.exists() and not out.is_dir():
        raise InvalidArgument(f"cannot write the report to {out}: it is a file (--out names a directory)")
    try:
        out.mkdir(exist_ok=True)
        return _write(details, study, out)
    except OSError as exc:  # a read-only or full disk: the one line the CLI promises, not a traceback
        raise InvalidArgument(f"cannot write the report to {out}: {exc.strerror or exc}") from None


def _write(details: StudyDetails, study: optuna.Study, out: Path) -> list[Path]:
    from optuna.visualization import matplotlib as mpl_vis

    unit = details.summary.metric_unit or "metric"

    def metric(t: optuna.trial.FrozenTrial) -> float:
        return float(t.user_attrs.get(studies.METRIC, float("nan")))

    plots: list[tuple[str, str, Callable[[], Any], Callable[[], Any]]] = [
        ("history", "Optimisation history (kernel time, ms)",
         lambda: optuna.visualization.plot_optimization_history(study, target_name="time ms"),
         lambda: mpl_vis.plot_optimization_history(study, target_name="time ms")),
        ("importances", "Parameter importances for the kernel time",
         lambda: optuna.visualization.plot_param_importances(study, target_name="time ms"),
         lambda: mpl_vis.plot_param_importances(study, target_name="time ms")),
        ("metric_vs_params", f"{unit} against each parameter",
         lambda: optuna.visualization.plot_slice(study, target=metric, target_name=unit),
         lambda: mpl_vis.plot_slice(study, target=metric, target_name=unit)),
    ]  # fmt: skip
    written, sections, notes = [], [], []
    import matplotlib.pyplot as plt

    for stem, title, interactive, static in plots:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optuna's matplotlib backend is marked experimental
            try:
                figure = interactive()
                axes = static()
            except (ValueError, RuntimeError) as exc:  # e.g. importances of a study whose parameters never vary
                notes.append(f"{title}: not drawn ({exc})")
                continue
        sections.append(f"<h2>{html.escape(title)}</h2>" + figure.to_html(full_html=False, include_plotlyjs=not sections))
        first = axes.flat[0] if hasattr(axes, "flat") else axes
        png = out / f"{stem}.png"
        first.figure.set_size_inches(max(first.figure.get_size_inches()[0], 10), 6)
        first.figure.savefig(png, dpi=110, bbox_inches="tight")
        plt.close(first.figure)
        written.append(png)
    index = out / "index.html"
    index.write_text(_page(details, sections, notes))
    written.insert(0, index)
    return written


def _page(details: StudyDetails, sections: list[str], notes: list[str]) -> str:
    s = details.summary
    e = html.escape
    speed = f"{s.speedup:.2f}x the default configuration" if s.speedup else "no default configuration measured"
    rows = "".join(
        f"<tr><td>{t.number}{'' if t.retimed else '*'}</td><td>{t.time_ms:.4f}</td>"
        f"<td>{(t.metric or 0):.2f}</td><td>{t.registers or ''}</td><td>{t.shared_bytes or ''}</td>"
        f"<td>{'' if t.compile_s is None else f'{t.compile_s:.2f}'}</td>"
        f"<td>{e(' '.join(f'{k}={v}' for k, v in t.params.items()))}</td></tr>"
        for t in details.top
    )
    failures = "".join(
        f"<tr><td>{e(kind)}</td><td>{f['count']}</td><td>{e(f['example'])}</td></tr>"
        for kind, f in details.failures.items()
    ) or "<tr><td colspan=3>none</td></tr>"
    note_html = "".join(f"<p><i>{e(n)}</i></p>" for n in notes)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{e(s.name)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}} td,th{{padding:2px 8px;text-align:left}}
table{{border-collapse:collapse}} tr:nth-child(even){{background:#f4f4f4}}</style></head><body>
<h1>{e(s.name)}</h1>
<p>{e(s.kernel)} at {e(s.shape)} on {e(s.device)}. Best: {(s.best_ms or 0):.4f} ms =
{(s.best_metric or 0):.2f} {e(s.metric_unit)} (trial {s.best_trial}), {e(speed)}.
Measured trials: {s.complete} complete, {sum(s.failed.values())} failed; {s.rejected} proposals rejected before
compiling, {s.duplicates} duplicates answered from the record; GPU worker restarts: {s.worker_restarts}.</p>
<h2>Top configurations</h2>
<table><tr><th>trial</th><th>time ms</th><th>{e(s.metric_unit)}</th><th>registers</th><th>shared B</th>
<th>compile s</th><th>configuration</th></tr>{rows}</table>
<p>* not re-timed with the leaders: time from the search itself.</p>
<h2>Failures by reason</h2>
<table><tr><th>kind</th><th>trials</th><th>example</th></tr>{failures}</table>
{note_html}{''.join(sections)}
</body></html>
"""
