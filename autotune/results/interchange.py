"""Tuned configurations as a JSON file, so that results travel to machines that did not tune.

    {"format": "autotune-configs/1", "exported_at": "…",
     "devices": [{"device_name": "NVIDIA H200", "compute_capability": "9.0",
                  "configs": [{"kernel": "gemm", "shape": "4096x4096x4096", "dtype": "float32",
                               "template_hash": "…", "params": {…}, "time_ms": 3.1, "metric": 44.1,
                               "metric_unit": "TFLOP/s", "default_time_ms": 3.5, "driver_version": "…",
                               "nvcc_version": "…", "study_name": "…", "trial_number": 17}]}]}

``--with-binaries`` adds to each config whose template is the current one ``"binary": {"arch": "sm_90a",
"defines": {…}, "sha256": "…", "cubin": "<base64>"}``: the machine code for the device's compute capability,
so that a host without nvcc runs it at once (`autotune.runtime.binaries`). Its arch must be the named device's, the
cubin's ELF header must say so, its digest must match and its defines must be those this autotune compiles the
config with; ``import`` then puts it in the binary store.

`parse` checks a whole file before anything is written and names the first bad field by its path. Each config
must hold its space's parameters with values in their domains, and satisfy the space's constraints on the
device the file names (judged by that device's compute capability: `autotune.device.nominal_device`), so the
dispatcher never meets a stored configuration that cannot run.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from autotune.device import COMPUTE_CAPABILITIES, nominal_device
from autotune.errors import AutotuneError, InvalidArgument, UnknownKernel
from autotune.results.storage import BestConfig, BestEntry
from autotune.runtime.compiler import cubin_hash
from autotune.spaces import get_space

FORMAT = "autotune-configs/1"
METRIC_UNITS = ("TFLOP/s", "GB/s")


@dataclass
class Binary:
    """A cubin carried by an exported file, checked and ready for the binary store."""

    key: str  # autotune.runtime.binaries.binary_key
    arch: str
    cubin: bytes


def _cc_tuple(cc: str) -> tuple[int, int]:
    major, minor = cc.split(".")
    return int(major), int(minor)


def binary_of(row: BestConfig, space: Any = None) -> dict[str, Any] | None:
    """The ``binary`` field of an exported config: its cubin for the row's device (from the binary store, nvcc or
    NVRTC); None where the stored template hash is not the current template's (its code cannot be rebuilt), or
    where the row's kernel is neither ``space`` nor a library kernel (a kernel of one's own is known by its file
    reference, which the row does not hold)."""
    from autotune.runtime.binaries import load_cubin

    try:
        space = get_space(space.ref() if space is not None else row.kernel, dtype=row.dtype)
    except UnknownKernel:
        return None
    if space.template_hash() != row.template_hash:
        return None
    config = row.config
    defines = space.compile_defines(config, space.parse_shape(row.shape))
    arch = nominal_device(row.device_name, _cc_tuple(row.compute_capability)).compile_arch
    cubin, _route = load_cubin(space.template_for(config), defines, arch)
    return {"arch": arch, "defines": {k: defines[k] for k in sorted(defines)},
            "sha256": cubin_hash(cubin), "cubin": base64.b64encode(cubin).decode()}  # fmt: skip


def export(rows: Sequence[BestConfig], *, with_binaries: bool = False, space: Any = None,
           code_hashes: Mapping[int, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """The file of ``rows``; ``space``: the space of rows of its name (a kernel of one's own, by reference);
    ``code_hashes``: the rows' machine-code identities by row id (`Database.code_hashes`), carried along."""
    devices: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        entry = row.to_dict()
        key = (entry.pop("device_name"), entry.pop("compute_capability"))
        if code_hashes and row.id in code_hashes:
            entry["code_hash"] = code_hashes[row.id]
        if with_binaries:
            binary = binary_of(row, space if space is not None and space.name == row.kernel else None)
            if binary is not None:
                entry["binary"] = binary
        devices.setdefault(key, []).append(entry)
    return {
        "format": FORMAT,
        "exported_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "devices": [
            {"device_name": name, "compute_capability": cc, "configs": configs}
            for (name, cc), configs in sorted(devices.items())
        ],
    }


