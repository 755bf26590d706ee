// The split-KV decode attention kernel (flash-decoding) of one row of
// kAttentionDecodeVariants (configs.hpp), and its launch. sm_80+ (mma.sync, ldmatrix,
// cp.async); this header is what each generated row unit includes, of lines like
//     #include "attention/decode/kernel.cuh"
//     SPARSEK_ATTENTION_DECODE_INSTANTIATE("attn_decode_bf16_d128")
//
// Why it is built this way. Decode reads every kept key and value once for a handful of
// queries: time = K/V bytes / HBM bandwidth, so everything serves streaming K and V with
// enough bytes in flight on every SM.
//
//  * Rows. One CTA serves one (batch, KV head, split): its query rows are the seq_q queries of
//    every query head of the KV head's group (row r = g * seq_q + i: query head
//    kv_head * group + g, query i; at most 16, family.cu), the m16 of mma.sync m16n8k16,
//    padded with zero rows. Each K and V tile is read once for the whole group.
//
//  * Sequences. Padded (sequence b is batch entry b of every view), or packed along seq by
//    SequenceLayout's cu_seqlens_q / cu_seqlens_k (decode_sequence: the views' batch is 1,
//    sequence b's rows start at cu_seqlens[b]); a CTA's rows are then those of the longest
//    sequence (max_seqlen_q), the rows past its own sequence's queries zero and never stored,
//    its keys and causal diagonal its own (bottom-right: len_k - len_q). The LSE of packed
//    queries is [heads, total_q]. The arrays are read on the device: the launch stays
//    capturable.
//
//  * Keys per sequence and pages. With seqlens_k, sequence b keeps its first seqlens_k[b]
//    keys (clamped into [0, max_seqlen_k]: unchecked counts never make an access leave the
//    views) and its bottom-right diagonal sits at seqlens_k[b] - seq_q. With a page table, K
//    and V are a pool of pages: logical key j of sequence b is row j % page_size of page
//    page_table[b * max_pages + j / page_size] (clamped into the pool). A tile within one
//    page (the usual case: pages of 16 keys or more, tiles aligned to them) looks its page
//    up once; a tile across pages looks up each row's. Splits are sized by the longest
//    sequence: a split past a shorter one's keys loads nothing and writes its empty partial.
//
//  * Key tiles. The keys of a (batch, KV head) are a sequence of tiles of 16 keys (split.hpp's
//    tiles): without a mask tile u is keys [16u, 16u + 16) below key_end (causal: the last
//    query's diagonal); with a mask the kept blocks of the (batch, KV head)'s pattern row
//    (col_idx ascending, the blocks past key_end dropped by a binary search), each block cut
//    into ceil(block_k / 16) tiles that end at the block's end. Split s of S takes tiles
//    [T*s/S, T*(s+1)/S); warp w of the CTA takes the split's tiles w, w + W, w + 2W, ...
//
//  * Ring. Each warp streams its own tiles through its own ring of `stages` slots (one tile
//    of K and one of V each) with 16-byte cp.async (L2 evict-first: read once), one commit
//    group per tile, stages - 1 tiles in flight while it computes one; only __syncwarp
//    orders a warp's copies and reads, no CTA barrier in the loop. Rows past a tile's keys
//    are zero-filled (src-size 0): V's must be finite under P = 0. A slot row is
//    head_dim elements, its 16-byte chunk c stored at c ^ (row % 8), so the 8 rows of each
//    ldmatrix phase hit 8 distinct bank groups.
//
//  * Tensor cores. S = Q K^T: Q's fragments loaded once into registers (head_dim / 16 k16
//    steps), K's by ldmatrix (K rows are mma's col-major B), two n8 tiles per key tile; then
//    the online softmax in fp32 in the log2 domain (scale * log2(e) folded into one multiply)
//    on the accumulators, the probabilities rounded to the input type as the A fragment of
//    O += P V (the accumulator layout of two n8 tiles is the A layout of one k16 step), V's
//    fragments by ldmatrix.trans, head_dim / 8 n8 tiles of O in registers. A key is kept by
//    row r (query i) iff it is below its tile's end and, causal, key <= i + causal_offset;
//    dropped keys score -inf. Each lane keeps its partial row sums; the four lanes of a row
//    add them once at the end.
//
//  * Deterministic merge, no atomics: after the loop the warps' (max, sum, O) go to shared
//    memory and the CTA merges them in warp order 0, 1, ..., W-1 (weights 2^(m_w - M) per
//    row, computed once). S = 1: the CTA writes O = acc / sum and LSE = ln 2 (M + log2 sum)
//    itself. S > 1 on an sm_90 image, where S <= 8 and the pairs' clusters of S CTAs fit in
//    one wave (cluster_merges): the pair's splits are one thread-block cluster, and after a
//    cluster barrier each CTA merges a share of O's elements from every CTA's partial in
//    distributed shared memory, in rank order (cluster_merge): no workspace, no second
//    kernel. Otherwise each CTA writes its unnormalised fp32 partial O and (M, sum) per row
//    to the workspace (core/split_workspace.hpp's pool), and the combine kernel merges the
//    splits of each (batch, KV head) in split order 0, 1, ..., S-1 the same way. The order depends
//    only on the problem, the row and S (split.hpp: shape and device), never on scheduling.
//    A row that keeps no key has max -inf and sum 0 everywhere: O = 0, LSE = -inf.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "attention/decode/configs.hpp"
#include "attention/decode/split.hpp"
#include "attention/problem.hpp"
#include "core/dtype.hpp"
#include "core/mma_sync.cuh"
#include "core/split_workspace.hpp"

// The body of a generated row unit: the row NAME's kernels and its entry points.
#define SPARSEK_ATTENTION_DECODE_INSTANTIATE(NAME)                                                   \
  static_assert(::sparsek::detail::attention_decode::attention_decode_row(NAME) >= 0,                \
                "SPARSEK_ATTENTION_DECODE_INSTANTIATE: no row " NAME " in kAttentionDecodeVariants"); \
  namespace sparsek::detail::attention_decode {                                                      \
  template cudaError_t launch_row<attention_decode_row(NAME)>(const AttentionProblem&, cudaStream_t); \
  template const void* probe_kernel<attention_decode_row(NAME)>();                                   \
  }

