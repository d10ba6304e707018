"""The Hopper TMA GEMM for any N and K: ``wgmma_tma`` where an operand's rows are not whole 16 bytes (N or K not a
multiple of 8 elements), which TMA cannot stride (template: kernel_templates/gemm_wgmma_tma_padded.cu).

Such an operand is first copied into a workspace whose rows are padded with zeros to a multiple of 8 elements
(``gemm_pad_rows``, kernel_templates/gemm_layout.cuh): A (M×K) into ``a_padded`` where K is odd to TMA, B (K×N)
into ``b_padded`` where N is. The TMA kernel then runs unchanged over the workspaces; the zeros past K add
nothing, the columns past N are not stored, and C (any N) is written from registers by guarded stores. The copy
is timed with the product (what is timed is what runs): it reads and writes each padded operand once more, so it
pays where the product's arithmetic outweighs that (the rule default takes it only for wide outputs,
`autotune.spaces._gemm_rules`). Shapes TMA strides as they are belong to ``wgmma_tma`` (`unfit`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from autotune.device import DeviceInfo
from autotune.shape import Shape
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import BufferSpec, Config, Launch, Step, TensorMap, ceil_div
from autotune.spaces.gemm_wgmma_tma import ALIGN_ELEMENTS, WgmmaTmaGemm

PAD_THREADS, PAD_VECTOR = 256, 8  # gemm_pad_rows: 8 elements (16 bytes) per thread, 256 threads per block
MAX_GRID_Y = 65535  # gridDim.y's limit: past it a block walks several rows
PADDED = {"A": "a_padded", "B": "b_padded"}


def padded(length: int) -> int:
    """A row of ``length`` 16-bit elements rounded up to whole 16 bytes."""
    return ceil_div(length, ALIGN_ELEMENTS) * ALIGN_ELEMENTS


def pad_launch(source: str, rows: int, cols: int) -> Launch:
    """``gemm_pad_rows``: ``source`` (rows × cols) into its workspace, rows of `padded` (cols)."""
    ld = padded(cols)
    grid = (ceil_div(ld, PAD_THREADS * PAD_VECTOR), min(rows, MAX_GRID_Y), 1)
    return Launch("gemm_pad_rows", grid, (PAD_THREADS, 1, 1), 0,
                  (source, PADDED[source], np.int32(rows), np.int32(cols), np.int32(ld)))  # fmt: skip


class WgmmaTmaPaddedGemm(WgmmaTmaGemm):
    name = "wgmma_tma_padded"
    template = "gemm_wgmma_tma_padded.cu"
    LABEL = "wgmma+tma padded"

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = Algorithm.unfit(self, shape, device)
        if reason is not None:
            return reason
        _, n, k = shape
        if n % ALIGN_ELEMENTS == 0 and k % ALIGN_ELEMENTS == 0:
            return (f"algorithm {self.name} pads rows TMA cannot stride, and N={n}, K={k} are multiples of "
                    f"{ALIGN_ELEMENTS}: wgmma_tma runs this shape as it is")  # fmt: skip
        return None

    def padded_operands(self, shape: Shape) -> dict[str, tuple[int, int]]:
        """The operands copied first, each with its (rows, cols) as stored."""
        m, n, k = shape
        found = {}
        if k % ALIGN_ELEMENTS:
            found["A"] = (m, k)
        if n % ALIGN_ELEMENTS:
            found["B"] = (k, n)
        return found

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        steps = super().launches(config, shape, device)
        pads = self.padded_operands(shape)
        at = next(i for i, s in enumerate(steps) if isinstance(s, Launch) and s.kernel == "gemm_wgmma_tma")
        gemm = steps[at]
        assert isinstance(gemm, Launch)

        def over_workspace(arg: object) -> object:
            if not isinstance(arg, TensorMap) or arg.buffer not in pads:
                return arg
            dims = (padded(arg.dims[0]), *arg.dims[1:])  # the inner extent, rows of whole 16 bytes
            return dataclasses.replace(arg, buffer=PADDED[arg.buffer], dims=dims)

        gemm = dataclasses.replace(gemm, args=tuple(over_workspace(a) for a in gemm.args))
        copies = [pad_launch(name, rows, cols) for name, (rows, cols) in pads.items()]
        return [*copies, *steps[:at], gemm, *steps[at + 1:]]

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        spaces = super().workspace(config, shape)
        for name, (rows, cols) in self.padded_operands(shape).items():
            spaces[PADDED[name]] = BufferSpec((rows, padded(cols)), self.dtype)
        return spaces
