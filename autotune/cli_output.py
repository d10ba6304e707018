"""What `autotune search` and `autotune worker` print: the progress bar while they run and the table of the
leaders at the end (kept apart from the commands' argument handling in `autotune.cli`)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autotune.errors import AutotuneError
from autotune.spaces import get_space
from autotune.tuning.search_report import Progress as SearchProgress
from autotune.tuning.search_report import SearchReport

console = Console(highlight=False)


def progress_bar(label: str, trials: int, unit: str) -> tuple[Progress, Any]:
    """A progress bar and the `on_progress` callback that drives it. The bar starts with the first progress
    event: checks that fail before it print only their error."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[best]}"),
        console=console,
    )
    task = bar.add_task(label, total=trials, best="")

    def show(p: SearchProgress) -> None:
        if not bar.live.is_started:
            bar.start()
        best = ""
        if p.best is not None:
            best = f"best {p.best.time_ms:.3f} ms = {p.best.metric:.1f} {unit}"
        extra = f"  rejected {p.rejected}" if p.rejected else ""
        extra += f"  failed {p.failures}" if p.failures else ""
        bar.update(task, total=p.target, completed=min(p.measured, p.target), best=best + extra)

    return bar, show


def describe_config(kernel: str, dtype: str, config: dict) -> str:
    """A stored configuration in its space's words (raw JSON where the kernel or dtype is unknown here)."""
    try:
        return get_space(kernel, dtype=dtype).describe(config)
    except (AutotuneError, KeyError):
        return json.dumps(config)


def print_report(report: SearchReport, top: int = 10, space: Any = None) -> None:
    """The leaders of a search; ``space`` describes the configurations (default: the library kernel of the
    report's name, else raw JSON: a kernel of one's own is known by its file reference, not its name)."""
    if space is None:
        try:
            space = get_space(report.kernel, dtype=report.dtype)
        except AutotuneError:
            space = None
    describe = space.describe if space is not None else (lambda c: json.dumps(c))
    d = report.device
    console.print(
        f"study [bold]{report.study_name}[/] on {d.name} (cc {d.cc}, driver {d.driver_version})",
        soft_wrap=True,
    )
    table = Table(show_edge=False, pad_edge=False)
    for col in ("#", "trial", "time ms", report.metric_unit, "regs", "vs default", "spread"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("configuration", ratio=1)
    default_ms = report.default.time_ms if report.default else None
    for i, r in enumerate(report.ranking[:top], 1):
        table.add_row(
            str(i),
            str(r.trial_number) + ("" if r.retimed else "*"),
            f"{r.time_ms:.4f}",
            f"{r.metric:.2f}",
            str(r.registers or ""),
            f"{default_ms / r.time_ms:.2f}x" if default_ms else "",
            f"{100 * r.spread:.2f}%" if r.spread is not None else "",
            escape(describe(r.config)),
        )
    console.print(table)
    if any(not r.retimed for r in report.ranking[:top]):
        console.print("* not re-timed with the leaders: time from the search itself")
    failures = ", ".join(f"{k} {v}" for k, v in sorted(report.failures.items())) or "none"
    console.print(
        f"measured {report.measured_total} of {report.target} ({report.measured_now} this run); "
        f"proposals repaired to a valid configuration {report.repaired_now}, moved off a measured one "
        f"{report.moved_now}; "
        f"rejected before compiling {report.rejected_now} this run ({report.rejected_total} in all); "
        f"duplicates answered from the record {report.duplicates_now}; "
        f"raced (timed twice only, clearly slower) {report.profile.raced}; failures {failures}; "
        f"GPU worker restarts {report.restarts}; {report.wall_s:.1f} s",
        soft_wrap=True,
    )
    if report.seeds:
        sources = sorted({s.rsplit("#", 1)[0] for s in report.seeds})
        console.print(f"warm start: {len(report.seeds)} seeds from {', '.join(sources)}", markup=False, soft_wrap=True)
    for kind, example in sorted(report.failure_examples.items()):
        console.print(f"  {kind}: {example}", soft_wrap=True, markup=False)
    if report.stopped_early:
        console.print(f"stopped early: {report.stopped_early}", markup=False)
    best = report.best
    if best is None:
        console.print("[yellow]no configuration passed validation: nothing stored[/]")
        return
    line = f"[bold]best[/] trial {best.trial_number}: {best.time_ms:.4f} ms = {best.metric:.2f} {report.metric_unit}"
    if report.speedup is not None and report.default is not None:
        line += f", {report.speedup:.2f}x the default configuration ({report.default.time_ms:.4f} ms)"
    if report.rule is not None and report.rule is not report.default:
        line += (f", {report.rule.time_ms / best.time_ms:.2f}x the rule default for the shape, what runs untuned "
                 f"({report.rule.time_ms:.4f} ms)")  # fmt: skip
    console.print(line, soft_wrap=True)
