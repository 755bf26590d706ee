// sparsek attention SM90: the kernel of one row of kAttentionSm90Variants (configs.hpp) and its
// launch. Warp-specialized, one CTA per (query block, head, sequence):
//
//   warpgroup 0, warp 0   producer: TMA loads of Q, then K and V of each key block
//                         (mainloop.hpp), through two PipelineTmaAsync;
//   warpgroups 1 and 2    consumers: 64 query rows each, S = Q K^T and O += P V on WGMMA,
//                         online softmax in registers (mainloop.hpp, softmax.hpp), then the
//                         epilogue (epilogue.hpp).
// Producers give registers to the consumers (setmaxnreg: 24 / 240).
//
// Grid order: blockIdx.x = (batch*heads + head) * q_blocks + (q_blocks - 1 - qb): the CTAs of
// one head run together (its K and V stay in L2 for all its query blocks), the longest
// causal rows first. Grouped-query attention: query head h reads KV head h / group, so the
// query heads sharing a KV head are consecutive in the grid too. Variable-length batches
// (SequenceLayout's cu_seqlens_q / cu_seqlens_k, sequence.hpp): q_blocks is the longest
// sequence's (max_seqlen_q; no host read of the arrays, so a launch is capturable in a CUDA
// graph), and a CTA whose query block starts past its sequence's end exits at once.
//
// Deterministic: each output row is computed by one CTA, its key blocks in ascending order.
//
// Each row's kernel is compiled in a translation unit the build generates, of lines like:
//     #include "attention/sm90/kernel.hpp"
//     SPARSEK_ATTENTION_SM90_INSTANTIATE("attn_sm90_bf16_d128")
// Built without sm_90a (SPARSEK_NO_SM90A), the macro only checks that the row exists.
#pragma once

#include "attention/sm90/configs.hpp"

#ifdef SPARSEK_NO_SM90A

#define SPARSEK_ATTENTION_SM90_INSTANTIATE(NAME)                                       \
  static_assert(::sparsek::detail::attention_sm90::attention_sm90_row(NAME) >= 0,      \
                "SPARSEK_ATTENTION_SM90_INSTANTIATE: no row " NAME " in kAttentionSm90Variants");

#else

#include <cstdint>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/pipeline/pipeline.hpp"

#include "attention/sm90/epilogue.hpp"
#include "attention/sm90/key_blocks.hpp"
#include "attention/sm90/mainloop.hpp"
#include "core/tma_encode.hpp"  // a refused TMA encode leaves an all-zero descriptor
#include "core/tma_status.hpp"

#define SPARSEK_ATTENTION_SM90_INSTANTIATE(NAME)                                                     \
  static_assert(::sparsek::detail::attention_sm90::attention_sm90_row(NAME) >= 0,                    \
                "SPARSEK_ATTENTION_SM90_INSTANTIATE: no row " NAME " in kAttentionSm90Variants");    \
  namespace sparsek::detail::attention_sm90 {                                                        \
  template cudaError_t launch_row<attention_sm90_row(NAME)>(const AttentionProblem&, cudaStream_t);  \
  template const void* probe_kernel<attention_sm90_row(NAME)>();                                     \
  }

namespace sparsek::detail::attention_sm90 {

using namespace cute;

template <DType kT>
struct ElementOf {  // the CUTLASS type of the DType's traits entry (core/dtype.hpp)
  using type = typename detail::DeviceTypeOf<kT>::cutlass_type;
};

template <class Mainloop_, class Epilogue_>
struct AttentionKernel {
  using Mainloop = Mainloop_;
  using Epilogue = Epilogue_;
  using Pipeline = typename Mainloop::Pipeline;
  static constexpr int kThreads = 384;
  static constexpr uint32_t kProducerRegisters = 24;
  static constexpr uint32_t kConsumerRegisters = 240;

  struct SharedStorage {
    typename Mainloop::SharedStorage mainloop;
    typename Epilogue::SharedStorage epilogue;
    alignas(16) typename Pipeline::SharedStorage pipe_k;
    alignas(16) typename Pipeline::SharedStorage pipe_v;
    alignas(8) uint64_t q_barrier;
  };

