// The Decode kernel's FP8 dequantization in registers (the W8A16 rows): two e4m3 or e5m2
// values to the mma's f16 or bf16 pair. The epilogue's fp32 conversions are the ones every
// family shares (core/vec8.cuh: to_float, from_float).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace sparsek::detail::spmm_decode {

// Two FP8 values (the low byte first) as the mma's 16-bit pair: exact (e4m3 and e5m2 values
// are f16 and bf16 values). sm_89+ converts in one instruction (cvt.rn.f16x2.e4m3x2);
// cuda_fp8.h emulates it on older images, which family.cu never runs.
template <typename TA, typename TB>
__device__ __forceinline__ uint32_t fp8x2_to(uint32_t two) {
  constexpr __nv_fp8_interpretation_t kind = std::is_same_v<TA, __nv_fp8_e5m2> ? __NV_E5M2 : __NV_E4M3;
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), kind);
  if constexpr (std::is_same_v<TB, __half>) {
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __float22bfloat162_rn(f);
    return static_cast<uint32_t>(__bfloat16_as_ushort(b.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(b.y)) << 16);
  }
}

}  // namespace sparsek::detail::spmm_decode
