// The checked attention problem: what the attention kernel family (cpp/attention/sm90) takes.
// Made in exactly two places, each the validation of one entry point: validate() in
// cpp/attention/api.cu (the C++ API, include/sparsek/attention.hpp) and
// AttentionProblem::from_rust() in cpp/attention/bridge.cc (the Rust API, which validated the
// same invariants in src/attention). Nothing downstream re-checks them.
//
// Invariants:
//   - q is [batch, heads, seq_q, head_dim], k and v [batch, heads_kv, seq_k, head_dim], o like
//     q; batch, heads, heads_kv, seq >= 0, head_dim >= 1; heads_kv divides heads (heads a
//     multiple of heads_kv: 0 only when heads is 0); strides >= 0 and every view's extent
//     (the largest offset + 1) fits int64 elements; data non-null when a view is non-empty;
//     all four F16 or all four BF16;
//   - lse is null or holds batch*heads*seq_q floats;
//   - has_mask: 1 <= block_q, block_k; q_blocks = ceil(seq_q/block_q), k_blocks =
//     ceil(seq_k/block_k), both fit int32; patterns is 1, or batch*mask.heads with
//     mask.batch q's and mask.heads q's or k's heads; patterns*q_blocks + 1 row_ptr
//     entries and nnzb fit int32; row_ptr non-null, col_idx
//     non-null when nnzb > 0; the index arrays valid (host-checked by Rust, device-checked
//     with check_indices, or trusted);
//   - o does not overlap itself (its dims of extent > 1, by stride ascending, each step over
//     the span of those inside it); o and lse overlap neither each other nor q, k, v or the
//     mask's arrays;
//   - causal_alignment is TopLeft or BottomRight;
//   - layout (SequenceLayout): its counts >= 0 and its arrays 4-byte aligned; all zero when no
//     array is set; otherwise batch = q's batch (Q not packed) and max_seqlen_q 0 or seq_q;
//     seqlens_k: max_seqlen_k <= k's seq (not paged); page_table: seqlens_k set, max_pages >=
//     1, batch * max_pages < 2^31, k and v [num_pages >= 1, heads_kv, page_size >= 1,
//     head_dim] with max_seqlen_k <= max_pages * page_size; a mask's k_blocks =
//     ceil(max_seqlen_k / block_k) with keys per sequence, and paged, block_k a multiple of
//     page_size or page_size of block_k; O and LSE overlap neither array; the arrays' values
//     (seqlens_k[b] in [0, max_seqlen_k], reached page entries in [0, num_pages)) checked on
//     the device with check_indices, else trusted for the results (kernels clamp them: no
//     access leaves the views); cu_seqlens_q: q and o batch 1, seq (the packed total) within
//     int32 and at most batch * max_seqlen_q, batch < 2^31 - 1, a mask's q_blocks =
//     ceil(max_seqlen_q / block_q) and its per-head patterns batch * heads of the layout's
//     batch, lse [heads, total_q]; cu_seqlens_k: k and v batch 1, likewise, no page table; the
//     other side not packed: its batch the layout's; the offsets' values (from 0,
//     non-decreasing, ending at the total, lengths <= max_seqlen) checked like the others;
//   - scale is finite and > 0 (0 in the options was resolved to 1/sqrt(head_dim));
//   - q, k, v and o's data are 2-byte aligned (their elements'), lse 4-byte;
//   - `device` describes the current device, which is the launch stream's.
#pragma once

#include <sparsek/attention.hpp>

#include "spmm/problem.hpp"  // DeviceInfo, make_result

namespace sparsek::detail {

class AttentionProblem {
 public:
  HeadsView q, k, v;
  HeadsMutView o;
  float* lse = nullptr;
  bool has_mask = false;
  BlockMaskView mask;
  bool causal = false;
  CausalAlignment causal_alignment = CausalAlignment::TopLeft;
  // The serving layout (include/sparsek/attention.hpp): all null is the padded batch.
  SequenceLayout layout;
  float scale = 1.0f;
  Backend backend = Backend::Auto;
  DeviceInfo device;