namespace sparsek::detail::attention_decode {

// ---- PTX, one instruction each (the rest: core/mma_sync.cuh) ----
namespace ptx {

// 16 bytes from global to shared; the bytes past src_bytes (0 or 16) are zeros. K and V are
// read once: their lines go first when L2 needs room (mma_sync::evict_first_policy).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, uint32_t src_bytes, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes), "l"(policy)
               : "memory");
}

}  // namespace ptx

// Two floats as the mma's pair of 16-bit values (lo: the lower column), rounded to nearest.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t out;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&out, &h, 4);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&out, &h, 4);
  }
  return out;
}

template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}

// What a launch passes its kernels (launch_row fills it from the checked problem; every
// count fits int32 by family.cu's supports). Strides in elements.
struct DecodeParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // null: not written
  int64_t q_sb, q_sh, q_ss, k_sb, k_sh, k_ss, v_sb, v_sh, v_ss, o_sb, o_sh, o_ss;
  // The mask (null row_ptr: none). Its one query block's row: pattern b * heads_kv + kv_head
  // when per_kv_pattern, else 0.
  const int32_t* row_ptr;
  const int32_t* col_idx;
  bool per_kv_pattern;
  int32_t block_k, tiles_per_block;
  // seq_q: a CTA's query rows per query head, the longest sequence's (max_seqlen_q with packed
  // queries); rows = seq_q * group <= 16.
  int32_t seq_q, heads_q, heads_kv, group, rows;
  // Packed sequences (SequenceLayout's cu_seqlens_q / cu_seqlens_k, batch + 1 offsets), or
  // null: padded. total_q, total_k: Q's and K's seq (every sequence's length when padded, the
  // packed total when packed).
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int32_t total_q, total_k;
  // Keys per sequence (SequenceLayout's seqlens_k, or null), at most max_seqlen_k; and the
  // page table (or null): K and V's batch entries are num_pages pages of page_size keys,
  // max_pages entries per sequence.
  const int32_t* seqlens_k;
  int32_t max_seqlen_k;
  const int32_t* page_table;
  int64_t max_pages, num_pages;
  int32_t page_size;
  bool causal;
  bool bottom_right;  // the causal diagonal at each sequence's len_k - len_q (else 0)
  float scale_log2;   // scale * log2(e)
  int32_t splits;
  // splits > 1: merged in a thread-block cluster of the splits (cluster: the kernel merges them
  // through distributed shared memory, no workspace, no combine), or through the workspace, per
  // CTA (blockIdx.x) 16 rows of head_dim floats of partial O and 16 (max, sum) pairs.
  bool cluster;
  float* part_o;
  float* part_ml;
};

// Where sequence b lies in Q/O and in K/V: the views' batch entry (0 when packed), its first
// row and its rows, clamped into the views (unchecked arrays never make an access leave
// them); and the keys some of its queries may keep, [0, key_end): all its keys, or causal,
// those up to its last query's diagonal (split.hpp's decode_key_end per sequence).
struct DecodeSequence {
  int64_t q_batch, k_batch;
  int32_t q_start, q_len, k_start, k_len;
  int32_t causal_offset, key_end;
};

__device__ __forceinline__ void sequence_span(const int32_t* cu, int64_t b, int32_t total, int32_t& start,
                                              int32_t& len) {
  const int32_t lo = __ldg(cu + b), hi = __ldg(cu + b + 1);
  start = lo < 0 ? 0 : lo > total ? total : lo;
  len = (hi < start ? start : hi > total ? total : hi) - start;
}

__device__ __forceinline__ DecodeSequence decode_sequence(const DecodeParams& p, int64_t b) {
  DecodeSequence s{b, b, 0, p.total_q, 0, p.total_k, 0, 0};
  if (p.cu_seqlens_q != nullptr) {
    s.q_batch = 0;
    sequence_span(p.cu_seqlens_q, b, p.total_q, s.q_start, s.q_len);
  }
  if (p.cu_seqlens_k != nullptr) {
    s.k_batch = 0;
    sequence_span(p.cu_seqlens_k, b, p.total_k, s.k_start, s.k_len);
  }
  if (p.seqlens_k != nullptr) {
    // Paged: the sequence's pages hold max_seqlen_k keys; else the keys its view holds.
    const int32_t cap = p.page_table != nullptr || s.k_len > p.max_seqlen_k ? p.max_seqlen_k : s.k_len;
    const int32_t n = __ldg(p.seqlens_k + b);
    s.k_len = n < 0 ? 0 : n > cap ? cap : n;
  }
  s.causal_offset = p.bottom_right ? s.k_len - s.q_len : 0;
  const int32_t end = s.q_len + s.causal_offset;  // one past the last query's diagonal
  s.key_end = !p.causal ? s.k_len : end < 0 ? 0 : end < s.k_len ? end : s.k_len;
  return s;
}

// One tile's keys: [key0, key0 + count), count in 0..16 (key0 = key_end when count is 0).
struct TileSpan {
  int32_t key0, count;
};

// Tile u of the (batch, KV head) whose keys end at key_end: listed (a mask: its kept blocks
// from col_idx position `first`) or dense.
__device__ __forceinline__ TileSpan tile_span(const DecodeParams& p, int32_t key_end, int32_t first, int32_t u) {
  int64_t key0, end;
  if (p.row_ptr != nullptr) {
    const int32_t block = u / p.tiles_per_block;
    const int32_t sub = u - block * p.tiles_per_block;
    const int64_t start = int64_t(__ldg(p.col_idx + first + block)) * p.block_k;
    key0 = start + int64_t(sub) * kDecodeKeys;
    end = start + p.block_k;
  } else {
    key0 = int64_t(u) * kDecodeKeys;
    end = key0 + kDecodeKeys;
  }
  if (end > key_end) end = key_end;
  if (key0 + kDecodeKeys < end) end = key0 + kDecodeKeys;
  if (key0 >= end) return TileSpan{key_end, 0};
  return TileSpan{int32_t(key0), int32_t(end - key0)};
}

// Query i of sequence b, query head `head`: its LSE index ([batch, heads, seq_q], or
// [heads, total_q] with packed queries) and its O row.
__device__ __forceinline__ int64_t decode_lse_index(const DecodeParams& p, const DecodeSequence& s, int64_t b,
                                                    int32_t head, int32_t i) {
  if (p.cu_seqlens_q != nullptr) return int64_t(head) * p.total_q + s.q_start + i;
  return (b * p.heads_q + head) * int64_t(p.total_q) + i;
}
template <class T>
__device__ __forceinline__ T* decode_o_row(const DecodeParams& p, const DecodeSequence& s, int32_t head, int32_t i) {
  return static_cast<T*>(p.o) + s.q_batch * p.o_sb + int64_t(head) * p.o_sh + (int64_t(s.q_start) + i) * p.o_ss;
}

