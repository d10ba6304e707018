"""GEMM with an operand stored the other way: the families ``gemm_nt`` (C = A·Bᵀ, B stored N×K: `nn.Linear`'s
weight, the forward and the input's gradient) and ``gemm_tn`` (C = Aᵀ·B, A stored K×M: a weight's gradient), and
the machinery `autotune.spaces.linear` (C = A·Bᵀ + bias) adds its bias to.

Shapes are (M, N, K) of the product, as for ``gemm``; only the stored operand differs. The families have gemm's
algorithms, dtypes, accuracy contract, shape classes and rule defaults; each algorithm meets the layout in one of
three ways (`layout_variant`):

* natively: ``wgmma_tma`` reads B K-major (``B_K_MAJOR``) or A MN-major (``A_MN_MAJOR``) with the same TMA copies
  and swizzle and wgmma's transpose bits flipped (kernel_templates/gemm_wgmma_tma.cu), and adds the bias in its
  epilogue (``GEMM_BIAS``); ``wgmma_tf32x3``'s split pre-pass, which writes both operands K-major anyway, reads
  the stored operand as it is (transposing A stored K×M, no longer B stored N×K), and the same epilogue adds the
  bias;
* by swapping operands where a vector makes the layouts the same memory: ``gemv``'s one-row and one-column
  products (a 1×K row and a K×1 column are the same bytes);
* otherwise by a transposed copy of the stored operand (``gemm_transpose``, kernel_templates/gemm_layout.cuh)
  into a workspace, launched first and timed with the product: what is timed is what runs.

Without a bias epilogue, the bias is added by ``gemm_bias_add`` after the product (``linear_gelu``'s bias and
activation by ``gemm_bias_gelu``).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Mapping

import numpy as np

from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces import _gemm_rules
from autotune.spaces._gemm_splitk import splits_of
from autotune.spaces.algorithm import Algorithm
from autotune.spaces.base import ALGO, BufferSpec, Config, Launch, Step, TensorMap, Zero, ceil_div
from autotune.spaces.gemm import GemmSpace
from autotune.spaces.gemm_gemv import GemvGemm
from autotune.spaces.gemm_wgmma_tf32x3 import MAX_GRID_Y, WgmmaTf32x3Gemm, padded
from autotune.spaces.gemm_wgmma_tma import ALIGN_ELEMENTS, BK, WgmmaTmaGemm, tma_rows_problem
from autotune.spaces.gemm_wgmma_tma_padded import WgmmaTmaPaddedGemm

TRANSPOSE_TILE, TRANSPOSE_THREADS = 32, 256  # kernel_templates/gemm_layout.cuh
BIAS_THREADS = 256
# gemm_wgmma_tma.cu's, set by these families alone (and linear_swiglu, `autotune.spaces.linear_swiglu`)
LAYOUT_DEFINES = ("A_MN_MAJOR", "B_K_MAJOR", "GEMM_BIAS", "GEMM_GELU", "GEMM_SWIGLU")
# The TMA tile a few rows take instead of copying the stored operand (`LayoutGemmSpace.rule_default`).
READ_AS_STORED = {"BM": 64, "BN": 128, "WG": 1, "PINGPONG": 0, "STAGES": 7, "CLUSTER_M": 1}


def relabel(steps: list[Step], names: Mapping[str, str]) -> list[Step]:
    """The launch plan with its buffers renamed (``names``: old → new; others kept)."""

    def arg(a: object) -> object:
        if isinstance(a, str):
            return names.get(a, a)
        if isinstance(a, TensorMap):
            return dataclasses.replace(a, buffer=names.get(a.buffer, a.buffer))
        return a

    out: list[Step] = []
    for step in steps:
        if isinstance(step, Zero):
            out.append(Zero(names.get(step.buffer, step.buffer)))
        else:
            out.append(dataclasses.replace(step, args=tuple(arg(a) for a in step.args)))
    return out


def bias_launch(m: int, n: int, device: DeviceInfo) -> Launch:
    """``gemm_bias_add``: C += bias, rounded once more; a few blocks per SM."""
    blocks = max(1, min(ceil_div(m * n, BIAS_THREADS), 4 * device.multiprocessors))
    return Launch("gemm_bias_add", (blocks, 1, 1), (BIAS_THREADS, 1, 1), 0, ("C", "bias", np.int64(m * n), np.int32(n)))


def gelu_launch(m: int, n: int, device: DeviceInfo) -> Launch:
    """``gemm_bias_gelu``: pre = C + bias, C = gelu_tanh(pre) (linear_gelu without its fused epilogue)."""
    blocks = max(1, min(ceil_div(m * n, BIAS_THREADS), 4 * device.multiprocessors))
    args = ("C", "bias", "pre", np.int64(m * n), np.int32(n))
    return Launch("gemm_bias_gelu", (blocks, 1, 1), (BIAS_THREADS, 1, 1), 0, args)


def transpose_launch(src: str, dst: str, rows: int, cols: int) -> Launch:
    """``gemm_transpose``: dst (cols × rows) = srcᵀ (past 65535 rows of tiles, a block walks several)."""
    grid = (ceil_div(cols, TRANSPOSE_TILE), min(ceil_div(rows, TRANSPOSE_TILE), MAX_GRID_Y), 1)
    return Launch("gemm_transpose", grid, (TRANSPOSE_THREADS, 1, 1), 0, (src, dst, np.int32(rows), np.int32(cols)))


class Layout:
    """What a layout family asks of an algorithm: which operand is stored transposed, whether a bias is added, and
    whether GELU (tanh form) follows it, with the sum before it kept as the output ``pre``."""

    def __init__(self, transposed: str, bias: bool, gelu: bool = False) -> None:
        assert bias or not gelu, "the GELU epilogue follows a bias"
        self.transposed, self.bias, self.gelu = transposed, bias, gelu

    def epilogue_defines(self) -> dict[str, int]:
        """gemm_wgmma_tma.cu's epilogue defines for this layout."""
        return {**({"GEMM_BIAS": 1} if self.bias else {}), **({"GEMM_GELU": 1} if self.gelu else {})}

    def epilogue_args(self) -> tuple[str, ...]:
        """The buffers an epilogue in the product's kernel takes, after C."""
        return ("bias", "pre")[: int(self.bias) + int(self.gelu)]

    def stored_dims(self, shape: Shape) -> tuple[int, int]:
        """(rows, cols) of the transposed operand as stored."""
        m, n, k = shape
        return (n, k) if self.transposed == "B" else (k, m)

    def swapped(self, shape: Shape) -> Shape | None:
        """Where a vector makes the stored layout gemm's with A and B exchanged, the shape of that product
        (gemm_nt at M = 1: the rows of the weight times the row; gemm_tn at N = 1); None otherwise."""
        m, n, k = shape
        if self.transposed == "B" and m == 1 and n > 1:
            return (n, 1, k)
        if self.transposed == "A" and n == 1 and m > 1:
            return (1, m, k)
        return None

    def unaligned_rows(self, shape: Shape) -> dict[str, int]:
        """The dims whose rows TMA could not stride reading the operands as stored (not whole 16 bytes): A (M×K)
        and B stored N×K have rows of K; A stored K×M and B (K×N) rows of M and N."""
        m, n, k = shape
        inner = {"K": k} if self.transposed == "B" else {"M": m, "N": n}
        return {name: v for name, v in inner.items() if v % ALIGN_ELEMENTS}

    def same_as_gemm(self, shape: Shape) -> bool:
        """Whether the stored operand, a vector, has gemm's layout already (K×1 and 1×K are the same bytes)."""
        m, n, _ = shape
        return (n == 1) if self.transposed == "B" else (m == 1)


