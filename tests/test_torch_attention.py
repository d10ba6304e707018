"""patch's attention (`autotune.torch.attention`) without a GPU: which scaled_dot_product_attention calls our
operators take (on meta tensors, through the operators' fake implementations, seen by `autotune.record`), the rewrite
of a module's forward, and what the report says where it cannot rewrite one."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

import autotune  # noqa: E402
import autotune.torch as att  # noqa: E402
from autotune.torch.attention import CHILD, ScaledDotProductAttention, unsupported  # noqa: E402

F = torch.nn.functional
nn = torch.nn


def meta(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="meta", dtype=dtype)


class GptAttention(nn.Module):
    """GPT-2's attention: q, k and v split from one projection, heads by a view and a transpose, causal."""

    def __init__(self, width: int = 256, heads: int = 4, device: str = "cpu", dtype=torch.float32) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width, device=device, dtype=dtype)
        self.proj = nn.Linear(width, width, device=device, dtype=dtype)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Masked(GptAttention):
    def forward(self, x, mask=None):  # a second argument: a trace would freeze it
        return F.scaled_dot_product_attention(x, x, x, attn_mask=mask)


class Dropout(GptAttention):
    def forward(self, x):  # train and eval trace to different code: a trace would freeze one
        return F.scaled_dot_product_attention(x, x, x, dropout_p=0.1 if self.training else 0.0)


def test_patch_takes_sdpa_only_when_asked_and_the_kernels_then_run_it():
    model = GptAttention(device="meta", dtype=torch.bfloat16)
    untouched = copy.deepcopy(model)
    assert not any("attention" in s for s in att.patch(untouched).swapped) and not hasattr(untouched, CHILD)
    report = att.patch(model, attention=True)
    assert f"{CHILD} (scaled_dot_product_attention)" in report.swapped
    assert isinstance(getattr(model, CHILD), ScaledDotProductAttention) and not report.skipped
    with torch.no_grad(), autotune.record() as calls:
        assert model(meta(2, 16, 256)).shape == (2, 16, 256)
    assert [kernel for kernel, _, _ in calls.calls] == ["linear", "attention_causal", "linear"]
    assert not report.attention_fallbacks and not report.fallbacks
    assert model.state_dict().keys() == untouched.state_dict().keys(), "no parameter or buffer added"


def test_a_patched_forward_computes_torchs_answer_where_the_kernels_do_not_run():
    """On CPU tensors the child runs torch's SDPA: the same answer as the module before the rewrite, each call
    counted with its reason."""
    model = GptAttention()
    before = copy.deepcopy(model)
    report = att.patch(model, attention=True, linear=False)
    x = torch.randn(2, 9, 256)
    assert torch.equal(model(x), before(x))
    assert report.attention_fallbacks == {"cpu tensors": 1}
    assert "1 calls ran torch's scaled_dot_product_attention: cpu tensors" in str(report)
    model.eval()  # the same code in eval mode: the rewrite froze neither
    assert torch.equal(model(x), before.eval()(x))


@pytest.mark.parametrize("module, why", [
    (Masked, "its forward does not take exactly one tensor (a trace would freeze what else it takes)"),
    (Dropout, "its forward differs between train and eval mode (a trace would freeze one)")])  # fmt: skip
def test_forwards_a_trace_would_change_keep_torchs_attention_and_the_report_says_why(module, why):
    model = nn.Sequential(module(device="meta", dtype=torch.bfloat16))
    report = att.patch(model, attention=True, linear=False)
    assert not hasattr(model[0], CHILD) and not report.swapped
    assert report.skipped == [("0", f"{why}: its scaled_dot_product_attention stays torch's")]


