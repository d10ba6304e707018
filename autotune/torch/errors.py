"""Errors of autotune's PyTorch operators, in torch's manner: each names the argument, and derives from the
built-in class torch itself raises for that mistake (RuntimeError for device and dtype, ValueError for layout
and shape), as well as from `autotune.AutotuneError`."""

from __future__ import annotations

from autotune.errors import AutotuneError


class TensorError(AutotuneError):
    """A tensor given to an autotune operator cannot be used as it is."""


class WrongDevice(TensorError, RuntimeError):
    """A tensor is not on a CUDA device, or not on the same one as the first input."""


class WrongDtype(TensorError, RuntimeError):
    """A tensor's dtype is not one the kernel family supports, or differs from the other inputs'."""


class NotContiguous(TensorError, ValueError):
    """The raw operators take contiguous tensors only (the functions and modules copy instead)."""


class WrongShape(TensorError, ValueError):
    """The tensors' shapes do not make a problem of the kernel (e.g. weight of another width than x)."""


class NoBackward(TensorError, RuntimeError):
    """A forward-only operator was called on tensors that need a gradient (it would return none)."""
