"""The base of every kernel space: what can be tuned, what is valid, how to launch, what is right, what is fast.

A space is everything autotune knows about one kernel family besides its CUDA templates:

* ``parameters``: the tunables and their domains (each a compile-time define of the template, or mapped to
  defines by `defines`), and ``default_config``, the template's own defaults;
* `constraints`: why a configuration cannot work (before anything is compiled);
* `launches`: grid, block, shared memory and arguments of each kernel launch (a launch plan may hold several
  launches and buffer zeroings, e.g. a two-pass reduction);
* `inputs` / `outputs` / `reference` / `tolerance` / `validation_cases`: what a correct answer is;
* `work` and ``metric_unit``: the FLOP or byte count that turns a time into TFLOP/s or GB/s.

`KernelSpace` itself holds the identity, the tunables, the algorithms, the constraints and the metric; the other
hooks come in groups, each in its own module: `autotune.spaces.rendering` (templates, defines, launches,
workspace), `autotune.spaces.correctness` (inputs, reference, tolerances, validation cases) and
`autotune.spaces.dispatching` (what the run-time dispatcher asks). What is done *with* a space's parameters lives
beside it, not in it: `autotune.spaces.enumeration` (every configuration, random ones, the valid ones) and
`autotune.spaces.optuna_mapping` (configurations as Optuna trial parameters).

A space is bound to one problem dtype (``dtype``, one of ``dtypes``), like a problem is bound to its shape.

A family may be computed by several **algorithms** (`autotune.spaces.algorithm.Algorithm`: SIMT, tensor-core
mma, wgmma, …). Then the space's first parameter is ``ALGO``, and each algorithm's own parameters are
conditional on it: a configuration holds ``ALGO`` and the parameters of that algorithm only, and Optuna samples
them define-by-run (`autotune.spaces.optuna_mapping.suggest`). Each algorithm has its own template, constraints
and launch plan; the family keeps what all of them share (shapes, inputs, reference, tolerance, work).

Spaces hold no GPU state and import no GPU library: they are exercised on CPU-only machines.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument, InvalidConfig
from autotune.shape import Shape, format_shape, parse_shape
from autotune.spaces.correctness import UNIFORM, Correctness  # noqa: F401  (spaces import UNIFORM from here)
from autotune.spaces.dispatching import Dispatching
from autotune.spaces.rendering import Rendering

if TYPE_CHECKING:
    from autotune.spaces.algorithm import Algorithm

Config = dict[str, Any]
ALGO = "ALGO"  # the parameter that picks a family's algorithm


@dataclass(frozen=True)
class Param:
    """One tunable: its name (a define of the template unless `defines` maps it) and its candidate values.

    ``algorithm``: set by a family for the parameters of one of its algorithms (active only when ``ALGO`` is
    that algorithm)."""

    name: str
    values: tuple[Any, ...]
    doc: str = ""
    algorithm: str | None = None

    @property
    def key(self) -> str:
        """The parameter's name in Optuna: unique in the family (two algorithms may both have a ``BM``)."""
        return self.name if self.algorithm is None else f"{self.algorithm}.{self.name}"