  struct Params {
    typename Mainloop::Params mainloop;
    typename Epilogue::Params epilogue;
    const int32_t* row_ptr;  // the mask (has_mask), stacked patterns
    const int32_t* col_idx;
    // Packed sequences (SequenceLayout's cu_seqlens_q / cu_seqlens_k, batch + 1 offsets), or
    // null: padded (sequence.hpp).
    const int32_t* cu_seqlens_q;
    const int32_t* cu_seqlens_k;
    // Keys per sequence (SequenceLayout's seqlens_k, or null), at most max_seqlen_k; paged K
    // and V (mainloop.hpp's PagedKV: page_table null when not).
    const int32_t* seqlens_k;
    int32_t max_seqlen_k;
    PagedKV paged;
    // Q's and K's seq: every sequence's length (padded) or the packed total.
    int32_t seq_q, seq_k, heads;
    // Query blocks of the longest sequence (the grid's CTAs per (sequence, head); the mask's
    // q_blocks), and the mask's key blocks.
    int32_t q_blocks, k_blocks;
    int32_t group;       // query heads per KV head (heads / heads_kv)
    int32_t mask_heads;  // heads of a per-head mask (Q's or K's), 0 for one shared pattern
    int32_t mask_group;  // query heads per mask head (heads / mask_heads)
    bool has_mask, causal;
    // Causal alignment: bottom-right puts each sequence's diagonal at its own len_k - len_q
    // (AttentionProblem::causal_offset per sequence), top-left at 0.
    bool bottom_right;
    float scale;
  };

