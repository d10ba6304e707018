"""The base of every kernel space: what can be tuned, what is valid, how to launch, what is right, what is fast.

A space is everything autotune knows about one kernel family besides its CUDA template:

* ``parameters``: the tunables and their domains (each a compile-time define of the template, or mapped to
  defines by `defines`), and ``default_config``, the template's own defaults;
* `constraints`: why a configuration cannot work (before anything is compiled);
* `launches`: grid, block, shared memory and arguments of each kernel launch (a launch plan may hold several
  launches and buffer zeroings, e.g. a two-pass reduction);
* `inputs` / `outputs` / `reference` / `tolerance` / `validation_shapes`: what a correct answer is;
* `work` and ``metric_unit``: the FLOP or byte count that turns a time into TFLOP/s or GB/s.

Spaces hold no GPU state and import no GPU library: they are exercised on CPU-only machines.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument, InvalidConfig
from autotune.shape import Shape, format_shape, parse_shape

Config = dict[str, Any]


@dataclass(frozen=True)
class Param:
    """One tunable: its name (a define of the template unless `defines` maps it) and its candidate values."""

    name: str
    values: tuple[Any, ...]
    doc: str = ""


@dataclass(frozen=True)
class Launch:
    """One kernel launch. ``args`` are buffer names (str) or numpy scalars (np.int32(n), np.float32(x), …)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Zero:
    """Zero a buffer before the launches that follow (kernels that accumulate with atomics need it)."""

    buffer: str


@dataclass(frozen=True)
class BufferSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


Step = Launch | Zero