@dataclass(frozen=True)
class Launch:
    """One kernel launch. ``args`` are buffer names (str), numpy scalars (np.int32(n), np.float32(x), …) or
    tensor maps over a buffer (`TensorMap`).

    ``overlaps_previous`` (compute capability 9.0 and newer): a programmatic dependent launch. The kernel may be
    scheduled while the previous launch of the plan drains, and must run ``griddepcontrol.wait`` before it reads
    what that launch wrote (a no-op where the driver launched it plainly): its launch latency is hidden."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[Any, ...]
    overlaps_previous: bool = False


@dataclass(frozen=True)
class TensorMap:
    """A kernel argument: a TMA tensor map (CUtensorMap, passed by value as a ``__grid_constant__`` parameter)
    over the dense buffer ``buffer`` seen as a tensor of ``dims`` elements of ``dtype`` (innermost first), copied
    in boxes of ``box`` elements, ``swizzle`` bytes swizzled (0, 32, 64 or 128). The launch plan encodes it for
    the buffer's pointer (`autotune.runtime.launch_plan`); `problems` says why the copy engine could not take it."""

    buffer: str
    dtype: str
    dims: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 128

    def problems(self) -> list[str]:
        itemsize = dtypes.dtype(self.dtype).itemsize
        found = []
        if not 1 <= len(self.dims) <= 5 or len(self.box) != len(self.dims):
            found.append(f"rank {len(self.dims)} with a box of rank {len(self.box)} (1 to 5, equal)")
        stride = itemsize
        for extent in self.dims[:-1]:
            stride *= extent
            if stride % 16:
                found.append(f"a row of {extent} {self.dtype} elements is {stride} bytes, not a multiple of 16")
                break
        if any(not 1 <= b <= 256 for b in self.box):
            found.append(f"box {self.box}: each extent must be 1 to 256")
        if self.swizzle not in (0, 32, 64, 128):
            found.append(f"swizzle {self.swizzle} bytes (0, 32, 64 or 128)")
        elif self.swizzle and self.box and self.box[0] * itemsize > self.swizzle:
            inner = self.box[0] * itemsize
            found.append(f"the box's inner extent ({inner} bytes) exceeds the {self.swizzle}-byte swizzle")
        if any(not 1 <= d < 2**32 for d in self.dims):
            found.append(f"dims {self.dims}: each must be 1 to 2^32-1")
        return found


@dataclass(frozen=True)
class Zero:
    """Zero a buffer before the launches that follow (kernels that accumulate with atomics need it)."""

    buffer: str


@dataclass(frozen=True)
class BufferSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"  # a name of `autotune.dtypes`

    @property
    def nbytes(self) -> int:
        return dtypes.nbytes(self.shape, self.dtype)