  CUTE_DEVICE static void run(Params const& p, char* smem_raw) {
    SharedStorage& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
    const int warp_group = int(threadIdx.x) / cutlass::NumThreadsPerWarpGroup;
    const int64_t bh = int64_t(blockIdx.x) / p.q_blocks;
    const int32_t qb = p.q_blocks - 1 - int32_t(int64_t(blockIdx.x) % p.q_blocks);
    const int32_t h = int32_t(bh % p.heads), b = int32_t(bh / p.heads);
    const int32_t h_kv = h / p.group;
    const SequenceRows sq = sequence_rows(p.cu_seqlens_q, b, p.seq_q);
    // A query block past its sequence (the grid is sized by the longest): nothing to write.
    // Uniform over the CTA, before any barrier.
    if (qb * kBlockM >= sq.len) return;
    SequenceRows sk = sequence_rows(p.cu_seqlens_k, b, p.seq_k);
    if (p.seqlens_k != nullptr) {
      // The sequence's key count, clamped to the keys it has: its pages' (paged), else its
      // view's (unchecked counts never make an access leave the views).
      const int32_t cap = p.paged.page_table != nullptr || sk.len > p.max_seqlen_k ? p.max_seqlen_k : sk.len;
      const int32_t n = __ldg(p.seqlens_k + b);
      sk.len = n < 0 ? 0 : n > cap ? cap : n;
    }
    // The pattern of (b, h): AttentionProblem::pattern_of.
    const int64_t pattern = p.mask_heads > 0 ? int64_t(b) * p.mask_heads + h / p.mask_group : 0;
    const int64_t mask_row = pattern * p.q_blocks + qb;
    // The diagonal's key for the block's first query; the last key block with a key kept by
    // some query of the block: the sequence's last, or when causal the one holding the
    // diagonal of its last query (qb*128 + 127 + offset), -1 when there is none.
    const int32_t causal_offset = p.bottom_right ? sk.len - sq.len : 0;
    const int32_t diag0 = qb * kBlockM + causal_offset;
    const int64_t last_diag = int64_t(qb) * kBlockM + kBlockM - 1 + causal_offset;
    int32_t last = (sk.len + kBlockN - 1) / kBlockN - 1;
    if (p.causal) {
      const int64_t last_causal = last_diag < 0 ? -1 : last_diag / kBlockN;
      if (last_causal < last) last = int32_t(last_causal);
    }
    const KeyBlockRange range = key_block_range(p.row_ptr, p.col_idx, p.has_mask, mask_row, p.k_blocks, last);
    // The LSE index of the sequence's row 0 for head h ([heads, total_q] when packed).
    const int64_t lse_row0 =
        p.cu_seqlens_q != nullptr ? int64_t(h) * p.seq_q + sq.start : bh * int64_t(p.seq_q);

    typename Pipeline::Params pipe;
    pipe.transaction_bytes = Mainloop::kBytesKV;
    pipe.role = warp_group == 0 ? Pipeline::ThreadCategory::Producer : Pipeline::ThreadCategory::Consumer;
    pipe.is_leader = threadIdx.x == 0;
    pipe.num_consumers = Mainloop::kConsumerThreads;
    Pipeline pipe_k(smem.pipe_k, pipe, Shape<_1, _1, _1>{});
    Pipeline pipe_v(smem.pipe_v, pipe, Shape<_1, _1, _1>{});
    if (threadIdx.x == 0) cutlass::arch::ClusterTransactionBarrier::init(&smem.q_barrier, 1);
    cutlass::arch::fence_barrier_init();
    __syncthreads();

    if (warp_group == 0) {
      cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
      if (threadIdx.x < 32 && range.count() > 0)
        Mainloop::load(p.mainloop, pipe_k, pipe_v, smem.mainloop, &smem.q_barrier, range, p.col_idx, qb, h, h_kv, sq,
                       sk, p.paged.of_sequence(b), int(threadIdx.x));
      return;
    }
    cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
    const int thread = int(threadIdx.x) - cutlass::NumThreadsPerWarpGroup;
    typename Mainloop::TiledMmaPV mma_pv;
    Tensor tOrO = partition_fragment_C(mma_pv, Shape<typename Mainloop::TileM, typename Mainloop::HeadDim>{});
    OnlineSoftmax<2> softmax(p.scale);
    const bool empty = range.count() == 0;
    if (!empty)
      Mainloop::mma(pipe_k, pipe_v, smem.mainloop, &smem.q_barrier, range, p.col_idx, thread, diag0, sk.len,
                    p.causal, tOrO, softmax);
    float inv_sum[2], lse[2];
    softmax.finish(inv_sum, lse);
    Epilogue::store(p.epilogue, smem.epilogue, tOrO, inv_sum, lse, empty, thread, qb, h, sq, lse_row0);
  }
};

template <int kRow>
struct KernelOf {
  static constexpr AttentionSm90Variant kVariant = kAttentionSm90Variants[kRow];
  using Element = typename ElementOf<kVariant.input>::type;
  using Mainloop = AttentionMainloop<Element, kVariant.head_dim, kVariant.stages, kVariant.turns>;
  using type = AttentionKernel<Mainloop, AttentionEpilogue<Mainloop>>;
};

template <int kRow>
__global__ void __launch_bounds__(384, 1) attention_sm90_kernel(const __grid_constant__
                                                                typename KernelOf<kRow>::type::Params params) {
  extern __shared__ __align__(1024) char smem[];
  KernelOf<kRow>::type::run(params, smem);
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&attention_sm90_kernel<kRow>);
}

// TMA's view of a HeadsView. A dimension of extent 1 is never stepped: its stride is set to
// one TMA accepts (a 16-byte multiple) whatever the caller's is.
template <class Element, class View>
auto heads_tensor(const View& t) {
  const auto stride = [](int64_t s, int64_t extent) { return extent == 1 ? int64_t(8) : s; };
  return make_tensor(make_gmem_ptr(static_cast<Element*>(t.data)),
                     HeadsShape(int32_t(t.seq), int32_t(t.head_dim), int32_t(t.heads), int32_t(t.batch)),
                     HeadsStride(stride(t.stride_s, t.seq), _1{}, stride(t.stride_h, t.heads),
                                 stride(t.stride_b, t.batch)));
}