def config_key(config: Mapping[str, Any]) -> str:
    """Canonical text of a configuration: equal configurations give equal keys."""
    return json.dumps({k: config[k] for k in sorted(config)}, separators=(",", ":"))


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class KernelSpace(ABC):
    # --- identity -------------------------------------------------------------------------------------------
    name: ClassVar[str]  # the kernel's name on the command line and in the store
    template: ClassVar[str | Path]  # a file of kernel_templates/, or a path (test-only templates)
    dims: ClassVar[tuple[str, ...]]  # names of the shape's dimensions, e.g. ("M", "N", "K")
    default_shape: ClassVar[Shape]
    dtype: ClassVar[str] = "float32"
    metric_unit: ClassVar[str]  # "TFLOP/s" or "GB/s": what `work` counts per unit of time

    # --- tunables -------------------------------------------------------------------------------------------
    parameters: ClassVar[tuple[Param, ...]]
    default_config: ClassVar[Config]  # must equal the template's macro defaults

    def __init__(self, domains: Mapping[str, Sequence[Any]] | None = None) -> None:
        """``domains`` narrows some parameters to a subset of their values (replay data, quick searches)."""
        params = {p.name: p for p in self.parameters}
        if domains:
            for name, values in domains.items():
                if name not in params:
                    raise InvalidArgument(f"{self.name} has no parameter {name!r}")
                unknown = [v for v in values if v not in params[name].values]
                if unknown or not values:
                    raise InvalidArgument(f"{self.name}.{name}: {unknown or 'no'} values outside its domain")
                params[name] = Param(name, tuple(values), params[name].doc)
        self.params: tuple[Param, ...] = tuple(params.values())

    # --- constraints ----------------------------------------------------------------------------------------
    @abstractmethod
    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        """Reasons this configuration cannot work on this device for this shape; empty when it can."""

    def violations(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        """Domain membership, then the space's own constraints."""
        problems = []
        for p in self.params:
            if p.name not in config:
                problems.append(f"missing parameter {p.name}")
            elif config[p.name] not in p.values:
                problems.append(f"{p.name}={config[p.name]!r} is not one of {list(p.values)}")
        extra = set(config) - {p.name for p in self.params}
        if extra:
            problems.append(f"unknown parameters {sorted(extra)}")
        return problems or self.constraints(config, shape, device)

    def require_valid(self, config: Config, shape: Shape, device: DeviceInfo) -> None:
        problems = self.violations(config, shape, device)
        if problems:
            raise InvalidConfig(f"{self.name} configuration {config_key(config)} is invalid: {problems[0]}")

    # --- rendering and launching ----------------------------------------------------------------------------
    def defines(self, config: Config) -> dict[str, int | str]:
        """The -D defines that render ``config`` (by default: the parameters themselves)."""
        return dict(config)

    @abstractmethod
    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        """The launch plan: kernels (and buffer zeroings) in order. ``device``: grids sized by SM count."""

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        """Scratch buffers the launch plan needs besides inputs and outputs."""
        return {}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        """The problem shape from the shapes of the caller's input arrays (runtime dispatch); raises
        `InvalidArgument` naming the argument that does not fit."""
        raise NotImplementedError(f"{self.name} does not support runtime dispatch")

    # --- correctness ----------------------------------------------------------------------------------------
    @abstractmethod
    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        """The buffers the kernel reads."""

    def inputs(self, shape: Shape, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Fresh random inputs (never zeros): uniform in [-1, 1) unless the space knows better."""
        return {
            name: rng.uniform(-1.0, 1.0, size=spec.shape).astype(spec.dtype)
            for name, spec in self.input_specs(shape).items()
        }

    @abstractmethod
    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        """The buffers the kernel writes, every element of which is checked."""

    @abstractmethod
    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        """The right answer in float64, computed with numpy."""

    def device_bytes(self, config: Config | None, shape: Shape) -> int:
        """GPU memory a measurement at ``shape`` needs: inputs, outputs, their fp64 references, workspace."""
        total = sum(s.nbytes for s in self.input_specs(shape).values())
        total += sum(3 * s.nbytes for s in self.outputs(shape).values())
        if config is not None:
            total += sum(s.nbytes for s in self.workspace(config, shape).values())
        return total

    def tolerance(self, output: str, shape: Shape) -> float:
        """Largest accepted ‖out − ref‖ / ‖ref‖ for ``output``."""
        return 1e-4

    def zero_tolerance(self, output: str, shape: Shape) -> float:
        """Largest RMS error accepted where the whole reference is exactly zero (a relative error is undefined
        there, e.g. LayerNorm's dx over rows of length 1): an absolute bound on the output's natural scale."""
        return self.tolerance(output, shape)

    def validation_shapes(self, shape: Shape) -> list[Shape]:
        """Small shapes with ragged edges, checked (with fresh inputs) besides the target shape."""
        return []

    # --- metric ---------------------------------------------------------------------------------------------
    @abstractmethod
    def work(self, shape: Shape) -> float:
        """FLOPs (for TFLOP/s) or bytes moved (for GB/s) of one run of the launch plan."""

    def metric(self, shape: Shape, time_ms: float) -> float:
        scale = 1e12 if self.metric_unit == "TFLOP/s" else 1e9
        return self.work(shape) / (time_ms * 1e-3) / scale

    # --- helpers --------------------------------------------------------------------------------------------
    def parse_shape(self, text: str) -> Shape:
        return parse_shape(text, self.dims)

    def format_shape(self, shape: Shape) -> str:
        return format_shape(shape)

    def domain(self, name: str) -> tuple[Any, ...]:
        for p in self.params:
            if p.name == name:
                return p.values
        raise KeyError(name)

    def size(self) -> int:
        """Number of configurations in the product of the domains (valid or not)."""
        return math.prod(len(p.values) for p in self.params)

    def configs(self) -> Iterator[Config]:
        """Every configuration of the product of the domains, in a fixed order."""
        names = [p.name for p in self.params]
        for values in np.ndindex(*(len(p.values) for p in self.params)):
            yield {n: p.values[i] for n, p, i in zip(names, self.params, values)}

    def valid_configs(self, shape: Shape, device: DeviceInfo) -> list[Config]:
        return [c for c in self.configs() if not self.violations(c, shape, device)]

    @classmethod
    def ref(cls) -> str:
        """Import reference ``module:Class`` by which a worker process rebuilds this space."""
        return f"{cls.__module__}:{cls.__qualname__}"

    def describe(self, config: Config) -> str:
        """A compact one-line rendering for tables."""
        return " ".join(f"{k}={v}" for k, v in config.items())
