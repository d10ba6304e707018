"""The per-call path of a `TunedKernel` for torch tensors whose shapes were seen before.

Only what can change between calls is looked at (device, contiguity, shape, dtype, pointer); anything unusual
returns `SLOW`, and the general path, which explains every error, takes the call. Where the C++ launcher of torch
calls is loaded (`autotune.runtime.torch_native`), these checks and the launch run there, on the same plans.
"""

from __future__ import annotations

from typing import Any, Sequence

from autotune.errors import InvalidArgument
from autotune.runtime import torch_native
from autotune.runtime.arrays import TORCH, ArrayArg, stream_handle
from autotune.runtime.cuda_driver import Driver
from autotune.runtime.problem_plan import ProblemPlan

SLOW = object()  # returned by the fast path where it cannot take the call


def torch_current_stream(device: int) -> int:
    """torch's current stream on GPU ``device``, as a CUstream handle."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Triton uses: an int, no Stream object
    if raw is not None:
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


class TorchCalls:
    """The torch tensors' fast path of one `TunedKernel` (see the module)."""

    def __init__(self, driver: Driver, context: int, ordinal: int, inputs: int) -> None:
        """``inputs``: how many input arrays the kernel takes."""
        self._driver = driver
        self._context = context
        self._ordinal = ordinal
        self._inputs = inputs
        self._torch: Any = None
        self._torch_type: Any = None  # set once torch tensors have been seen
        self._torch_plans: dict[tuple, tuple] = {}
        self._table: int | None = None  # this kernel's plans in the C++ launcher, where it is loaded
        self._native: Any = None  # its call: the whole per-call path in C++ (None: take the Python one)

    def remember(self, inputs: Sequence[ArrayArg], plan: ProblemPlan) -> bool:
        """Let later calls with tensors of these shapes take `call` (any number of outputs; the plan allocates a
        workspace once per stream); False where the inputs are not all torch tensors."""
        if any(a.kind != TORCH for a in inputs):
            return False
        import torch

        self._torch, self._torch_type = torch, type(inputs[0].obj)
        key = []
        for arg in inputs:
            key += [arg.obj.shape, arg.obj.dtype]
        out_specs = [(torch.Size(spec.shape), getattr(torch, spec.dtype)) for spec in plan.outputs.values()]
        self._torch_plans[tuple(key)] = (plan, out_specs)
        native = torch_native.module()
        if native is not None:
            if self._table is None:
                self._table = native.new_table(self._inputs)
            native.table_add(self._table, tuple(a.obj for a in inputs), torch_native.describe(plan))
            self._native = native.call
        return True

    def call(self, arrays: tuple, out: Any, stream: Any) -> Any:
        """The call's result, or `SLOW` (see the module)."""
        if self._native is not None:
            try:
                result = self._native(self._table, self._ordinal, arrays, out, stream)
            except ValueError as exc:  # the launcher's bad-argument check (TORCH_CHECK_VALUE): our convention's type
                raise InvalidArgument(str(exc).splitlines()[0].removeprefix("autotune: ")) from None
            if result is not None:
                return result
        tensor, ordinal = self._torch_type, self._ordinal
        if len(arrays) != self._inputs:
            return SLOW
        key = []
        pointers = []
        for t in arrays:
            if type(t) is not tensor or not t.is_cuda or t.get_device() != ordinal or not t.is_contiguous():
                return SLOW
            key.append(t.shape)
            key.append(t.dtype)
            pointers.append(t.data_ptr())
        entry = self._torch_plans.get(tuple(key))
        if entry is None:
            return SLOW
        plan, out_specs = entry
        device = arrays[0].device
        if out is None:
            outs = [self._torch.empty(shape, dtype=dtype, device=device) for shape, dtype in out_specs]
        else:
            outs = [out] if len(out_specs) == 1 else out
            if type(outs) not in (tuple, list) or len(outs) != len(out_specs):
                return SLOW
            for t, (shape, dtype) in zip(outs, out_specs):
                if (type(t) is not tensor or t.shape != shape or t.dtype != dtype or not t.is_cuda
                        or t.get_device() != ordinal or not t.is_contiguous()):  # fmt: skip
                    return SLOW
        for t in outs:
            pointers.append(t.data_ptr())
        handle = torch_current_stream(ordinal) if stream is None else stream_handle(stream)
        self._driver.make_current(self._context)
        plan.launch(self._driver, pointers, handle)
        return outs[0] if len(outs) == 1 else tuple(outs)
