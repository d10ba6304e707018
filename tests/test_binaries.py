"""Kernels without nvcc: the binary store, NVRTC, the route the runtime takes, and cubins carried by
export --with-binaries / import (checked: another compute capability's code is never stored nor loaded)."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from typer.testing import CliRunner

from autotune.cli import app
from autotune.errors import InvalidArgument, ToolchainError
from autotune.results.storage import BestEntry, Database, resolve_url
from autotune.runtime import binaries
from autotune.runtime.binaries import CACHED, NVCC, NVRTC, BinaryStore, arch_sm, binary_key, cubin_sm, load_cubin
from autotune.spaces import get_space
from autotune.templates import template_hash

from conftest import file_digest

SPACE = get_space("softmax")
CONFIG = dict(SPACE.default_config)
SHAPE = (64, 256)
TEMPLATE = SPACE.template_for(CONFIG)
DEFINES = SPACE.compile_defines(CONFIG, SHAPE)


def nvrtc_missing() -> str | None:
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception as exc:  # not installed, or its library missing
        return f"NVRTC unusable: {exc}"
    return None


needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=str(nvrtc_missing()))


@pytest.fixture
def no_nvcc(monkeypatch, tmp_path):
    """A host without nvcc, and with an empty cache."""
    monkeypatch.setenv("AUTOTUNE_NVCC", "/nonexistent/nvcc")
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "empty-cache"))


@pytest.mark.nvcc
def test_cubin_sm_reads_the_elf_header():
    for arch in ("sm_80", "sm_90a"):
        data, route = load_cubin(TEMPLATE, DEFINES, arch, route=NVCC)
        assert route == NVCC and cubin_sm(data) == arch_sm(arch)
    with pytest.raises(InvalidArgument, match="not a cubin"):
        cubin_sm(b"\x7fELF" + bytes(100))


@pytest.mark.nvcc
def test_the_store_never_gives_another_architectures_code(tmp_path):
    store = BinaryStore(tmp_path)
    sm80, _ = load_cubin(TEMPLATE, DEFINES, "sm_80", route=NVCC)
    key = binary_key(template_hash(TEMPLATE), DEFINES, "sm_90a")
    with pytest.raises(InvalidArgument, match="cubin is for sm_80, not sm_90a"):
        store.put(key, sm80, "sm_90a")
    path = store._path(key)  # planted by hand under the sm_90a key: still refused
    path.parent.mkdir(parents=True)
    path.write_bytes(sm80)
    assert store.get(key, "sm_90a") is None
    assert store.get(key, "sm_80") is not None  # the same bytes, for the architecture they are for


@needs_nvrtc
def test_without_nvcc_the_runtime_compiles_with_nvrtc_once(no_nvcc):
    data, route = load_cubin(TEMPLATE, DEFINES, "sm_90a")
    assert route == NVRTC and cubin_sm(data) == 90
    again, route = load_cubin(TEMPLATE, DEFINES, "sm_90a")
    assert route == CACHED and again == data


@needs_nvrtc
@pytest.mark.parametrize("kernel", ["gemm", "layernorm", "layernorm_backward", "rmsnorm", "sgemv", "sum", "add"])
def test_nvrtc_compiles_the_library_templates(kernel):
    space = get_space(kernel)
    config = space.default_config
    data = binaries.nvrtc_compile(space.template_for(config), space.compile_defines(config, space.default_shape),
                                  "sm_90a")  # fmt: skip
    assert cubin_sm(data) == 90


def test_no_route_left_is_one_line(no_nvcc, monkeypatch):
    def missing(*args):
        raise ToolchainError("NVRTC is not installed: pip install 'autotune[nvrtc]'")

    monkeypatch.setattr(binaries, "nvrtc_compile", missing)
    with pytest.raises(ToolchainError) as err:
        load_cubin(TEMPLATE, DEFINES, "sm_90a")
    assert str(err.value).startswith("no cached cubin, AUTOTUNE_NVCC=/nonexistent/nvcc is not an executable")
    assert "autotune[nvrtc]" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ToolchainError, match="no cubin for sm_90a"):
        load_cubin(TEMPLATE, DEFINES, "sm_90a", route=CACHED)


def entry(**change) -> BestEntry:
    base = dict(
        device_name="NVIDIA H200", compute_capability="9.0", kernel="softmax", shape="64x256", dtype="float32",
        template_hash=SPACE.template_hash(), params=CONFIG, time_ms=0.01, metric=100.0, metric_unit="GB/s",
        default_time_ms=None, driver_version="", nvcc_version="", study_name="s", trial_number=1,
    )  # fmt: skip
    base.update(change)
    return BestEntry(**base)


@pytest.fixture
def exported(tmp_path):
    """A file exported --with-binaries from a database with one current and one stale-template row."""
    db = Database(resolve_url(tmp_path / "src.db"))
    db.import_entries([entry(), entry(shape="32x32", template_hash="cd" * 32)], overwrite=True)
    db.close()
    out = tmp_path / "configs.json"
    result = CliRunner().invoke(app, ["export", "--out", str(out), "--with-binaries", "--db", str(tmp_path / "src.db")])
    assert result.exit_code == 0, result.output
    assert "1 with their cubin (1 of stale templates without)" in result.output
    return out


@pytest.mark.nvcc
def test_binaries_travel_with_the_export(tmp_path, exported, monkeypatch):
    configs = json.loads(exported.read_text())["devices"][0]["configs"]
    assert [("binary" in c) for c in configs] == [False, True]  # sorted by shape: 32x32 (stale) first
    binary = configs[1]["binary"]
    assert binary["arch"] == "sm_90a" and cubin_sm(base64.b64decode(binary["cubin"])) == 90
    # The importing host: no nvcc, an empty cache.
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "host-cache"))
    monkeypatch.setenv("AUTOTUNE_NVCC", "/nonexistent/nvcc")
    result = CliRunner().invoke(app, ["import", str(exported), "--db", str(tmp_path / "host.db")])
    assert result.exit_code == 0 and "1 cubins put in the cache" in result.output, result.output
    data, route = load_cubin(TEMPLATE, DEFINES, "sm_90a")
    assert route == CACHED and data == base64.b64decode(binary["cubin"])


def _spoil(configs: list, what: str) -> None:
    b = configs[1]["binary"]
    if what == "arch":
        b["arch"] = "sm_80"
    elif what == "sha":
        b["sha256"] = "0" * 64
    elif what == "base64":
        b["cubin"] = "%%%"
    elif what == "defines":
        b["defines"]["BLOCK"] = 1
    elif what == "other cc":  # a genuine sm_80 cubin with a consistent digest, labelled for the H200
        sm80, _ = load_cubin(TEMPLATE, DEFINES, "sm_80", route=NVCC)
        b["cubin"], b["sha256"] = base64.b64encode(sm80).decode(), hashlib.sha256(sm80).hexdigest()


@pytest.mark.nvcc
@pytest.mark.parametrize("what, message", [
    ("arch", "binary.arch: 'sm_80' is not the code of compute capability 9.0 (sm_90a)"),
    ("sha", "its sha256 is not the one recorded"),
    ("base64", "binary.cubin: not base64"),
    ("defines", "binary.defines: not those this autotune compiles"),
    ("other cc", "built for sm_80, not sm_90a: never loaded"),
])  # fmt: skip
def test_a_bad_binary_refuses_the_file_whole(tmp_path, exported, monkeypatch, what, message):
    data = json.loads(exported.read_text())
    _spoil(data["devices"][0]["configs"], what)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "host-cache"))
    target = tmp_path / "host.db"
    Database(resolve_url(target)).close()
    before = file_digest(target)
    result = CliRunner().invoke(app, ["import", str(bad), "--db", str(target)])
    assert result.exit_code == 2 and message in result.output, result.output
    assert file_digest(target) == before and not (tmp_path / "host-cache").exists()


@needs_nvrtc
def test_missing_cuda_headers_are_named(monkeypatch):
    monkeypatch.setattr(binaries, "_include_dirs", lambda: [])
    # An fp32 kernel includes no CUDA header, so NVRTC builds it without any; a half one needs cuda_fp16.h.
    assert binaries.nvrtc_compile(TEMPLATE, DEFINES, "sm_90a")[:4] == b"\x7fELF"
    half = get_space("softmax", dtype="float16")
    with pytest.raises(ToolchainError) as err:
        binaries.nvrtc_compile(half.template_for(CONFIG), half.compile_defines(CONFIG, SHAPE), "sm_90a")
    text = str(err.value)
    assert text.startswith("NVRTC needs cuda_") and "pip install nvidia-cuda-runtime" in text and "\n" not in text