def _with_bias(layout: Layout, steps: list[Step], shape: Shape, device: DeviceInfo) -> list[Step]:
    """``steps`` and the launch that adds the bias (and GELU) after them, where the layout has one."""
    if layout.gelu:
        return steps + [gelu_launch(shape[0], shape[1], device)]
    return steps + [bias_launch(shape[0], shape[1], device)] if layout.bias else steps


def _step_defines(layout: Layout) -> dict[str, int]:
    """What a template without the bias epilogue needs for the steps after its product (gemm_bias_gelu)."""
    return {"GEMM_GELU": 1} if layout.gelu else {}


class NativeTma(WgmmaTmaGemm):
    """``wgmma_tma`` reading the stored layout itself (and adding the bias in its epilogue)."""

    layout: ClassVar[Layout]

    def defines(self, config: Config) -> dict[str, int | str]:
        flag = "B_K_MAJOR" if self.layout.transposed == "B" else "A_MN_MAJOR"
        return {**super().defines(config), flag: 1, **self.layout.epilogue_defines()}

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        problems = super().constraints(config, shape, device)
        accumulators = self.geometry(self.local(config))["accumulators"]
        if self.layout.bias and accumulators > 128:
            problems.append(f"{accumulators} accumulators per thread and the bias epilogue spill (128 at most here)")
        return problems

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = Algorithm.unfit(self, shape, device)
        if reason is not None:
            return reason
        bad = self.layout.unaligned_rows(shape)
        if bad:
            dims = "K" if self.layout.transposed == "B" else "M and N"
            got = ", ".join(f"{name}={v}" for name, v in bad.items())
            return tma_rows_problem(self.name, dims, got)
        return None

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        m, n, k = shape
        steps = super().launches(config, shape, device)
        at = next(i for i, s in enumerate(steps) if isinstance(s, Launch) and s.kernel == "gemm_wgmma_tma")
        gemm = steps[at]
        assert isinstance(gemm, Launch)
        args = list(gemm.args)
        if self.layout.transposed == "B":  # B stored N×K: boxes of 64 k × 64 rows
            args[1] = TensorMap("B", self.dtype, dims=(k, n), box=(BK, 64))
        else:  # A stored K×M: boxes of 64 rows (m) × BK k-rows
            args[0] = TensorMap("A", self.dtype, dims=(m, k), box=(64, BK))
        args[3:3] = self.layout.epilogue_args()  # after C
        out = [*steps[:at], dataclasses.replace(gemm, args=tuple(args)), *steps[at + 1:]]
        return _with_bias(self.layout, out, shape, device) if splits_of(config) > 1 else out


