"""The ``autotune`` command line (typer + rich).

Every failure a user can cause or meet — a typo, a bad shape, no GPU, an unusable database — ends as one line
``error: …`` on stderr and a non-zero exit status, never a traceback (see `_Group.main`).
"""

from __future__ import annotations

import json
import sys
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from autotune.cli_output import console, describe_config, print_report, progress_bar
from autotune.errors import AutotuneError, InvalidArgument
from autotune.results.storage import Database, resolve_url
from autotune.spaces import get_space, kernel_names
from autotune.spaces.optuna_mapping import config_of
from autotune.tuning.samplers import DEFAULT_SAMPLER, SAMPLERS, check_seed, make_sampler
from autotune.tuning.tune import check_trials, tune

err_console = Console(stderr=True, highlight=False)


def _fail(message: str, code: int) -> None:
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    sys.exit(code)


def _exception_classes(*names: str) -> tuple[type[BaseException], ...]:
    """typer ≥ 0.2x vendors click (typer.exceptions); older typer uses click itself: catch whichever exists."""
    found: list[type[BaseException]] = []
    for module_name in ("typer.exceptions", "click", "click.exceptions"):
        try:
            module = __import__(module_name, fromlist=["_"])
        except ImportError:
            continue
        found += [getattr(module, n) for n in names if isinstance(getattr(module, n, None), type)]
    return tuple(dict.fromkeys(found))


_USAGE_ERRORS = _exception_classes("TyperException", "ClickException")
_ABORTS = _exception_classes("Abort")