template <int kRow>
struct DecodeTraits {
  static constexpr AttentionDecodeVariant kVariant = kAttentionDecodeVariants[kRow];
  using T = DeviceType<kVariant.input>;
  static constexpr int kD = kVariant.head_dim;
  static constexpr int kWarps = kVariant.warps;
  static constexpr int kStages = kVariant.stages;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kChunks = kD / 8;                       // 16-byte chunks per row
  static constexpr int kRowBytes = kD * 2;
  static constexpr int kTileBytes = kDecodeKeys * kRowBytes;   // K or V of one tile
  static constexpr int kSlotBytes = 2 * kTileBytes;            // K, then V
  static constexpr int kK16 = kD / 16;                         // k16 steps of Q K^T, n16 steps of P V
  static constexpr int kN8 = kD / 8;                           // n8 tiles of O
  static constexpr int kCopies = kDecodeKeys * kChunks / 32;   // 16-byte copies per lane per operand and tile
  static constexpr int kMergeStride = kD + 4;                  // floats per merge row (bank spread)
  static constexpr int kSmemBytes = decode_smem_bytes(kVariant);
  static constexpr int kCombineThreads = 256;  // the combine's column quads x split lanes
  static_assert(kDecodeKeys == 16 && kDecodeRows == 16, "the tile is one m16 x (2 x n8) of S and one k16 of P V");
  static_assert(kCopies * 32 == kDecodeKeys * kChunks, "a tile's copies spread evenly over the lanes");
  static_assert(kWarps * kSlotBytes * kStages == decode_ring_bytes(kVariant), "the ring's size (configs.hpp)");
};

// The splits of one (batch, KV head) merged inside their thread-block cluster (p.cluster: the
// cluster is the pair's `splits` CTAs, rank = split): every CTA's (max, sum) per row and partial
// O are in its shared memory (`ml`, `o`: rows x head_dim floats); after a cluster barrier each
// rank reads every rank's (max, sum) of each row from distributed shared memory, weighs the
// ranks as the combine kernel weighs the splits (2^(m_s - M), rank order), and writes its share
// of O's elements (rows x head_dim split evenly over the ranks), each the weighted sum of the
// ranks' partials in rank order; rank 0 writes the LSE. A second cluster barrier keeps every CTA
// alive until no other reads its shared memory. The order depends only on S, so results are
// bitwise identical run to run.
template <class Tr>
__device__ __forceinline__ void cluster_merge(const DecodeParams& p, const DecodeSequence& seq, int64_t b,
                                              int32_t kv_head, int32_t split, float (&ml)[kDecodeRows][2],
                                              float* o, float (&weight)[kMaxClusterSplits][kDecodeRows],
                                              float (&sum)[kDecodeRows]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using T = typename Tr::T;
  constexpr int kD = Tr::kD;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int S = p.splits;
  const int tid = int(threadIdx.x);
  cluster.sync();  // every rank's partial is in its shared memory (release / acquire)
  if (tid < p.rows) {
    const int r = tid;
    float mmax = -INFINITY;
    for (int q = 0; q < S; ++q) mmax = fmaxf(mmax, cluster.map_shared_rank(&ml[r][0], q)[0]);
    const float mbase = mmax == -INFINITY ? 0.0f : mmax;
    float total = 0.0f;
    for (int q = 0; q < S; ++q) {
      const float* mq = cluster.map_shared_rank(&ml[r][0], q);
      const float w = exp2f(mq[0] - mbase);
      weight[q][r] = w;
      total += mq[1] * w;
    }
    sum[r] = total;
    const int32_t gh = r / p.seq_q, i = r % p.seq_q;
    if (split == 0 && p.lse != nullptr && i < seq.q_len)
      p.lse[decode_lse_index(p, seq, b, kv_head * p.group + gh, i)] =
          total > 0.0f ? (mmax + log2f(total)) * 0.69314718055994531f : -INFINITY;
  }
  __syncthreads();
  // Every rank's partial O, mapped once (static indices: the pointers stay in registers).
  const float* partial[kMaxClusterSplits];
#pragma unroll
  for (int q = 0; q < kMaxClusterSplits; ++q) partial[q] = q < S ? cluster.map_shared_rank(o, q) : o;
  const int n = p.rows * kD;
  const int lo = int(int64_t(n) * split / S), hi = int(int64_t(n) * (split + 1) / S);
  for (int at = lo + tid; at < hi; at += Tr::kThreads) {
    const int r = at / kD, c = at % kD;
    float acc = 0.0f;
#pragma unroll
    for (int q = 0; q < kMaxClusterSplits; ++q)
      if (q < S) acc += partial[q][at] * weight[q][r];
    const float total = sum[r];
    const int32_t gh = r / p.seq_q, i = r % p.seq_q;
    if (i < seq.q_len)
      decode_o_row<T>(p, seq, kv_head * p.group + gh, i)[c] = from_float<T>(total > 0.0f ? acc / total : 0.0f);
  }
  cluster.sync();  // no rank leaves while another may still read its shared memory
#else
  (void)p, (void)seq, (void)b, (void)kv_head, (void)split, (void)ml, (void)o, (void)weight, (void)sum;
  __trap();  // the host launches clusters for sm_90 images only
#endif
}

