// The backward formulas the C++ launcher (torch_launcher.cpp) records as autograd nodes: a training call of these
// operators then runs no Python, as torch's own operators do (autotune/torch/autograd.py has the same formulas in
// Python, for the other operators and where the launcher is not loaded). Linear's two products are the other
// layouts (dA = gemm(dC, B), dB = gemm_tn(dC, A)) and dbias = dC summed over rows (bias_grad: fp32 accumulation);
// linear_gelu's takes dpre and dbias from gelu_bias_grad first; layernorm's is layernorm_backward with the saved
// mean and rstd; attention's (and attention_causal's) is its backward kernel on the saved q, k, v, o and lse. Each
// GEMM's two gradients are the other layouts' products. A two-input GEMM's third slot is an empty optional, which
// autograd does not take for a variable (an undefined tensor there failed: its VariableInfo asks for its device,
// 2026-11-28c call 9).
#pragma once
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/extension.h>

#include <optional>
#include <tuple>

namespace autotune_native {

// The values of autotune.runtime.torch_native.NATIVE_FORMULAS.
enum Formula {
  NO_FORMULA = 0, LINEAR = 1, LAYERNORM = 2, GEMM = 3, GEMM_NT = 4, GEMM_TN = 5, LINEAR_GELU = 6, ATTENTION = 7,
  ATTENTION_CAUSAL = 8
};

using OneTensor = at::Tensor(const at::Tensor&);
using TwoTensors = at::Tensor(const at::Tensor&, const at::Tensor&);
using TwoToTwo = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&);
using NormBackward = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&);
using AttentionBackward = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                         const at::Tensor&, const at::Tensor&,
                                                                         const at::Tensor&, const at::Tensor&);

inline bool is_attention(int64_t formula) { return formula == ATTENTION || formula == ATTENTION_CAUSAL; }

// Whether a call with first input t0 records a C++ node: float32 attention has no backward kernel, and Python's
// formula raises WrongDtype at its backward, naming the forward the user called.
inline bool native_backward(int64_t formula, const at::Tensor& t0) {
  return formula != NO_FORMULA && !(is_attention(formula) && t0.scalar_type() == at::kFloat);
}

// An operator's typed handle, looked up once per process (the backward runs on every training step).
template <class Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

inline at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = typed_op<TwoTensors>("autotune::gemm");
  return op.call(a, b);
}
inline at::Tensor gemm_nt(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = typed_op<TwoTensors>("autotune::gemm_nt");
  return op.call(a, b);
}
inline at::Tensor gemm_tn(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = typed_op<TwoTensors>("autotune::gemm_tn");
  return op.call(a, b);
}
inline at::Tensor bias_grad(const at::Tensor& dc) {  // the rows of dC summed (fp32 accumulation)
  static const auto op = typed_op<OneTensor>("autotune::bias_grad");
  return op.call(dc);
}
inline std::tuple<at::Tensor, at::Tensor> gelu_bias_grad(const at::Tensor& dc, const at::Tensor& pre) {
  static const auto op = typed_op<TwoToTwo>("autotune::gelu_bias_grad");
  return op.call(dc, pre);
}

// (dq, dk, dv) = attention_backward(q, k, v, o, do, lse), or its causal form; each looked up on its first use.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(bool causal, const at::Tensor& q,
                                                                          const at::Tensor& k, const at::Tensor& v,
                                                                          const at::Tensor& o, const at::Tensor& d_o,
                                                                          const at::Tensor& lse) {
  if (causal) {
    static const auto op = typed_op<AttentionBackward>("autotune::attention_causal_backward");
    return op.call(q, k, v, o, d_o, lse);
  }
  static const auto op = typed_op<AttentionBackward>("autotune::attention_backward");
  return op.call(q, k, v, o, d_o, lse);
}

