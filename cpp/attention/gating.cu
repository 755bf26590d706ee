// Top-k key-block gating on the device, one launch (the contract is in
// include/sparsek/attention.hpp; the CPU reference, src/attention/gating.rs, computes the
// same bits).
//
// One CTA per (batch*head, chunk of kRowsPerCta query blocks):
//   1. pooled scores only: the mean of every K block and of the chunk's Q blocks into shared
//      memory, one thread per (block, column) pair (pool_blocks: the documented order of
//      the sums, 16-row groups, then an IEEE division by the row count);
//   2. per query block: its score against every key block (a fused multiply-add chain over
//      d ascending, or the caller's score), then each candidate's rank counted against all
//      others (rank_key: higher first, ties by lower block, NaN as -inf) and the kept ones written in
//      ascending block order. Counting instead of sorting keeps the result independent of
//      thread order.
// row_ptr is known before the launch (gating_row_keep); the chunk's CTA writes its rows.
//
// The registry (core/registry.hpp) sees this kernel as the one row of the gating's one
// family, kGatingFamily (attention/gating.hpp), defined at the end of this file.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "core/dtype.hpp"
#include "attention/gating.hpp"

namespace sparsek::detail {
namespace {

constexpr int kThreads = 512;
constexpr int kRowsPerCta = 16;

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// The means of blocks first .. first + count - 1 of one head's [seq, d] view (rows of
// `block`, the last one possibly short), column by column, into out[(j - first) * ld + c]. One
// thread per (block, column) pair. The documented order: groups of kGroup rows, each summed
// from 0 in ascending order, the group sums added in order, then one division by the row
// count. A group's loads are all in flight together (only its adds are a chain).
constexpr int kGroup = 16;
template <class T>
__device__ void pool_blocks(const T* base, int64_t stride_s, int64_t seq, int64_t block, int64_t first,
                            int32_t count, int32_t d, float* out, int32_t ld, int32_t tid, int32_t nthreads) {
  const int64_t pairs = int64_t(count) * d;
  for (int64_t x = tid; x < pairs; x += nthreads) {
    const int64_t r0 = (first + x / d) * block;
    const int64_t n = seq - r0 < block ? seq - r0 : block;
    const T* col = base + r0 * stride_s + x % d;
    float total = 0.0f;
    for (int64_t g = 0; g < n; g += kGroup) {
      float v[kGroup];
#pragma unroll
      for (int t = 0; t < kGroup; ++t) v[t] = g + t < n ? to_float(__ldg(col + (g + t) * stride_s)) : 0.0f;
      // Rows past n add +0.0f, which leaves a sum begun at +0.0f unchanged (it is never -0).
      float part = 0.0f;
#pragma unroll
      for (int t = 0; t < kGroup; ++t) part = __fadd_rn(part, v[t]);
      total = __fadd_rn(total, part);
    }
    out[(x / d) * ld + x % d] = __fdiv_rn(total, float(n));
  }
}

// The ranking key of a score: NaN as -inf, then IEEE 754's total order as an integer order
// (the sign-magnitude bits, negatives flipped), as Rust's f32::total_cmp.
__device__ inline int32_t rank_key(float s) {
  const int32_t bits = __float_as_int(isnan(s) ? -INFINITY : s);
  return bits ^ int32_t(uint32_t(bits >> 31) >> 1);
}

// Whether candidate (sa, a) ranks above (sb, b): the higher key, then the lower block.
__device__ inline bool ranks_above(float sa, int32_t a, float sb, int32_t b) {
  const int32_t ka = rank_key(sa), kb = rank_key(sb);
  return ka != kb ? ka > kb : a < b;
}

struct GatingParams {
  const void* q;
  const void* k;
  int64_t q_stride_b, q_stride_h, q_stride_s, k_stride_b, k_stride_h, k_stride_s;
  const float* scores;
  int32_t heads, group, head_dim;  // group: query heads per KV head (K has heads / group)
  int64_t seq_q, seq_k;
  int32_t q_blocks, k_blocks, chunks;
  int32_t block_q, block_k, top_k;
  bool causal;
  int64_t causal_offset;  // gating_causal_offset (attention/gating.hpp)
  int32_t* row_ptr;
  int32_t* col_idx;
  int64_t per_pattern;  // blocks per (batch, head): the sum of gating_row_keep over its rows
};

// Candidates of query block i: every key block, or (causal) those with a key on or before the
// diagonal of its last query (gating_row_candidates, attention/gating.hpp).
__device__ inline int32_t row_candidates(const GatingParams& p, int64_t i) {
  if (!p.causal) return p.k_blocks;
  const int64_t last_key = (i + 1) * p.block_q - 1 + p.causal_offset;
  if (last_key < 0) return 0;
  const int64_t last = last_key / p.block_k;
  return int32_t(last + 1 < p.k_blocks ? last + 1 : p.k_blocks);
}
__device__ inline int32_t row_keep(const GatingParams& p, int64_t i) {
  const int32_t cand = row_candidates(p, i);
  return p.top_k < cand ? p.top_k : cand;
}

template <class T, bool kPooled>
__global__ void __launch_bounds__(kThreads) gating_kernel(const GatingParams p) {
  extern __shared__ float shared[];
  const int64_t bh = blockIdx.x / p.chunks;
  const int32_t chunk = int32_t(blockIdx.x % p.chunks);
  const int32_t i0 = chunk * kRowsPerCta;
  const int32_t rows = p.q_blocks - i0 < kRowsPerCta ? p.q_blocks - i0 : kRowsPerCta;
  const int32_t d = p.head_dim;
  float* score = shared;                                  // k_blocks
  int32_t* keep_flag = reinterpret_cast<int32_t*>(score + p.k_blocks);  // k_blocks
  // Pooled K rows padded to d + 1 floats: the threads of a warp read 32 different rows at
  // once in the scores loop, which would all hit one bank at a stride of d = 64 or 128.
  float* pooled_k = reinterpret_cast<float*>(keep_flag + p.k_blocks);  // k_blocks * (d + 1)
  float* pooled_q = pooled_k + int64_t(p.k_blocks) * (d + 1);          // kRowsPerCta * d
  const int32_t tid = int32_t(threadIdx.x);

  if constexpr (kPooled) {
    const int64_t b = bh / p.heads, h = bh % p.heads;
    // The query head's KV head (grouped-query attention).
    const T* kb = static_cast<const T*>(p.k) + b * p.k_stride_b + (h / p.group) * p.k_stride_h;
    const T* qb = static_cast<const T*>(p.q) + b * p.q_stride_b + h * p.q_stride_h;
    pool_blocks(kb, p.k_stride_s, p.seq_k, p.block_k, 0, p.k_blocks, d, pooled_k, d + 1, tid, kThreads);
    pool_blocks(qb, p.q_stride_s, p.seq_q, p.block_q, i0, rows, d, pooled_q, d, tid, kThreads);
  }

  // row_ptr of the chunk's rows: the pattern's offset plus the rows before (a short loop).
  if (tid == 0) {
    int64_t offset = bh * p.per_pattern;
    for (int32_t i = 0; i < i0; ++i) offset += row_keep(p, i);
    for (int32_t r = 0; r < rows; ++r) {
      p.row_ptr[bh * p.q_blocks + i0 + r] = int32_t(offset);
      offset += row_keep(p, i0 + r);
    }
    if (bh == int64_t(gridDim.x / p.chunks) - 1 && i0 + rows == p.q_blocks)
      p.row_ptr[(bh + 1) * p.q_blocks] = int32_t(offset);
  }

  for (int32_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    __syncthreads();  // the pooled means are in; the previous row's scores are read
    for (int32_t j = tid; j < p.k_blocks; j += kThreads) {
      float s;
      if constexpr (kPooled) {
        const float* a = pooled_q + int64_t(r) * d;
        const float* c = pooled_k + int64_t(j) * (d + 1);
        s = 0.0f;
        for (int32_t x = 0; x < d; ++x) s = __fmaf_rn(a[x], c[x], s);
      } else {
        s = p.scores[(bh * p.q_blocks + i) * p.k_blocks + j];
      }
      score[j] = s;
    }
    __syncthreads();
    const int32_t keep = row_keep(p, i);
    const int32_t cand = row_candidates(p, i);
    for (int32_t j = tid; j < p.k_blocks; j += kThreads) {
      int32_t above = 0;
      if (j < cand)
        for (int32_t x = 0; x < cand; ++x) above += ranks_above(score[x], x, score[j], j) ? 1 : 0;
      keep_flag[j] = j < cand && above < keep ? 1 : 0;
    }
    __syncthreads();
    if (tid == 0) {
      // The row's first position: row_ptr was written above by this thread.
      int64_t out = p.row_ptr[bh * p.q_blocks + i];
      for (int32_t j = 0; j < p.k_blocks; ++j)
        if (keep_flag[j]) p.col_idx[out++] = j;
    }
  }
}

template <class T>
cudaError_t launch_typed(const GatingProblem& g, const GatingParams& params, unsigned grid, size_t smem,
                         cudaStream_t stream) {
  const auto kernel = g.pooled ? gating_kernel<T, true> : gating_kernel<T, false>;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  kernel<<<grid, kThreads, smem, stream>>>(params);
  return cudaGetLastError();
}

// Shared memory of one CTA: scores and flags per key block, plus the pooled means.
// INT64_MAX when it overflows (head_dim is bounded only by Q's extent).
int64_t gating_smem(const GatingProblem& p) {
  int64_t bytes = p.k_blocks * 8;  // k_blocks < 2^31
  if (!p.pooled) return bytes;
  int64_t pooled = 0, q = 0;
  if (__builtin_add_overflow(p.q.head_dim, int64_t(1), &pooled) ||
      __builtin_mul_overflow(pooled, p.k_blocks, &pooled) ||
      __builtin_mul_overflow(p.q.head_dim, int64_t(kRowsPerCta), &q) || __builtin_add_overflow(pooled, q, &pooled) ||
      __builtin_mul_overflow(pooled, int64_t(4), &pooled) || __builtin_add_overflow(bytes, pooled, &bytes))
    return INT64_MAX;
  return bytes;
}

// Why the gating kernel cannot run p (shared memory for the pooled K, the grid), or nullptr.
const char* gating_supports(const GatingProblem& p) {
  if (p.device.cc_major < 8) return "top-k gating needs compute capability 8.0 or newer";
  const int64_t smem = gating_smem(p);
  const int64_t limit = p.pooled ? p.device.smem_optin : 48 * 1024;
  if (smem > limit)
    return p.pooled ? "top-k gating keeps the pooled K in shared memory: k_blocks * head_dim is too large"
                    : "top-k gating keeps a row's scores in shared memory: k_blocks must be at most 6144";
  int64_t chunks = (p.q_blocks + kRowsPerCta - 1) / kRowsPerCta, grid = 0;
  if (__builtin_mul_overflow(chunks, p.batch * p.heads, &grid) || grid > INT32_MAX)
    return "batch * heads * query blocks is too large for one launch";
  return nullptr;
}

// Enqueues the one gating launch (a memset of row_ptr's one entry when there is no query
// block), each failure named by its call.
Result launch_gating(const GatingProblem& g, int /*row*/, cudaStream_t stream) {
  if (g.batch * g.heads == 0 || g.q_blocks == 0) {
    // No query block: row_ptr is the one entry 0.
    const cudaError_t e = cudaMemsetAsync(g.row_ptr, 0, sizeof(int32_t), stream);
    return e == cudaSuccess ? Result{} : with_cuda_error(e, make_result(Status::CudaError, "top-k gating: %s", cudaGetErrorString(e)));
  }
  GatingParams p{};
  p.q = g.q.data;
  p.k = g.k.data;
  p.q_stride_b = g.q.stride_b;
  p.q_stride_h = g.q.stride_h;
  p.q_stride_s = g.q.stride_s;
  p.k_stride_b = g.k.stride_b;
  p.k_stride_h = g.k.stride_h;
  p.k_stride_s = g.k.stride_s;
  p.scores = g.scores;
  p.heads = int32_t(g.heads);
  p.group = g.pooled && g.k.heads > 0 ? int32_t(g.heads / g.k.heads) : 1;
  p.head_dim = int32_t(g.pooled ? g.q.head_dim : 0);
  p.seq_q = g.seq_q;
  p.seq_k = g.seq_k;
  p.q_blocks = int32_t(g.q_blocks);
  p.k_blocks = int32_t(g.k_blocks);
  p.chunks = int32_t((g.q_blocks + kRowsPerCta - 1) / kRowsPerCta);
  p.block_q = g.options.block_q;
  p.block_k = g.options.block_k;
  p.top_k = g.options.top_k;
  p.causal = g.options.causal;
  p.causal_offset = gating_causal_offset(g.options, g.seq_q, g.seq_k);
  p.row_ptr = g.row_ptr;
  p.col_idx = g.col_idx;
  p.per_pattern = gating_pattern_keep(g.options, g.q_blocks, g.k_blocks, p.causal_offset);
  const unsigned grid = unsigned(int64_t(p.chunks) * g.batch * g.heads);
  const size_t smem = size_t(gating_smem(g));
  // Given scores need no element type (the f16 kernel reads none); pooled Q and K of one
  // of the attention types (validated by the entry).
  const DType t = g.pooled ? g.q.dtype : DType::F16;
  const cudaError_t e = dispatch<DTypeList<DType::F16, DType::BF16>>(
      t, [&](auto tr) { return launch_typed<DeviceType<decltype(tr)::kDType>>(g, p, grid, smem, stream); },
      [] { return cudaErrorNotSupported; });
  if (e != cudaSuccess) return with_cuda_error(e, make_result(Status::CudaError, "top-k gating launch failed: %s", cudaGetErrorString(e)));
  return Result{};
}

VariantInfo gating_info(int /*row*/) {
  return VariantInfo{"gating", /*automatic=*/true,
                     "the gating's only kernel: one configuration (512 threads, 16 query blocks per CTA), nothing to "
                     "choose between"};
}

const char* gating_fits(const GatingProblem&, int /*row*/) { return nullptr; }

}  // namespace

extern const GatingFamily kGatingFamily = {
    Backend::Auto,  // no backend to choose
    "gating",
    /*rows=*/1,
    /*epilogue=*/false,
    &gating_info,
    &gating_supports,
    &gating_fits,
    /*launch=*/nullptr,
    /*auto_skips=*/nullptr,
    /*gated=*/false,
    /*launch_worded=*/&launch_gating,
};

}  // namespace sparsek::detail
