// sparsek attention SM90: the mainloop of one CTA (one 128-row query block of one (batch,
// head)): the producer warp's TMA loads and the consumer warpgroups' WGMMAs and online
// softmax, over the query block's key blocks (key_blocks.hpp).
//
// Shared memory: Q (128 x d), and kStages stages of K and of V (128 x d each), all K-major
// (d contiguous) with the 128-byte swizzle WGMMA reads. S = Q K^T takes Q and K from shared
// memory (both K-major); O += P V takes P from registers (the S accumulator converted to 16
// bits, softmax.hpp) and V from shared memory read transposed (V^T is d x 128, MN-major: a
// layout view, no copy). Two consumer warpgroups each own 64 query rows (the tiled MMAs are
// 2 x 1 atoms of 64-row WGMMAs), so each has its own softmax rows and needs no exchange.
//
// Pipelines (CUTLASS's PipelineTmaAsync): one for K, one for V, the same stage sequence. The
// consumers overlap the softmax with the tensor cores as FlashAttention-3's intra-warpgroup
// pipelining does: for block n they issue S_n = Q K_n^T, then O += P_{n-1} V_{n-1}, wait only
// for S_n, run block n's softmax while P_{n-1} V_{n-1} is on the tensor cores, then wait for it.
// O is rescaled for block n-1's max just before P_{n-1} V_{n-1} is issued.
//
// With kTurns, the two warpgroups also take turns issuing their WGMMAs (FlashAttention-3's
// warpgroup ping-pong, through two named barriers): while one issues, the other runs its
// softmax. Without, each warpgroup issues as soon as its data is ready. Measured on the H100
// (configs.hpp's chosen_by), the turns bought nothing and cost causal masks 5 %: the automatic
// rows go without.
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/pipeline/pipeline.hpp"

#include "attention/sm90/configs.hpp"
#include "attention/sm90/key_blocks.hpp"
#include "attention/sm90/sequence.hpp"
#include "attention/sm90/softmax.hpp"

namespace sparsek::detail::attention_sm90 {

using namespace cute;

// (seq, head_dim, heads, batch) of a HeadsView: TMA's view of Q, K, V and O.
using HeadsShape = Shape<int32_t, int32_t, int32_t, int32_t>;
using HeadsStride = Stride<int64_t, _1, int64_t, int64_t>;

// Paged K and V (SequenceLayout's page_table): K and V's batch entries are num_pages pages of
// blocks_per_page 128-key blocks; logical key block kb of sequence b is block kb %
// blocks_per_page of page page_table[b * max_pages + kb / blocks_per_page] (clamped into the
// pool: an unchecked entry never makes a load leave the views). page_table null: not paged.
struct PagedKV {
  const int32_t* page_table = nullptr;
  int64_t max_pages = 0;
  int32_t blocks_per_page = 1, num_pages = 0;

  // The table row of sequence b (the same PagedKV with page_table moved to it).
  CUTE_HOST_DEVICE PagedKV of_sequence(int32_t b) const {
    PagedKV s = *this;
    if (page_table != nullptr) s.page_table = page_table + int64_t(b) * max_pages;
    return s;
  }
  // The pool page of logical key block kb (of_sequence's row).
  CUTE_DEVICE int32_t page(int32_t kb) const {
    const int32_t at = __ldg(page_table + kb / blocks_per_page);
    return at < 0 ? 0 : at >= num_pages ? num_pages - 1 : at;
  }
};

template <class Element_, int kHeadDim_, int kStages_, bool kTurns_>
struct AttentionMainloop {
  using Element = Element_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kStages = kStages_;
  static constexpr bool kTurns = kTurns_;
  // Named barriers of the turns: warpgroup w waits on kTurnBarrier + w (id 0 is the
  // epilogue's, epilogue.hpp).
  static constexpr uint32_t kTurnBarrier = 1;
  static constexpr int kConsumerThreads = 256;  // two warpgroups
  using TileM = Int<kBlockM>;
  using TileN = Int<kBlockN>;
  using HeadDim = Int<kHeadDim>;