// kPaged: the launch's K and V are a page pool (p.page_table != null). A template argument,
// not a run-time branch: the unpaged kernel carries none of the page lookups in its copies,
// and a decode CTA runs each instruction of its short life about once, so the code's size is
// instruction-fetch time.
template <int kRow, bool kPaged>
__global__ void __launch_bounds__(DecodeTraits<kRow>::kThreads) attention_decode_kernel(const DecodeParams p) {
  using Tr = DecodeTraits<kRow>;
  using T = typename Tr::T;
  constexpr int kD = Tr::kD, kWarps = Tr::kWarps, kStages = Tr::kStages, kChunks = Tr::kChunks;
  extern __shared__ __align__(128) char smem[];
  // The merge's 2^(m_w - M) (cluster: then the splits' 2^(m_s - M), kMaxClusterSplits >= kWarps).
  __shared__ float row_weight[kMaxClusterSplits][kDecodeRows];
  __shared__ float row_sum[kDecodeRows];
  __shared__ float cluster_ml[kDecodeRows][2];  // cluster: the CTA's (max, sum) per row

  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane >> 2, t = lane & 3;  // the mma's row group and thread in group
  const int32_t split = int32_t(blockIdx.x % uint32_t(p.splits));
  const int64_t pair = int64_t(blockIdx.x / uint32_t(p.splits));  // b * heads_kv + kv_head
  const int32_t kv_head = int32_t(pair % p.heads_kv);
  const int64_t b = pair / p.heads_kv;
  const DecodeSequence seq = decode_sequence(p, b);

  // The tiles of this (batch, KV head) and this split's share.
  int32_t first = 0, tiles = 0;
  if (p.row_ptr != nullptr) {
    const int64_t row = p.per_kv_pattern ? pair : 0;  // q_blocks = 1: pattern = its row
    first = __ldg(p.row_ptr + row);
    int32_t last = __ldg(p.row_ptr + row + 1);
    // Drop the blocks at or past key_end (col_idx ascending: the first such position).
    int32_t lo = first, hi = last;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (int64_t(__ldg(p.col_idx + mid)) * p.block_k < seq.key_end) lo = mid + 1;
      else hi = mid;
    }
    last = lo;
    tiles = (last - first) * p.tiles_per_block;
  } else {
    tiles = (seq.key_end + kDecodeKeys - 1) / kDecodeKeys;
  }
  const int32_t u0 = int32_t(int64_t(tiles) * split / p.splits);
  const int32_t u1 = int32_t(int64_t(tiles) * (split + 1) / p.splits);
  const int32_t mine = u1 - u0 > warp ? (u1 - u0 - warp + kWarps - 1) / kWarps : 0;

  // The sequence's key 0 of the KV head (tile keys are relative to it); paged, page 0's
  // (a key's page is added per tile or row).
  constexpr bool paged = kPaged;
  const int64_t k_batch = paged ? 0 : seq.k_batch, k_start = paged ? 0 : seq.k_start;
  const uint16_t* k_head =
      static_cast<const uint16_t*>(p.k) + k_batch * p.k_sb + int64_t(kv_head) * p.k_sh + k_start * p.k_ss;
  const uint16_t* v_head =
      static_cast<const uint16_t*>(p.v) + k_batch * p.v_sb + int64_t(kv_head) * p.v_sh + k_start * p.v_ss;
  const int32_t* pages = paged ? p.page_table + b * p.max_pages : nullptr;
  // The pool page of logical page `at` of this sequence, clamped into the pool.
  const auto page_of = [&](int32_t at) -> int64_t {
    const int64_t page = __ldg(pages + at);
    return page < 0 ? 0 : page >= p.num_pages ? p.num_pages - 1 : page;
  };
  char* ring = smem + warp * kStages * Tr::kSlotBytes;
  const uint64_t policy = mma_sync::evict_first_policy();

  // A lane's copies of a tile are rows kRowsPerCopy apart.
  constexpr int kRowsPerCopy = 32 / kChunks;
  static_assert(kRowsPerCopy * kChunks == 32 && kRowsPerCopy * Tr::kCopies == kDecodeKeys,
                "a lane copies one chunk column of every kRowsPerCopy-th row");
  const int64_t k_copy_step = int64_t(kRowsPerCopy) * p.k_ss, v_copy_step = int64_t(kRowsPerCopy) * p.v_ss;
  // Tile i of this warp into slot `slot`: K rows, then V rows, 16 bytes per copy.
  const auto load = [&](int32_t i, int slot) {
    const TileSpan s = tile_span(p, seq.key_end, first, u0 + warp + i * kWarps);
    const uint32_t k_dst = mma_sync::smem_u32(ring + slot * Tr::kSlotBytes);
    const uint32_t v_dst = k_dst + Tr::kTileBytes;
    // Paged: the tile's first page and row; one lookup when the whole tile is in that page.
    int32_t page0 = 0, row0 = 0;
    int64_t k_page = 0, v_page = 0;
    bool one_page = true;
    if (paged && s.count > 0) {
      page0 = s.key0 / p.page_size;
      row0 = s.key0 - page0 * p.page_size;
      one_page = row0 + s.count <= p.page_size;
      if (one_page) {
        const int64_t page = page_of(page0);
        k_page = page * p.k_sb + int64_t(row0) * p.k_ss;
        v_page = page * p.v_sb + int64_t(row0) * p.v_ss;
      }
    }
    // This lane's 16-byte chunk c of rows r0, r0 + kRowsPerCopy, ... (kChunks divides 32).
    const int r0 = lane / kChunks, c = lane % kChunks;
    if (!paged || one_page) {
      // Rows at a fixed stride: row r0's address once, then one add per copy (a 64-bit product
      // per copy and operand would be most of the kernel's integer instructions).
      const int64_t row0_k = (paged ? k_page : int64_t(s.key0) * p.k_ss) + int64_t(r0) * p.k_ss;
      const int64_t row0_v = (paged ? v_page : int64_t(s.key0) * p.v_ss) + int64_t(r0) * p.v_ss;
      const uint16_t* k_src = k_head + row0_k + c * 8;
      const uint16_t* v_src = v_head + row0_v + c * 8;
#pragma unroll
      for (int it = 0; it < Tr::kCopies; ++it) {
        const int r = r0 + it * kRowsPerCopy;
        const bool kept = r < s.count;
        const uint32_t off = uint32_t(r * Tr::kRowBytes + ((c ^ (r & 7)) << 4));
        // A row past the tile's keys copies nothing from key 0's chunk (it exists: a tile
        // implies keys).
        ptx::cp_async_16(k_dst + off, kept ? k_src + it * k_copy_step : k_head + c * 8, kept ? 16u : 0u, policy);
        ptx::cp_async_16(v_dst + off, kept ? v_src + it * v_copy_step : v_head + c * 8, kept ? 16u : 0u, policy);
      }
    } else {
      // A tile across pages: each row's page looked up.
#pragma unroll
      for (int it = 0; it < Tr::kCopies; ++it) {
        const int r = r0 + it * kRowsPerCopy;
        const bool kept = r < s.count;
        int64_t k_at = 0, v_at = 0;
        if (kept) {
          const int32_t key = s.key0 + r;
          const int32_t at = key / p.page_size;
          const int64_t page = page_of(at), row = key - at * p.page_size;
          k_at = page * p.k_sb + row * p.k_ss;
          v_at = page * p.v_sb + row * p.v_ss;
        }
        const uint32_t off = uint32_t(r * Tr::kRowBytes + ((c ^ (r & 7)) << 4));
        ptx::cp_async_16(k_dst + off, k_head + k_at + c * 8, kept ? 16u : 0u, policy);
        ptx::cp_async_16(v_dst + off, v_head + v_at + c * 8, kept ? 16u : 0u, policy);
      }
    }
  };

  // Q's A fragments (rows g and g + 8; columns 2t, 2t + 1 and 2t + 8, 2t + 9 of each k16
  // step), and each row's last kept key (causal; padding rows, and the rows past a shorter
  // sequence's queries, keep everything: zero Q, never stored).
  uint32_t qa[Tr::kK16][4];
  int32_t q_last[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    const bool real = r < p.rows && r % p.seq_q < seq.q_len;
    const int32_t gh = real ? r / p.seq_q : 0, i = real ? r % p.seq_q : 0;
    const uint16_t* q_row = static_cast<const uint16_t*>(p.q) + seq.q_batch * p.q_sb +
                            int64_t(kv_head * p.group + gh) * p.q_sh + (int64_t(seq.q_start) + i) * p.q_ss;
    q_last[h] = real && p.causal ? i + seq.causal_offset : INT32_MAX;
    // A fragment register is two adjacent elements: one 32-bit load where the row allows it
    // (nothing to compute on the loaded bits, so nothing waits for them before the MMAs).
    if (real && (reinterpret_cast<uintptr_t>(q_row) & 3u) == 0) {
      const uint32_t* q_words = reinterpret_cast<const uint32_t*>(q_row);
#pragma unroll
      for (int kk = 0; kk < Tr::kK16; ++kk)
#pragma unroll
        for (int half = 0; half < 2; ++half) qa[kk][h + 2 * half] = __ldg(q_words + 8 * kk + 4 * half + t);
    } else {
#pragma unroll
      for (int kk = 0; kk < Tr::kK16; ++kk)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int col = 16 * kk + 8 * half + 2 * t;
          const uint32_t lo = real ? q_row[col] : 0u, hi = real ? q_row[col + 1] : 0u;
          qa[kk][h + 2 * half] = lo | (hi << 16);
        }
    }
  }

  // The ring's first tiles in flight, after Q's loads are issued (above): Q's few bytes ahead
  // of the ring's in the memory system, so the first tile's wait is not also Q's. Not
  // unrolled: one copy of load's code here (see kPaged).
