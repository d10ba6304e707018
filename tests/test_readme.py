"""The README's command lines (lines of its code blocks that call ``autotune ``) against the command line as built.

What this checks, and what it does not:

* every such line, usage synopses included (``autotune search KERNEL [--trials 200] ...``): its command exists
  and every ``--option`` it names is an option of that command;
* every concrete line (no placeholder such as KERNEL, ``[...]``, ``...`` or ``$VAR``): click parses it whole
  (options, their values) and the kernel, dtype and shapes it names resolve;
* the concrete lines run, in README order, in a scratch folder holding ``examples/`` (as the repository's root
  does) whose default database a replayed search filled. ``search`` lines run only on a machine without a GPU,
  where they must stop for the GPU alone (one ``error:`` line); on a GPU machine they are parsed, not run (each
  would tune for minutes), and the GPU tests cover searching.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from autotune.cli import app
from autotune.spaces import get_space
from autotune.tuning.multishape import plan

from conftest import assert_stopped_only_for_lack_of_gpu, has_gpu
from synthetic import record_every_config

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PLACEHOLDER = re.compile(r"\[|\.\.\.|\$|\b[A-Z]{3,}\b")  # KERNEL, STUDY, FILE.json, [--opt], gemm-...-, $AUTOTUNE_DB


def readme_commands() -> list[tuple[int, str]]:
    """(line number, command) for each line of a code block (fenced or indented) that calls autotune; a usage
    synopsis continued on the next lines (``[--seed N] ...``) is joined to its first line."""
    found: list[tuple[int, str]] = []
    fenced = continuing = False
    for number, line in enumerate(README.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced, continuing = not fenced, False
            continue
        code = line.strip() if fenced or line.startswith("    ") else ""
        code = code.split("&&")[-1].strip()  # `python3 -m pip install ... && autotune search gemm`
        if code.startswith("autotune "):
            found.append((number, code))
            continuing = True
        elif continuing and code.startswith("["):
            found[-1] = (found[-1][0], f"{found[-1][1]} {code}")
        else:
            continuing = False
    return found


def _group() -> Any:
    """The click group typer builds (typer >= 0.2x vendors its own click: no isinstance against `click`)."""
    return typer.main.get_command(app)


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


def _without_comment(code: str) -> str:
    return code.split(" #", 1)[0].strip()


def parse(args: list[str]) -> dict[str, Any]:
    """The parameters click makes of ``autotune ARGS`` (raises click's UsageError as the CLI would)."""
    group = _group()
    with typer.Context(group, info_name="autotune") as ctx:
        command = group.get_command(ctx, args[0])
        assert command is not None, f"no command {args[0]!r}"
        return command.make_context(args[0], list(args[1:]), parent=ctx).params


def resolve(args: list[str], params: dict[str, Any]) -> None:
    """The kernel, dtype and shapes a concrete line names exist (what `search` checks before any work)."""
    if args[0] == "search":
        assert plan(params["kernel"], params["dtype"], params["shape"], params["shapes"], params["shapes_from"])
    elif params.get("kernel"):
        get_space(params["kernel"])


def test_the_readme_has_the_commands_this_test_expects():
    """A guard against the extraction silently finding nothing (e.g. after a change of the README's layout)."""
    commands = [c for _, c in readme_commands()]
    concrete = [c for c in commands if not PLACEHOLDER.search(_without_comment(c))]
    assert "autotune search ./examples/vector_add/my_space.py:MySpace --shape 16777216 --trials 40" in concrete
    assert "autotune best ./examples/vector_add/my_space.py:MySpace" in concrete
    assert len(concrete) >= 8 and len(commands) >= len(concrete) + 11, commands
    assert {shlex.split(c)[1] for c in commands} == set(_group().commands), "every command has its synopsis"


@pytest.mark.parametrize("number, code", readme_commands(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_every_readme_line_names_existing_commands_and_options(number, code):
    command = _group().commands.get(shlex.split(code)[1])
    assert command is not None, (number, code)
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", code))
    unknown = named - _options(command)
    assert not unknown, f"README line {number}: {code!r} names options {sorted(unknown)} that do not exist"


GEMM_RECORDING = ROOT / "tests" / "data" / "replay_gemm_h200.json"
EXAMPLE = "./examples/vector_add/my_space.py:MySpace"


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder like the repository's root (``examples/``) whose default database holds a replayed GEMM study
    (what `export` and `import` carry), the shapes.json the README's ``record`` example writes, and a stand-in
    recording of the README's own kernel, so that its search, replayed, stores what `best` then lists."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    filled = CliRunner().invoke(app, ["search", "gemm", "--trials", "20", "--replay", str(GEMM_RECORDING)])
    assert filled.exit_code == 0, filled.output
    calls = [{"kernel": "softmax", "shape": [4096, 768], "dtype": "float32"}]
    (tmp_path / "shapes.json").write_text(json.dumps({"version": 1, "calls": calls}))
    record_every_config(tmp_path / "vector_add.json", EXAMPLE, (16777216,))
    return tmp_path


def test_the_readmes_concrete_commands_run_as_printed(scratch):
    from conftest import nvcc_problem

    runner = CliRunner()
    concrete = [(n, _without_comment(c)) for n, c in readme_commands() if not PLACEHOLDER.search(_without_comment(c))]
    ran = []
    for number, code in concrete:
        args = shlex.split(code)[1:]
        resolve(args, parse(args))
        if args[0] == "search":
            if not has_gpu():
                assert_stopped_only_for_lack_of_gpu(runner.invoke(app, args))
                ran.append(number)
            if args[1] == EXAMPLE:  # then as far as a search goes on CPU: the recording stands in for the GPU
                replayed = runner.invoke(app, [*args, "--replay", str(scratch / "vector_add.json")])
                assert replayed.exit_code == 0, (number, replayed.output)
            continue
        result = runner.invoke(app, args)
        if args[0] == "export" and "--with-binaries" in args and nvcc_problem():
            # cubins need nvcc (or NVRTC) here: one clear line, then the file without them for `import`
            assert result.exit_code == 2 and result.output.startswith("error:"), result.output
            result = runner.invoke(app, [a for a in args if a != "--with-binaries"])
        assert result.exit_code == 0, (number, code, result.output)
        assert "Traceback" not in result.output
        if args[0] == "best":
            assert "vector_add 16777216 float32 on NVIDIA H200" in result.output, result.output
        ran.append(number)
    assert len(ran) >= 4 if has_gpu() else len(ran) == len(concrete), ran
