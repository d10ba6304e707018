"""Tuned kernels in one line, at run time, with no tuning:

    gemm = autotune.load("gemm")        # stored configurations for this GPU (default database, or db=...)
    C = gemm(A, B)                      # or gemm(A, B, out=C, stream=s)

Per input shape the dispatcher picks a configuration once (`autotune.runtime.selection`), compiles it at most once per
process (through the same disk cache as search), loads it into the device's primary context — the one torch,
cupy and pycuda use — and keeps the launch ready: a later call with the same shapes only reads the array
pointers and launches. Calls are safe from several threads.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from autotune.device import DeviceInfo, query_device
from autotune.errors import AutotuneError, InvalidArgument, InvalidType, NotTuned, ToolchainError
from autotune.results.storage import Database, resolve_url, sqlite_path
from autotune.runtime import call_log
from autotune.runtime.arrays import CAI, CUPY, RAW, TORCH, ArrayArg, check_matches, describe, empty_like, stream_handle
from autotune.runtime.cuda_driver import CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED, Driver
from autotune.runtime.launch_plan import LaunchPlan
from autotune.runtime.selection import TUNED, Choice, choose, describe_fallback
from autotune.shape import Shape, format_shape
from autotune.spaces import get_space
from autotune.spaces.base import BufferSpec, Config, KernelSpace, config_key

# The logger's name is what users configure: kept as it was before this module moved into autotune.runtime.
log = logging.getLogger("autotune.dispatch")
_SLOW = object()  # returned by a fast path that cannot take the call

@dataclass
class ProblemPlan:
    """What runs for one problem (shape, dtype): the chosen configuration and its bound launches.

    Pointers are given in the order of ``names``: the inputs, the outputs, then the workspace buffers; a
    caller that allocates no workspace (a plain call) leaves them out, and the plan allocates its own once per
    stream."""

    shape: Shape
    dtype: str
    choice: Choice
    launches: LaunchPlan
    outputs: dict[str, BufferSpec]
    workspace: dict[str, BufferSpec]
    kernel: str = ""  # as `autotune.record` names it
    lock: threading.Lock = field(default_factory=threading.Lock)
    scratch: dict[int, list[int]] = field(default_factory=dict)  # stream → workspace pointers

    @property
    def names(self) -> tuple[str, ...]:
        return self.launches.names

    def launch(self, driver: Driver, pointers: Sequence[int], stream: int) -> None:
        """Run on ``pointers`` (see the class) on ``stream``."""
        if call_log.ACTIVE:
            call_log.note(self.kernel, self.shape, self.dtype)
        if len(pointers) < len(self.launches.names):
            pointers = [*pointers, *self._scratch(driver, stream)]
        self.launches.launch(pointers, stream)

    def run(self, driver: Driver, pointers: Mapping[str, int], stream: int) -> None:
        """`launch` with pointers by name (the workspace's may be left out)."""
        given = [pointers[n] for n in self.launches.names if n not in self.workspace]
        if self.workspace and all(n in pointers for n in self.workspace):
            given += [pointers[n] for n in self.workspace]
        self.launch(driver, given, stream)

    def _scratch(self, driver: Driver, stream: int) -> list[int]:
        with self.lock:
            found = self.scratch.get(stream)
            if found is None:
                found = self.scratch[stream] = [driver.alloc(s.nbytes) for s in self.workspace.values()]
            return found


class TunedKernel:
    """A kernel family ready to run with its tuned configurations; made by `load`."""

    def __init__(self, kernel: str, *, db: str | None = None, strict: bool = False, device: int = 0,
                 tune_missing: int = 0) -> None:
        self._kernel = kernel
        self._db = db
        self.tune_missing = tune_missing
        self.space = get_space(kernel)  # at the family's first dtype; `space_for` gives the others
        self._spaces: dict[str, KernelSpace] = {self.space.dtype: self.space}
        self._hashes: dict[str, str] = {}
        self.strict = strict
        default = self.space.default_shape
        self.input_names = tuple(self.space.input_specs(default))
        self.output_names = tuple(self.space.outputs(default))
        self._driver = Driver.get()
        self.device: DeviceInfo = query_device(device)
        self._ordinal = device
        self._context = self._driver.primary_context(self._driver.device(device))
        self.template_hash = self.hash_for(self.space.dtype)
        self.rows = self._read_rows(db)
        self._plans: dict[tuple, ProblemPlan] = {}
        self._modules: dict[str, tuple[int, dict[str, int]]] = {}
        self._lock = threading.RLock()
        self._torch: Any = None
        self._torch_type: Any = None  # set once torch tensors have been seen
        self._torch_plans: dict[tuple, tuple] = {}

    def _read_rows(self, db: str | None) -> list:
        url = resolve_url(db)
        path = sqlite_path(url)
        if path is not None and not path.exists():
            if self.strict:
                raise NotTuned(f"no tuned configurations: database {path} does not exist")
            log.warning("autotune: database %s does not exist: %s runs its default configuration", path,
                        self.space.name)  # fmt: skip
            return []
        database = Database(url, create=False)
        try:
            return database.best(kernel=self.space.name)
        finally:
            database.close()

    # --- choosing -------------------------------------------------------------------------------------------
    def space_for(self, dtype: str) -> KernelSpace:
        """The kernel's space for problems of ``dtype`` (`InvalidType` if it has none)."""
        space = self._spaces.get(dtype)
        if space is None:
            try:
                space = get_space(self._kernel, dtype=dtype)
            except InvalidArgument as exc:
                raise InvalidType(str(exc)) from None
            self._spaces[space.dtype] = space
        return space

    def hash_for(self, dtype: str) -> str:
        if dtype not in self._hashes:
            self._hashes[dtype] = self.space_for(dtype).template_hash()
        return self._hashes[dtype]

    def choice(self, shape: Shape | str, dtype: str | None = None) -> Choice:
        """The configuration this kernel runs at ``shape`` (a problem shape such as (M, N, K)) for problems of
        ``dtype`` (default: the family's first), and why."""
        space = self.space_for(dtype or self.space.dtype)
        shape_t = space.parse_shape(shape) if isinstance(shape, str) else tuple(shape)
        rows = [r for r in self.rows if r.dtype == space.dtype]
        return choose(space, shape_t, self.device, rows, self.hash_for(space.dtype), strict=self.strict)

    def _plan(self, key: tuple, inputs: Sequence[ArrayArg]) -> ProblemPlan:
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                return plan
            dtype = type(self.space).infer_dtype({a.name: str(a.dtype) for a in inputs})
            space = self.space_for(dtype)
            shape = space.infer_shape({a.name: a.shape for a in inputs})  # type: ignore[misc]
            specs = space.input_specs(shape)
            for arg in inputs:
                check_matches(arg, specs[arg.name].shape, specs[arg.name].dtype)
            choice = self.choice(shape, dtype)
            if choice.source != TUNED and self.tune_missing > 0 and not self.strict:
                choice = self._tune_now(space, shape, dtype, choice)
            if choice.source != TUNED:
                # Once per (kernel, shape, dtype): plans are cached by shape and dtype.
                log.warning("autotune: %s %s %s: %s; %s", space.name, format_shape(shape), dtype, choice.reason,
                            describe_fallback(choice))  # fmt: skip
            plan = self._build(space, shape, choice)
            self._plans[key] = plan
            return plan

    def _tune_now(self, space: KernelSpace, shape: Shape, dtype: str, fallback: Choice) -> Choice:
        """``tune_missing``: search this untuned shape now (once per shape and dtype: plans are cached), store
        the result, and run it. A search that fails leaves the fallback in place, with the reason logged."""
        from autotune.tuning.tune import tune

        text = format_shape(shape)
        log.warning("autotune: %s %s %s has no tuned configuration: searching %d trials now (tune_missing), "
                    "result stored in the database", space.name, text, dtype, self.tune_missing)  # fmt: skip
        try:
            tune(self._kernel, text, dtype=dtype, trials=self.tune_missing, db=self._db)
        except AutotuneError as exc:
            log.warning("autotune: the search for %s %s %s failed (%s); %s", space.name, text, dtype, exc,
                        describe_fallback(fallback))  # fmt: skip
            return fallback
        self.rows = self._read_rows(self._db)
        return self.choice(shape, dtype)

    def _build(self, space: KernelSpace, shape: Shape, choice: Choice) -> ProblemPlan:
        config = choice.config
        outputs, workspace = space.outputs(shape), space.workspace(config, shape)
        names = (*self.input_names, *outputs, *workspace)
        sizes = {name: spec.nbytes for name, spec in {**outputs, **workspace}.items()}
        launches = LaunchPlan(self._driver, space.launches(config, shape, self.device),
                              lambda kernel, shared: self._function(space, config, shape, kernel, shared),
                              names, sizes)  # fmt: skip
        return ProblemPlan(shape, space.dtype, choice, launches, outputs, workspace, kernel=_record_name(space))

    def _function(self, space: KernelSpace, config: Config, shape: Shape, kernel: str, shared_bytes: int) -> int:
        defines = space.compile_defines(config, shape)
        key = space.dtype + ":" + config_key(defines)
        if key not in self._modules:
            from autotune.runtime.binaries import load_cubin

            try:  # a cubin from the binary store, else nvcc, else NVRTC: the runtime needs no toolkit
                image, _route = load_cubin(space.template_for(config), defines, self.device.compile_arch)
            except ToolchainError as exc:
                raise ToolchainError(f"{space.name}: configuration {key}: {exc}") from None
            self._driver.make_current(self._context)
            self._modules[key] = (self._driver.load_module(image), {})
        module, functions = self._modules[key]
        if kernel not in functions:
            self._driver.make_current(self._context)
            functions[kernel] = self._driver.function(module, kernel)
            if shared_bytes > 48 * 1024:
                self._driver.set_max_dynamic_shared(functions[kernel], shared_bytes)
        return functions[kernel]

    # --- calling --------------------------------------------------------------------------------------------
    def prepare(self, *arrays: Any) -> ProblemPlan:
        """The launch plan for calls on arrays like ``arrays`` (checked, chosen, compiled and loaded once): for
        callers that allocate outputs and workspaces themselves and launch with `launch` (autotune.torch)."""
        if len(arrays) != len(self.input_names):
            raise InvalidType(f"{self.space.name} takes {len(self.input_names)} arrays "
                              f"({', '.join(self.input_names)}), got {len(arrays)}")  # fmt: skip
        inputs = [describe(n, a) for n, a in zip(self.input_names, arrays)]
        key = tuple((a.shape, a.dtype) for a in inputs)
        return self._plans.get(key) or self._plan(key, inputs)

    def launch(self, plan: ProblemPlan, pointers: Sequence[int], stream: int) -> None:
        """Run ``plan`` on device pointers in the order of ``plan.names`` (inputs, outputs, then the workspace,
        or the plan allocates its own) on ``stream``. Nothing is checked: `prepare` did, for arrays of these
        shapes."""
        self._driver.make_current(self._context)
        plan.launch(self._driver, pointers, stream)

    def __call__(self, *arrays: Any, out: Any = None, stream: Any = None) -> Any:
        if self._torch_type is not None:
            result = self._call_torch(arrays, out, stream)
            if result is not _SLOW:
                return result
        return self._call(arrays, out, stream)

    def _call_torch(self, arrays: tuple, out: Any, stream: Any) -> Any:
        """The per-call path for torch tensors whose shapes were seen before: only what can change between
        calls is looked at (device, contiguity, shape, dtype, pointer). Anything unusual returns _SLOW and the
        general path, which explains every error, takes the call."""
        tensor, ordinal = self._torch_type, self._ordinal
        if len(arrays) != len(self.input_names):
            return _SLOW
        key = []
        pointers = []
        for t in arrays:
            if type(t) is not tensor or not t.is_cuda or t.get_device() != ordinal or not t.is_contiguous():
                return _SLOW
            key.append(t.shape)
            key.append(t.dtype)
            pointers.append(t.data_ptr())
        entry = self._torch_plans.get(tuple(key))
        if entry is None:
            return _SLOW
        plan, out_specs = entry
        device = arrays[0].device
        if out is None:
            outs = [self._torch.empty(shape, dtype=dtype, device=device) for shape, dtype in out_specs]
        else:
            outs = [out] if len(out_specs) == 1 else out
            if type(outs) not in (tuple, list) or len(outs) != len(out_specs):
                return _SLOW
            for t, (shape, dtype) in zip(outs, out_specs):
                if (type(t) is not tensor or t.shape != shape or t.dtype != dtype or not t.is_cuda
                        or t.get_device() != ordinal or not t.is_contiguous()):  # fmt: skip
                    return _SLOW
        for t in outs:
            pointers.append(t.data_ptr())
        handle = torch_current_stream(ordinal) if stream is None else stream_handle(stream)
        self._driver.make_current(self._context)
        plan.launch(self._driver, pointers, handle)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _remember_torch(self, inputs: Sequence[ArrayArg], plan: ProblemPlan) -> None:
        """Let later calls with tensors of these shapes take `_call_torch` (any number of outputs; the plan
        allocates a workspace once per stream)."""
        if any(a.kind != TORCH for a in inputs):
            return
        import torch

        self._torch, self._torch_type = torch, type(inputs[0].obj)
        key = []
        for arg in inputs:
            key += [arg.obj.shape, arg.obj.dtype]
        out_specs = [(torch.Size(spec.shape), getattr(torch, spec.dtype)) for spec in plan.outputs.values()]
        self._torch_plans[tuple(key)] = (plan, out_specs)

    def _call(self, arrays: tuple, out: Any, stream: Any) -> Any:
        if len(arrays) != len(self.input_names):
            raise InvalidType(f"{self.space.name} takes {len(self.input_names)} arrays "
                              f"({', '.join(self.input_names)}), got {len(arrays)}")  # fmt: skip
        inputs = [describe(n, a) for n, a in zip(self.input_names, arrays)]
        host = [a.name for a in inputs if a.on_host]
        if host and len(host) != len(inputs):
            gpu = [a.name for a in inputs if not a.on_host]
            raise InvalidType(f"{', '.join(host)} on the host (numpy) but {', '.join(gpu)} on the GPU: "
                              "pass all arrays on one side")  # fmt: skip
        key = tuple((a.shape, a.dtype) for a in inputs)
        plan = self._plans.get(key) or self._plan(key, inputs)
        if host:
            return self._call_host(plan, inputs, out)
        if inputs[0].kind == TORCH:
            self._remember_torch(inputs, plan)
        for arg in inputs:
            self._check_device(arg)
        outputs = self._outputs(plan, inputs, out)
        if stream is not None:
            handle = stream_handle(stream)
        else:
            handle = self._current_stream(inputs)
        pointers = {a.name: a.ptr for a in inputs}
        for arg in outputs:
            pointers[arg.name] = arg.ptr
        self._driver.make_current(self._context)
        plan.run(self._driver, pointers, handle)
        results = tuple(a.obj for a in outputs)
        return results[0] if len(results) == 1 else results

    def _check_device(self, arg: ArrayArg) -> None:
        if arg.device is not None:
            if arg.device != self._ordinal:
                raise InvalidArgument(f"{arg.name} is on GPU {arg.device}; this kernel runs on GPU {self._ordinal}")
            return
        if arg.kind in (CAI, RAW):  # no framework to trust: ask the driver what the pointer is
            info = self._driver.pointer_info(arg.ptr)
            if info is None or info[0] not in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
                raise InvalidType(f"{arg.name} does not point to GPU memory")
            if info[1] != self._ordinal:
                raise InvalidArgument(f"{arg.name} is on GPU {info[1]}; this kernel runs on GPU {self._ordinal}")
            arg.nbytes_available = info[2] if info[2] >= 0 else None

    def _outputs(self, plan: ProblemPlan, inputs: Sequence[ArrayArg], out: Any) -> list[ArrayArg]:
        names = list(plan.outputs)
        if out is None:
            made = []
            for name in names:
                spec = plan.outputs[name]
                obj = empty_like(inputs[0], spec.shape, spec.dtype)
                if obj is None:
                    raise InvalidArgument(f"pass out=: cannot allocate {name} like {type(inputs[0].obj).__name__}")
                made.append(describe(name, obj))
            return made
        given = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(given) != len(names):
            raise InvalidArgument(f"out= needs {len(names)} arrays ({', '.join(names)}), got {len(given)}")
        args = []
        for name, obj in zip(names, given):
            arg = describe(f"out ({name})" if len(names) > 1 else "out", obj)
            if arg.on_host:
                raise InvalidType(f"{arg.name} is a numpy array but the inputs are on the GPU")
            if arg.readonly:
                raise InvalidArgument(f"{arg.name} is read-only")
            self._check_device(arg)
            check_matches(arg, plan.outputs[name].shape, plan.outputs[name].dtype)
            arg.name = name
            args.append(arg)
        return args

    def _current_stream(self, inputs: Sequence[ArrayArg]) -> int:
        """The stream the caller's framework is working on (their 'current stream'); else the default one."""
        kinds = {a.kind for a in inputs}
        if TORCH in kinds:
            return torch_current_stream(self._ordinal)
        if CUPY in kinds:
            import cupy

            return cupy.cuda.get_current_stream().ptr
        for arg in inputs:
            if arg.stream is not None:
                return arg.stream
        return 0

    def _call_host(self, plan: ProblemPlan, inputs: Sequence[ArrayArg], out: Any) -> Any:
        names = list(plan.outputs)
        if out is None:
            results = [np.empty(plan.outputs[n].shape, plan.outputs[n].dtype) for n in names]
        else:
            results = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(results) != len(names):
                raise InvalidArgument(f"out= needs {len(names)} arrays ({', '.join(names)}), got {len(results)}")
            for name, obj in zip(names, results):
                arg = describe("out", obj)
                if not arg.on_host:
                    raise InvalidType("out is a GPU array but the inputs are numpy arrays")
                if not obj.flags.writeable:
                    raise InvalidArgument("out is read-only")
                check_matches(arg, plan.outputs[name].shape, plan.outputs[name].dtype)
        driver = self._driver
        driver.make_current(self._context)
        allocated: dict[str, int] = {}
        try:
            for arg in inputs:
                allocated[arg.name] = driver.alloc(arg.obj.nbytes)
                driver.copy_to_device(allocated[arg.name], arg.ptr, arg.obj.nbytes, 0)
            for name in names:
                allocated[name] = driver.alloc(plan.outputs[name].nbytes)
            plan.run(driver, allocated, 0)
            for name, array in zip(names, results):
                driver.copy_to_host(array.ctypes.data, allocated[name], array.nbytes, 0)
            driver.synchronize(0)
        finally:
            for ptr in allocated.values():
                driver.free(ptr)
        return results[0] if len(results) == 1 else tuple(results)

    def __repr__(self) -> str:
        tuned = sorted({f"{r.shape} {r.dtype}" for r in self.rows if r.device_name == self.device.name})
        return f"<autotune {self.space.name} on {self.device.name}: tuned for {', '.join(tuned) or 'no shape'}>"


def _record_name(space: KernelSpace) -> str:
    """A library kernel by its name; a space from elsewhere by its import reference (what a search takes)."""
    from autotune.spaces import kernel_names, space_class

    cls = type(space)
    if space.name in kernel_names() and space_class(space.name) is cls:
        return space.name
    return cls.ref()  # a file.py:Class space by its file's absolute path


def torch_current_stream(device: int) -> int:
    """torch's current stream on GPU ``device``, as a CUstream handle."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton uses: an int, no Stream object
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def load(kernel: str, *, db: str | None = None, strict: bool = False, device: int = 0,
         tune_missing: int = 0) -> TunedKernel:
    """The tuned kernel ``kernel`` for GPU ``device``: call it on arrays.

    ``strict=True`` raises `NotTuned` where no configuration was tuned for the exact shape on this GPU model
    with the current template, instead of falling back to the nearest tuned shape or the default.
    ``tune_missing=N``: the first call on a shape (and dtype) with no tuned configuration runs a search of N
    trials there, stores its result in ``db`` and runs it (logged: the call takes as long as the search).
    """
    return TunedKernel(kernel, db=db, strict=strict, device=device, tune_missing=tune_missing)
