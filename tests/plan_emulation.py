"""A numpy emulation of the TMA GEMM's launch plans (no GPU): what each step's kernel computes, on the buffers the
plan names, so that a CPU test checks the plan's wiring — which buffer each step reads and writes, the tensor
maps' extents over them, the padding copies, the transposed copies, the bias and the split-K reduce — against
numpy's product. The kernels themselves are the GPU tier's to check.

Workspaces start as NaN: a step that reads what no earlier step wrote (a padding column left unwritten, say)
poisons C. linear_gelu's epilogue (in the kernel, or gemm_bias_gelu after it) writes ``pre`` and GELU of it to C.
Tensor maps read as TMA does: the box extents inside ``dims`` come from the buffer, anything past them
is zero.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np

from autotune.spaces._gelu import gelu_tanh
from autotune.spaces._gemm_splitk import PARTIAL
from autotune.spaces.base import Launch, TensorMap, Zero


def _matrix(buffers: Mapping[str, np.ndarray], tmap: TensorMap) -> np.ndarray:
    """The 2-D tensor a map reads: ``dims`` (inner, outer) over its buffer's dense rows."""
    inner, outer = tmap.dims
    flat = buffers[tmap.buffer].reshape(-1)
    assert flat.size >= inner * outer, (tmap, flat.size)
    return flat[: inner * outer].reshape(outer, inner)


def _operand(buffers: Mapping[str, np.ndarray], tmap: TensorMap, rows: int, cols: int,
             transposed: bool) -> np.ndarray:  # fmt: skip
    """rows × cols of the operand from its map (stored transposed: the map's matrix is its transpose); zeros past
    the map's extents, as TMA fills them."""
    stored = _matrix(buffers, tmap)
    view = stored.T if transposed else stored
    out = np.zeros((rows, cols))
    r, c = min(rows, view.shape[0]), min(cols, view.shape[1])
    out[:r, :c] = view[:r, :c]
    return out


def _gemm(buffers: dict[str, np.ndarray], args: tuple, defines: Mapping[str, Any], grid: tuple) -> None:
    a_map, b_map, out, *rest = args
    epilogue = list(itertools.takewhile(lambda a: isinstance(a, str), rest))  # (bias[, pre]) right after C
    rest = rest[len(epilogue):]
    bias = epilogue[0] if epilogue else None
    m, n, k = (int(v) for v in rest[:3])
    a = _operand(buffers, a_map, m, k, transposed=bool(defines.get("A_MN_MAJOR")))
    b = _operand(buffers, b_map, k, n, transposed=bool(defines.get("B_K_MAJOR")))
    c = a @ b
    if bias is not None and out != PARTIAL:  # the epilogue adds it unsplit only (gridDim.z == 1): split, it is
        c = c + buffers[bias].reshape(-1)[:n]  # the plan's gemm_bias_add after the reduce
        if defines.get("GEMM_GELU"):
            assert epilogue == ["bias", "pre"], epilogue
            buffers["pre"].reshape(m, n)[:] = c
            c = gelu_tanh(c)
    if out == PARTIAL:  # z slices of K: their sum is the product (the split is the kernel's business)
        part = buffers[PARTIAL].reshape(grid[2], m, n)
        part[:] = 0.0
        part[0] = c
    else:
        buffers[out].reshape(m, n)[:] = c


def emulate(space: Any, config: Mapping[str, Any], shape: tuple, device: Any,
            inputs: Mapping[str, np.ndarray]) -> np.ndarray:  # fmt: skip
    """C of ``space``'s plan for ``config`` at ``shape``, the steps emulated in float64."""
    return emulate_outputs(space, config, shape, device, inputs)["C"]


def emulate_outputs(space: Any, config: Mapping[str, Any], shape: tuple, device: Any,
                    inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:  # fmt: skip
    """Every output of ``space``'s plan (C, and linear_gelu's pre), the steps emulated in float64."""
    buffers: dict[str, np.ndarray] = {name: np.asarray(v, dtype=np.float64).copy() for name, v in inputs.items()}
    for name, spec in space.outputs(shape).items():
        buffers[name] = np.full(spec.shape, np.nan)
    for name, spec in space.workspace(config, shape).items():
        buffers[name] = np.full(spec.shape, np.nan)
    defines = space.defines(config)
    for step in space.launches(config, shape, device):
        if isinstance(step, Zero):
            buffers[step.buffer][:] = 0.0
            continue
        assert isinstance(step, Launch)
        args = step.args
        if step.kernel == "gemm_pad_rows":
            src, dst, rows, cols, ld = args[0], args[1], int(args[2]), int(args[3]), int(args[4])
            padded = np.zeros((rows, ld))
            padded[:, :cols] = buffers[src].reshape(-1)[: rows * cols].reshape(rows, cols)
            buffers[dst].reshape(-1)[: rows * ld] = padded.reshape(-1)
        elif step.kernel == "gemm_transpose":
            src, dst, rows, cols = args[0], args[1], int(args[2]), int(args[3])
            stored = buffers[src].reshape(-1)[: rows * cols].reshape(rows, cols)
            buffers[dst].reshape(-1)[: rows * cols] = stored.T.reshape(-1)
        elif step.kernel == "gemm_wgmma_tma":
            _gemm(buffers, args, defines, step.grid)
        elif step.kernel == "gemm_splitk_reduce":
            partial, out, mn, splits = args[0], args[1], int(args[2]), int(args[3])
            buffers[out].reshape(-1)[:mn] = buffers[partial].reshape(splits, -1)[:, :mn].sum(axis=0)
        elif step.kernel == "gemm_bias_add":
            out, bias, mn, cols = args[0], args[1], int(args[2]), int(args[3])
            flat = buffers[out].reshape(-1)
            flat[:mn] += np.tile(buffers[bias].reshape(-1)[:cols], mn // cols)
        elif step.kernel == "gemm_bias_gelu":
            out, bias, pre, mn, cols = args[0], args[1], args[2], int(args[3]), int(args[4])
            x = buffers[out].reshape(-1)[:mn] + np.tile(buffers[bias].reshape(-1)[:cols], mn // cols)
            buffers[pre].reshape(-1)[:mn] = x
            buffers[out].reshape(-1)[:mn] = gelu_tanh(x)
        else:
            raise AssertionError(f"no emulation of kernel {step.kernel}")
    return {name: buffers[name] for name in space.outputs(shape)}