class NativeTf32x3(WgmmaTf32x3Gemm):
    """``wgmma_tf32x3`` whose split pre-pass reads the stored operand as it is (and whose epilogue adds the bias)."""

    layout: ClassVar[Layout]

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**super().defines(config), **self.layout.epilogue_defines()}

    def splits(self, shape: Shape) -> tuple[Launch, Launch]:
        m, n, k = shape
        split_a, split_b = super().splits(shape)
        if self.layout.transposed == "B":  # stored N×K: already the K-major rows the workspaces hold
            return split_a, self._split("B", n, k, padded(k), transpose=False)
        return self._split("A", k, m, padded(k), transpose=True), split_b  # stored K×M: transposed into M×K

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        split_a, split_b, main, *rest = super().launches(config, shape, device)
        if not self.layout.bias:
            return [split_a, split_b, main, *rest]
        assert isinstance(main, Launch)
        main = dataclasses.replace(main, args=(*main.args[:5], *self.layout.epilogue_args(), *main.args[5:]))
        steps = [split_a, split_b, main, *rest]
        return _with_bias(self.layout, steps, shape, device) if rest else steps


class SwappedGemv(GemvGemm):
    """``gemv`` over the swapped product where the layout allows (`Layout.swapped`), else gemm's own."""

    layout: ClassVar[Layout]
    template = "layout_gemm_gemv.cu"

    def _shape(self, shape: Shape) -> Shape:
        return self.layout.swapped(shape) or shape

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        return super().constraints(config, self._shape(shape), device)

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**super().defines(config), **_step_defines(self.layout)}

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        swapped = self.layout.swapped(shape)
        if swapped is None:
            steps = super().launches(config, shape, device)
        else:
            steps = relabel(super().launches(config, swapped, device), {"A": "B", "B": "A"})
        return _with_bias(self.layout, steps, shape, device)

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        return super().workspace(config, self._shape(shape))