  int64_t batch() const { return q.batch; }
  int64_t heads() const { return q.heads; }
  // K and V's heads (grouped-query attention: heads_kv divides heads; query head h reads KV
  // head h / group(), consecutive query heads sharing one KV head).
  int64_t heads_kv() const { return k.heads; }
  bool varlen_q() const { return layout.cu_seqlens_q != nullptr; }
  bool varlen_k() const { return layout.cu_seqlens_k != nullptr; }
  bool paged() const { return layout.page_table != nullptr; }
  // Sequence lengths known only on the device (per-sequence arrays): a kernel reads them.
  bool per_sequence() const { return varlen_q() || varlen_k() || layout.seqlens_k != nullptr || paged(); }
  // Each sequence has its own key count (seqlens_k, paged or packed keys): the longest is
  // layout.max_seqlen_k, which masks are counted from and launches size by.
  bool keys_per_sequence() const { return varlen_k() || layout.seqlens_k != nullptr || paged(); }
  int64_t max_seqlen_k() const { return keys_per_sequence() ? layout.max_seqlen_k : k.seq; }
  int64_t group() const { return k.heads > 0 ? q.heads / k.heads : 1; }
  // The causal diagonal: query i keeps key j <= i + causal_offset() (0 top-left, seq_k - seq_q
  // bottom-right; may be negative).
  int64_t causal_offset() const { return causal_alignment == CausalAlignment::BottomRight ? k.seq - q.seq : 0; }
  // The mask pattern of query head h of batch b: 0 for a shared pattern, else per (batch, head)
  // of the mask's heads (Q's, or K's for a pattern a group shares).
  int64_t pattern_of(int64_t b, int64_t h) const {
    if (!has_mask || mask.patterns == 1 || mask.heads == 0) return 0;
    return b * mask.heads + h / (q.heads / mask.heads);
  }
  int64_t seq_q() const { return q.seq; }
  int64_t seq_k() const { return k.seq; }
  int64_t head_dim() const { return q.head_dim; }
  DType input() const { return q.dtype; }
  DType output() const { return o.dtype; }
  // Nothing to write: no query row.
  bool empty_output() const { return q.batch == 0 || q.heads == 0 || q.seq == 0; }
  // The registry's questions (core/registry.hpp): no fused or gated epilogue, no n or
  // row-depth bound.
  bool has_epilogue() const { return false; }
  bool gated_epilogue() const { return false; }
  int64_t n() const { return 0; }
  bool deeper_than(int64_t) const { return false; }

  static AttentionProblem from_rust(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o,
                                    float* lse, const BlockMaskView* mask, bool causal,
                                    CausalAlignment causal_alignment, float scale, Backend backend,
                                    const DeviceInfo& device, const SequenceLayout& layout = SequenceLayout{}) {
    AttentionProblem p;
    p.q = q;
    p.k = k;
    p.v = v;
    p.o = o;
    p.lse = lse;
    p.has_mask = mask != nullptr;
    if (mask != nullptr) p.mask = *mask;
    p.causal = causal;
    p.causal_alignment = causal_alignment;
    p.layout = layout;
    p.scale = scale;
    p.backend = backend;
    p.device = device;
    return p;
  }

 private:
  AttentionProblem() = default;
  friend Result validate(const HeadsView&, const HeadsView&, const HeadsView&, const HeadsMutView&, const float*,
                         const BlockMaskView*, const AttentionOptions&, const DeviceSource&, AttentionProblem*);
};

// Puts the C++ API's one message prefix ("sparsek: ") in front of a failed Result (cpp/core/validate.cu).
Result finish(Result r);

// The C++ entry's validation (cpp/attention/api.cu): every invariant above, into *out; the
// device last, from `devices` (core/validate.hpp).
Result validate(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o, const float* lse,
                const BlockMaskView* mask, const AttentionOptions& options, const DeviceSource& devices,
                AttentionProblem* out);

}  // namespace sparsek::detail
