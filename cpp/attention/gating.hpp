// Top-k key-block gating (include/sparsek/attention.hpp, block_topk*) as an operation of the
// registry (core/registry.hpp): the checked request, and its one family of one kernel
// (cpp/attention/gating.cu). The C++ entry (cpp/attention/api.cu) and the Rust bridge
// (cpp/attention/bridge.cc) build a GatingProblem after their validation and run it through
// the registry (select_and_launch); the launch trusts it.
#pragma once

#include <sparsek/attention.hpp>

#include "core/features.hpp"
#include "core/one_kernel.hpp"
#include "core/registry.hpp"
#include "core/result.hpp"

namespace sparsek::detail {

class DeviceSource;  // core/validate.hpp

// Invariants: batch, heads, seq_q, seq_k >= 0; 1 <= block_q, block_k; top_k >= 0;
// options.causal_alignment one of the enum's values; q_blocks = ceil(seq_q/block_q) and
// k_blocks = ceil(seq_k/block_k) fit int32; batch*heads*q_blocks + 1 and nnzb fit int32;
// pooled: q and k are valid HeadsViews of [batch, heads, seq_q, head_dim] and [batch, heads_kv,
// seq_k, head_dim], heads_kv (k.heads) dividing heads (0 only when heads is 0; query head h is
// scored against KV head h / (heads / heads_kv)), F16 or BF16, the same, 2-byte aligned; scores
// null; else scores holds batch*heads*q_blocks*k_blocks floats (4-byte aligned); row_ptr
// non-null, col_idx non-null when nnzb > 0, both 4-byte aligned; row_ptr and col_idx overlap
// neither each other nor the inputs; `device` is the current device, the launch stream's.
struct GatingProblem : OneKernelProblem {
  bool pooled = false;  // scores from q and k (else from `scores`)
  HeadsView q, k;
  const float* scores = nullptr;
  int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0;
  TopkGatingOptions options;
  int64_t q_blocks = 0, k_blocks = 0, nnzb = 0;
  int32_t* row_ptr = nullptr;
  int32_t* col_idx = nullptr;
  DeviceInfo device;

