// Counters through which the CTAs of one launch wait on each other (the Decode family's
// chained products: the second product's CTAs wait until the first's have written its
// input). Each launch leaves its counters at zero when it ends (its last CTA resets them),
// so they are zeroed once, when made, never per launch: no memset in a launch path or a
// CUDA graph.
//
// Counters may serve only one launch at a time. Launches on one stream are ordered (with
// programmatic dependent launch too: a kernel reads the counters only after
// griddepcontrol.wait, i.e. after the previous grid has ended), so an eager launch takes
// its stream's pair; a launch being captured into a CUDA graph takes a pair of its own for
// good (the graph may be replayed on any stream, beside any other work). The pairs come from
// one arena per device made on the first eager use; where none can be had (the arena not
// made yet while capturing, or spent) the caller runs its unchained path instead.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace sparsek::detail {

// Pairs of uint32 counters per device arena (64 KiB).
constexpr int kCounterPairs = 8192;

// Two zeroed uint32 counters for one launch on `stream` (of `device`, the current device);
// cudaErrorNotSupported (nothing allocated, no error left pending) where none can be had.
inline cudaError_t launch_counters(int device, cudaStream_t stream, uint32_t** out) {
  *out = nullptr;
  constexpr int kMaxDevices = 64;
  struct Arena {
    uint32_t* base = nullptr;
    int used = 0;  // pairs handed out
    std::unordered_map<cudaStream_t, int> by_stream;
  };
  static std::mutex mutex;
  static Arena arenas[kMaxDevices];
  if (device < 0 || device >= kMaxDevices) return cudaErrorNotSupported;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    (void)cudaGetLastError();
    return cudaErrorNotSupported;
  }
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  std::lock_guard<std::mutex> lock(mutex);
  Arena& a = arenas[device];
  if (a.base == nullptr) {
    if (capturing) return cudaErrorNotSupported;  // no allocation or memset inside a capture
    void* p = nullptr;
    const size_t bytes = size_t(kCounterPairs) * 2 * sizeof(uint32_t);
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return cudaErrorNotSupported;
    }
    if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaFree(p);
      return cudaErrorNotSupported;
    }
    a.base = static_cast<uint32_t*>(p);
  }
  int slot = -1;
  if (!capturing) {
    const auto it = a.by_stream.find(stream);
    if (it != a.by_stream.end()) slot = it->second;
  }
  if (slot < 0) {
    if (a.used >= kCounterPairs) return cudaErrorNotSupported;
    slot = a.used++;
    if (!capturing) a.by_stream.emplace(stream, slot);
  }
  *out = a.base + 2 * slot;
  return cudaSuccess;
}

}  // namespace sparsek::detail
