"""A kernel of the user's own, by ``file.py:Class``: templates beside the space file, an incomplete space named
in one line, `autotune new-kernel`'s skeleton, and the reference worker processes load."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.errors import UnknownKernel
from autotune.runtime.compiler import Compiler
from autotune.spaces import get_space
from autotune.spaces.enumeration import valid_configs

from conftest import H200

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "vector_add"


def test_new_kernel_writes_a_skeleton_that_loads_and_validates(tmp_path):
    result = CliRunner().invoke(app, ["new-kernel", "my_add"])  # the tests run in tmp_path
    assert result.exit_code == 0, result.output
    assert "autotune search ./my_add_space.py:MyAddSpace" in result.output
    space = get_space("./my_add_space.py:MyAddSpace")
    assert space.name == "my_add"
    assert space.template_for(space.default_config) == tmp_path / "my_add.cu", "the template beside the space"
    assert space.ref() == f"{tmp_path / 'my_add_space.py'}:MyAddSpace", "workers load it by absolute path"
    assert valid_configs(space, (1000,), H200)
    again = CliRunner().invoke(app, ["new-kernel", "my_add"])
    assert again.exit_code == 2 and "already exist: nothing written" in again.output
    bad = CliRunner().invoke(app, ["new-kernel", "My-Add"])
    assert bad.exit_code == 2 and "kernel name 'My-Add'" in bad.output


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["scaled", "sqrt", "float4"])  # the last two: names CUDA's headers declare
def test_the_skeletons_default_compiles(tmp_path, name):
    assert CliRunner().invoke(app, ["new-kernel", name]).exit_code == 0
    space = get_space(f"./{name}_space.py:{name.capitalize()}Space")
    result = Compiler("sm_90a", cache_dir=tmp_path).compile(space.template_for(space.default_config),
                                                             space.compile_defines(space.default_config, (100,)))
    assert result.ok, result.error
    assert [launch.kernel for launch in space.launches(space.default_config, (100,), H200)] == [f"{name}_kernel"]
    assert f"{name}_kernel" in result.kernels


@pytest.mark.parametrize("name, message", [
    ("gemm", "kernel name 'gemm' is a library kernel's"), ("softmax", "is a library kernel's"),
    ("class", "kernel name 'class' is a C or C++ keyword"), ("and", "C or C++ keyword"),
    ("template", "C or C++ keyword"), ("My-Add", "use lower-case letters"),
])  # fmt: skip
def test_new_kernel_refuses_a_name_that_would_shadow_or_break(tmp_path, name, message):
    result = CliRunner().invoke(app, ["new-kernel", name])
    assert result.exit_code == 2 and result.output.startswith("error:") and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == [], "nothing written"


def test_an_incomplete_space_names_everything_it_lacks(tmp_path):
    (tmp_path / "half.py").write_text(textwrap.dedent('''
        from autotune.spaces import KernelSpace, Param
        class Half(KernelSpace):
            name = "half"
            template = "half.cu"
            parameters = (Param("BLOCK", (128, 256)),)
            default_config = {"BLOCK": 128}
            def input_specs(self, shape): return {}
    '''))
    (tmp_path / "half.cu").write_text("// empty\n")
    with pytest.raises(UnknownKernel) as err:
        get_space("./half.py:Half")
    assert str(err.value) == ("kernel space './half.py:Half' is incomplete: it lacks dims, default_shape, "
                              "metric_unit, outputs(), reference(), work(), constraints(), launches()")


def test_a_missing_template_is_named(tmp_path):
    text = (EXAMPLE / "my_space.py").read_text().replace('template = "vector_add.cu"', 'template = "nowhere.cu"')
    (tmp_path / "s.py").write_text(text)
    with pytest.raises(UnknownKernel, match=r"template 'nowhere.cu' is neither beside .*s.py nor in the library"):
        get_space("./s.py:MySpace")


def test_a_broken_module_is_one_line(tmp_path):
    (tmp_path / "broken.py").write_text("import nothing_of_that_name\n")
    with pytest.raises(UnknownKernel, match="No module named 'nothing_of_that_name'"):
        get_space("./broken.py:X")
    (tmp_path / "syntax.py").write_text("def (:\n")
    with pytest.raises(UnknownKernel, match="SyntaxError"):
        get_space("./syntax.py:X")
    with pytest.raises(UnknownKernel, match="does not exist"):
        get_space("./absent.py:X")


def test_a_library_template_name_still_resolves_in_the_library():
    space = get_space("gemm")
    assert Path(space.template_for(space.default_config)).name == "gemm_simt.cu"


def test_best_takes_the_reference(tmp_path):
    from autotune.results.storage import BestEntry, Database, resolve_url

    CliRunner().invoke(app, ["new-kernel", "my_add"])
    space = get_space("./my_add_space.py:MyAddSpace")
    db = Database(resolve_url(tmp_path / "u.db"))
    db.save_best(BestEntry(
        device_name="NVIDIA H200", compute_capability="9.0", kernel="my_add", shape="1024", dtype="float32",
        template_hash=space.template_hash(), params=dict(space.default_config), time_ms=0.01, metric=500.0,
        metric_unit="GB/s", default_time_ms=None, driver_version="", nvcc_version="", study_name="s", trial_number=1,
    ))  # fmt: skip
    db.close()
    result = CliRunner().invoke(app, ["best", "./my_add_space.py:MyAddSpace", "--db", str(tmp_path / "u.db")])
    assert result.exit_code == 0, result.output
    assert "my_add 1024" in result.output and "stale" not in result.output
