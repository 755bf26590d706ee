// Every TMA descriptor CuTe encodes for us reports a refused encode: CUTLASS's make_tma_copy
// calls cutlass::call_cuTensorMapEncodeTiled (cutlass/cuda_host_adapter.hpp), and on a
// failed encode only prints and asserts (compiled out) while keeping the descriptor it
// passed, which the driver may have partly written (seen on the H100 for a 2^40-byte
// stride: tests/cpp/tma_status.cu). This specialization, for the argument types
// make_tma_copy passes, makes the same driver call and zeroes the descriptor when it fails,
// so a refused descriptor is always the all-zero one that tma_encoded (core/tma_status.hpp)
// reports, and the launch that built it enqueues nothing. Include it in every unit that
// builds TMA descriptors, before make_tma_copy is instantiated.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>

#include "cutlass/cuda_host_adapter.hpp"

#if !defined(CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL) && !defined(__CUDACC_RTC__)
namespace cutlass {

template <>
inline CUresult call_cuTensorMapEncodeTiled<CUtensorMap*, CUtensorMapDataType, int, void*, uint64_t*, uint64_t*,
                                            uint32_t*, uint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                            CUtensorMapL2promotion, CUtensorMapFloatOOBfill>(
    CUtensorMap* map, CUtensorMapDataType type, int rank, void* address, uint64_t* dims, uint64_t* strides,
    uint32_t* box, uint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion promotion, CUtensorMapFloatOOBfill fill) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<Encode>(fn);
  }();
  const CUresult r = encode == nullptr ? CUDA_ERROR_UNKNOWN
                                       : encode(map, type, cuuint32_t(rank), address, dims, strides, box,
                                                element_strides, interleave, swizzle, promotion, fill);
  if (r != CUDA_SUCCESS) std::memset(static_cast<void*>(map), 0, sizeof(CUtensorMap));
  return r;
}

}  // namespace cutlass
#endif