Step = Launch | Zero


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text of a configuration: equal configurations give equal keys."""
    return json.dumps({k: config[k] for k in sorted(config)}, separators=(",", ":"))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class KernelSpace(Rendering, Correctness, Dispatching):
    """One kernel family's tunables and constraints, with the hook groups it inherits (see the module)."""

    # --- identity -------------------------------------------------------------------------------------------
    name: ClassVar[str]  # the kernel's name on the command line and in the store
    template: ClassVar[str | Path]  # a file of kernel_templates/, or a path (families: each algorithm has one)
    dims: ClassVar[tuple[str, ...]]  # names of the shape's dimensions, e.g. ("M", "N", "K")
    # Other forms a shape may be written in, whose `parse_shape` the space overrides to accept (attention: with
    # the kv heads, ("B", "H", "HKV", "SQ", "SKV", "D")).
    other_dims: ClassVar[tuple[tuple[str, ...], ...]] = ()
    default_shape: ClassVar[Shape]
    dtypes: ClassVar[tuple[str, ...]] = ("float32",)  # problem dtypes; the first is the default
    metric_unit: ClassVar[str]  # "TFLOP/s" or "GB/s": what `work` counts per unit of time

    # --- tunables -------------------------------------------------------------------------------------------
    algorithms: ClassVar[tuple[type["Algorithm"], ...]] = ()  # a family's algorithms, in order of preference
    parameters: ClassVar[tuple[Param, ...]] = ()  # families: parameters shared by every algorithm (rare)
    default_config: Config  # must equal the template's macro defaults (families: set per dtype at __init__)

    def __init__(self, domains: Mapping[str, Sequence[Any]] | None = None, *, dtype: str | None = None) -> None:
        """``domains`` narrows some parameters to a subset of their values (replay data, quick searches): keyed
        by a parameter's name (every algorithm's parameter of that name) or its `Param.key` (one algorithm's).
        Narrowing ``ALGO`` leaves out the parameters of the algorithms it drops (so a space of one algorithm has
        that algorithm's parameters only), while ``algos`` keeps every algorithm of the dtype: a configuration
        of another one (e.g. the baseline that sets tolerances) still renders and launches.
        ``dtype``: the problem's dtype (default: the family's first)."""
        self.dtype = self._bind_dtype(dtype)
        self.algos: dict[str, Algorithm] = {}
        params = list(self.parameters)
        if self.algorithms:
            self.algos = {a.name: a(self) for a in self.algorithms if self.dtype in a.dtypes}
            wanted = (domains or {}).get(ALGO, self.algos)
            offered = [name for name in self.algos if name in wanted]
            params = [Param(ALGO, tuple(self.algos), "algorithm"), *params]
            for name in offered:
                params += [dataclasses.replace(p, algorithm=name) for p in self.algos[name].parameters]
            first = self.algos[offered[0]] if offered else next(iter(self.algos.values()))
            self.default_config = {ALGO: first.name, **first.default_config}
        self.params: tuple[Param, ...] = tuple(self._narrow(params, domains or {}))

    @classmethod
    def supported_dtypes(cls) -> tuple[str, ...]:
        if cls.algorithms:
            return tuple(dict.fromkeys(d for a in cls.algorithms for d in a.dtypes))
        return cls.dtypes

    def _bind_dtype(self, dtype: str | None) -> str:
        supported = self.supported_dtypes()
        if dtype is None:
            return supported[0]
        try:
            name = dtypes.canonical(dtype)
        except InvalidArgument:
            name = str(dtype)
        if name not in supported:
            raise InvalidArgument(f"{self.name} does not support dtype {name}; it supports {', '.join(supported)}")
        return name

    def _narrow(self, params: list[Param], domains: Mapping[str, Sequence[Any]]) -> list[Param]:
        names = {p.name for p in params} | {p.key for p in params}
        for key in domains:
            if key not in names:
                raise InvalidArgument(f"{self.name} has no parameter {key!r}")
        out = []
        for p in params:
            values = domains.get(p.key, domains.get(p.name))
            if values is not None:
                unknown = [v for v in values if v not in p.values]
                if unknown or not values:
                    raise InvalidArgument(f"{self.name}.{p.key}: {unknown or 'no'} values outside its domain")
                p = dataclasses.replace(p, values=tuple(values))
            out.append(p)
        return out

    # --- algorithms -----------------------------------------------------------------------------------------
    def algorithm(self, config: Mapping[str, Any]) -> "Algorithm":
        """The algorithm that computes ``config`` (families only)."""
        try:
            return self.algos[config[ALGO]]
        except KeyError:
            raise InvalidConfig(f"{self.name} ({self.dtype}) has no algorithm {config.get(ALGO)!r}; it has "
                                f"{', '.join(self.algos)}") from None  # fmt: skip

    def active_params(self, config: Mapping[str, Any]) -> list[Param]:
        """The parameters a configuration holds: the family's, and those of its algorithm."""
        algo = config.get(ALGO)
        return [p for p in self.params if p.algorithm is None or p.algorithm == algo]

    def for_problem(self, shape: Shape, device: DeviceInfo, algorithms: Sequence[str] | None = None) -> "KernelSpace":
        """This space with ``ALGO`` narrowed to the algorithms that can compute ``shape`` on ``device`` (a search
        proposes only those: GEMV is never a candidate for a square GEMM); itself where every one can.
        ``algorithms``: the ``ALGO`` values to keep instead (a resumed study keeps its recorded choices)."""
        if not self.algorithms:
            return self
        offered = self.params[0].values
        if algorithms is None:
            unfit = {name: self.algos[name].unfit(shape, device) for name in offered}
            algorithms = [name for name in offered if unfit[name] is None]
            if not algorithms:
                reasons = "; ".join(str(reason) for reason in unfit.values())
                raise InvalidArgument(f"no algorithm of {self.name} ({self.dtype}) can compute "
                                      f"{format_shape(shape)} on {device.name}: {reasons}")  # fmt: skip
        if tuple(algorithms) == tuple(offered):
            return self
        narrowed = copy.copy(self)
        kept = set(algorithms)
        narrowed.params = tuple(
            dataclasses.replace(p, values=tuple(algorithms)) if p.name == ALGO else p
            for p in self.params
            if p.algorithm is None or p.algorithm in kept
        )
        return narrowed

    # --- constraints ----------------------------------------------------------------------------------------
    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        """Reasons this configuration cannot work on this device for this shape; empty when it can.
        Families: whether the algorithm fits the shape and device at all (`Algorithm.unfit`), then its own
        constraints."""
        if not self.algorithms:
            raise NotImplementedError(f"{type(self).__name__} must define constraints")
        algo = self.algorithm(config)
        unfit = algo.unfit(shape, device)
        return [unfit] if unfit else algo.constraints(config, shape, device)

    def completed(self, config: Config) -> Config:
        """``config`` with each parameter it lacks set to the template's default: a row tuned before a parameter
        was added ran with that default (the template's macro default, `default_config`), so it keeps meaning what
        it measured. Used on stored rows whose machine code was checked unchanged (autotune.runtime.selection)."""
        algo = config.get(ALGO)
        if self.algorithms and algo in self.algos:
            defaults = self.algos[algo].default_config
        else:
            defaults = self.default_config
        missing = {p.name: defaults[p.name] for p in self.active_params(config)
                   if p.name not in config and p.name in defaults}  # fmt: skip
        return {**config, **missing} if missing else config

    def violations(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        """Domain membership, then the space's own constraints."""
        problems = []
        active = self.active_params(config)
        for p in active:
            if p.name not in config:
                problems.append(f"missing parameter {p.name}")
            elif config[p.name] not in p.values:
                problems.append(f"{p.name}={config[p.name]!r} is not one of {list(p.values)}")
        extra = set(config) - {p.name for p in active}
        if extra:
            problems.append(f"unknown parameters {sorted(extra)}")
        return problems or self.constraints(config, shape, device)

    def require_valid(self, config: Config, shape: Shape, device: DeviceInfo) -> None:
        problems = self.violations(config, shape, device)
        if problems:
            raise InvalidConfig(f"{self.name} configuration {config_key(config)} is invalid: {problems[0]}")

    # --- metric ---------------------------------------------------------------------------------------------
    def work(self, shape: Shape) -> float:
        """FLOPs (for TFLOP/s) or bytes moved (for GB/s) of one run of the launch plan."""
        raise NotImplementedError

    def metric(self, shape: Shape, time_ms: float) -> float:
        scale = 1e12 if self.metric_unit == "TFLOP/s" else 1e9
        return self.work(shape) / (time_ms * 1e-3) / scale

    # --- helpers --------------------------------------------------------------------------------------------
    def parse_shape(self, text: str) -> Shape:
        return parse_shape(text, self.dims)

    def format_shape(self, shape: Shape) -> str:
        return format_shape(shape)

    def domain(self, name: str) -> tuple[Any, ...]:
        """The values of a parameter, by `Param.key` (or by name where only one parameter has it)."""
        for p in self.params:
            if p.key == name:
                return p.values
        matches = [p for p in self.params if p.name == name]
        if len(matches) == 1:
            return matches[0].values
        raise KeyError(name)

    @classmethod
    def ref(cls) -> str:
        """Import reference ``module:Class`` (or ``/path/file.py:Class`` for a space loaded from a file) by which
        a worker process rebuilds this space."""
        return vars(cls).get("_file_reference") or f"{cls.__module__}:{cls.__qualname__}"

    @classmethod
    def missing(cls) -> list[str]:
        """What a space class lacks to be searched and dispatched (empty when complete): a user's space is
        checked when it is loaded, so the error names every missing piece at once."""
        absent = [a for a in ("name", "dims", "default_shape", "metric_unit") if not hasattr(cls, a)]
        if not cls.algorithms:
            absent += [a for a in ("template", "default_config") if not hasattr(cls, a)]
            if not cls.parameters:
                absent.append("parameters (or algorithms)")
        methods = ["input_specs", "outputs", "reference", "work"]  # infer_shape: for autotune.load only
        if not cls.algorithms:
            methods += ["constraints", "launches"]
        absent += [f"{m}()" for m in methods if getattr(cls, m) is getattr(KernelSpace, m)]
        return absent

    def describe(self, config: Config) -> str:
        """A compact one-line rendering for tables."""
        if self.algorithms and config.get(ALGO) in self.algos:
            return self.algorithm(config).describe(config)
        return " ".join(f"{k}={v}" for k, v in config.items())