struct NativeGrad : public torch::autograd::Function<NativeGrad> {
  // The operator below autograd on its tensors (t2 empty for the two-input GEMMs).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const c10::OperatorHandle* handle, c10::DispatchKeySet keys,
                                                int64_t formula, const at::Tensor& t0, const at::Tensor& t1,
                                                const std::optional<at::Tensor>& t2) {
    torch::jit::Stack stack{t0, t1};
    if (t2.has_value()) stack.emplace_back(*t2);
    {
      at::AutoDispatchBelowAutograd below;
      handle->redispatchBoxed(keys & c10::after_autograd_keyset, &stack);
    }
    torch::autograd::variable_list outs;
    for (const c10::IValue& v : stack) outs.push_back(v.toTensor());
    ctx->saved_data["formula"] = formula;
    if (formula == LAYERNORM) {  // (y, mean, rstd): the statistics carry no gradient, and get no zeros either
      ctx->save_for_backward({t0, t1, outs[1], outs[2]});
      ctx->mark_non_differentiable({outs[1], outs[2]});
      ctx->set_materialize_grads(false);
    } else if (is_attention(formula)) {  // (o, lse): q, k, v, o and lse kept; lse carries no gradient
      ctx->save_for_backward({t0, t1, *t2, outs[0], outs[1]});
      ctx->mark_non_differentiable({outs[1]});
      ctx->set_materialize_grads(false);
    } else if (formula == LINEAR_GELU) {  // (C, pre): pre is kept for the backward
      ctx->save_for_backward({t0, t1, outs[1]});
      ctx->mark_non_differentiable({outs[1]});
      ctx->set_materialize_grads(false);
    } else {
      ctx->save_for_backward({t0, t1});
    }
    return outs;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const int64_t formula = ctx->saved_data["formula"].toInt();
    const auto saved = ctx->get_saved_variables();
    const bool need0 = ctx->needs_input_grad(0), need1 = ctx->needs_input_grad(1);
    at::Tensor g0, g1, g2;
    if (formula == LAYERNORM) {
      if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), g0, g1, g2};  // y unused
      static const auto norm_backward = typed_op<NormBackward>("autotune::layernorm_backward");
      auto [dx, dweight, dbias] = norm_backward.call(grads[0].contiguous(), saved[0], saved[1], saved[2], saved[3]);
      g0 = need0 ? dx : at::Tensor();
      g1 = need1 ? dweight : at::Tensor();
      g2 = ctx->needs_input_grad(2) ? dbias : at::Tensor();
      return {at::Tensor(), at::Tensor(), at::Tensor(), g0, g1, g2};
    }
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), g0, g1, g2};  // C (or o) unused
    if (is_attention(formula)) {  // dq, dk, dv from the backward kernel: (q, k, v, o, do, lse), do made contiguous
      auto [dq, dk, dv] = attention_backward(formula == ATTENTION_CAUSAL, saved[0], saved[1], saved[2], saved[3],
                                             grads[0].contiguous(), saved[4]);
      if (need0) g0 = dq;
      if (need1) g1 = dk;
      if (ctx->needs_input_grad(2)) g2 = dv;
      return {at::Tensor(), at::Tensor(), at::Tensor(), g0, g1, g2};
    }
    const at::Tensor dc = grads[0].contiguous();
    const at::Tensor &a = saved[0], &b = saved[1];
    switch (formula) {
      case GEMM:  // C = A·B: dA = dC·Bᵀ, dB = Aᵀ·dC
        if (need0) g0 = gemm_nt(dc, b);
        if (need1) g1 = gemm_tn(a, dc);
        break;
      case GEMM_NT:  // C = A·Bᵀ (+ bias): dA = dC·B, dB = dCᵀ·A (dbias = the rows of dC summed)
      case LINEAR:
        if (need0) g0 = gemm(dc, b);
        if (need1) g1 = gemm_tn(dc, a);
        if (formula == LINEAR && ctx->needs_input_grad(2)) g2 = bias_grad(dc);
        break;
      case LINEAR_GELU: {  // C = gelu(pre), pre = A·Bᵀ + bias: dpre = dC·gelu'(pre), then linear's gradients of dpre
        auto [dpre, dbias] = gelu_bias_grad(dc, saved[2]);
        if (need0) g0 = gemm(dpre, b);
        if (need1) g1 = gemm_tn(dpre, a);
        if (ctx->needs_input_grad(2)) g2 = dbias;
        break;
      }
      case GEMM_TN:  // C = Aᵀ·B: dA = B·dCᵀ, dB = A·dC
        if (need0) g0 = gemm_nt(b, dc);
        if (need1) g1 = gemm(a, dc);
        break;
      default:
        TORCH_CHECK(false, "autotune: no backward formula ", formula);
    }
    return {at::Tensor(), at::Tensor(), at::Tensor(), g0, g1, g2};
  }
};

}  // namespace autotune_native
