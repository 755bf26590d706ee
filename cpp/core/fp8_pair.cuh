// Two FP8 values as a 16-bit pair, the dequantization every W8A16 kernel shares (the Decode
// rows' registers, the Hopper rows' shared-memory tiles): exact, since e4m3 and e5m2 values
// are f16 and bf16 values.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace sparsek::detail {

// `two`: the low byte first. kE5m2: e5m2 values (else e4m3); kBf16: a bf16 pair (else f16).
// sm_89+ converts to f16 in one instruction (cvt.rn.f16x2.e4m3x2); bf16 goes through f32.
template <bool kE5m2, bool kBf16>
__device__ __forceinline__ uint32_t fp8x2_to_16(uint32_t two) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), kE5m2 ? __NV_E5M2 : __NV_E4M3);
  if constexpr (!kBf16) {
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __float22bfloat162_rn(f);
    return static_cast<uint32_t>(__bfloat16_as_ushort(b.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(b.y)) << 16);
  }
}

}  // namespace sparsek::detail
