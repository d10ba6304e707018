"""Tuned kernels in one line, at run time, with no tuning:

    gemm = autotune.load("gemm")        # stored configurations for this GPU (default database, or db=...)
    C = gemm(A, B)                      # or gemm(A, B, out=C, stream=s)

Per input shape the dispatcher picks a configuration once (`autotune.runtime.selection`), compiles it at most once per
process (through the same disk cache as search), loads it into the device's primary context — the one torch,
cupy and pycuda use — and keeps the launch ready: a later call with the same shapes only reads the array
pointers and launches. Calls are safe from several threads.

`TunedKernel` chooses and calls; what it runs for one problem is a `ProblemPlan` (`autotune.runtime.problem_plan`),
its compiled modules are `KernelModules`, a call's arrays are checked and placed by `CallArrays`, and torch tensors
seen before take the `TorchCalls` fast path.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Sequence

from autotune.device import DeviceInfo, query_device
from autotune.errors import AutotuneError, InvalidArgument, InvalidType, NotTuned
from autotune.results.storage import Database, resolve_url, sqlite_path
from autotune.runtime.arrays import TORCH, ArrayArg, check_matches, describe, stream_handle
from autotune.runtime.call_arrays import CallArrays
from autotune.runtime.call_log import record_name
from autotune.runtime.code_check import CodeCheck
from autotune.runtime.cuda_driver import Driver
from autotune.runtime.kernel_modules import KernelModules
from autotune.runtime.launch_plan import LaunchPlan
from autotune.runtime.problem_plan import ProblemPlan
from autotune.runtime.selection import TUNED, Choice, choose, describe_fallback
from autotune.runtime.torch_calls import SLOW, TorchCalls
from autotune.shape import Shape, format_shape
from autotune.spaces import get_space
from autotune.spaces.base import KernelSpace

# The logger's name is what users configure: kept as it was before this module moved into autotune.runtime.
log = logging.getLogger("autotune.dispatch")


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
        self.rows, code_hashes = self._read_rows(db)
        self._code_check = CodeCheck(code_hashes, self.device.compile_arch, self.space_for)
        self._plans: dict[tuple, ProblemPlan] = {}
        self._modules = KernelModules(self._driver, self._context, self.device.compile_arch)
        self._lock = threading.RLock()
        self._arrays = CallArrays(self._driver, self._context, device)
        self._torch = TorchCalls(self._driver, self._context, device, len(self.input_names))
        self._call_torch: Any = None  # the torch fast path, once torch tensors have been seen

    def _read_rows(self, db: str | None) -> tuple[list, dict[int, str]]:
        """The kernel's stored rows, and their machine-code identities by row id."""
        url = resolve_url(db)
        path = sqlite_path(url)
        if path is not None and not path.exists():
            if self.strict:
                raise NotTuned(f"no tuned configurations: database {path} does not exist")
            log.warning("autotune: database %s does not exist: %s runs its default configuration", path,
                        self.space.name)  # fmt: skip
            return [], {}
        database = Database(url, create=False)
        try:
            return database.best(kernel=self.space.name), database.code_hashes()
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
        return choose(space, shape_t, self.device, rows, self.hash_for(space.dtype), strict=self.strict,
                      revalidate=self._code_check)  # fmt: skip

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
        self.rows, code_hashes = self._read_rows(self._db)
        self._code_check.hashes.update(code_hashes)
        return self.choice(shape, dtype)

    def _build(self, space: KernelSpace, shape: Shape, choice: Choice) -> ProblemPlan:
        config = choice.config
        outputs, workspace = space.outputs(shape), space.workspace(config, shape)
        names = (*self.input_names, *outputs, *workspace)
        sizes = {name: spec.nbytes for name, spec in {**outputs, **workspace}.items()}
        launches = LaunchPlan(self._driver, space.launches(config, shape, self.device),
                              lambda kernel, shared: self._modules.function(space, config, shape, kernel, shared),
                              names, sizes)  # fmt: skip
        return ProblemPlan(shape, space.dtype, choice, launches, outputs, workspace, kernel=record_name(space))

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
        if self._call_torch is not None:
            result = self._call_torch(arrays, out, stream)
            if result is not SLOW:
                return result
        return self._call(arrays, out, stream)

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
            return self._arrays.call_host(plan, inputs, out)
        if inputs[0].kind == TORCH and self._torch.remember(inputs, plan):
            self._call_torch = self._torch.call
        for arg in inputs:
            self._arrays.check_device(arg)
        outputs = self._arrays.outputs(plan, inputs, out)
        if stream is not None:
            handle = stream_handle(stream)
        else:
            handle = self._arrays.current_stream(inputs)
        pointers = {a.name: a.ptr for a in inputs}
        for arg in outputs:
            pointers[arg.name] = arg.ptr
        self._driver.make_current(self._context)
        plan.run(self._driver, pointers, handle)
        results = tuple(a.obj for a in outputs)
        return results[0] if len(results) == 1 else results

    def __repr__(self) -> str:
        tuned = sorted({f"{r.shape} {r.dtype}" for r in self.rows if r.device_name == self.device.name})
        return f"<autotune {self.space.name} on {self.device.name}: tuned for {', '.join(tuned) or 'no shape'}>"


def load(kernel: str, *, db: str | None = None, strict: bool = False, device: int = 0,
         tune_missing: int = 0) -> TunedKernel:
    """The tuned kernel ``kernel`` for GPU ``device``: call it on arrays.

    ``strict=True`` raises `NotTuned` where no configuration was tuned for the exact shape on this GPU model
    with the current template, instead of falling back to the nearest tuned shape or the default.
    ``tune_missing=N``: the first call on a shape (and dtype) with no tuned configuration runs a search of N
    trials there, stores its result in ``db`` and runs it (logged: the call takes as long as the search).
    """
    return TunedKernel(kernel, db=db, strict=strict, device=device, tune_missing=tune_missing)
