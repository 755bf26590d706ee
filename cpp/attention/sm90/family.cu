// The Hopper attention family (kAttentionSm90Family, attention/operation.hpp; the registry:
// core/registry.hpp), sm_90a: what it supports, when a row of its table (configs.hpp) fits,
// and the dispatch to the row's launch (the row units, generated from the table by the units
// generator; the kernel is kernel.hpp). It checks what the kernels need beyond the
// AttentionProblem's invariants (cpp/attention/problem.hpp).
//
// This file is light (no CUTLASS). Built without sm_90a (SPARSEK_NO_SM90A), the family still
// exists, with its table, and refuses every problem with the reason.
#include <climits>
#include <cstdint>

#include "attention/operation.hpp"
#include "attention/sm90/configs.hpp"
#include "core/family_util.hpp"
#include "core/launch_table.hpp"

#ifndef SPARSEK_NO_SM90A
#include <array>
#include <utility>
#endif

namespace sparsek::detail {
namespace attention_sm90 {
namespace {

VariantInfo info(int row) {
  const AttentionSm90Variant& v = kAttentionSm90Variants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by};
  i.needs = needs(v);
  return i;
}

const char* fits(const AttentionProblem& p, int row) {
  const AttentionSm90Variant& v = kAttentionSm90Variants[row];
  if (p.input() != v.input) return detail::row_takes(v.input);
  if (p.head_dim() != v.head_dim) return v.head_dim == 64 ? "the row is for head_dim 64" : "the row is for head_dim 128";
  return nullptr;
}

#ifdef SPARSEK_NO_SM90A

const char* supports(const AttentionProblem&) { return "sparsek was built without sm_90a (SPARSEK_CUDA_ARCHS)"; }

cudaError_t launch(const AttentionProblem&, int, cudaStream_t) { return cudaErrorInvalidDeviceFunction; }

#else

const char* missing_image(const AttentionProblem& p) {
  static ImageCache cache;
  return detail::missing_image(p.device.id, probe_kernel<0>(), cache);
}

// TMA: 16-byte aligned base, strides in 16-byte units and below 2^40 bytes.
bool tma_ok(const HeadsView& t) {
  const auto stride_ok = [](int64_t s, int64_t extent) {
    return extent == 1 || (s % 8 == 0 && s < (int64_t(1) << 39));  // 2-byte elements
  };
  return aligned16(t.data) && stride_ok(t.stride_s, t.seq) && stride_ok(t.stride_h, t.heads) &&
         stride_ok(t.stride_b, t.batch);
}

const char* supports(const AttentionProblem& p) {
  if (p.device.cc_major != 9 || p.device.cc_minor != 0) return "needs compute capability 9.0 (Hopper, sm_90a)";
  if (const char* why = missing_image(p)) return why;
  if (p.empty_output()) return nullptr;  // nothing is launched (core/select.hpp)
  // Paged K and V: a key block of 128 is one TMA box inside one page.
  if (p.paged() && p.seq_k() % kBlockN != 0)
    return "paged K/V: the page size must be a multiple of 128 keys (the kernel's key tile)";
  if (p.paged() && p.k.batch > INT32_MAX) return "paged K/V: the pool's pages must fit int32";
  if (p.head_dim() != 64 && p.head_dim() != 128) return "head_dim must be 64 or 128";
  if (p.has_mask && (p.mask.block_q != kBlockM || p.mask.block_k != kBlockN))
    return "the mask's blocks must be 128 x 128 (the kernels' tile)";
  // Index arithmetic is int32 (key block * 128 + 127 included); one CTA per query block.
  constexpr int64_t kMaxSeq = INT32_MAX - kBlockN;
  if (p.seq_q() > kMaxSeq || p.seq_k() > kMaxSeq || p.max_seqlen_k() > kMaxSeq)
    return "sequences must be below 2^31 - 128";
  if (p.heads() > INT32_MAX || p.batch() > INT32_MAX || grid_sequences(p) > INT32_MAX - 1)
    return "batch and heads must fit int32";
  // Packed queries: the grid is sized by the longest sequence (kernel.hpp).
  if (p.varlen_q() && p.layout.max_seqlen_q > kMaxSeq) return "max_seqlen_q must be below 2^31 - 128";
  int64_t grid = 0;
  if (__builtin_mul_overflow(grid_q_blocks(p), grid_sequences(p) * p.heads(), &grid) || grid > INT32_MAX)
    return "batch * heads * query blocks must fit int32 (one CTA each)";
  if (!tma_ok(p.q) || !tma_ok(p.o) || (p.seq_k() > 0 && (!tma_ok(p.k) || !tma_ok(p.v))))
    return "Q, K, V and O must be 16-byte aligned with strides that are multiples of 8 elements (TMA)";
  return nullptr;
}

using LaunchFn = cudaError_t (*)(const AttentionProblem&, cudaStream_t);
// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kAttentionSm90Variants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kAttentionSm90Rows>();

cudaError_t launch(const AttentionProblem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

#endif  // SPARSEK_NO_SM90A

}  // namespace
}  // namespace attention_sm90

extern const AttentionFamily kAttentionSm90Family = {
    Backend::Hopper,
    "hopper",
    attention_sm90::kAttentionSm90Rows,
    /*epilogue=*/false,
    &attention_sm90::info,
    &attention_sm90::supports,
    &attention_sm90::fits,
    &attention_sm90::launch,
};

}  // namespace sparsek::detail
