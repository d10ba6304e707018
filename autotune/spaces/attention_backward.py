"""Attention backward: dQ, dK, dV of O = softmax(Q·Kᵀ·scale [+ causal mask])·V from dO and the forward's O and LSE.

The problem is the forward's (`autotune.spaces.attention`): layout (batch, heads, seq, head_dim), contiguous; q (B,
H, SQ, D), k and v (B, HKV, SKV, D) (grouped-query attention where HKV < H: query head h reads kv head h // (H /
HKV), and dK, dV of a kv head sum over its group's query heads); scale = 1/√D; the causal mask aligned bottom-right
(query i sees key j iff j ≤ i + SKV − SQ; SQ > SKV refused); head_dim 32, 64, 96 or 128, compiled in and never
crossed by the dispatcher. Inputs: q, k, v, o and do in the problem's dtype, lse (B, H, SQ) in float32, the forward's
natural-log row statistics (what ``attention`` returns). Outputs: dq, dk, dv in the problem's dtype, of q's, k's and
v's shapes. Two kernel names, one family: ``attention_backward`` and ``attention_causal_backward``.

Algorithms (``ALGO``): ``fa2`` (float16, bfloat16: FlashAttention-2's backward on mma.sync, see
`autotune.spaces.attention_backward_fa2`; the default off Hopper), ``fa3`` (sm_90a, head_dim 64 and 128,
multi-head and grouped: a Hopper backward on TMA and wgmma, `autotune.spaces.attention_backward_fa3`; the rule
default where it fits).

Reference: float64 gradients from the very (rounded) inputs, with P recomputed from q and k rather than taken from
o and lse: P = softmax(S), dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(dP∘P)), dQ = dS·K·scale, dK = dSᵀ·Q·scale.
The o and lse a candidate is given are the exact float64 forward of the same q, k, v, rounded to the dtype (o) and
to fp32 (lse), so the reference and the inputs describe one computation.

Accuracy contract (relative L2 error of each gradient against that reference): `GRAD_TOLERANCE` of its dtype,
fp16 2e-3 and bf16 1.6e-2, four units of the dtype's rounding (2^-11 and 2^-8), as the forward's `O_TOLERANCE`,
with fp32 accumulation. What a correct fp32-accumulating kernel loses: P and dS rounded to the dtype before the
products that take them, the outputs' own rounding, and Δ = rowsum(dO∘o) from the rounded o (the inherent cost of
a backward that takes o: with large logits, rows are nearly one-hot, dP − Δ cancels and o's rounding shows). A
float64 emulation of exactly that arithmetic (`tests/test_spaces_attention_backward.py`) stays within 0.65 units
on uniform inputs and 2 units on large logits (fp16 ≤ 9.4e-4, bf16 ≤ 6.4e-3) over the validation cases; fed the
fp16/bf16 o and lse of an emulated fa2 forward instead of the exact ones, within 0.6 of the tolerance. An lse
read in the dtype instead of fp32 fails the large-logit cases. Validation inputs: uniform in [-1, 1) (do too),
and large logits (q and k scaled by the forward's `WIDE_SCALE`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from autotune import dtypes
from autotune.device import DeviceInfo
from autotune.errors import InvalidArgument, InvalidType
from autotune.shape import Shape
from autotune.spaces._attention import attention_dims
from autotune.spaces.attention import (
    WIDE,
    AttentionCausalSpace,
    AttentionSpace,
    grouped_cases,
    head_periods,
    reference_period,
)
from autotune.spaces.attention_backward_fa2 import Fa2AttentionBackward
from autotune.spaces.attention_backward_fa3 import Fa3AttentionBackward
from autotune.spaces.base import ALGO, UNIFORM, BufferSpec, Config

GRAD_TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2}
FORWARD_INPUTS = ("q", "k", "v")  # the rest (o, do, lse) must agree with these
KEYS_FIRST_WAVES = 4  # the rule's fa3 grids of at most this many waves take BLOCK_ORDER 1 under a causal mask
REFERENCE_BLOCK = 1 << 22  # score elements per step of the float64 reference (each array of the step: 32 MiB)


class AttentionBackwardSpace(AttentionSpace):
    """The backward family: the forward's problem (shape, head dims, causality, keys and classes), its own
    buffers, reference and algorithms."""

    name = "attention_backward"
    algorithms = (Fa2AttentionBackward, Fa3AttentionBackward)  # fa2 first: the default, on every GPU

    def forward(self) -> AttentionSpace:
        """The forward problem whose gradients this computes (same dtype and causality)."""
        return (AttentionCausalSpace if self.causal else AttentionSpace)(dtype=self.dtype)

    # --- problem --------------------------------------------------------------------------------------------
    def input_specs(self, shape: Shape) -> dict[str, BufferSpec]:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        return {"q": BufferSpec((b, h, sq, d), self.dtype), "k": BufferSpec((b, hkv, skv, d), self.dtype),
                "v": BufferSpec((b, hkv, skv, d), self.dtype), "o": BufferSpec((b, h, sq, d), self.dtype),
                "do": BufferSpec((b, h, sq, d), self.dtype), "lse": BufferSpec((b, h, sq), "float32")}  # fmt: skip

    def outputs(self, shape: Shape) -> dict[str, BufferSpec]:
        b, h, hkv, sq, skv, d = attention_dims(shape)
        return {"dq": BufferSpec((b, h, sq, d), self.dtype), "dk": BufferSpec((b, hkv, skv, d), self.dtype),
                "dv": BufferSpec((b, hkv, skv, d), self.dtype)}  # fmt: skip

    def infer_shape(self, inputs: Mapping[str, tuple[int, ...]]) -> Shape:
        shape = super().infer_shape({name: inputs[name] for name in FORWARD_INPUTS})
        b, h, hkv, sq, skv, d = attention_dims(shape)
        expected = {"o": (b, h, sq, d), "do": (b, h, sq, d), "lse": (b, h, sq)}
        for name, want in expected.items():
            if name in inputs and tuple(inputs[name]) != want:
                raise InvalidArgument(f"{name} has shape {tuple(inputs[name])}, expected {want} for q "
                                      f"{tuple(inputs['q'])}")  # fmt: skip
        return shape

    @classmethod
    def infer_dtype(cls, given: Mapping[str, str]) -> str:
        """q, k, v, o and do in one supported dtype; lse in float32 (the forward's statistics)."""
        if "lse" in given and given["lse"] != "float32":
            raise InvalidType(f"lse has dtype {given['lse']}; {cls.name} takes the forward's float32 lse")
        return super().infer_dtype({name: dtype for name, dtype in given.items() if name != "lse"})

    def work(self, shape: Shape) -> float:
        """Five products of B·H·SQ·SKV·D multiply-adds (S recomputed, dP, dV, dK, dQ): 2.5 forwards."""
        b, h, hkv, sq, skv, d = attention_dims(shape)
        return 10.0 * b * h * sq * skv * d / (2 if self.causal else 1)

    def rule_default(self, shape: Shape, device: DeviceInfo) -> Config:
        """fa3 with its head_dim's default where it fits (Hopper, head_dim 64 or 128, over 16 query rows; grouped
        heads too: 2.1-2.6x fa2's default there, 0.73-1.03x cuDNN, H200 2026-11-29g). Under a causal mask, where its
        grid fills at most four waves, key blocks first (BLOCK_ORDER 1): 1.15-1.47x head by head on grouped shapes
        at 2-4 waves, but 0.84x at 7.8 waves, where the blocks of a few heads at a time share L2 (2026-11-29h).
        Else fa2's default, with 16 query rows or fewer in tiles of 16 rows (not fa3's 64 or 128), and where its
        shared memory does not fit (e.g. 99 KiB on sm_86/89) with smaller key blocks."""
        p = attention_dims(shape)
        fa3 = self.algos["fa3"]
        if p.sq > 16 and fa3.unfit(shape, device) is None:
            config = {ALGO: "fa3", **fa3.default_for(p.d)}
            blocks = math.prod(fa3.grid(config, shape))
            if self.causal and blocks <= KEYS_FIRST_WAVES * device.multiprocessors:
                config["BLOCK_ORDER"] = 1  # a mask's heaviest key blocks of every head start in the first wave
            if not self.violations(config, shape, device):
                return config
        fa2 = {ALGO: "fa2", **self.algos["fa2"].default_config}
        if p.sq <= 16:
            fa2["BR"] = 16
        for change in ({}, {"BC": 64, "WARPS": 4}, {"BC": 64, "WARPS": 4, "STAGES": 1}):
            config = {**fa2, **change}
            if not self.violations(config, shape, device):
                return config
        return dict(self.default_config)

    # --- correctness ----------------------------------------------------------------------------------------
    def inputs(self, shape: Shape, rng: np.random.Generator, kind: str = UNIFORM) -> dict[str, np.ndarray]:
        """q, k, v as the forward draws them (large inputs repeat: `head_periods`), do uniform (with q's period), o
        and lse the float64 forward rounded to the dtype and to fp32."""
        p = attention_dims(shape)
        forward = self.forward()
        made = forward.inputs(shape, rng, kind)
        heads = p.b * p.h
        period, _ = head_periods(p)  # as q
        do = rng.uniform(-1.0, 1.0, size=(period, p.sq, p.d)).astype(np.float32)
        do = np.tile(do, (math.ceil(heads / period), 1, 1))[:heads]
        exact = forward.reference(forward.decoded_inputs(made, shape), shape)
        do = dtypes.encode(do.reshape(p.b, p.h, p.sq, p.d), self.dtype)
        return {**made, "o": dtypes.encode(exact["o"], self.dtype), "do": do, "lse": exact["lse"].astype(np.float32)}

    def reference(self, inputs: Mapping[str, np.ndarray], shape: Shape) -> dict[str, np.ndarray]:
        b, h, hkv, sq, skv, d = p = attention_dims(shape)
        heads, group = b * h, p.group
        q, do = (np.asarray(inputs[n], np.float64).reshape(heads, sq, d) for n in ("q", "do"))
        k, v = (np.asarray(inputs[n], np.float64).reshape(b * hkv, skv, d) for n in ("k", "v"))
        period = reference_period(p, q, k, v, more=(do,))
        kv_period = period // group  # whole groups: the period is all heads or HEAD_PERIOD groups
        grads = {"dq": np.empty((period, sq, d)), "dk": np.zeros((kv_period, skv, d)),
                 "dv": np.zeros((kv_period, skv, d))}  # fmt: skip
        scale = 1.0 / math.sqrt(d)
        chunk = max(1, REFERENCE_BLOCK // skv)
        for i in range(period):
            kv = i // group  # dK and dV of a kv head: the sum over its group's query heads
            for r0 in range(0, sq, chunk):
                rows = slice(r0, r0 + chunk)
                s = (q[i, rows] @ k[kv].T) * scale
                if self.causal:
                    seen = np.arange(r0, r0 + s.shape[0])[:, None] + (skv - sq)
                    s[np.arange(skv)[None, :] > seen] = -np.inf
                pr = np.exp(s - s.max(axis=1, keepdims=True))
                pr /= pr.sum(axis=1, keepdims=True)
                dp = do[i, rows] @ v[kv].T
                ds = pr * (dp - (dp * pr).sum(axis=1, keepdims=True))
                grads["dv"][kv] += pr.T @ do[i, rows]
                grads["dq"][i, rows] = (ds @ k[kv]) * scale
                grads["dk"][kv] += (ds.T @ q[i, rows]) * scale
        specs = self.outputs(shape)
        out = {}
        for name, g in grads.items():
            n = heads if name == "dq" else b * hkv
            if len(g) != n:
                g = np.tile(g, (math.ceil(n / len(g)), 1, 1))[:n]
            out[name] = g.reshape(specs[name].shape)
        return out

    def tolerance(self, output: str, shape: Shape) -> float:
        return GRAD_TOLERANCE[self.dtype]

    def validation_cases(self, shape: Shape) -> list[tuple[Shape, str]]:
        # Lengths ragged against every tile (1, 5, 77, 129, 1000, 1031, 4097: BC up to 128, BR up to 64), seq_q ≠
        # seq_kv both ways (causal: bottom-right, seq_q ≤ seq_kv), one query and one key (dq and dk exactly 0),
        # several batches and heads, large logits; all at the target's head_dim (compiled in).
        p = attention_dims(shape)
        d = p.d
        cases = [
            ((1, 1, 1, 1, d), UNIFORM),
            ((2, 3, 77, 77, d), UNIFORM),
            ((1, 2, 77, 1031, d), UNIFORM),
            ((3, 1, 5, 1000, d), UNIFORM),
            ((1, 2, 1000, 1000, d), WIDE),
            ((1, 1, 129, 4097, d), WIDE),
            ((1, 2, 1031, 1031, d), UNIFORM),
        ]
        if p.grouped:  # KV_GROUPED is compiled in: every case grouped (the group size is an argument)
            cases = grouped_cases(d)
        if not self.causal:
            cases.append(((2, 1, 1031, 77, d) if not p.grouped else (2, 4, 2, 1031, 77, d), UNIFORM))  # more queries
        return cases


class AttentionCausalBackwardSpace(AttentionBackwardSpace):
    name = "attention_causal_backward"
    causal = 1
