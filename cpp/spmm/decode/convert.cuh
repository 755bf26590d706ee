// The Decode kernel's FP8 dequantization in registers (the W8A16 rows): two e4m3 or e5m2
// values to the mma's f16 or bf16 pair (core/fp8_pair.cuh). The epilogue's fp32 conversions
// are the ones every family shares (core/vec8.cuh: to_float, from_float).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "core/fp8_pair.cuh"

namespace sparsek::detail::spmm_decode {

// Two FP8 values (the low byte first) as the mma's 16-bit pair; cuda_fp8.h emulates the
// conversion on images older than sm_89, which family.cu never runs.
template <typename TA, typename TB>
__device__ __forceinline__ uint32_t fp8x2_to(uint32_t two) {
  return detail::fp8x2_to_16<std::is_same_v<TA, __nv_fp8_e5m2>, !std::is_same_v<TB, __half>>(two);
}

}  // namespace sparsek::detail::spmm_decode
