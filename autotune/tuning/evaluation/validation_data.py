"""The data a candidate is checked on, on the device: inputs, outputs poisoned before each run, fp64 references.

The target shape's data is made once per worker, its references cached on disk (computing them on the host can
take seconds at large shapes); each validation case's data is drawn afresh every `CASE_REUSE` candidates.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from autotune.shape import format_shape
from autotune.spaces.base import UNIFORM, BufferSpec, KernelSpace

if TYPE_CHECKING:
    from autotune.tuning.evaluation.gpu_session import Setup

REFERENCE_CACHE_LIMIT = 2 << 30  # bytes of fp64 reference worth keeping on disk
_TOLERANCE = "__tolerance__"  # prefix of the tolerances kept beside the references in the cache file
CASE_REUSE = 8  # candidates checked on one validation case's data before it is drawn again


class DataSet:
    """Inputs, poisoned outputs and fp64 references of one shape, on the device. ``inputs`` are host arrays in
    the buffers' dtypes; ``tolerances`` per output (`KernelSpace.tolerances`)."""

    def __init__(self, cuda: Any, space: KernelSpace, shape: tuple[int, ...], inputs: dict[str, np.ndarray],
                 refs: dict[str, np.ndarray], tolerances: dict[str, float], kind: str = UNIFORM) -> None:  # fmt: skip
        self.shape = shape
        self.kind = kind
        self.buffers: dict[str, tuple[Any, int]] = {}
        self.host_inputs = {name: np.ascontiguousarray(array) for name, array in inputs.items()}
        for name, array in self.host_inputs.items():
            self.buffers[name] = (cuda.to_device(array), array.nbytes)
        self.outputs: dict[str, BufferSpec] = space.outputs(shape)
        self.refs: dict[str, Any] = {}
        for name, spec in self.outputs.items():
            self.buffers[name] = (cuda.mem_alloc(max(spec.nbytes, 4)), spec.nbytes)
            ref = np.ascontiguousarray(refs[name], dtype=np.float64)
            if ref.size != int(np.prod(spec.shape)):
                raise ValueError(f"reference {name} has {ref.size} elements, output has {int(np.prod(spec.shape))}")
            self.refs[name] = cuda.to_device(ref)
        self.tolerances = dict(tolerances)
        self.zero_tolerances = {name: space.zero_tolerance(name, shape) for name in self.outputs}

    def reload_inputs(self, cuda: Any) -> None:
        """Copy the inputs to the device again (synchronously, from pageable memory): a candidate that wrote
        into them (out of bounds) cannot change what the next one is checked on."""
        for name, array in self.host_inputs.items():
            cuda.memcpy_htod(self.buffers[name][0], array)

    def free(self) -> None:
        for alloc, _ in self.buffers.values():
            alloc.free()
        for alloc in self.refs.values():
            alloc.free()
        self.buffers.clear()
        self.refs.clear()


def reference_cache(setup: Setup, space: KernelSpace, shape: tuple[int, ...]) -> Path:
    """The file of the target shape's references: keyed by the space (its module's source too), the dtype, the
    shape and the seed of the inputs."""
    module_file = Path(sys.modules[type(space).__module__].__file__ or "")
    text = f"{setup.space_ref}|{setup.dtype}|{format_shape(shape)}|{setup.seed}|"
    digest = hashlib.sha256(text.encode() + module_file.read_bytes()).hexdigest()[:32]
    return Path(setup.cache_dir) / "reference" / f"{digest}.npz"


def target_dataset(cuda: Any, setup: Setup, space: KernelSpace, shape: tuple[int, ...]) -> DataSet:
    """The target shape's data, its inputs drawn from the setup's seed, its references from the cache where there."""
    rng = np.random.default_rng(setup.seed)
    inputs = space.inputs(shape, rng)
    path = reference_cache(setup, space, shape)
    refs = tolerances = None
    if path.is_file():
        try:
            with np.load(path) as data:
                refs = {k: data[k] for k in data.files if not k.startswith(_TOLERANCE)}
                tolerances = {k[len(_TOLERANCE):]: float(data[k]) for k in data.files if k.startswith(_TOLERANCE)}
        except (OSError, ValueError):
            refs = None
    if refs is None or tolerances is None:
        refs, tolerances = space.references(inputs, shape)
        if sum(r.nbytes for r in refs.values()) <= REFERENCE_CACHE_LIMIT:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
            np.savez(tmp, **refs, **{_TOLERANCE + k: np.float64(v) for k, v in tolerances.items()})
            os.replace(tmp, path)
    return DataSet(cuda, space, shape, inputs, refs, tolerances)


def fresh_dataset(cuda: Any, space: KernelSpace, shape: tuple[int, ...], rng: np.random.Generator,
                  kind: str = UNIFORM) -> DataSet:  # fmt: skip
    """New random inputs of ``kind`` at ``shape``, with their references computed on the host."""
    inputs = space.inputs(shape, rng) if kind == UNIFORM else space.inputs(shape, rng, kind)
    refs, tolerances = space.references(inputs, shape)
    return DataSet(cuda, space, shape, inputs, refs, tolerances, kind)


class ValidationCases:
    """The data of the space's validation cases, each reused for `CASE_REUSE` candidates."""

    def __init__(self, cuda: Any, space: KernelSpace, rng: np.random.Generator,
                 calibrate: Callable[[DataSet], None]) -> None:  # fmt: skip
        """``rng``: draws the cases' inputs; ``calibrate``: sets a fresh case's tolerances (see
        `KernelSpace.baseline_config`)."""
        self.cuda = cuda
        self.space = space
        self.rng = rng
        self._calibrate = calibrate
        self._cases: dict[tuple, tuple[DataSet, int]] = {}  # (shape, kind) → (validation data, candidates left)

    def data(self, shape: tuple[int, ...], kind: str) -> DataSet:
        """The data of one validation case, with its tolerances calibrated: fresh (new random inputs, fp64
        references on the host) every `CASE_REUSE` candidates instead of for each — the host reference of the
        61x70x16384 GEMM case alone took ~66 ms, most of a candidate's validation (issue 12) — and its inputs
        copied to the device again for every candidate."""
        key = (shape, kind)
        data, left = self._cases.get(key, (None, 0))
        if data is None or left <= 0:
            if data is not None:
                data.free()
                del self._cases[key]
            data = fresh_dataset(self.cuda, self.space, shape, self.rng, kind)
            try:
                self._calibrate(data)
            except BaseException:
                data.free()
                raise
            left = CASE_REUSE
        else:
            data.reload_inputs(self.cuda)
        self._cases[key] = (data, left - 1)
        return data

    def free(self) -> None:
        """Free every case's data, as far as the device still can."""
        for data, _ in self._cases.values():
            try:
                data.free()
            except Exception:
                pass