  // One kernel (core/one_kernel.hpp); with no query block the launch still writes row_ptr's
  // one entry, so the output is never empty.
};

// Where the causal diagonal sits, as attention's: query i keeps key j <= i + offset (0
// top-left, seq_k - seq_q bottom-right); 0 without `causal`. Within [-seq_q, seq_k], so
// (i+1)*block_q - 1 + offset below fits int64 for every query block i.
inline int64_t gating_causal_offset(const TopkGatingOptions& o, int64_t seq_q, int64_t seq_k) {
  return o.causal && o.causal_alignment == CausalAlignment::BottomRight ? seq_k - seq_q : 0;
}

// Candidates of query block i: every key block, or (causal) the key blocks j with j*block_k <=
// (i+1)*block_q - 1 + offset (some key not after the diagonal of the block's last row; none
// when that is negative).
inline int64_t gating_row_candidates(const TopkGatingOptions& o, int64_t i, int64_t k_blocks, int64_t offset) {
  if (!o.causal) return k_blocks;
  const int64_t last_key = (i + 1) * o.block_q - 1 + offset;
  if (last_key < 0) return 0;
  const int64_t cand = last_key / o.block_k + 1;
  return cand < k_blocks ? cand : k_blocks;
}

// Blocks kept by query block i (min(top_k, candidates)).
inline int64_t gating_row_keep(const TopkGatingOptions& o, int64_t i, int64_t k_blocks, int64_t offset) {
  const int64_t cand = gating_row_candidates(o, i, k_blocks, offset);
  return o.top_k < cand ? o.top_k : cand;
}

// The blocks one pattern keeps: the sum of gating_row_keep over query blocks 0 .. q_blocks - 1,
// in closed form (q_blocks may be 2^31 - 1; no loop over them). The Rust reference
// (src/attention/gating.rs, kept_per_pattern) computes the same. With T = min(top_k,
// k_blocks): without `causal` every row keeps T; with it, the rows before i0 (the first with
// (i0+1)*block_q - 1 + offset >= 0) keep nothing, and from i0 on, row i0 + u has candidates
// f(u) = (block_q*u + c)/block_k + 1 (c = (i0+1)*block_q - 1 + offset >= 0), which never
// decrease: the first ceil(((T-1)*block_k - c)/block_q) of them (at most the rows left) have
// f(u) < T and keep f(u), the others keep T; the sum of f over the first is a floor sum.
// Needs 0 <= q_blocks, k_blocks <= INT32_MAX, 1 <= block_q, block_k, top_k >= 0 and
// -q_blocks*block_q <= offset <= k_blocks*block_k (gating_causal_offset's range); the result
// is at most q_blocks * k_blocks < 2^62.
inline int64_t gating_pattern_keep(const TopkGatingOptions& o, int64_t q_blocks, int64_t k_blocks, int64_t offset) {
  using u128 = unsigned __int128;
  const u128 t = u128(o.top_k < k_blocks ? int64_t(o.top_k) : k_blocks);
  if (!o.causal || t == 0) return int64_t(u128(q_blocks) * t);
  const int64_t bq = o.block_q, bk = o.block_k;
  // The first row with a candidate: (i0 + 1)*bq >= 1 - offset.
  const int64_t i0 = offset >= 0 ? 0 : (1 - offset + bq - 1) / bq - 1;
  if (i0 >= q_blocks) return 0;
  const u128 n = u128(q_blocks - i0);
  const int64_t c = (i0 + 1) * bq - 1 + offset;  // >= 0, below 2^63 (the offset's range)
  // Rows (from i0) with f(u) < T: bq*u + c < (T-1)*bk.
  const u128 need = (t - 1) * u128(bk);
  const u128 below_all = need > u128(c) ? (need - u128(c) + u128(bq) - 1) / u128(bq) : 0;
  const u128 below = below_all < n ? below_all : n;
  // floor_sum = sum over u < below of floor((bq*u + c) / bk), by the Euclidean-like
  // reduction of sum_{u<x} floor((a*u + b) / m): O(log) steps, every value below 2^96.
  u128 sum = 0, x = below, m = u128(bk), a = u128(bq), b = u128(c);
  while (x > 0) {
    if (a >= m) {
      sum += x * (x - 1) / 2 * (a / m);
      a %= m;
    }
    if (b >= m) {
      sum += x * (b / m);
      b %= m;
    }
    const u128 y = a * x + b;
    if (y < m) break;
    x = y / m;
    b = y % m;
    const u128 swap = m;
    m = a;
    a = swap;
  }
  return int64_t(below + sum + (n - below) * t);
}

// The C++ entries' validation (cpp/attention/api.cu): the dims, the inputs (Q and K pooled, or
// the scores), the outputs (row_ptr, col_idx, the mask view), then the device from `devices`
// (core/validate.hpp), into *g; every invariant above.
Result validate_block_topk(const HeadsView& q, const HeadsView& k, const TopkGatingOptions& options, int32_t* row_ptr,
                           int32_t* col_idx, const BlockMaskView* mask, const DeviceSource& devices,
                           GatingProblem* g);
Result validate_block_topk_scores(const float* scores, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k,
                                  const TopkGatingOptions& options, int32_t* row_ptr, int32_t* col_idx,
                                  const BlockMaskView* mask, const DeviceSource& devices, GatingProblem* g);

using GatingFamily = FamilyOf<GatingProblem>;
using GatingSelection = SelectionOf<GatingProblem>;

// The gating's one family: one row, the gating kernel (cpp/attention/gating.cu, compiled with
// the feature `attention` only).
extern const GatingFamily kGatingFamily;

template <>
struct Operation<GatingProblem> : OperationDefaults<GatingProblem> {
  static constexpr uint32_t kNeeds = kFeatureAttention;
  static constexpr const char* kNotBuilt =
      "sparsek was built without attention: enable the feature `attention` (cargo feature; CMake "
      "SPARSEK_WITH_ATTENTION)";
  // Its kernel reads f16 and bf16 Q and K in every build.
  static constexpr bool kBf16Feature = false;
  // One kernel: nothing for SPARSEK_VARIANT to force, and a refusal is its reason alone.
  static constexpr bool kForcible = false;
  static constexpr bool kNamesFamilies = false;
#if SPARSEK_FEATURES & SPARSEK_FEATURE_ATTENTION
  static constexpr const GatingFamily* kFamilies[] = {&kGatingFamily};
#else
  static constexpr const GatingFamily* kFamilies[] = {nullptr};  // not built: select refuses first
#endif
};

// select and launch for the gating are defined in cpp/attention/api.cu.
extern template Result select<GatingProblem>(const GatingProblem&, GatingSelection*);
extern template Result launch<GatingProblem>(const GatingProblem&, const GatingSelection&, cudaStream_t);

}  // namespace sparsek::detail
