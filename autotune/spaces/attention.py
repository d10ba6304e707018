"""Attention forward: O = softmax(Q·Kᵀ·scale [+ causal mask])·V and the log-sum-exp of each row.

Layout (batch, heads, seq, head_dim), contiguous; q (B, H, SQ, D), k and v (B, H, SKV, D); SQ and SKV may
differ; scale = 1/√D. Outputs: o (B, H, SQ, D) in the inputs' dtype and lse (B, H, SQ) in float32, the natural
log of each row's sum of exp(scaled logits) (what a backward pass or a split-KV combine needs).

Two kernel names, one family: ``attention`` and ``attention_causal``. The causal mask is aligned bottom-right:
query i sees key j iff j ≤ i + SKV − SQ (the last query sees every key, as in decoding with a KV cache), as
FlashAttention ≥ 2.1 and torch's ``causal_lower_right`` bias align it; torch's ``is_causal=True`` aligns it
top-left, which differs only where SQ ≠ SKV. SQ > SKV is refused: its first rows would see no key.
Causality is part of the kernel's name, not of the shape, because the dispatcher knows a problem from its arrays
alone; so no tuned configuration ever crosses it. Head dimension is a compile-time constant of every template
(`problem_defines`) and the `shape_key`: the dispatcher never falls back across it. dtype is keyed by the core.
`shape_class` separates decoding (SQ ≤ 16) from prefill.

Algorithms (``ALGO``): ``fa2`` (float16, bfloat16: FlashAttention-2 on mma.sync), ``fa3`` (float16, bfloat16,
Hopper only: TMA, warp-specialised wgmma, P in registers; head_dim 64, 96, 128), ``split_kv`` (float16, bfloat16:
flash-decoding for seq_q ≤ 64, KV split across blocks, partial results combined by their LSE), ``simt``
(float32). `rule_default` runs split_kv for decoding shapes (with splits sized to the SM count), fa3 for prefill on
Hopper where it fits (head_dim 64, 96, 128), fa2 otherwise; the space's first configuration stays fa2's (it runs
on every GPU).

Accuracy contract (relative L2 error against float64 attention on the same rounded inputs): o within
`O_TOLERANCE` of its dtype (a few units of its rounding: the output's own rounding and P's rounding to the input
type before P·V), lse within `LSE_TOLERANCE` (fp32 statistics). Validation inputs: uniform in [-1, 1), and
large logits (q and k scaled by `WIDE_SCALE`: logits of tens, nearly one-hot rows, the online max matters).
"""

from __future__ import annotations

import math
from typing import ClassVar, Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument
from autotune.shape import Shape
from autotune.spaces.attention_fa2 import Fa2Attention
from autotune.spaces.attention_fa3 import Fa3Attention
from autotune.spaces.attention_simt import SimtAttention
from autotune.spaces.attention_split_kv import SplitKvAttention
from autotune.spaces.base import ALGO, UNIFORM, BufferSpec, Config, KernelSpace