#pragma unroll 1
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < mine) load(i, i);
    mma_sync::cp_async_commit();
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The combine (a programmatic dependent when S > 1) may launch now: it waits for this
  // grid's completion before it reads a partial.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  float o[Tr::kN8][4];
#pragma unroll
  for (int n = 0; n < Tr::kN8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};  // running row max (log2 domain)
  float l[2] = {0.0f, 0.0f};            // this lane's share of the running row sum

  // ldmatrix lane addresses within a slot: K (x4: keys 0-7 / 8-15 by lane / 16, the k16
  // step's two 8-column halves by lane / 8 % 2) and V (.trans: keys by lane / 8 % 2, the n16
  // step's halves by lane / 16).
  const int k_row = (lane >> 4) * 8 + (lane & 7), k_half = (lane >> 3) & 1;
  const int v_row = ((lane >> 3) & 1) * 8 + (lane & 7), v_half = lane >> 4;

  for (int32_t i = 0; i < mine; ++i) {
    const int32_t ahead = i + kStages - 1;
    if (ahead < mine) load(ahead, ahead % kStages);
    mma_sync::cp_async_commit();
    mma_sync::cp_async_wait<kStages - 1>();
    __syncwarp();

    const TileSpan span = tile_span(p, seq.key_end, first, u0 + warp + i * kWarps);
    const uint32_t k_slot = mma_sync::smem_u32(ring + (i % kStages) * Tr::kSlotBytes);
    const uint32_t v_slot = k_slot + Tr::kTileBytes;

    // S = Q K^T: two n8 tiles (keys 0-7, 8-15).
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < Tr::kK16; ++kk) {
      uint32_t b0, b1, b2, b3;
      const int c = 2 * kk + k_half;
      mma_sync::ldsm_x4(k_slot + uint32_t(k_row * Tr::kRowBytes + ((c ^ (k_row & 7)) << 4)), b0, b1, b2, b3);
      mma_sync::mma_16816<T>(s[0], qa[kk], b0, b1);
      mma_sync::mma_16816<T>(s[1], qa[kk], b2, b3);
    }

    // Masks, scale, online softmax. Lane (g, t) holds keys 8j + 2t + e of rows g (h = 0)
    // and g + 8 (h = 1): s[j][2h + e].
    float mx[2];
    int32_t last[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int32_t causal_last = q_last[h] == INT32_MAX ? INT32_MAX : q_last[h] - span.key0;
      last[h] = span.count - 1 < causal_last ? span.count - 1 : causal_last;
      mx[h] = -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 8 * j + 2 * t + e;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x = col <= last[h] ? s[j][2 * h + e] * p.scale_log2 : -INFINITY;
          s[j][2 * h + e] = x;
          mx[h] = fmaxf(mx[h], x);
        }
      }
    float alpha[2], base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float m_new = fmaxf(m[h], mx[h]);
      base[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing kept yet: every term 0
      alpha[h] = exp2f(m[h] - base[h]);
      m[h] = m_new;
    }
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float x = exp2f(s[j][2 * h + e] - base[h]);
          s[j][2 * h + e] = x;
          sum[h] += x;
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + sum[h];
#pragma unroll
    for (int n = 0; n < Tr::kN8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }

    // O += P V: P's A fragment is the two n8 accumulators (rows g, g + 8; keys 2t.. and 8 + 2t..).
    const uint32_t pa[4] = {pack2<T>(s[0][0], s[0][1]), pack2<T>(s[0][2], s[0][3]), pack2<T>(s[1][0], s[1][1]),
                            pack2<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int nn = 0; nn < Tr::kK16; ++nn) {
      uint32_t b0, b1, b2, b3;
      const int c = 2 * nn + v_half;
      mma_sync::ldsm_x4_trans(v_slot + uint32_t(v_row * Tr::kRowBytes + ((c ^ (v_row & 7)) << 4)), b0, b1, b2, b3);
      mma_sync::mma_16816<T>(o[2 * nn], pa, b0, b1);
      mma_sync::mma_16816<T>(o[2 * nn + 1], pa, b2, b3);
    }
    __syncwarp();  // the slot is read before the next iteration copies into it
  }
  mma_sync::cp_async_wait<0>();

  // The row sums of the four lanes of each row (every lane gets the same bits: + commutes).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }

  // ---- merge the warps (the ring is free once every warp is here) ----
  __syncthreads();
  float* merge_o = reinterpret_cast<float*>(smem);  // [warp][row][kMergeStride]
  float* merge_m = merge_o + kWarps * kDecodeRows * Tr::kMergeStride;
  float* merge_l = merge_m + kWarps * kDecodeRows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    float* dst = merge_o + (warp * kDecodeRows + r) * Tr::kMergeStride + 2 * t;
