// Per-launch scratch memory (the partial sums of split tiles, spmm/sm90/scheduler.hpp; the
// SM90 SDDMM's block coordinates, sddmm/sm90/kernel.hpp):
// stream-ordered allocations from a memory pool sparsek owns, one per device, created on
// first use. The pool keeps up to kScratchKeepBytes between launches: the device's default
// pool gives its memory back at every synchronization and maps it again on the next launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace sparsek::detail {

constexpr uint64_t kScratchKeepBytes = uint64_t(64) << 20;

inline cudaError_t scratch_pool(int device, cudaMemPool_t* out) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static cudaMemPool_t pools[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mutex);
  if (pools[device] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    cudaError_t e = cudaMemPoolCreate(&pool, &props);
    if (e != cudaSuccess) return e;
    uint64_t keep = kScratchKeepBytes;
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (e != cudaSuccess) {
      (void)cudaMemPoolDestroy(pool);
      return e;
    }
    pools[device] = pool;
  }
  *out = pools[device];
  return cudaSuccess;
}

// `bytes` of scratch on `device`, usable by work queued on `stream` after this call, zeroed
// over its first `zero_bytes`; give it back with scratch_free on the same stream. `device` is
// the problem's (the current device), which is `stream`'s: the entries refuse a stream of
// another device (DeviceSource, core/validate.hpp).
inline cudaError_t scratch_alloc(int device, size_t bytes, size_t zero_bytes, cudaStream_t stream, void** out) {
  *out = nullptr;
  cudaMemPool_t pool = nullptr;
  cudaError_t e = scratch_pool(device, &pool);
  if (e != cudaSuccess) return e;
  e = cudaMallocFromPoolAsync(out, bytes, pool, stream);
  if (e != cudaSuccess) return e;
  if (zero_bytes > 0) e = cudaMemsetAsync(*out, 0, zero_bytes, stream);
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(*out, stream);
    *out = nullptr;
  }
  return e;
}

inline cudaError_t scratch_free(void* ptr, cudaStream_t stream) {
  return ptr == nullptr ? cudaSuccess : cudaFreeAsync(ptr, stream);
}

}  // namespace sparsek::detail