class _Group(TyperGroup):
    """Runs commands non-standalone so that every error is reported here, the same way."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:  # fmt: skip
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except AutotuneError as exc:
            _fail(str(exc), exc.exit_code)
        except _USAGE_ERRORS as exc:
            code = getattr(exc, "exit_code", 2) or 2
            # Bare `autotune`: the help is the answer, not an error (by name: typer vendors its own click).
            if type(exc).__name__ == "NoArgsIsHelpError":
                help_text = exc.format_message()  # type: ignore[attr-defined]
                if help_text:  # plain click hands the help back; typer's rich help has printed it already
                    console.print(help_text, markup=False, highlight=False)
                sys.exit(code)
            _fail(exc.format_message(), code)  # type: ignore[attr-defined]
        except (KeyboardInterrupt, *_ABORTS):
            _fail("interrupted; finished trials are stored: run the same command again to resume", 130)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Find the fastest configuration of CUDA kernels by search, and keep it for run time.",
)

DB_HELP = "database: a path or a SQLAlchemy URL (default: $AUTOTUNE_DB, else studies/autotune.db)"


@app.command()
def search(
    kernel: Optional[str] = typer.Argument(None, help="kernel to tune: " + ", ".join(kernel_names())),
    trials: int = typer.Option(200, "--trials", "-n", help="measured trials the study holds at the end"),
    dtype: Optional[str] = typer.Option(
        None, help="element type: float32, float16, bfloat16 (default: the kernel's first)"
    ),
    shape: Optional[List[str]] = typer.Option(
        None, "--shape", "-s", help="problem shape, e.g. 4096x4096x4096 or 4096,4096,4096; repeat for several"
    ),
    shapes: Optional[str] = typer.Option(None, "--shapes", help="a file of shapes to tune, one per line"),
    shapes_from: Optional[str] = typer.Option(
        None, "--shapes-from", help="tune the calls recorded by autotune.record() (shapes.json)"
    ),
    from_study: Optional[str] = typer.Option(
        None, "--from", help="warm-start a new study with the leaders of this study (name or unique prefix)"
    ),
    warm_start: bool = typer.Option(
        True, "--warm-start/--no-warm-start", help="seed a new study with the leaders of related studies"
    ),
    sampler: str = typer.Option(DEFAULT_SAMPLER, help="search strategy: " + " | ".join(SAMPLERS)),
    seed: Optional[int] = typer.Option(None, help="seed of the sampler and of the random inputs"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    timeout: Optional[float] = typer.Option(
        None, help="seconds a candidate may take before it counts as hung (default: 20x the slowest good one, ≥ 10)"
    ),
    hot_cache: bool = typer.Option(False, "--hot-cache", help="do not flush the L2 cache between timed runs"),
    race: bool = typer.Option(
        True, "--race/--no-race", help="time a candidate over twice the fastest so far by two runs only"
    ),
    top: int = typer.Option(10, help="rows of the final table"),
    replay: Optional[str] = typer.Option(
        None, help="simulate: answer from a recorded measurement file instead of the GPU (try samplers anywhere)"
    ),
    profile: bool = typer.Option(False, "--profile", help="print where the time went: compile, queue, GPU, Optuna"),
    devices: Optional[str] = typer.Option(
        None, help="GPUs that measure: all, or numbers like 0,1 (one study per GPU model; default: GPU 0)"
    ),
    compile_batch: int = typer.Option(
        1, "--compile-batch", help="candidates waiting together share one nvcc front end, up to this many"
    ),
) -> None:
    """Search the configurations of KERNEL and store the fastest valid one for this GPU.

    Several shapes (--shape repeated, --shapes, --shapes-from) are tuned in turn; each new study starts from
    the leaders of the shapes tuned before it. A range (--shape 1-8192x4096x4096) is tuned as its buckets, the
    --trials split over them."""
    from autotune.tuning.multishape import plan

    problems = plan(kernel, dtype, shape, shapes, shapes_from)  # every problem checked before any is tuned
    check_trials(trials)
    make_sampler(sampler, seed)  # an unknown sampler is refused before any work
    groups: list[Any] = [None]
    if devices is not None and replay is not None:
        raise InvalidArgument("--devices and --replay exclude each other: a replay answers from its recording, "
                              "not from GPUs")  # fmt: skip
    ranged = next((p.range_of for p in problems if p.range_of), None)
    if ranged is not None and replay is not None:
        raise InvalidArgument(f"--replay answers the one shape it recorded; the range {ranged} has several")
    if devices is not None:
        from autotune.tuning.evaluation.multi import host_devices

        groups = host_devices(devices)  # GPUs of one model share a study; other models get their own
    ranges_shown: set[str] = set()
    handoff = None
    if len(problems) > 1 and replay is None:  # used where a search measures on one GPU
        from autotune.tuning.evaluation.worker_start import WorkerHandoff

        handoff = WorkerHandoff()  # one GPU worker for every shape, set up again for each, not started anew
    try:
        for problem, group in [(p, g) for p in problems for g in groups]:
            space = get_space(problem.kernel, dtype=problem.dtype)
            shape_t = problem.shape
            default_label = "(replay)" if replay else space.format_shape(space.default_shape)
            label = space.format_shape(shape_t) if shape_t else default_label
            budget = problem.trials(trials)
            if problem.range_of is not None and problem.range_of not in ranges_shown:
                ranges_shown.add(problem.range_of)
                console.print(f"range {problem.range_of}: {problem.buckets} buckets (its ends and the powers of two "
                              f"between), {budget} trials each, the ends first, then each gap's middle",
                              soft_wrap=True)  # fmt: skip
            bar, show = progress_bar(f"{space.name} {label} {space.dtype}", budget, space.metric_unit)
            try:
                # The kernel as the user named it: a file reference (./my_space.py:MySpace) is how tune() and the
                # GPU workers find a kernel of one's own; its `name` resolves only among the library's kernels.
                report = tune(
                    problem.kernel, shape_t, trials=budget, dtype=problem.dtype, db=db, sampler=sampler, seed=seed,
                    timeout_s=timeout, hot_cache=hot_cache, on_progress=show, replay=replay, warm_start=warm_start,
                    from_study=from_study, devices=group, racing=race, compile_batch=compile_batch,
                    handoff=handoff,
                )  # fmt: skip
            finally:
                if bar.live.is_started:
                    bar.stop()
            print_report(report, top, get_space(problem.kernel, dtype=report.dtype))  # a replay's dtype is its own
            if profile:
                for line in report.profile.lines():
                    console.print(line, markup=False, soft_wrap=True)
            console.print(f"stored in {resolve_url(db).removeprefix('sqlite:///')}")
    finally:
        if handoff is not None:
            handoff.close()


@app.command()
def worker(
    study: str = typer.Argument(..., help="name of the study to join (autotune studies lists them)"),
    db: str = typer.Option(..., help="the shared database, e.g. postgresql://user@host/autotune"),
    trials: Optional[int] = typer.Option(None, "--trials", "-n", help="target trials (default: the study's)"),
    wait: float = typer.Option(0.0, help="seconds to wait for the study to appear (a search starting elsewhere)"),
    seed: Optional[int] = typer.Option(None, help="seed of this host's sampler and random inputs"),
    timeout: Optional[float] = typer.Option(None, help="seconds a candidate may take before it counts as hung"),
    device: int = typer.Option(0, help="CUDA device ordinal of this host's GPU"),
    top: int = typer.Option(10, help="rows of the final table"),
    replay: Optional[str] = typer.Option(None, help="simulate: answer from a recorded measurement file"),
) -> None:
    """Join STUDY from this host: measure its candidates on this host's GPU until it holds its target trials."""
    from autotune.tuning.join import join

    if wait < 0:
        raise InvalidArgument(f"--wait must not be negative, got {wait}")
    check_seed(seed)  # before the GPU worker is started with it
    bar, show = progress_bar(f"{study} (worker)", trials or 1, "")
    try:
        report = join(study, db=db, trials=trials, seed=seed, timeout_s=timeout, wait_s=wait, replay=replay,
                      device_ordinal=device, on_progress=show)  # fmt: skip
    finally:
        if bar.live.is_started:
            bar.stop()
    print_report(report, top)