class CopyFirst:
    """Mixed into an algorithm that reads row-major A and B only: the stored operand is transposed into a
    workspace (``AT`` or ``BT``) first."""

    layout: ClassVar[Layout]

    def _copy_name(self) -> str:
        return self.layout.transposed + "T"

    def defines(self, config: Config) -> dict[str, int | str]:
        return {**super().defines(config), **_step_defines(self.layout)}  # type: ignore[misc]

    def launches(self, config: Config, shape: Shape, device: DeviceInfo) -> list[Step]:
        steps = super().launches(config, shape, device)  # type: ignore[misc]
        if self.layout.same_as_gemm(shape):
            return _with_bias(self.layout, steps, shape, device)
        rows, cols = self.layout.stored_dims(shape)
        name = self.layout.transposed
        copy = transpose_launch(name, self._copy_name(), rows, cols)
        return _with_bias(self.layout, [copy, *relabel(steps, {name: self._copy_name()})], shape, device)

    def workspace(self, config: Config, shape: Shape) -> dict[str, BufferSpec]:
        space = super().workspace(config, shape)  # type: ignore[misc]
        if self.layout.same_as_gemm(shape):
            return space
        rows, cols = self.layout.stored_dims(shape)
        return {**space, self._copy_name(): BufferSpec((cols, rows), self.dtype)}  # type: ignore[attr-defined]


class PaddedCopyFirst(CopyFirst):
    """``wgmma_tma_padded`` in a layout family: offered exactly where ``wgmma_tma`` cannot read the stored layout
    (`Layout.unaligned_rows`). The stored operand is copied transposed first, which gives it gemm's layout; then
    only rows still not whole 16 bytes (N or K odd to TMA) are padded. So a weight gradient over an odd vocabulary
    (gemm_tn, M = 50257) runs on TMA after one transposed copy of its activations."""

    def unfit(self, shape: Shape, device: DeviceInfo) -> str | None:
        reason = Algorithm.unfit(self, shape, device)  # type: ignore[arg-type]
        if reason is None and not self.layout.unaligned_rows(shape):
            name = self.name  # type: ignore[attr-defined]
            return (f"algorithm {name} is for rows TMA cannot read as stored: here wgmma_tma reads them (the "
                    f"{self.layout.transposed} operand stored transposed)")  # fmt: skip
        return reason


def layout_variant(base: type[Algorithm], layout: Layout) -> type[Algorithm]:
    """The algorithm ``base`` for a layout family: same name, tunables and defaults (so tuned configurations read
    the same), computing the stored layout natively, by swapping, or after a transposed copy. An algorithm with a
    ``for_layout(layout)`` class method makes its own variant."""
    own = getattr(base, "for_layout", None)
    if own is not None:  # an algorithm that meets the layouts itself says how
        return own(layout)
    attrs: dict[str, object] = {"layout": layout, "__module__": __name__}
    if issubclass(base, WgmmaTf32x3Gemm):
        return type(f"{base.__name__}{layout.transposed}", (NativeTf32x3,), attrs)
    if issubclass(base, WgmmaTmaGemm) and base.template == WgmmaTmaGemm.template:  # and its stream-K schedule
        return type(f"{base.__name__}{layout.transposed}", (NativeTma, base), attrs)
    if issubclass(base, GemvGemm):
        return type(f"{base.__name__}{layout.transposed}", (SwappedGemv,), attrs)
    attrs["template"] = f"layout_{base.template}"
    if issubclass(base, WgmmaTmaPaddedGemm):
        return type(f"{base.__name__}{layout.transposed}", (PaddedCopyFirst, base), attrs)
    return type(f"{base.__name__}{layout.transposed}", (CopyFirst, base), attrs)