#pragma unroll
    for (int n = 0; n < Tr::kN8; ++n) *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
    if (t == 0) {
      merge_m[warp * kDecodeRows + r] = m[h];
      merge_l[warp * kDecodeRows + r] = l[h];
    }
  }
  __syncthreads();

  const int tid = int(threadIdx.x);
  if (tid < p.rows) {
    const int r = tid;
    float mmax = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mmax = fmaxf(mmax, merge_m[w * kDecodeRows + r]);
    const float mbase = mmax == -INFINITY ? 0.0f : mmax;
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float weight = exp2f(merge_m[w * kDecodeRows + r] - mbase);
      row_weight[w][r] = weight;
      total += merge_l[w * kDecodeRows + r] * weight;
    }
    row_sum[r] = total;
    if (p.splits == 1) {
      const int32_t gh = r / p.seq_q, i = r % p.seq_q;
      if (p.lse != nullptr && i < seq.q_len)
        p.lse[decode_lse_index(p, seq, b, kv_head * p.group + gh, i)] =
            total > 0.0f ? (mmax + log2f(total)) * 0.69314718055994531f : -INFINITY;
    } else if (p.cluster) {
      cluster_ml[r][0] = mmax;
      cluster_ml[r][1] = total;
    } else {
      float* ml = p.part_ml + (int64_t(blockIdx.x) * kDecodeRows + r) * 2;
      ml[0] = mmax;
      ml[1] = total;
    }
  }
  __syncthreads();

  // The CTA's partial O (cluster: into shared memory past the warps' merge buffers).
  float* cluster_o = merge_l + kWarps * kDecodeRows;
  for (int at = tid; at < p.rows * kD; at += Tr::kThreads) {
    const int r = at / kD, c = at % kD;
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) acc += merge_o[(w * kDecodeRows + r) * Tr::kMergeStride + c] * row_weight[w][r];
    if (p.splits == 1) {
      const float total = row_sum[r];
      const int32_t gh = r / p.seq_q, i = r % p.seq_q;
      if (i < seq.q_len)
        decode_o_row<T>(p, seq, kv_head * p.group + gh, i)[c] = from_float<T>(total > 0.0f ? acc / total : 0.0f);
    } else if (p.cluster) {
      cluster_o[at] = acc;
    } else {
      p.part_o[(int64_t(blockIdx.x) * kDecodeRows + r) * kD + c] = acc;
    }
  }
  if (p.cluster) cluster_merge<Tr>(p, seq, b, kv_head, split, cluster_ml, cluster_o, row_weight, row_sum);
}

// The splits of one query row of one (batch, KV head) merged: O and LSE. One CTA per (pair,
// row) (blockIdx.x = pair, blockIdx.y = row), so a batch-1 decode's few pairs still spread over
// many SMs; each thread owns 4 columns (a float4 of every split's partial O) and one of
// kSplitLanes lanes of splits (s = lane, lane + kSplitLanes, ...): its loads are independent,
// and a row's S partials are read in about S / kSplitLanes rounds rather than S. The sums run
// in an order fixed by S alone (ascending within a lane, then the lanes in order; the row sum
// over a warp's fixed shuffle tree), so results are bitwise identical run to run.
template <int kRow>
__global__ void __launch_bounds__(DecodeTraits<kRow>::kCombineThreads) attention_decode_combine(const DecodeParams p) {
  using Tr = DecodeTraits<kRow>;
  using T = typename Tr::T;
  constexpr int kD = Tr::kD;
  constexpr int kQuads = kD / 4;
  constexpr int kSplitLanes = Tr::kCombineThreads / kQuads;
  static_assert(kQuads * kSplitLanes == Tr::kCombineThreads, "threads = column quads x split lanes");
  __shared__ float split_weight[kDecodeMaxSplits];
  __shared__ float4 lane_acc[kSplitLanes][kQuads];
  __shared__ float row_total;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as the main kernel's programmatic dependent (launch_row): wait for its partials.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int64_t pair = blockIdx.x;
  const int r = int(blockIdx.y);
  const int32_t kv_head = int32_t(pair % p.heads_kv);
  const int64_t b = pair / p.heads_kv;
  const DecodeSequence seq = decode_sequence(p, b);
  const int32_t gh = r / p.seq_q, i = r % p.seq_q;
  if (i >= seq.q_len) return;  // a row past a shorter packed sequence's queries: nothing to write
  const int64_t cta0 = pair * p.splits;  // the pair's first CTA of the main kernel
  const int tid = int(threadIdx.x);
  const int splits = p.splits;
  if (tid < 32) {
    // The row's max over the splits (fmaxf: exact in any order), then each split's weight
    // and the row sum: lane partial sums ascending, then a fixed xor tree.
    float mmax = -INFINITY;
    for (int s = tid; s < splits; s += 32) mmax = fmaxf(mmax, p.part_ml[((cta0 + s) * kDecodeRows + r) * 2]);
#pragma unroll
    for (int x = 16; x > 0; x >>= 1) mmax = fmaxf(mmax, __shfl_xor_sync(0xffffffffu, mmax, x));
    const float mbase = mmax == -INFINITY ? 0.0f : mmax;
    float total = 0.0f;
    for (int s = tid; s < splits; s += 32) {
      const float* ml = p.part_ml + ((cta0 + s) * kDecodeRows + r) * 2;
      const float weight = exp2f(ml[0] - mbase);
      split_weight[s] = weight;
      total += ml[1] * weight;
    }
#pragma unroll
    for (int x = 16; x > 0; x >>= 1) total += __shfl_xor_sync(0xffffffffu, total, x);
    if (tid == 0) {
      row_total = total;
      if (p.lse != nullptr)
        p.lse[decode_lse_index(p, seq, b, kv_head * p.group + gh, i)] =
            total > 0.0f ? (mmax + log2f(total)) * 0.69314718055994531f : -INFINITY;
    }
  }
  __syncthreads();
  const int quad = tid % kQuads, lane = tid / kQuads;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float4* part = reinterpret_cast<const float4*>(p.part_o + (cta0 * kDecodeRows + r) * kD) + quad;
  constexpr int64_t kSplitStride = int64_t(kDecodeRows) * kD / 4;  // float4s from one split's row to the next's
#pragma unroll 4
  for (int s = lane; s < splits; s += kSplitLanes) {
    const float4 v = part[s * kSplitStride];
    const float w = split_weight[s];
    acc.x += v.x * w;
    acc.y += v.y * w;
    acc.z += v.z * w;
    acc.w += v.w * w;
  }
  lane_acc[lane][quad] = acc;
  __syncthreads();
  if (lane == 0) {
    float4 sum = lane_acc[0][quad];
#pragma unroll
    for (int l = 1; l < kSplitLanes; ++l) {
      const float4 v = lane_acc[l][quad];
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    const float total = row_total;
    T* out = decode_o_row<T>(p, seq, kv_head * p.group + gh, i) + 4 * quad;
    out[0] = from_float<T>(total > 0.0f ? sum.x / total : 0.0f);
    out[1] = from_float<T>(total > 0.0f ? sum.y / total : 0.0f);
    out[2] = from_float<T>(total > 0.0f ? sum.z / total : 0.0f);
    out[3] = from_float<T>(total > 0.0f ? sum.w / total : 0.0f);
  }
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&attention_decode_kernel<kRow, false>);
}