@app.command()
def best(
    kernel: Optional[str] = typer.Argument(None, help="only this kernel"),
    device: Optional[str] = typer.Option(None, help="only this device name, e.g. 'NVIDIA H200'"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """List the stored best configurations (what the runtime dispatcher uses)."""
    ref = kernel
    if kernel is not None:
        kernel = get_space(kernel).name  # unknown kernel: one clear line; ./my_space.py:MySpace → its name
    database = Database(resolve_url(db), create=False)
    try:
        rows = database.best(kernel=kernel, device_name=device)
        code_hashes = database.code_hashes()
    finally:
        database.close()
    current: dict[tuple[str, str], str | None] = {}
    for key in {(r.kernel, r.dtype) for r in rows}:
        try:
            current[key] = get_space(ref if ref and ":" in ref else key[0], dtype=key[1]).template_hash()
        except AutotuneError:
            current[key] = None
    if as_json:
        data = [dict(r.to_dict(), stale=current.get((r.kernel, r.dtype)) != r.template_hash,
                     code_hash=code_hashes.get(r.id)) for r in rows]  # fmt: skip
        console.print_json(json.dumps(data))
        return
    if not rows:
        console.print("no tuned configurations stored" + (f" for {kernel}" if kernel else ""))
        return
    for r in rows:
        stale = ""
        if current.get((r.kernel, r.dtype)) != r.template_hash:  # the dispatcher may still use it (code_check)
            stale = (" [yellow](the template has changed: used where its machine code has not)[/]" if
                     r.id in code_hashes else " [yellow](stale: the template has changed)[/]")  # fmt: skip
        vs_default = f", {r.default_time_ms / r.time_ms:.2f}x the default" if r.default_time_ms else ""
        console.print(
            f"[bold]{r.kernel} {r.shape}[/] {r.dtype} on {escape(r.device_name)} (cc {r.compute_capability}): "
            f"{r.time_ms:.4f} ms = {r.metric:.2f} {r.metric_unit}{vs_default}",
            soft_wrap=True,
        )
        described = describe_config(ref if ref and ":" in ref else r.kernel, r.dtype, r.config)
        console.print(f"    {described}", markup=False, soft_wrap=True)
        console.print(
            f"    template {r.template_hash[:8]}{stale}, "
            f"driver {r.driver_version}, nvcc {r.nvcc_version}, trial {r.trial_number} of {escape(r.study_name)}, "
            f"{r.updated_at:%Y-%m-%d %H:%M} UTC",
            soft_wrap=True,
        )


def _reader(db: Optional[str]) -> Any:
    from autotune.results.summary import open_reader

    return open_reader(resolve_url(db))


_NOT_OURS = "not a study of autotune (it records no kernel, shape or device: Optuna's own, say)"


def _failures_text(failed: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in failed.items()) or "0"


@app.command("studies")
def list_studies(
    kernel: Optional[str] = typer.Option(None, help="only this kernel"),
    device: Optional[str] = typer.Option(None, help="only this device name"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """One line per study: trials complete / failed / rejected, best time and metric, speedup, last update."""
    if kernel is not None:
        kernel = get_space(kernel).name  # ./my_space.py:MySpace → the name its studies are stored under
    reader = _reader(db)
    try:
        if not reader.names():
            raise InvalidArgument(f"no studies in {reader.database.url.removeprefix('sqlite:///')}")
        rows = reader.summaries(kernel=kernel, device=device)
    finally:
        reader.close()
    if as_json:
        console.print_json(json.dumps([r.to_dict() for r in rows]))
        return
    if not rows:
        console.print(f"no studies of {kernel or 'any kernel'} on {device or 'any device'}")
        return
    for r in rows:
        best = f"{r.best_ms:.4f} ms = {r.best_metric:.2f} {r.metric_unit}" if r.best_ms else "no complete trial"
        speed = f", {r.speedup:.2f}x default" if r.speedup else ""
        when = f"{r.last_update:%Y-%m-%d %H:%M}" if r.last_update else "-"
        console.print(f"[bold]{escape(r.name)}[/]", soft_wrap=True)
        if not r.by_autotune:
            console.print(f"    {_NOT_OURS}: {r.trials} trials; updated {when}", markup=False, soft_wrap=True)
            continue
        console.print(
            f"    {r.kernel} {r.shape} on {escape(r.device or '?')}: {r.complete} complete, failed "
            f"{_failures_text(r.failed)}, {r.rejected} rejected; best {best}{speed}; updated {when}",
            soft_wrap=True,
        )


@app.command()
def show(
    study: str = typer.Argument(..., help="study name or a unique prefix of it"),
    top: int = typer.Option(10, help="how many of the best trials"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """The best trials of a study with their parameters and resources, and its failures by reason."""
    if top < 1:
        raise InvalidArgument(f"--top must be at least 1, got {top}")
    reader = _reader(db)
    try:
        details = reader.details(reader.resolve(study), top)
    finally:
        reader.close()
    if as_json:
        console.print_json(json.dumps(details.to_dict()))
        return
    s = details.summary
    if not s.by_autotune:
        console.print(f"[bold]{escape(s.name)}[/]: {_NOT_OURS}; {s.trials} trials", soft_wrap=True)
        return
    console.print(f"[bold]{escape(s.name)}[/]: {s.kernel} {s.shape} {s.dtype} on {escape(s.device or '?')}",
                  soft_wrap=True)  # fmt: skip
    console.print(
        f"{s.complete} complete, failed {_failures_text(s.failed)}, {s.rejected} rejected, {s.duplicates} duplicates, "
        f"{s.interrupted} interrupted; GPU worker restarts {s.worker_restarts}", soft_wrap=True,
    )  # fmt: skip
    try:
        space = get_space(s.kernel, dtype=s.dtype)
    except AutotuneError:
        space = None
    table = Table(show_edge=False, pad_edge=False)
    for col in ("trial", "time ms", s.metric_unit or "metric", "regs", "smem B", "compile s"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("configuration", ratio=1)
    for t in details.top:
        table.add_row(
            f"{t.number}{'' if t.retimed else '*'}", f"{t.time_ms:.4f}", f"{(t.metric or 0):.2f}",
            str(t.registers or ""), str(t.shared_bytes or ""), "" if t.compile_s is None else f"{t.compile_s:.2f}",
            escape(space.describe(config_of(space, t.params)) if space else json.dumps(t.params)),
        )  # fmt: skip
    console.print(table)
    console.print("* not re-timed with the leaders")
    if details.failures:
        console.print("failures by reason:")
        for kind, f in details.failures.items():
            console.print(f"  {kind} ({f['count']}), e.g. trial {f['trial']}: {f['example']}", markup=False,
                          soft_wrap=True)  # fmt: skip


@app.command()
def report(
    study: str = typer.Argument(..., help="study name or a unique prefix of it"),
    out: str = typer.Option(..., "--out", "-o", help="directory for index.html and the PNGs"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """Write a study's summary page and plots (history, importances, metric per parameter) to a directory."""
    from pathlib import Path

    from autotune.results.report import write_report

    reader = _reader(db)
    try:
        files = write_report(reader, reader.resolve(study), Path(out))
    finally:
        reader.close()
    console.print(f"wrote {', '.join(str(f) for f in files)}", markup=False, soft_wrap=True)


@app.command()
def dashboard(
    port: int = typer.Option(8080, help="port to listen on"),
    host: str = typer.Option("127.0.0.1", help="address to listen on"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """Serve the studies in optuna-dashboard (needs: pip install 'autotune\\[dashboard]')."""
    # The bracket is escaped: typer renders help as rich markup, where [dashboard] alone would vanish as a tag.
    import socket

    try:
        import optuna_dashboard
    except ImportError:
        raise InvalidArgument("the dashboard needs optuna-dashboard: pip install 'autotune[dashboard]'") from None
    if not 0 < port < 65536:
        raise InvalidArgument(f"--port must be between 1 and 65535, got {port}")
    reader = _reader(db)  # the database must exist and hold studies
    try:
        if not reader.names():
            raise InvalidArgument(f"no studies in {reader.database.url.removeprefix('sqlite:///')}")
    finally:
        reader.close()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InvalidArgument(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    url = resolve_url(db)
    console.print(f"optuna-dashboard on http://{host}:{port}/dashboard for {url} (Ctrl-C to stop)", markup=False,
                  soft_wrap=True)  # fmt: skip
    optuna_dashboard.run_server(url, host=host, port=port)


@app.command("export")
def export_configs(
    out: str = typer.Option(..., "--out", "-o", help="JSON file to write"),
    device: Optional[str] = typer.Option(None, help="only this device name"),
    kernel: Optional[str] = typer.Option(None, help="only this kernel"),
    with_binaries: bool = typer.Option(
        False, "--with-binaries", help="carry each config's cubin for its device (hosts without nvcc run it at once)"
    ),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """Write the stored best configurations to a JSON file (for machines that did not tune)."""
    from pathlib import Path

    from autotune.results import interchange

    space = get_space(kernel) if kernel is not None else None  # ./my_space.py:MySpace → its rows, its cubins
    database = Database(resolve_url(db), create=False)
    try:
        rows = database.best(kernel=space.name if space else None, device_name=device)
        code_hashes = database.code_hashes()
    finally:
        database.close()
    target = Path(out)
    if not target.parent.is_dir():
        raise InvalidArgument(f"cannot write {target}: directory {target.parent} does not exist")
    data = interchange.export(rows, with_binaries=with_binaries, space=space, code_hashes=code_hashes)
    try:
        target.write_text(json.dumps(data, indent=1) + "\n")
    except OSError as exc:
        raise InvalidArgument(f"cannot write {target}: {exc.strerror}") from None
    carried = ""
    if with_binaries:
        n = sum("binary" in c for d in data["devices"] for c in d["configs"])
        # A row names its kernel, not the file of a kernel of one's own: its cubin needs --kernel FILE.py:CLASS.
        own = sum(r.kernel not in kernel_names() and not (space and r.kernel == space.name) for r in rows)
        notes = [f"{len(rows) - n - own} of stale templates without"] if len(rows) - n > own else []
        notes += [f"{own} of kernels of your own without: name one by --kernel FILE.py:CLASS"] if own else []
        carried = f", {n} with their cubin" + (f" ({'; '.join(notes)})" if notes else "")
    console.print(f"exported {len(rows)} configurations of {len(data['devices'])} devices{carried} to {target}",
                  markup=False, soft_wrap=True)  # fmt: skip


@app.command("import")
def import_configs(
    file: str = typer.Argument(..., help="JSON file written by autotune export"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace stored rows of the same key"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
) -> None:
    """Read best configurations from a JSON file; a malformed file is refused whole."""
    from pathlib import Path

    from autotune.results import interchange

    entries, binaries = interchange.read_all(Path(file))  # every entry checked before anything is written
    database = Database(resolve_url(db))
    try:
        interchange.check_devices(entries, database.devices())
        counts = database.import_entries(entries, overwrite=overwrite)
    finally:
        database.close()
    cached = interchange.store_binaries(binaries)
    console.print(
        f"imported {len(entries)} configurations: {counts['added']} added, {counts['replaced']} replaced, "
        f"{counts['kept']} already stored and kept" + ("" if overwrite else " (--overwrite replaces them)")
        + (f"; {cached} cubins put in the cache" if cached else ""),
        markup=False,
        soft_wrap=True,
    )


@app.command("new-kernel")
def new_kernel(
    name: str = typer.Argument(..., help="the kernel's name (a C identifier), e.g. my_add"),
    directory: str = typer.Option(".", "--dir", help="where to write NAME.cu and NAME_space.py"),
) -> None:
    """Write a kernel of your own to start from: a template and its space that already search and dispatch."""
    from pathlib import Path

    from autotune import skeleton

    files = skeleton.write(name, Path(directory))
    where = f"./{files[1].name}" if Path(directory).resolve() == Path.cwd() else str(files[1])
    ref = f"{where}:{skeleton.class_name(name)}"
    console.print(f"wrote {', '.join(str(f) for f in files)}\nnext: autotune search {ref} --trials 20",
                  markup=False, soft_wrap=True)  # fmt: skip


def main() -> None:
    app()
