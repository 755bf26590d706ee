// Eight fp32 values to and from 16 bytes of C (32 for f32), and the activation on eight
// values: the vector epilogue pieces the WMMA kernel (wmma/kernel.cuh) and the SM90 any-block
// epilogue (sm90/direct_epilogue.hpp) share. The 16-bit types are CUDA's __half and
// __nv_bfloat16; every pointer is 16-byte aligned (the callers check it before taking the
// vector path).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "activation.cuh"

namespace sparsek::detail {

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(float v) { return v; }
// One fp32 value rounded to nearest into C's type.
template <typename OutT>
__device__ __forceinline__ OutT from_float(float v) {
  if constexpr (std::is_same_v<OutT, __half>) return __float2half_rn(v);
  else if constexpr (std::is_same_v<OutT, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return v;
}
__device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
template <typename T2>
__device__ __forceinline__ T2 from_float2(float a, float b);
template <>
__device__ __forceinline__ __half2 from_float2<__half2>(float a, float b) {
  return __floats2half2_rn(a, b);
}
template <>
__device__ __forceinline__ __nv_bfloat162 from_float2<__nv_bfloat162>(float a, float b) {
  return __floats2bfloat162_rn(a, b);
}

template <typename T>
struct Pair;
template <>
struct Pair<__half> {
  using type = __half2;
};
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

// Loads 8 consecutive elements of C (16-byte aligned) as fp32.
template <typename OutT>
__device__ __forceinline__ void load8(const OutT* p, float v[8]) {
  if constexpr (std::is_same_v<OutT, float>) {
    const float4 x = reinterpret_cast<const float4*>(p)[0];
    const float4 y = reinterpret_cast<const float4*>(p)[1];
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
  } else {
    using T2 = typename Pair<OutT>::type;
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      T2 h;
      static_assert(sizeof(T2) == 4, "pair of 16-bit values");
      memcpy(&h, &w[i], 4);
      const float2 f = to_float2(h);
      v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
  }
}

// Stores 8 fp32 values as 8 consecutive elements of C (16-byte aligned), rounding to nearest.
template <typename OutT>
__device__ __forceinline__ void store8(OutT* p, const float v[8]) {
  if constexpr (std::is_same_v<OutT, float>) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    using T2 = typename Pair<OutT>::type;
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const T2 h = from_float2<T2>(v[2 * i], v[2 * i + 1]);
      memcpy(&w[i], &h, 4);
    }
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// The activation of the fused epilogue on 8 values (fp32), as every family computes it
// (activation.cuh). `act` is uniform per launch: one switch per chunk, no divergence.
__device__ __forceinline__ void activate8(float v[8], int32_t act) {
  switch (act) {
    case static_cast<int32_t>(Activation::Relu):
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = detail::act_relu(v[i]);
      break;
    case static_cast<int32_t>(Activation::GeluTanh):
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = detail::act_gelu_tanh(v[i]);
      break;
    case static_cast<int32_t>(Activation::Silu):
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = detail::act_silu(v[i]);
      break;
    default:  // Activation::None
      break;
  }
}

}  // namespace sparsek::detail