class _Fields:
    """Typed access to a JSON object that reports the path of whatever is wrong."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, dict):
            raise InvalidArgument(f"{path}: expected an object, got {type(data).__name__}")
        self.data, self.path = data, path

    def get(self, key: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
        if key not in self.data or (optional and self.data[key] is None):
            if optional:
                return None
            raise InvalidArgument(f"{self.path}.{key}: missing")
        value = self.data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise InvalidArgument(f"{self.path}.{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
        return value

    def text(self, key: str) -> str:
        value = self.get(key, str)
        if not value.strip():
            raise InvalidArgument(f"{self.path}.{key}: empty")
        return value

    def positive(self, key: str, *, optional: bool = False) -> float | None:
        value = self.get(key, (int, float), optional=optional)
        if value is None:
            return None
        if not (math.isfinite(value) and value > 0):
            raise InvalidArgument(f"{self.path}.{key}: expected a positive number, got {value!r}")
        return float(value)


def _binary(c: _Fields, space: Any, params: dict, shape: Any, device: Any, template_hash: str) -> Binary | None:
    """The checked cubin of one config (None without one, or where the template is not this autotune's)."""
    from autotune.runtime.binaries import arch_sm, binary_key, cubin_sm

    if c.data.get("binary") is None:
        return None
    b = _Fields(c.data["binary"], f"{c.path}.binary")
    arch = b.text("arch")
    if arch != device.compile_arch:
        raise InvalidArgument(f"{b.path}.arch: {arch!r} is not the code of compute capability {device.cc} "
                              f"({device.compile_arch})")  # fmt: skip
    try:
        cubin = base64.b64decode(b.text("cubin"), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"{b.path}.cubin: not base64") from None
    if cubin_hash(cubin) != b.text("sha256"):
        raise InvalidArgument(f"{b.path}.cubin: its sha256 is not the one recorded (damaged file)")
    try:
        sm = cubin_sm(cubin)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{b.path}.cubin: {exc}") from None
    if sm != arch_sm(arch):
        raise InvalidArgument(f"{b.path}.cubin: built for sm_{sm}, not {arch}: never loaded")
    given = b.get("defines", dict)
    if template_hash != space.template_hash():
        return None  # a stale template here: the dispatcher will not run this row, nor its code
    defines = space.compile_defines(params, shape)
    if {k: str(v) for k, v in given.items()} != {k: str(v) for k, v in defines.items()}:
        raise InvalidArgument(f"{b.path}.defines: not those this autotune compiles the config with (another "
                              f"version wrote the file): export without --with-binaries")  # fmt: skip
    from autotune.templates import template_hash as hash_of

    return Binary(binary_key(hash_of(space.template_for(params)), defines, arch), arch, cubin)


def parse(data: Any) -> list[BestEntry]:
    """Entries of an exported file; raises `InvalidArgument` at the first problem, naming where it is."""
    return parse_all(data)[0]


def parse_all(data: Any) -> tuple[list[BestEntry], list[Binary]]:
    """Entries and carried cubins of an exported file, all checked before anything is written."""
    binaries: list[Binary] = []
    top = _Fields(data, "file")
    if top.get("format", str) != FORMAT:
        raise InvalidArgument(f"file.format: expected {FORMAT!r}, got {data.get('format')!r}")
    entries = []
    capability_of: dict[str, str] = {}  # device name → its compute capability in this file
    for i, device in enumerate(top.get("devices", list)):
        d = _Fields(device, f"devices[{i}]")
        device_name = d.text("device_name")
        cc = d.text("compute_capability")
        if not re.fullmatch(r"\d+\.\d+", cc):
            raise InvalidArgument(f"{d.path}.compute_capability: expected e.g. '9.0', got {cc!r}")
        cc_t = _cc_tuple(cc)
        if cc_t not in COMPUTE_CAPABILITIES:
            known = sorted(COMPUTE_CAPABILITIES)
            raise InvalidArgument(f"{d.path}.compute_capability: {cc} is no CUDA GPU's (they are {'%d.%d' % known[0]} "
                                  f"to {'%d.%d' % known[-1]}; a GPU newer than this autotune needs a newer one)")  # fmt: skip
        if cc != "%d.%d" % cc_t:  # '09.0' would be stored beside '9.0', as another device
            raise InvalidArgument(f"{d.path}.compute_capability: write {'%d.%d' % cc_t!r}, not {cc!r}")
        if capability_of.setdefault(device_name, cc) != cc:
            raise InvalidArgument(f"{d.path}.compute_capability: {device_name} has compute capability "
                                  f"{capability_of[device_name]} elsewhere in the file, not {cc}")  # fmt: skip
        device = nominal_device(device_name, cc_t)
        for j, config in enumerate(d.get("configs", list)):
            c = _Fields(config, f"{d.path}.configs[{j}]")
            kernel, shape_text, dtype = c.text("kernel"), c.text("shape"), c.text("dtype")
            try:
                space = get_space(kernel)
                shape = space.parse_shape(shape_text)
            except AutotuneError as exc:
                raise InvalidArgument(f"{c.path}: {exc}") from None
            try:
                space = get_space(kernel, dtype=dtype)
            except AutotuneError as exc:
                raise InvalidArgument(f"{c.path}.dtype: {exc}") from None
            if dtype != space.dtype:
                raise InvalidArgument(f"{c.path}.dtype: write {space.dtype!r}, not {dtype!r}")
            template_hash = c.text("template_hash")
            if not re.fullmatch(r"[0-9a-f]{64}", template_hash):
                raise InvalidArgument(f"{c.path}.template_hash: expected 64 hex digits")
            params = c.get("params", dict)
            domain = {p.name: p.values for p in space.active_params(params)}
            for name, value in params.items():
                if name not in domain:
                    raise InvalidArgument(f"{c.path}.params: {kernel} has no parameter {name!r}")
                if value not in domain[name]:
                    raise InvalidArgument(f"{c.path}.params.{name}: {value!r} is not one of {list(domain[name])}")
            missing = sorted(set(domain) - set(params))
            if missing:
                raise InvalidArgument(f"{c.path}.params: missing {', '.join(missing)}")
            problems = space.constraints(dict(params), shape, device)
            if problems:
                raise InvalidArgument(f"{c.path}.params: not valid for {kernel} {space.format_shape(shape)} on "
                                      f"{device_name} (cc {cc}): {problems[0]}")  # fmt: skip
            binary = _binary(c, space, dict(params), shape, device, template_hash)
            if binary is not None:
                binaries.append(binary)
            unit = c.text("metric_unit")
            if unit not in METRIC_UNITS:
                raise InvalidArgument(f"{c.path}.metric_unit: expected one of {METRIC_UNITS}, got {unit!r}")
            trial = c.get("trial_number", int)
            if trial < 0:
                raise InvalidArgument(f"{c.path}.trial_number: negative")
            code_hash = c.get("code_hash", str, optional=True)  # files of schema 2 have none
            if code_hash is not None and not re.fullmatch(r"[0-9a-f]{64}", code_hash):
                raise InvalidArgument(f"{c.path}.code_hash: expected 64 hex digits, got {code_hash!r}")
            entries.append(
                BestEntry(
                    device_name=device_name,
                    compute_capability=cc,
                    kernel=kernel,
                    shape=space.format_shape(shape),
                    dtype=dtype,
                    template_hash=template_hash,
                    params=params,
                    time_ms=c.positive("time_ms"),  # type: ignore[arg-type]
                    metric=c.positive("metric"),  # type: ignore[arg-type]
                    metric_unit=unit,
                    default_time_ms=c.positive("default_time_ms", optional=True),
                    driver_version=c.get("driver_version", str),
                    nvcc_version=c.get("nvcc_version", str),
                    study_name=c.get("study_name", str),
                    trial_number=trial,
                    code_hash=code_hash,
                )
            )
    return entries, binaries


def check_devices(entries: Sequence[BestEntry], stored: dict[str, set[str]]) -> None:
    """A GPU model has one compute capability: an entry giving a stored model another one (an edited or wrong
    file) is refused, rather than stored as a second device beside the real one and never used."""
    for e in entries:
        other = sorted(stored.get(e.device_name, set()) - {e.compute_capability})
        if other:
            raise InvalidArgument(f"{e.device_name} is stored with compute capability {', '.join(other)}, and the "
                                  f"file says {e.compute_capability}: nothing imported")  # fmt: skip


def read(path: Path) -> list[BestEntry]:
    return read_all(path)[0]


def store_binaries(binaries: Sequence[Binary]) -> int:
    """Put checked cubins in the binary store; how many."""
    from autotune.runtime.binaries import BinaryStore

    store = BinaryStore()
    for b in binaries:
        store.put(b.key, b.cubin, b.arch)
    return len(binaries)


def read_all(path: Path) -> tuple[list[BestEntry], list[Binary]]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:  # a binary file (a cubin, a database) given by mistake
        raise InvalidArgument(f"{path} is not JSON: byte {exc.start} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{path} is not JSON: {exc.msg} at line {exc.lineno}") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more digits than Python converts, deep nesting
        raise InvalidArgument(f"{path} is not a file autotune export writes: {type(exc).__name__}: {exc}") from None
    try:
        return parse_all(data)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{path}: {exc}") from None
