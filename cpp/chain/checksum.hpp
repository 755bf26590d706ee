// A trivial kernel that proves the build/link/launch chain end to end: the host can
// compare its result with a checksum it computes itself.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace sparsek::detail {

// Enqueues on `stream`: *out_dev = sum over i < n of (uint64)data_dev[i] * (i + 1),
// wrapping mod 2^64. Both pointers are device pointers; n <= 0 gives 0. Returns the first
// CUDA error of the memset or the launch.
cudaError_t chain_checksum(const uint32_t* data_dev, int64_t n, uint64_t* out_dev, cudaStream_t stream);

}  // namespace sparsek::detail
