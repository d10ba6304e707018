// The rescaling step of the online softmax every attention template runs per KV tile (exponents in log2 units).
#pragma once

// A row's running maximum m moves to max(m, tile_max). Returns alpha = exp2(m_old - m_use), the factor that
// rescales the row's running sum and output, and sets m_use, the shift of this tile's exponents: the new maximum,
// or 0 while the row has seen no key (all -inf), so that P stays 0 rather than NaN.
template <class Exp2>
__device__ __forceinline__ float online_max(float& m, float tile_max, float& m_use, Exp2 exp2) {
  const float m_new = fmaxf(m, tile_max);
  m_use = m_new == -INFINITY ? 0.f : m_new;
  const float alpha = exp2(m - m_use);
  m = m_new;
  return alpha;
}
