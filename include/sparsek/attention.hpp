// sparsek: block-sparse attention (forward) on NVIDIA Hopper GPUs.
//
//   O[b,h] = softmax(scale * Q[b,h] * K[b,g(h)]^T + M[b,h]) * V[b,g(h)]
//   LSE[b,h,i] = log(sum_j exp(scale * Q[b,h,i] . K[b,g(h),j] + M[b,h,i,j]))   (natural log)
//
// Q is [batch, heads, seq_q, head_dim], K and V [batch, heads_kv, seq_k, head_dim], O like Q;
// f16 or bf16 (all four the same), head_dim 64 or 128, fp32 softmax and accumulation.
// Grouped-query attention (GQA; MQA with heads_kv = 1): heads_kv divides heads (0 only when
// heads is 0), and query head h reads KV head g(h) = h / (heads / heads_kv), so consecutive
// query heads share one KV head (PyTorch's enable_gqa, repeat_interleave of K and V).
// heads_kv = heads is ordinary multi-head attention. The mask M is 0 for kept (query, key)
// pairs and -inf for the others:
//   - a block mask (BlockMaskView): query block i (rows i*block_q ..) keeps key block j
//     (keys j*block_k ..) when j is listed in row i of its pattern; one pattern for all, one
//     per (batch, query head), or one per (batch, KV head) that the group's query heads share;
//   - causal: query i keeps key j only when j <= i + offset, where the offset places the
//     diagonal (AttentionOptions::causal_alignment): TopLeft, offset 0 (PyTorch's is_causal;
//     with seq_q != seq_k the first query sees the first key), or BottomRight, offset
//     seq_k - seq_q (the last query sees the last key: a KV cache, chunked prefill, decode;
//     with seq_q > seq_k the first seq_q - seq_k queries keep no key);
//   - or both: a pair is kept when both keep it.
// A query row that keeps no key (an empty mask row, every listed key out of range, or a
// bottom-right query before the first key) gets O = 0 and LSE = -inf. The last blocks may be
// partial: sequences need not be a multiple of the block.
//
// Two kernel families: Hopper (sm_90a; any shape) and Decode (sm_80+; at most 16 query rows
// per (batch, KV head), seq_q * heads / heads_kv <= 16: the key sequence split over CTAs,
// flash-decoding). Auto tries Decode first. Deterministic: bitwise identical run to run; a
// row's keys are reduced in ascending block order (Hopper: by one CTA; Decode: each split in
// order, the splits combined in ascending order by a second kernel, no atomics).
// Every pointer is a device pointer. Rust: sparsek::attention (src/attention/mod.rs).
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek {

// A [batch, heads, seq, head_dim] tensor that a call reads (Q, K, V). Strides are in
// elements; head_dim is contiguous (stride 1). Packed: stride_s = head_dim, stride_h =
// seq*head_dim, stride_b = heads*seq*head_dim; [batch, seq, heads, head_dim] storage (e.g. a
// fused QKV projection) is stride_s = heads*head_dim, stride_h = head_dim. The Hopper kernels
// read with TMA: data 16-byte aligned, every stride a multiple of 8 elements.
struct HeadsView {
  const void* data = nullptr;
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  int64_t stride_b = 0, stride_h = 0, stride_s = 0;
  DType dtype = DType::F16;
};

// A [batch, heads, seq, head_dim] tensor that a call writes (O): HeadsView's fields over
// mutable data. It converts to a HeadsView.
struct HeadsMutView {
  void* data = nullptr;
  int64_t batch = 0, heads = 0, seq = 0, head_dim = 0;
  int64_t stride_b = 0, stride_h = 0, stride_s = 0;
  DType dtype = DType::F16;
  operator HeadsView() const {
    return HeadsView{data, batch, heads, seq, head_dim, stride_b, stride_h, stride_s, dtype};
  }
};

// The packed view of `data` (see HeadsView), to read.
inline HeadsView packed_heads(const void* data, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim,
                              DType dtype) {
  return HeadsView{data, batch, heads, seq, head_dim, heads * seq * head_dim, seq * head_dim, head_dim, dtype};
}

// The packed view of `data`, to write (O).
inline HeadsMutView packed_heads_mut(void* data, int64_t batch, int64_t heads, int64_t seq, int64_t head_dim,
                                     DType dtype) {
  return HeadsMutView{data, batch, heads, seq, head_dim, heads * seq * head_dim, seq * head_dim, head_dim, dtype};
}

// Block patterns over (query blocks x key blocks), stacked as one BSR pattern: pattern p
// is block-rows p*q_blocks .. (p+1)*q_blocks - 1. `patterns` is 1 (one pattern for every
// (batch, head)) or batch*heads (the mask's `heads`: Q's heads, one pattern per query head,
// or K's heads, one per KV head that the query heads of its group share). Query head h of
// batch b reads pattern b*heads + h / (Q's heads / heads).
// q_blocks = ceil(seq_q / block_q), k_blocks = ceil(seq_k / block_k). `row_ptr` has
// patterns*q_blocks + 1 entries (from 0, non-decreasing, ending at nnzb), `col_idx` nnzb
// entries, each < k_blocks, sorted and unique within a block-row. The Hopper kernels take
// block_q = block_k = 128.
// (batch, heads): the (batch, heads) the per-head patterns were made for. Required when
// patterns != 1, and then batch is Q's and heads Q's or K's (a set made for (2, 3) is refused
// for (3, 2)), with patterns = batch*heads; ignored when patterns == 1. block_topk and
// block_topk_scores fill them.
struct BlockMaskView {
  int32_t block_q = 128, block_k = 128;
  int64_t q_blocks = 0, k_blocks = 0;
  int64_t patterns = 1;
  int64_t batch = 0, heads = 0;
  int64_t nnzb = 0;
  const int32_t* row_ptr = nullptr;
  const int32_t* col_idx = nullptr;
};

// Where the causal diagonal sits when seq_q != seq_k (any other value is refused: InvalidArgument). TopLeft: query i keeps key j <= i (PyTorch's
// is_causal). BottomRight: query i keeps key j <= i + seq_k - seq_q, the last query sees the last
// key (a KV cache: chunked prefill, speculative decoding, decode); with seq_q > seq_k the first
// seq_q - seq_k queries keep no key (O = 0, LSE = -inf).
enum class CausalAlignment : int32_t { TopLeft = 0, BottomRight = 1 };

// Serving layouts of the batch's sequences (every pointer a device int32 array; null: off).
// The default (all null) is the padded layout above: every sequence has seq_q queries and
// seq_k keys.
//   - Variable length (FlashAttention's varlen): with cu_seqlens_q, Q and O hold `batch`
//     sequences packed along seq (HeadsView batch = 1, seq = the total query tokens; a fused
//     [total, heads, head_dim] buffer is stride_s = heads*head_dim, stride_h = head_dim):
//     sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 (batch + 1
//     offsets from 0, non-decreasing, ending at Q's seq). With cu_seqlens_k, K and V likewise
//     (either may be packed alone: the other side is then [batch, heads, seq, head_dim]).
//     No padding work: a sequence's tiles stop at its own length. Causality is per sequence
//     (bottom-right: its own len_k - len_q), and so is the mask: q_blocks = ceil(max_seqlen_q
//     / block_q), patterns 1 or batch * heads (the layout's batch). LSE is [heads, total_q]
//     (FlashAttention's varlen LSE). Rows of O outside every sequence are never written. The
//     Hopper family's last key tile of a sequence reads the next sequence's K and V rows,
//     weighted by 0: those values must be finite (as in FlashAttention's varlen; an inf or NaN
//     there makes the sequence's O NaN). The
//     packed totals must fit int32 and batch be below 2^31 - 1; with check_indices the
//     offsets are checked on the device (a last entry that is not the packed total, a
//     decrease, a sequence longer than max_seqlen: InvalidArgument, nothing launched), else
//     trusted for the results (a kernel never reads or writes outside the views).
//   - Keys per sequence: seqlens_k[b] (<= the keys K holds for it) is sequence b's key count
//     (a KV cache filled to different lengths); bottom-right causality aligns each sequence's
//     last query with its own last key. K and V stay [batch, heads_kv, seq_k, head_dim] with
//     max_seqlen_k <= seq_k; a mask's k_blocks = ceil(max_seqlen_k / block_k).
//   - Paged K/V: with page_table, K and V are a pool [num_pages, heads_kv, page_size,
//     head_dim] (HeadsView batch = num_pages, seq = page_size); sequence b's logical key j is
//     row j % page_size of pool page page_table[b * max_pages + j / page_size]; seqlens_k is
//     then required, max_pages >= 1 entries per sequence (batch * max_pages < 2^31) and
//     max_seqlen_k <= max_pages * page_size. Entries past a sequence's keys are never read (any
//     value). A block mask's columns are logical key blocks (block_k a multiple of
//     page_size, or page_size a multiple of block_k), so one table serves paged-only,
//     sparse-only and both. The decode family takes any page size; the Hopper family pages of
//     a multiple of 128 keys (others: NotSupported).
//   With check_indices, seqlens_k[b] in [0, max_seqlen_k] and every table entry a sequence
//   reaches in [0, num_pages) are checked on the device (InvalidArgument naming the sequence
//   and page, nothing launched); else they are trusted for the results and clamped into those
//   ranges by the kernels (no access leaves the views). The Hopper family reads the K and V
//   rows past a sequence's count inside its last 128-key block (its page's, or the padded
//   cache's), weighted by 0: they must be finite; the decode family reads none of them.
// `batch`: the number of sequences (required with any field set); max_seqlen_q / max_seqlen_k:
// the longest query / key sequence (upper bounds the caller knows; a mask's q_blocks and k_blocks
// are counted from them), which launches size their grids by without reading the arrays.
struct SequenceLayout {
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqlens_k = nullptr;
  const int32_t* page_table = nullptr;
  int64_t max_pages = 0;
  int64_t batch = 0;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
};

struct AttentionOptions {
  // The softmax scale; 0 means 1/sqrt(head_dim).
  float scale = 0.0f;
  bool causal = false;
  // Auto, Hopper (sm_90a) or Decode (the split-KV family above); Wmma has no attention.
  Backend backend = Backend::Auto;
  // As SpmmOptions::check_indices: the mask's row_ptr/col_idx and the layout's arrays
  // checked on the device first (synchronizes with the stream); a defect gives
  // InvalidArgument, nothing else launched.
  bool check_indices = false;
  // Where the causal diagonal sits (read only with `causal`).
  CausalAlignment causal_alignment = CausalAlignment::TopLeft;
  // Variable-length, per-sequence key counts and paged K/V (above); all null: padded.
  SequenceLayout layout;
};

// Whether `attention` would run this problem (and with which backend). `mask` may be null
// (dense, or causal only). Launches nothing, reads no device memory.
Result can_implement(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o,
                     const float* lse, const BlockMaskView* mask, const AttentionOptions& options,
                     Backend* chosen = nullptr);

// Enqueues the attention forward on `stream`: writes O and, when `lse` is non-null, LSE
// (batch*heads*seq_q floats, [batch, heads, seq_q] packed; with cu_seqlens_q [heads,
// total_q], Q's batch being 1). Validates everything first; on
// any error nothing is launched and O, LSE are untouched. O must not overlap itself (its
// dims of extent > 1, taken by stride ascending, each stride at least the span of the dims
// inside it: no stride_h = 0 with heads > 1, no stride_s < head_dim with seq > 1), and O and
// LSE must overlap neither each other nor Q, K, V or the mask's arrays (InvalidArgument).
Result attention(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o, float* lse,
                 const BlockMaskView* mask, const AttentionOptions& options, cudaStream_t stream);

// ---- Top-k key-block gating ------------------------------------------------------------
//
// Builds a top-k-per-query-block mask in one launch: for each (batch, head) and query block
// i, the `top_k` key blocks j with the highest score s[i][j], as a BlockMaskView with
// patterns = batch*heads (column indices ascending within each row).
//   Scores: given by the caller (f32, [batch, heads, q_blocks, k_blocks] packed), or
//   pooled: s[i][j] = mean(Q block i) . mean(K block j), where mean(X block) is, per
//   column d, an f32 sum divided (IEEE, round-to-nearest) by the block's row count (only rows
//   < seq): the rows in groups of 16, each group summed from 0 in ascending order, the group
//   sums added from 0 in order; the dot product is the fused
//   multiply-add chain acc = fma(a[d], b[d], acc) from acc = 0, d ascending. The CPU
//   reference (sparsek::gating in Rust) computes the same bits, so both masks are equal.
//   Grouped-query attention (K with heads_kv heads dividing Q's, as for `attention`): the
//   patterns are still one per (batch, query head), each query head's pooled Q scored
//   against its KV head's pooled K (KV head h / (heads / heads_kv)); mask.heads = Q's heads.
//   Ranking (the rule of the Rust BlockMask::topk_per_row): NaN counts as -inf, then the
//   IEEE 754 total order, higher first (so +0 above -0); equal keys by lower j first. With
//   `causal`, only key blocks j with j*block_k <= (i+1)*block_q - 1 + offset (some key not
//   after the diagonal of the block's last query; offset 0 TopLeft, seq_k - seq_q
//   BottomRight, as attention's causal_alignment) are candidates (none when that bound is
//   negative). Row i keeps min(top_k, candidates) blocks; its row_ptr offsets are therefore
//   known before the launch (block_topk_nnzb counts them).
struct TopkGatingOptions {
  int32_t top_k = 1;
  bool causal = false;
  int32_t block_q = 128, block_k = 128;
  // Where the causal diagonal sits (read only with `causal`); set it as the attention's.
  CausalAlignment causal_alignment = CausalAlignment::TopLeft;
};

// The number of mask blocks block_topk writes for these dims (nnzb of its BlockMaskView).
// Errors (InvalidArgument) on dims that overflow.
Result block_topk_nnzb(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k, const TopkGatingOptions& options,
                       int64_t* nnzb);

// Top-k from pooled Q and K (q, k as for `attention`: K may have fewer heads, dividing Q's). `row_ptr` (batch*heads*q_blocks + 1
// ints) and `col_idx` (block_topk_nnzb ints) are device buffers the call fills (they must
// overlap neither each other nor Q, K or the scores); `*mask` gets the view of them, with its
// (batch, heads). One launch on `stream`.
Result block_topk(const HeadsView& q, const HeadsView& k, const TopkGatingOptions& options, int32_t* row_ptr,
                  int32_t* col_idx, BlockMaskView* mask, cudaStream_t stream);

// Top-k from caller scores: `scores` is batch*heads*q_blocks*k_blocks device floats.
Result block_topk_scores(const float* scores, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k,
                         const TopkGatingOptions& options, int32_t* row_ptr, int32_t* col_idx, BlockMaskView* mask,
                         cudaStream_t stream);

}  // namespace sparsek