HEAD_DIMS = (32, 64, 96, 128)
WIDE = "wide"
WIDE_SCALE = 8.0  # q, k uniform in ±8: logits with a standard deviation near 20 (|logit| up to ~100)
O_TOLERANCE = {"float32": 5e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
LSE_TOLERANCE = {"float32": 1e-5, "float16": 1e-4, "bfloat16": 1e-4}
DECODE_MAX_SQ = 16
# Above this many score elements (B·H·SQ·SKV·D) the inputs repeat with a period of `HEAD_PERIOD` (batch, head)
# pairs and the float64 reference computes one period: a 4x16x16384x16384x128 reference would otherwise take
# hours. The ragged validation cases, checked before every target, keep every head distinct.
PERIODIC_ABOVE = 2**33
HEAD_PERIOD = 3


class AttentionSpace(KernelSpace):
    name = "attention"
    causal: ClassVar[int] = 0
    dims = ("B", "H", "SQ", "SKV", "D")
    default_shape = (4, 16, 4096, 4096, 128)
    metric_unit = "TFLOP/s"
    algorithms = (Fa2Attention, Fa3Attention, SplitKvAttention, SimtAttention)

    # --- problem --------------------------------------------------------------------------------------------
    @staticmethod
    def scale_log2(head_dim: int) -> float:
        """The softmax scale 1/√D with log2(e) folded in: the kernels exponentiate with exp2."""
        return math.log2(math.e) / math.sqrt(head_dim)

    def problem_defines(self, shape: Shape) -> dict[str, int | str]:
        return {"HEAD_DIM": shape[4], "CAUSAL": self.causal}

    def shape_key(self, shape: Shape) -> tuple:
        return (shape[4],)

    def shape_class(self, shape: Shape) -> tuple:
        return ("decode",) if shape[2] <= DECODE_MAX_SQ else ("prefill",)

    def check_shape(self, shape: Shape) -> None:
        """`InvalidArgument` for a problem no kernel of this family computes."""
        b, h, sq, skv, d = shape
        if d not in HEAD_DIMS:
            raise InvalidArgument(f"head_dim {d} is not supported; {self.name} supports {', '.join(map(str, HEAD_DIMS))}")
        if self.causal and sq > skv:
            raise InvalidArgument(f"causal attention with seq_q {sq} > seq_kv {skv}: the first {sq - skv} queries "
                                  "would see no key (bottom-right alignment)")  # fmt: skip

    def constraints(self, config: Config, shape: Shape, device: DeviceInfo) -> list[str]:
        b, h, sq, skv, d = shape
        if d not in HEAD_DIMS:
            return [f"head_dim {d} is not supported ({', '.join(map(str, HEAD_DIMS))})"]
        if self.causal and sq > skv:
            return [f"causal with seq_q {sq} > seq_kv {skv}"]
        return super().constraints(config, shape, device)

    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        b, h, sq, skv, d = shape
        return {"q": BufferSpec((b, h, sq, d), self.dtype), "k": BufferSpec((b, h, skv, d), self.dtype),
                "v": BufferSpec((b, h, skv, d), self.dtype)}  # fmt: skip

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        b, h, sq, skv, d = shape
        return {"o": BufferSpec((b, h, sq, d), self.dtype), "lse": BufferSpec((b, h, sq), "float32")}

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        for name in ("q", "k", "v"):
            if len(inputs[name]) != 4:
                raise InvalidArgument(f"{name} must be 4-D (batch, heads, seq, head_dim), got shape {tuple(inputs[name])}")
        q, k, v = (tuple(inputs[n]) for n in ("q", "k", "v"))
        if k != v:
            raise InvalidArgument(f"k has shape {k} but v has {v}: they must match")
        if q[3] != k[3]:
            raise InvalidArgument(f"q has head_dim {q[3]} but k and v have {k[3]}")
        if q[:2] != k[:2]:
            raise InvalidArgument(f"q has (batch, heads) {q[:2]} but k and v have {k[:2]}")
        if k[2] == 0:
            raise InvalidArgument("seq_kv is 0: attention over no key is undefined")
        if 0 in q:
            raise InvalidArgument(f"q is empty (shape {q})")
        shape = (q[0], q[1], q[2], k[2], q[3])
        self.check_shape(shape)
        return shape

    def work(self, shape: Shape) -> float:
        b, h, sq, skv, d = shape
        return 4.0 * b * h * sq * skv * d / (2 if self.causal else 1)

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        b, h, sq, skv, d = shape
        if sq > DECODE_MAX_SQ:
            # Prefill on Hopper: fa3 (wgmma + TMA) where it runs the shape; on the H100 its default ran 1.00x /
            # 1.02x cuDNN (bf16, d128, 4x16x4096^2, non-causal / causal) where fa2's ran 0.40-0.55x.
            fa3 = self.algos.get("fa3")
            if fa3 is not None and "fa3" in self.domain(ALGO) and fa3.unfit(shape, device) is None:
                config = {ALGO: "fa3", **fa3.default_config}
                if not self.violations(config, shape, device):
                    return config
            return dict(self.default_config)
        if "split_kv" not in self.domain(ALGO):
            return dict(self.default_config)
        split_kv = self.algos["split_kv"]
        config = {ALGO: "split_kv", **split_kv.default_config}
        # Enough splits for about two blocks per SM, at least four KV tiles of the default size each.
        splits = 1
        for s in self.domain("split_kv.SPLITS"):
            if b * h * s <= 2 * device.multiprocessors and s * 4 * config["BC"] <= skv:
                splits = s
        config["SPLITS"] = splits
        return config

    # --- correctness ----------------------------------------------------------------------------------------
    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = UNIFORM) -> dict[str, np.ndarray]:
        b, h, sq, skv, d = shape
        heads = b * h
        periodic = heads > HEAD_PERIOD and heads * sq * skv * d > PERIODIC_ABOVE
        made = heads if not periodic else HEAD_PERIOD
        out = {}
        for name, seq in (("q", sq), ("k", skv), ("v", skv)):
            x = rng.uniform(-1.0, 1.0, size=(made, seq, d)).astype(np.float32)
            if kind == WIDE and name != "v":
                x *= WIDE_SCALE
            elif kind not in (UNIFORM, WIDE):
                raise ValueError(f"unknown input kind {kind!r}")
            if periodic:
                x = np.tile(x, (math.ceil(heads / made), 1, 1))[:heads]
            out[name] = dtypes.encode(x.reshape(b, h, seq, d), self.dtype)
        return out

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        b, h, sq, skv, d = shape
        q, k, v = (np.asarray(inputs[n], np.float64).reshape(b * h, -1, d) for n in ("q", "k", "v"))
        heads = b * h
        period = heads
        if heads > HEAD_PERIOD and all(np.array_equal(x[HEAD_PERIOD:], x[:-HEAD_PERIOD]) for x in (q, k, v)):
            period = HEAD_PERIOD
        o = np.empty((period, sq, d))
        lse = np.empty((period, sq))
        scale = 1.0 / math.sqrt(d)
        chunk = max(1, (1 << 24) // skv)  # rows per step: the score block stays ~128 MiB
        for i in range(period):
            for r0 in range(0, sq, chunk):
                s = (q[i, r0 : r0 + chunk] @ k[i].T) * scale
                if self.causal:
                    rows = np.arange(r0, r0 + s.shape[0])[:, None] + (skv - sq)
                    s[np.arange(skv)[None, :] > rows] = -np.inf
                m = s.max(axis=1, keepdims=True)
                p = np.exp(s - m)
                total = p.sum(axis=1, keepdims=True)
                o[i, r0 : r0 + chunk] = (p @ v[i]) / total
                lse[i, r0 : r0 + chunk] = (m + np.log(total))[:, 0]
        if period != heads:
            o = np.tile(o, (math.ceil(heads / period), 1, 1))[:heads]
            lse = np.tile(lse, (math.ceil(heads / period), 1))[:heads]
        return {"o": o.reshape(b, h, sq, d), "lse": lse.reshape(b, h, sq)}

    def tolerance(self, output: str, shape: Shape) -> float:
        return (LSE_TOLERANCE if output == "lse" else O_TOLERANCE)[self.dtype]

    def validation_cases(self, shape: Shape) -> list[tuple[Shape, str]]:
        # Lengths ragged against every tile (1, 77, 1000, 1031, 4097), seq_q ≠ seq_kv (causal: bottom-right),
        # several batches and heads; large logits; all at the target's head_dim (compiled in).
        d = shape[4]
        return [
            ((1, 1, 1, 1, d), UNIFORM),
            ((2, 3, 77, 77, d), UNIFORM),
            ((1, 2, 77, 1031, d), UNIFORM),
            ((3, 1, 5, 1000, d), UNIFORM),
            ((1, 2, 1000, 1000, d), WIDE),
            ((1, 1, 129, 4097, d), WIDE),
            ((2, 3, 16, 4097, d), WIDE),  # decoding shapes (split_kv runs only these two and the two above)
            ((1, 2, 3, 1031, d), UNIFORM),
        ]


class AttentionCausalSpace(AttentionSpace):
    name = "attention_causal"
    causal = 1
