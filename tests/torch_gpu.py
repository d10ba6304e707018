"""Helpers the GPU tests of autotune.torch share (their fixture ``att`` is in conftest.py): a relative error
against float64, seeded CUDA tensors."""

from __future__ import annotations

from typing import Any


def rel(a: Any, b: Any) -> float:
    """‖a − b‖ / ‖b‖ (Frobenius), in float64."""
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def cuda(*shape: int, seed: int = 0, **kw: Any) -> Any:
    """torch.randn on the GPU from a generator seeded with ``seed``."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g, **kw)
