// See checksum.hpp. A grid-stride loop, a warp reduction, one atomicAdd per warp. Integer
// addition mod 2^64 is associative and commutative, so the result does not depend on the
// order the atomics land in.
#include "chain/checksum.hpp"

#include <cuda_runtime.h>

namespace sparsek::detail {
namespace {

__global__ void __launch_bounds__(256) checksum_kernel(const uint32_t* data, int64_t n, unsigned long long* out) {
  unsigned long long sum = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    sum += static_cast<unsigned long long>(data[i]) * static_cast<unsigned long long>(i + 1);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0 && sum != 0) atomicAdd(out, sum);
}

}  // namespace

cudaError_t chain_checksum(const uint32_t* data_dev, int64_t n, uint64_t* out_dev, cudaStream_t stream) {
  cudaError_t e = cudaMemsetAsync(out_dev, 0, sizeof(uint64_t), stream);
  if (e != cudaSuccess || n <= 0) return e;
  constexpr int kThreads = 256;
  const int64_t blocks_needed = (n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(blocks_needed < 1024 ? blocks_needed : 1024);
  checksum_kernel<<<blocks, kThreads, 0, stream>>>(data_dev, n, reinterpret_cast<unsigned long long*>(out_dev));
  return cudaGetLastError();
}

}  // namespace sparsek::detail