template <int kRow>
cudaError_t launch_row(const AttentionProblem& p, cudaStream_t stream) {
  using Kernel = typename KernelOf<kRow>::type;
  using Element = typename KernelOf<kRow>::Element;
  using Mainloop = typename Kernel::Mainloop;
  using Epilogue = typename Kernel::Epilogue;
  // family.cu checked every size below against int32 and TMA's limits. With no key at all,
  // K and V are never loaded: Q stands in for them (a TMA descriptor needs a non-empty view).
  // K and V's descriptors span their heads_kv heads (grouped-query attention).
  const bool no_keys = p.seq_k() == 0;
  const HeadsView& k = no_keys ? p.q : p.k;
  const HeadsView& v = no_keys ? p.q : p.v;
  typename Kernel::Params params{};
  params.mainloop.tma_q = make_tma_copy(SM90_TMA_LOAD{}, heads_tensor<Element const>(p.q), typename Mainloop::SmemLayoutQ{});
  params.mainloop.tma_k =
      make_tma_copy(SM90_TMA_LOAD{}, heads_tensor<Element const>(k), take<0, 2>(typename Mainloop::SmemLayoutKV{}));
  params.mainloop.tma_v =
      make_tma_copy(SM90_TMA_LOAD{}, heads_tensor<Element const>(v), take<0, 2>(typename Mainloop::SmemLayoutKV{}));
  params.mainloop.shape_q = heads_tensor<Element const>(p.q).shape();
  params.mainloop.shape_k = heads_tensor<Element const>(k).shape();
  params.epilogue.tma_o = make_tma_copy(SM90_TMA_STORE{}, heads_tensor<Element>(p.o), typename Epilogue::SmemLayoutO{});
  params.epilogue.shape_o = heads_tensor<Element>(p.o).shape();
  // A descriptor cuTensorMapEncodeTiled refused is all zeros (tma_status.hpp): launch nothing.
  if (!tma_encoded(params.mainloop.tma_q)) return tma_encode_error(TmaOperand::Q);
  if (!tma_encoded(params.mainloop.tma_k)) return tma_encode_error(TmaOperand::K);
  if (!tma_encoded(params.mainloop.tma_v)) return tma_encode_error(TmaOperand::V);
  if (!tma_encoded(params.epilogue.tma_o)) return tma_encode_error(TmaOperand::O);
  params.epilogue.packed = p.varlen_q();
  params.epilogue.o = static_cast<Element*>(p.o.data);
  params.epilogue.o_stride_s = p.o.stride_s;
  params.epilogue.o_stride_h = p.o.stride_h;
  params.epilogue.lse = p.lse;
  params.row_ptr = p.has_mask ? p.mask.row_ptr : nullptr;
  params.col_idx = p.has_mask ? p.mask.col_idx : nullptr;
  params.cu_seqlens_q = p.layout.cu_seqlens_q;
  params.cu_seqlens_k = p.layout.cu_seqlens_k;
  params.seqlens_k = p.layout.seqlens_k;
  params.max_seqlen_k = int32_t(p.max_seqlen_k());
  if (p.paged()) {
    // family.cu: the page size a multiple of 128 keys, the pool's pages below 2^31.
    params.paged.page_table = p.layout.page_table;
    params.paged.max_pages = p.layout.max_pages;
    params.paged.blocks_per_page = int32_t(p.seq_k() / kBlockN);
    params.paged.num_pages = int32_t(p.k.batch);
  }
  params.seq_q = int32_t(p.seq_q());
  params.seq_k = int32_t(p.seq_k());
  params.heads = int32_t(p.heads());
  params.q_blocks = int32_t(grid_q_blocks(p));
  params.k_blocks = p.has_mask ? int32_t(p.mask.k_blocks) : 0;
  params.group = int32_t(p.group());
  const bool per_head_mask = p.has_mask && p.mask.patterns != 1 && p.mask.heads > 0;
  params.mask_heads = per_head_mask ? int32_t(p.mask.heads) : 0;
  params.mask_group = per_head_mask ? int32_t(p.heads() / p.mask.heads) : 1;
  params.has_mask = p.has_mask;
  params.causal = p.causal;
  params.bottom_right = p.causal_alignment == CausalAlignment::BottomRight;
  params.scale = p.scale;

  const int smem = int(sizeof(typename Kernel::SharedStorage));
  const void* kernel = probe_kernel<kRow>();
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  const int64_t grid = int64_t(params.q_blocks) * grid_sequences(p) * p.heads();  // <= INT32_MAX (family.cu)
  if (grid == 0) return cudaSuccess;  // packed queries, the longest sequence empty: no row to write
  attention_sm90_kernel<kRow><<<dim3(uint32_t(grid)), dim3(Kernel::kThreads), size_t(smem), stream>>>(params);
  return cudaGetLastError();
}

}  // namespace sparsek::detail::attention_sm90

#endif  // SPARSEK_NO_SM90A
