// Helpers shared by the kernel families' family.cu files.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

namespace sparsek::detail {

inline bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// Per device, whether a family's kernels have an image in this build (0: not asked yet).
struct ImageCache {
  static constexpr int kMaxDevices = 64;
  std::atomic<signed char> known[kMaxDevices] = {};  // 1: present, -1: absent
};

// A build may not carry an image for this GPU (e.g. only sm_80 + sm_90a on a cc 10.x part):
// ask the runtime once per device rather than guess. Every kernel of a family is built for
// the same architectures, so one kernel (`probe`) answers for all of them. `dev`: the
// current device.
inline const char* missing_image(int dev, const void* probe, ImageCache& cache) {
  constexpr const char* kNoImage = "this build has no kernel image for the current GPU architecture";
  const bool cached = dev >= 0 && dev < ImageCache::kMaxDevices;
  const signed char state = cached ? cache.known[dev].load(std::memory_order_relaxed) : 0;
  if (state != 0) return state > 0 ? nullptr : kNoImage;
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, probe);
  if (e == cudaSuccess) {
    if (cached) cache.known[dev].store(1, std::memory_order_relaxed);
    return nullptr;
  }
  (void)cudaGetLastError();  // the failed query must not surface as a later launch error
  switch (e) {
    case cudaErrorInvalidDeviceFunction:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidKernelImage:
    case cudaErrorInvalidPtx:
    case cudaErrorUnsupportedPtxVersion:
      if (cached) cache.known[dev].store(-1, std::memory_order_relaxed);
      return kNoImage;
    default:
      return cudaGetErrorString(e);  // not about the image: asked again next time
  }
}

// The same for any operation's problem, whose `device` is the current device.
template <class P>
inline const char* missing_image(const P& p, const void* probe, ImageCache& cache) {
  return missing_image(p.device.id, probe, cache);
}

}  // namespace sparsek::detail
