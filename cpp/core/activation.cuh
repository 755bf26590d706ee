// The fused epilogue's activations on one fp32 value: the one definition every GPU family
// uses, matching the CPU reference (src/epilogue.rs). Relu uses fmaxf (NaN -> 0, as Rust's
// f32::max); GeluTanh is the tanh approximation; Silu is x / (1 + e^-x).
#pragma once

#include <math.h>

#include <cstdint>

#include <sparsek/sparsek.hpp>

namespace sparsek::detail {

__host__ __device__ __forceinline__ float act_relu(float x) { return fmaxf(x, 0.0f); }
__host__ __device__ __forceinline__ float act_gelu_tanh(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);  // sqrt(2/pi) * (x + 0.044715 x^3)
  return 0.5f * x * (1.0f + tanhf(u));
}
__host__ __device__ __forceinline__ float act_silu(float x) { return x / (1.0f + expf(-x)); }

// `kind` is an Activation value, uniform per launch (no divergence).
__host__ __device__ __forceinline__ float activate(float x, int32_t kind) {
  switch (kind) {
    case static_cast<int32_t>(Activation::Relu): return act_relu(x);
    case static_cast<int32_t>(Activation::GeluTanh): return act_gelu_tanh(x);
    case static_cast<int32_t>(Activation::Silu): return act_silu(x);
    default: return x;  // Activation::None
  }
}

}  // namespace sparsek::detail