  // Two 64-row warpgroups along M.
  using WarpGroups = cute::Layout<Shape<_2, _1, _1>>;
  using TiledMmaQK =
      decltype(make_tiled_mma(GMMA::ss_op_selector<Element, Element, float, Shape<_64, TileN, HeadDim>>(), WarpGroups{}));
  using TiledMmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, HeadDim, TileN>, GMMA::Major::K, GMMA::Major::MN>(),
      WarpGroups{}));

  using SmemLayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<TileM, HeadDim>{}));
  using SmemLayoutKV =
      decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, Shape<TileN, HeadDim, Int<kStages>>{}));
  // V^T (d x 128 per stage) over V's storage: (d, n, stage) -> V(n, d, stage).
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<HeadDim, TileN, Int<kStages>>{}, Step<_2, _1, _3>{})));

  using TmaQ = decltype(make_tma_copy(
      SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), HeadsShape{}, HeadsStride{}),
      SmemLayoutQ{}));
  using TmaKV = decltype(make_tma_copy(
      SM90_TMA_LOAD{}, make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), HeadsShape{}, HeadsStride{}),
      take<0, 2>(SmemLayoutKV{})));

  using Pipeline = cutlass::PipelineTmaAsync<kStages>;
  using PipelineState = cutlass::PipelineState<kStages>;
  static constexpr uint32_t kBytesQ = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kBytesKV = kBlockN * kHeadDim * sizeof(Element);

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutQ>, 1024> q;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutKV>, 1024> k;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutKV>, 1024> v;
  };

  struct Params {
    TmaQ tma_q;
    TmaKV tma_k, tma_v;
    HeadsShape shape_q, shape_k;
  };

  // The producer warp (all 32 lanes; lane 0 issues): Q once (query head h), then K and V of
  // each key block (KV head h_kv, the one query head h reads). Tiles start at the sequence's
  // first row (sequence.hpp); rows past a sequence's end are loaded (the next sequence's, or
  // zeros past the view) and masked by the consumers (keys) or never stored (queries). Paged
  // (`pages`: the sequence's table row), each key block comes from its page.
  CUTE_DEVICE static void load(Params const& mp, Pipeline& pipe_k, Pipeline& pipe_v, SharedStorage& smem,
                               uint64_t* q_barrier, KeyBlockRange const& range, const int32_t* col_idx, int32_t qb,
                               int32_t h, int32_t h_kv, SequenceRows const& sq, SequenceRows const& sk,
                               PagedKV const& pages, int lane) {
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), SmemLayoutKV{});
    Tensor sV = make_tensor(make_smem_ptr(smem.v.data()), SmemLayoutKV{});
    Tensor mQ = mp.tma_q.get_tma_tensor(mp.shape_q)(_, _, h, sq.batch);
    Tensor mK = mp.tma_k.get_tma_tensor(mp.shape_k)(_, _, h_kv, sk.batch);
    Tensor mV = mp.tma_v.get_tma_tensor(mp.shape_k)(_, _, h_kv, sk.batch);
    Tensor gQ = local_tile(domain_offset(make_coord(sq.start, _0{}), mQ), Shape<TileM, HeadDim>{},
                           make_coord(qb, _0{}));  // (128, d)
    Tensor gK = local_tile(domain_offset(make_coord(sk.start, _0{}), mK), Shape<TileN, HeadDim>{},
                           make_coord(_, _0{}));  // (128, d, key blocks)
    Tensor gV = local_tile(domain_offset(make_coord(sk.start, _0{}), mV), Shape<TileN, HeadDim>{},
                           make_coord(_, _0{}));
    auto [tQgQ, tQsQ] = tma_partition(mp.tma_q, Int<0>{}, cute::Layout<_1>{}, group_modes<0, 2>(sQ), group_modes<0, 2>(gQ));
    auto [tKgK, tKsK] = tma_partition(mp.tma_k, Int<0>{}, cute::Layout<_1>{}, group_modes<0, 2>(sK), group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(mp.tma_v, Int<0>{}, cute::Layout<_1>{}, group_modes<0, 2>(sV), group_modes<0, 2>(gV));

    KeyBlockIterator it(range, col_idx, lane);
    if (lane == 0) {
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(q_barrier, kBytesQ);
      copy(mp.tma_q.with(*q_barrier), tQgQ, tQsQ);
    }
    // Block `blk` of pool page `page` of K or V (its TMA partition, as tKgK's over the page).
    auto page_block = [&](auto const& tma, auto& s, int32_t page, int32_t blk) {
      Tensor g = local_tile(tma.get_tma_tensor(mp.shape_k)(_, _, h_kv, page), Shape<TileN, HeadDim>{},
                            make_coord(_, _0{}));
      auto parts = tma_partition(tma, Int<0>{}, cute::Layout<_1>{}, group_modes<0, 2>(s), group_modes<0, 2>(g));
      return get<0>(parts)(_, blk);
    };
    PipelineState write = cutlass::make_producer_start_state<Pipeline>();
    for (int32_t n = 0; n < range.count(); ++n) {
      const int32_t kb = it.block();
      if (lane == 0) {
        if (pages.page_table == nullptr) {
          pipe_k.producer_acquire(write);
          copy(mp.tma_k.with(*pipe_k.producer_get_barrier(write)), tKgK(_, kb), tKsK(_, write.index()));
          pipe_v.producer_acquire(write);
          copy(mp.tma_v.with(*pipe_v.producer_get_barrier(write)), tVgV(_, kb), tVsV(_, write.index()));
        } else {
          const int32_t page = pages.page(kb), blk = kb % pages.blocks_per_page;
          pipe_k.producer_acquire(write);
          copy(mp.tma_k.with(*pipe_k.producer_get_barrier(write)), page_block(mp.tma_k, sK, page, blk),
               tKsK(_, write.index()));
          pipe_v.producer_acquire(write);
          copy(mp.tma_v.with(*pipe_v.producer_get_barrier(write)), page_block(mp.tma_v, sV, page, blk),
               tVsV(_, write.index()));
        }
      }
      ++write;
      ++it;
    }
  }

  // The consumer warpgroups (thread 0..255): the query block's S, softmax and O over its key
  // blocks (range.count() > 0). `diag0`: the last key the block's first query keeps when
  // causal (its row + the causal offset; row r of the block keeps keys <= diag0 + r);
  // `seq_k`: the sequence's keys (later ones score -inf). Leaves
  // O unnormalized (the epilogue divides by the row sums, softmax.finish()).
  template <class FragO>
  CUTE_DEVICE static void mma(Pipeline& pipe_k, Pipeline& pipe_v, SharedStorage& smem, uint64_t* q_barrier,
                              KeyBlockRange const& range, const int32_t* col_idx, int thread, int32_t diag0,
                              int32_t seq_k, bool causal, FragO& tOrO, OnlineSoftmax<2>& softmax) {
    TiledMmaQK mma_qk;
    TiledMmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(thread);
    auto thr_pv = mma_pv.get_thread_slice(thread);
    Tensor sQ = make_tensor(make_smem_ptr(smem.q.data()), SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.k.data()), SmemLayoutKV{});
    Tensor sVt = make_tensor(make_smem_ptr(smem.v.data()), SmemLayoutVt{});
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K)
    Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stage)
    Tensor tOrV = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stage)
    Tensor tSrS = partition_fragment_C(mma_qk, Shape<TileM, TileN>{});
    Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<TileM, TileN>{}));
    Tensor s_rows = make_tensor(tSrS.data(), acc_rowcol(tSrS.layout()));
    Tensor o_rows = make_tensor(tOrO.data(), acc_rowcol(tOrO.layout()));
    Tensor rP = make_tensor<Element>(tSrS.layout());
    Tensor tOrP = make_tensor(rP.data(), acc_as_a_operand(rP.layout()));

    auto issue_qk = [&](int stage) {
      mma_qk.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(tSrS);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kk = 0; kk < size<2>(tSrQ); ++kk) {
        cute::gemm(mma_qk, tSrQ(_, _, kk), tSrK(_, _, kk, stage), tSrS);
        mma_qk.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
    };
    // O += P V (first: O = P V).
    auto issue_pv = [&](int stage, bool first) {
      mma_pv.accumulate_ = first ? GMMA::ScaleOut::Zero : GMMA::ScaleOut::One;
      warpgroup_fence_operand(tOrO);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kk = 0; kk < size<2>(tOrP); ++kk) {
        cute::gemm(mma_pv, tOrP(_, _, kk), tOrV(_, _, kk, stage), tOrO);
        mma_pv.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
    };
    // Masks block kb's scores where needed (the keys' tail, the causal diagonal) and turns
    // them into P, returning the factor for O.
    auto softmax_block = [&](int32_t kb, float (&o_scale)[2]) {
      warpgroup_fence_operand(tSrS);
      const int32_t k0 = kb * kBlockN;
      if (k0 + kBlockN > seq_k || (causal && k0 + kBlockN - 1 > diag0))
        mask_scores(tSrS, tScS, diag0, k0, seq_k, causal);
      softmax.step(s_rows, o_scale);
    };
    auto convert_p = [&]() {
      constexpr int kN = decltype(size(tSrS))::value;
      cutlass::NumericArrayConverter<Element, float, kN> convert;
      *reinterpret_cast<cutlass::Array<Element, kN>*>(raw_pointer_cast(rP.data())) =
          convert(*reinterpret_cast<cutlass::Array<float, kN> const*>(raw_pointer_cast(tSrS.data())));
    };

    // The turns: wait for ours before issuing, pass the turn on after. Warpgroup 0 goes
    // first (warpgroup 1 hands it the first turn); both issue count + 1 times, and warpgroup
    // 1's last hand-over is skipped so no arrival is left pending at exit.
    const int wg = thread / cutlass::NumThreadsPerWarpGroup;
    const int32_t count = range.count();
    auto take_turn = [&]() {
      if constexpr (kTurns) cutlass::arch::NamedBarrier::sync(kConsumerThreads, kTurnBarrier + wg);
    };
    auto pass_turn = [&](bool last) {
      if constexpr (kTurns)
        if (!(last && wg == 1)) cutlass::arch::NamedBarrier::arrive(kConsumerThreads, kTurnBarrier + (1 - wg));
    };
    if constexpr (kTurns)
      if (wg == 1) cutlass::arch::NamedBarrier::arrive(kConsumerThreads, kTurnBarrier);

    KeyBlockIterator it(range, col_idx, thread % 32);
    PipelineState read_k, read_v;
    float o_scale[2];
    cutlass::arch::ClusterTransactionBarrier::wait(q_barrier, 0);

    pipe_k.consumer_wait(read_k);
    take_turn();
    issue_qk(read_k.index());
    pass_turn(false);
    warpgroup_wait<0>();
    pipe_k.consumer_release(read_k);
    ++read_k;
    softmax_block(it.block(), o_scale);
    ++it;
    convert_p();

    for (int32_t n = 1; n < count; ++n) {
      const int32_t kb = it.block();
      ++it;
      pipe_k.consumer_wait(read_k);
      take_turn();
      issue_qk(read_k.index());
      if (n > 1) scale_rows(o_rows, o_scale);
      pipe_v.consumer_wait(read_v);
      issue_pv(read_v.index(), n == 1);
      pass_turn(false);
      warpgroup_wait<1>();  // S_n is ready; P_{n-1} V_{n-1} may still run
      pipe_k.consumer_release(read_k);
      ++read_k;
      softmax_block(kb, o_scale);
      warpgroup_wait<0>();
      warpgroup_fence_operand(tOrO);
      pipe_v.consumer_release(read_v);
      ++read_v;
      convert_p();
    }
    if (count > 1) scale_rows(o_rows, o_scale);
    pipe_v.consumer_wait(read_v);
    take_turn();
    issue_pv(read_v.index(), count == 1);
    pass_turn(true);
    warpgroup_wait<0>();
    warpgroup_fence_operand(tOrO);
    pipe_v.consumer_release(read_v);
  }
};

}  // namespace sparsek::detail::attention_sm90