class LayoutGemmSpace(GemmSpace):
    """The base of gemm_nt, gemm_tn and linear: gemm's problem with one operand stored transposed."""

    LAYOUT: ClassVar[Layout]
    PRODUCT: ClassVar[str]  # the product and its operands' shapes, for the one line that says they do not fit

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "LAYOUT" in vars(cls):
            cls.algorithms = tuple(layout_variant(a, cls.LAYOUT) for a in GemmSpace.algorithms)

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        specs = super().input_specs(shape)
        rows, cols = self.LAYOUT.stored_dims(shape)
        specs[self.LAYOUT.transposed] = BufferSpec((rows, cols), self.dtype)
        return specs

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        name = self.LAYOUT.transposed
        a, b, stored = inputs["A"], inputs["B"], inputs[name]
        if len(stored) != 2:
            raise InvalidArgument(f"{name} must be a 2-D matrix, got shape {tuple(stored)}")
        if len(a) == 2 and len(b) == 2:  # K is dim 1 of both (A·Bᵀ) or dim 0 of both (Aᵀ·B)
            axis, what = (1, "columns") if name == "B" else (0, "rows")
            if a[axis] != b[axis]:
                raise InvalidArgument(f"A has {a[axis]} {what} but B has {b[axis]}: {self.PRODUCT}")
        return super().infer_shape({**inputs, name: (stored[1], stored[0])})

    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = "uniform") -> dict[str, np.ndarray]:
        made = super().inputs(shape, rng, kind)
        name = self.LAYOUT.transposed
        made[name] = np.ascontiguousarray(made[name].T)
        return made

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        name = self.LAYOUT.transposed
        return super().reference({**inputs, name: np.asarray(inputs[name]).T}, shape)

    # --- fallback -------------------------------------------------------------------------------------------
    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """gemm's rules, with two corrections for the stored layout: where a vector swaps the operands, the GEMV
        rule of the swapped product (the kernel that runs); and where the rule's algorithm would copy the stored
        operand and the copy moves more bytes than the product itself reads and writes (a few rows: decoding),
        half precision takes a 64×128 TMA tile that reads it as stored, split along K to fill the GPU."""
        config = super().rule_default(shape, device)
        swapped = self.LAYOUT.swapped(shape)
        if config[ALGO] == "gemv" and swapped is not None:
            again = _gemm_rules.gemv_rule(self, swapped, device)
            if again is not None and not self.violations(again, shape, device):
                return again
        if isinstance(self.algos[config[ALGO]], CopyFirst) and not self.LAYOUT.same_as_gemm(shape):
            m, n, k = shape
            rows, cols = self.LAYOUT.stored_dims(shape)
            if 2 * rows * cols >= m * k + k * n + m * n:  # the copy moves more elements than the product
                native = _gemm_rules.split_tma_tile(self, READ_AS_STORED, shape, device)
                if native is not None:
                    return native
        return config

    def validation_cases(self, shape: Shape) -> list[tuple[Shape, str]]:
        cases = super().validation_cases(shape)
        if self.LAYOUT.transposed == "A":
            # TMA reads A stored K×M only with M a multiple of 8: two cases where the native path runs, one of them
            # ragged along K (which no stride constrains here) and wide-range over a long K.
            cases += [((136, 72, 333), "uniform"), ((200, 264, 4100), "wide")]
        return cases


class GemmNtSpace(LayoutGemmSpace):
    """C = A·Bᵀ: A (M×K), B stored N×K."""

    name = "gemm_nt"
    LAYOUT = Layout("B", bias=False)
    PRODUCT = "C = A·Bᵀ needs A (M, K) and B (N, K)"


class GemmTnSpace(LayoutGemmSpace):
    """C = Aᵀ·B: A stored K×M, B (K×N)."""

    name = "gemm_tn"
    LAYOUT = Layout("A", bias=False)
    PRODUCT = "C = Aᵀ·B needs A (K, M) and B (K, N)"
    leading_dims = {"A": 2, "B": 2}  # K: the tokens of two activations (a weight's gradient)
