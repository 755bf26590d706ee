// Thin wrappers over the sm_80+ asynchronous global->shared copy (cp.async) used by the
// WMMA kernel's multi-stage ring. Kept apart so the kernel reads as the algorithm.
#pragma once

#include <cstdint>

namespace sparsek::detail::spmm_wmma {

// Copies 16 bytes from global `src` to shared `dst` without going through registers.
// When `valid` is false nothing is read (src-size 0) and the 16 bytes are zero-filled,
// which is how out-of-range columns of a partial N tile become zeros. `src` must still
// be a harmless address in that case; callers pass the matrix base pointer.
// .cg caches in L2 only: each tile is read once per CTA, reuse happens across CTAs in L2.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  const uint32_t saddr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr), "l"(src), "r"(src_bytes)
               : "memory");
}

// Closes the group of cp.async issued by this thread since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace sparsek::detail::spmm_wmma