// A runtime query asked once per device: `ask()`'s positive answer is kept for device `dev`;
// a non-positive one (the runtime could not say) is returned and asked again next time.
template <class Ask>
int once_per_device(int dev, std::atomic<int> (&known)[64], Ask ask) {
  const bool cached = dev >= 0 && dev < 64;
  if (cached) {
    const int k = known[dev].load(std::memory_order_relaxed);
    if (k > 0) return k;
  }
  const int k = ask();
  if (cached && k > 0) known[dev].store(k, std::memory_order_relaxed);
  return k;
}

// CTAs of row kRow resident per SM on device `dev` (1 if the runtime cannot say): the fewer of
// the two kernels' (paged or not), so one split rule serves both.
template <int kRow>
int resident_per_sm(int dev) {
  static std::atomic<int> known[64] = {};
  const int n = once_per_device(dev, known, [] {
    // The occupancy of a kernel past 48 KB of dynamic shared memory counts only once it may
    // take that much.
    int unpaged = 0, paged = 0;
    if (cudaFuncSetAttribute(attention_decode_kernel<kRow, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             DecodeTraits<kRow>::kSmemBytes) != cudaSuccess ||
        cudaFuncSetAttribute(attention_decode_kernel<kRow, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             DecodeTraits<kRow>::kSmemBytes) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&unpaged, attention_decode_kernel<kRow, false>,
                                                      DecodeTraits<kRow>::kThreads,
                                                      size_t(DecodeTraits<kRow>::kSmemBytes)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&paged, attention_decode_kernel<kRow, true>,
                                                      DecodeTraits<kRow>::kThreads,
                                                      size_t(DecodeTraits<kRow>::kSmemBytes)) != cudaSuccess) {
      (void)cudaGetLastError();  // a failed query must not surface as a later launch error
      return 0;
    }
    return unpaged < paged ? unpaged : paged;
  });
  return n > 0 ? n : 1;
}

// Whether kernel `fn`'s image is sm_90 code on an sm_90+ device (griddepcontrol, clusters),
// asked once per device (`known`: 1 no, 2 yes).
template <class Kernel>
bool sm90_image(const DeviceInfo& device, std::atomic<int> (&known)[64], Kernel fn) {
  return once_per_device(device.id, known, [&] {
           cudaFuncAttributes attr{};
           if (device.cc_major < 9) return 1;
           if (cudaFuncGetAttributes(&attr, fn) != cudaSuccess) {
             (void)cudaGetLastError();  // a failed query must not surface as a later launch error
             return 1;
           }
           return attr.binaryVersion >= 90 && attr.ptxVersion >= 90 ? 2 : 1;
         }) == 2;
}

// Whether row kRow's combine image is sm_90 code on an sm_90+ device, so it waits for the
// main kernel itself and may launch as its programmatic dependent.
template <int kRow>
bool combine_waits_in_kernel(const DeviceInfo& device) {
  static std::atomic<int> known[64] = {};
  return sm90_image(device, known, attention_decode_combine<kRow>);
}

// SPARSEK_ATTENTION_DECODE_CLUSTER=0 (a measuring knob, read once): the splits always merge
// through the workspace and the combine kernel.
inline bool decode_cluster_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("SPARSEK_ATTENTION_DECODE_CLUSTER");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return allowed;
}

// A launch of `ctas` CTAs of row kRow in clusters of `splits`, on `stream`; `at` holds the
// cluster attribute the configuration points to.
template <int kRow>
cudaLaunchConfig_t cluster_config(int64_t ctas, int splits, cudaStream_t stream, cudaLaunchAttribute* at) {
  at->id = cudaLaunchAttributeClusterDimension;
  at->val.clusterDim.x = uint32_t(splits);
  at->val.clusterDim.y = 1;
  at->val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(uint32_t(ctas));
  cfg.blockDim = dim3(DecodeTraits<kRow>::kThreads);
  cfg.dynamicSmemBytes = size_t(DecodeTraits<kRow>::kSmemBytes);
  cfg.stream = stream;
  cfg.attrs = at;
  cfg.numAttrs = 1;
  return cfg;
}

