"""autotune's tuned kernels inside PyTorch: custom operators with fake implementations and autograd, drop-in
modules, and `patch`.

    import autotune.torch as att
    report = att.patch(model)                 # nn.LayerNorm / RMSNorm / Linear → the tuned kernels, same parameters
    att.patch(model, attention=True)          # and the forwards' scaled_dot_product_attention calls
    y = att.functional.softmax(x)             # or the functions, or torch.ops.autotune.<kernel> directly
    torch.compile(model, fullgraph=True)      # no graph breaks: every operator has a fake implementation

* Operators: ``torch.ops.autotune.<family>`` for each family of `autotune.torch.ops.FAMILIES` (the row kernels
  and their backwards, the GEMM layouts, ``linear``, ``linear_gelu``, ``linear_swiglu``, the bias gradients,
  ``attention`` and ``attention_causal`` with their ``*_backward``), each built from its kernel space; the row
  kernels and GEMMs take activations of any leading dims as they are (`autotune.torch.ops`).
* Autograd: layernorm, softmax and attention (fp16/bf16) through their tuned backward kernels, each GEMM layout
  through the other two, rmsnorm through torch (`autotune.torch.autograd`); ``linear_swiglu`` is forward only.
  ``attention_causal`` masks bottom-right, torch's ``is_causal=True`` top-left: the same only where seq_q ==
  seq_kv.
* CUDA graphs: after one warm-up call per shape, a call allocates only through torch's caching allocator and
  never synchronises (`autotune.torch.launch`).
* Bad input: `WrongDevice` and `WrongDtype` (RuntimeError), `NotContiguous` and `WrongShape` (ValueError), each
  naming the argument. The raw operators refuse non-contiguous tensors; functions and modules copy them.
* Configurations come from the default database ($AUTOTUNE_DB, else studies/autotune.db) or `set_database`.

PyTorch is an optional dependency (``pip install 'autotune[torch]'``): ``import autotune`` never imports it.
"""

from __future__ import annotations

from autotune.errors import AutotuneError


class TorchMissing(AutotuneError, ImportError):
    """autotune.torch was imported where PyTorch is not installed."""


try:
    import torch as _torch  # noqa: F401
except ImportError:
    raise TorchMissing("autotune.torch needs PyTorch: pip install 'autotune[torch]'") from None

from autotune.torch import functional  # noqa: E402
from autotune.torch.attention import ScaledDotProductAttention  # noqa: E402
from autotune.torch.autograd import register_autograd  # noqa: E402
from autotune.torch.errors import NoBackward, NotContiguous, TensorError, WrongDevice, WrongDtype, WrongShape  # noqa: E402
from autotune.torch.launch import set_database  # noqa: E402
from autotune.torch.modules import LayerNorm, Linear, LinearGELU, LinearSwiGLU, RMSNorm  # noqa: E402
from autotune.torch.patching import PatchReport, patch  # noqa: E402
from autotune.torch.ops import OPS, op, register  # noqa: E402
from autotune.torch.ops import register_library as _register_library  # noqa: E402

OPERATORS = _register_library()
WITH_AUTOGRAD = register_autograd()
functional.bind()

__all__ = [
    "LayerNorm",
    "Linear",
    "LinearGELU",
    "LinearSwiGLU",
    "NoBackward",
    "NotContiguous",
    "OPERATORS",
    "OPS",
    "PatchReport",
    "RMSNorm",
    "ScaledDotProductAttention",
    "TensorError",
    "TorchMissing",
    "WITH_AUTOGRAD",
    "WrongDevice",
    "WrongDtype",
    "WrongShape",
    "functional",
    "op",
    "patch",
    "register",
    "set_database",
]