def test_which_calls_the_kernels_take():
    q, k = meta(2, 8, 64, 128), meta(2, 8, 64, 128)
    gqa = meta(2, 2, 64, 128)
    assert unsupported(q, k, k, None, 0.0, True, None, False) == ""
    assert unsupported(q, gqa, gqa, None, 0.0, False, 128**-0.5, True) == ""
    assert unsupported(q, meta(2, 8, 80, 128), meta(2, 8, 80, 128), None, 0.0, False, None, False) == ""
    refused = {
        "an attention mask": (q, k, k, meta(64, 64), 0.0, False, None, False),
        "dropout_p=0.1": (q, k, k, None, 0.1, False, None, False),
        "torch.float32 q": (*(meta(2, 8, 64, 128, dtype=torch.float32) for _ in range(3)), None, 0.0, False, None,
                            False),
        "not 4-D": (meta(8, 64, 128), meta(8, 64, 128), meta(8, 64, 128), None, 0.0, False, None, False),
        "q (2, 8, 64, 80)": (meta(2, 8, 64, 80), meta(2, 8, 64, 80), meta(2, 8, 64, 80), None, 0.0, False, None,
                             False),
        "scale=0.5": (q, k, k, None, 0.0, False, 0.5, False),
        "8 query heads over 2 kv heads without enable_gqa": (q, gqa, gqa, None, 0.0, False, None, False),
        "8 query heads over 3 kv heads": (q, meta(2, 3, 64, 128), meta(2, 3, 64, 128), None, 0.0, False, None, True),
        "is_causal with 1 queries over 64 keys": (meta(2, 8, 1, 128), k, k, None, 0.0, True, None, False),
        "cpu tensors": (torch.zeros(1, 1, 4, 64), torch.zeros(1, 1, 4, 64), torch.zeros(1, 1, 4, 64), None, 0.0,
                        False, None, False),
    }  # fmt: skip
    for why, args in refused.items():
        assert unsupported(*args).startswith(why), (why, unsupported(*args))


def test_the_module_falls_back_with_torchs_arguments_and_counts_why():
    sdpa = ScaledDotProductAttention()
    sdpa.fallbacks = __import__("collections").Counter()
    q, kv = meta(1, 8, 16, 64), meta(1, 2, 16, 64)
    with torch.no_grad(), autotune.record() as calls:
        assert sdpa(q, kv, kv, enable_gqa=True).shape == (1, 8, 16, 64)  # grouped: ours
        assert sdpa(q, q, q, attn_mask=meta(16, 16)).shape == (1, 8, 16, 64)  # a mask: torch's
    assert [kernel for kernel, _, _ in calls.calls] == ["attention"]
    assert sdpa.fallbacks == {"an attention mask": 1}


class AttentionAndSwiGLU(nn.Module):
    """One forward with a SwiGLU over one Linear's halves and an SDPA call: two rewrites of the same forward."""

    def __init__(self, width: int = 64, heads: int = 2, device: str = "meta", dtype=torch.bfloat16) -> None:
        super().__init__()
        self.heads = heads
        self.gate_up = nn.Linear(width, 2 * width, bias=False, device=device, dtype=dtype)

    def forward(self, x):
        b, t, c = x.shape
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        h = (F.silu(gate) * up).view(b, t, self.heads, c // self.heads).transpose(1, 2)
        return F.scaled_dot_product_attention(h, h, h).transpose(1, 2).reshape(b, t, c)


@pytest.mark.parametrize("order", ["together", "attention first", "attention second"])
def test_a_second_rewrite_of_a_forward_builds_on_the_first(order):
    model = AttentionAndSwiGLU()
    if order == "together":
        reports = [att.patch(model, attention=True)]
    elif order == "attention first":
        reports = [att.patch(model, attention=True, linear=False), att.patch(model)]
    else:
        reports = [att.patch(model), att.patch(model, attention=True)]
    swapped = [s for r in reports for s in r.swapped]
    assert "gate_up (Linear and SwiGLU, fused)" in swapped and f"{CHILD} (scaled_dot_product_attention)" in swapped
    assert not [s for r in reports for s in r.skipped if "autotune_attention" in s[0]]
    with torch.no_grad(), autotune.record() as calls:
        assert model(meta(2, 8, 64)).shape == (2, 8, 64)
    assert [kernel for kernel, _, _ in calls.calls] == ["linear_swiglu", "attention"]


def test_patching_twice_leaves_the_added_child_alone():
    model = GptAttention(device="meta", dtype=torch.bfloat16)
    att.patch(model, attention=True)
    again = att.patch(model, attention=True)
    assert not again.swapped and all(why == "already autotune's" for _, why in again.skipped)


def test_nanogpts_mode_dependent_dropout_of_zero_is_taken():
    """dropout_p=self.dropout if self.training else 0 with dropout 0.0: the same call in both modes."""

    class NanoGpt(GptAttention):
        dropout = 0.0

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0,
                                               is_causal=True)  # fmt: skip
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    model = NanoGpt(device="meta", dtype=torch.bfloat16)
    report = att.patch(model, attention=True)
    assert f"{CHILD} (scaled_dot_product_attention)" in report.swapped
    with torch.no_grad(), autotune.record() as calls:
        model(meta(2, 16, 256))
    assert "attention_causal" in [kernel for kernel, _, _ in calls.calls] and not report.attention_fallbacks