// Whether the rule's `splits` CTAs of each (batch, KV head) merge inside a thread-block
// cluster (cluster_merge) rather than through the workspace and the combine kernel: where the
// kernel's image is sm_90 code, splits is a portable cluster size (2..kMaxClusterSplits = 8)
// and the `pairs` clusters are all resident at once (a second wave of clusters would stream
// after the first). On an H200 a batch-1 call over a few hundred kept keys (4 splits) went
// from 12.6 to 8.4 µs, batches of 4-16 over 1152-2304 keys stayed within the run-to-run
// spread, and clusters of 16 (one split fewer than the rule's 17 at batch 1 over 1152 keys)
// made a decode step's attention 10 % slower: so a cluster takes the rule's splits whole, and
// at most 8. The answers are per device and kernel.
template <int kRow, bool kPaged>
bool cluster_merges(const AttentionProblem& p, int64_t pairs, int splits) {
  void (*const kernel)(DecodeParams) = attention_decode_kernel<kRow, kPaged>;
  if (!decode_cluster_allowed() || splits < 2 || splits > kMaxClusterSplits) return false;
  static std::atomic<int> sm90[64] = {};
  if (!sm90_image(p.device, sm90, kernel)) return false;
  static std::atomic<int> resident[kMaxClusterSplits + 1][64] = {};  // clusters + 1
  const int clusters = once_per_device(p.device.id, resident[splits], [&] {
                         cudaLaunchAttribute at{};
                         const cudaLaunchConfig_t cfg = cluster_config<kRow>(splits, splits, nullptr, &at);
                         int n = 0;
                         if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
                           (void)cudaGetLastError();
                           return 1;
                         }
                         return n + 1;
                       }) -
                       1;
  return clusters >= pairs;
}

// p passed kAttentionDecodeFamily's supports and fits for this row; its output is not empty
// (the registry launches nothing then).
template <int kRow>
cudaError_t launch_row(const AttentionProblem& p, cudaStream_t stream) {
  using Tr = DecodeTraits<kRow>;
  DecodeParams params{};
  params.q = p.q.data;
  params.k = p.k.data;
  params.v = p.v.data;
  params.o = p.o.data;
  params.lse = p.lse;
  params.q_sb = p.q.stride_b, params.q_sh = p.q.stride_h, params.q_ss = p.q.stride_s;
  params.k_sb = p.k.stride_b, params.k_sh = p.k.stride_h, params.k_ss = p.k.stride_s;
  params.v_sb = p.v.stride_b, params.v_sh = p.v.stride_h, params.v_ss = p.v.stride_s;
  params.o_sb = p.o.stride_b, params.o_sh = p.o.stride_h, params.o_ss = p.o.stride_s;
  params.row_ptr = p.has_mask ? p.mask.row_ptr : nullptr;
  params.col_idx = p.has_mask ? p.mask.col_idx : nullptr;
  params.per_kv_pattern = p.has_mask && p.mask.patterns > 1;
  params.block_k = p.has_mask ? p.mask.block_k : kDecodeKeys;
  params.tiles_per_block = int32_t(decode_tiles_per_block(p));
  params.seq_q = int32_t(decode_rows_per_head(p));
  params.heads_q = int32_t(p.heads());
  params.heads_kv = int32_t(p.heads_kv());
  params.group = int32_t(p.group());
  params.rows = int32_t(decode_rows_per_head(p) * p.group());
  params.cu_seqlens_q = p.layout.cu_seqlens_q;
  params.cu_seqlens_k = p.layout.cu_seqlens_k;
  params.total_q = int32_t(p.seq_q());
  params.total_k = int32_t(p.seq_k());
  params.seqlens_k = p.layout.seqlens_k;
  params.max_seqlen_k = int32_t(p.max_seqlen_k());
  params.page_table = p.layout.page_table;
  params.max_pages = p.layout.max_pages;
  params.num_pages = p.paged() ? p.k.batch : 0;
  params.page_size = int32_t(p.seq_k());
  params.causal = p.causal;
  params.bottom_right = p.causal_alignment == CausalAlignment::BottomRight;
  params.scale_log2 = float(double(p.scale) * 1.4426950408889634);

  const int64_t pairs = decode_sequences(p) * p.heads_kv();
  if (pairs == 0 || params.rows == 0) return cudaSuccess;  // packed: no sequence, or every one empty
  void (*const kernel)(DecodeParams) =
      params.page_table != nullptr ? attention_decode_kernel<kRow, true> : attention_decode_kernel<kRow, false>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return e;
  const int64_t resident = int64_t(p.device.sm_count) * resident_per_sm<kRow>(p.device.id);
  const int splits = decode_splits(pairs, decode_tiles_estimate(p), resident, Tr::kWarps);
  params.splits = splits;
  const bool cluster = params.page_table != nullptr ? cluster_merges<kRow, true>(p, pairs, splits)
                                                    : cluster_merges<kRow, false>(p, pairs, splits);
  if (cluster) {
    // One cluster of the pair's splits, merged in the kernel: no workspace, no combine.
    params.cluster = true;
    cudaLaunchAttribute at{};
    const cudaLaunchConfig_t cfg = cluster_config<kRow>(pairs * splits, splits, stream, &at);
    return cudaLaunchKernelEx(&cfg, kernel, params);
  }

  void* scratch = nullptr;
  if (splits > 1) {
    // pairs * splits <= INT32_MAX (family.cu); the partial O, then the (max, sum) pairs.
    const size_t ctas = size_t(pairs) * size_t(splits);
    const size_t o_floats = ctas * kDecodeRows * Tr::kD;
    e = scratch_alloc(p.device.id, (o_floats + ctas * kDecodeRows * 2) * sizeof(float), /*zero_bytes=*/0, stream,
                      &scratch);
    if (e != cudaSuccess) return e;
    params.part_o = static_cast<float*>(scratch);
    params.part_ml = params.part_o + o_floats;
  }
  kernel<<<dim3(uint32_t(pairs * splits)), dim3(Tr::kThreads), size_t(Tr::kSmemBytes), stream>>>(params);
  e = cudaGetLastError();
  if (e == cudaSuccess && splits > 1) {
    // One CTA per (pair, row); as the main kernel's programmatic dependent where its image
    // waits for it (sm_90 code: griddepcontrol.wait), so the launch overlaps the main
    // kernel's tail; else in plain stream order.
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(uint32_t(pairs), uint32_t(params.rows));
    cfg.blockDim = dim3(Tr::kCombineThreads);
    cfg.stream = stream;
    cudaLaunchAttribute pdl{};
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = 1;
    if (combine_waits_in_kernel<kRow>(p.device)) {
      cfg.attrs = &pdl;
      cfg.numAttrs = 1;
    }
    e = cudaLaunchKernelEx(&cfg, attention_decode_combine<kRow>, params);
  }
  const cudaError_t freed = scratch_free(scratch, stream);
  return e != cudaSuccess ? e : freed;
}

}  // namespace sparsek::detail::attention_decode
