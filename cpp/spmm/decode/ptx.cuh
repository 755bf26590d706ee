// The Decode kernel's PTX wrappers, one instruction (or one wait loop) each: its 16-byte
// cp.async (sm_80+), B's L2 policy, mbarriers and 2-D TMA copies (sm_90 images only: compiled
// out below). The ones attention's decode kernel uses too are the core's (core/mma_sync.cuh,
// named here): shared-memory addresses, the evict-first policy A's lines take (A is read once,
// B and C stay), cp.async's commit and wait, ldmatrix and the m16n8k16 mma. kernel.cuh's file
// comment says which path uses which and why.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "core/mma_sync.cuh"

namespace sparsek::detail::spmm_decode {

using mma_sync::cp_async_commit;
using mma_sync::cp_async_wait;
using mma_sync::evict_first_policy;
using mma_sync::ldsm_x2;
using mma_sync::ldsm_x4;
using mma_sync::mma_16816;
using mma_sync::smem_u32;

// 16-byte cp.async (sm_80+), one commit group per stage.
__device__ __forceinline__ void cp_async_a(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_b(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// B is re-read by every CTA of the layer: keep it (evict-last).
__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// sm_90: 2-D tensor copies (TMA: one instruction per TM x KC box) completing on an mbarrier.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar), "l"(policy)
      : "memory");
}
#endif

}  // namespace sparsek::detail::spmm_decode
