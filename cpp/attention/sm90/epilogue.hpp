// sparsek attention SM90: the epilogue of one CTA: O = O / rowsum in the output type, through
// shared memory (stmatrix) to global memory, and the rows' LSE.
//
// Padded batch: one TMA store of the 128 x d tile, which TMA clips to O's view (rows past
// seq_q and the gaps of a strided O are never written). Packed (varlen) queries: the rows
// after the sequence's last belong to the next sequence, which a TMA box cannot leave out,
// so the consumer threads store the tile's rows below the sequence's length themselves,
// 16 bytes a store, as FlashAttention-3's varlen epilogue does. A query block that kept no
// key writes zeros (its accumulators were never written by WGMMA) and LSE = -inf.
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cutlass/numeric_conversion.h"

#include "attention/sm90/mainloop.hpp"
#include "attention/sm90/sequence.hpp"
#include "attention/sm90/softmax.hpp"

namespace sparsek::detail::attention_sm90 {

using namespace cute;

template <class Mainloop>
struct AttentionEpilogue {
  using Element = typename Mainloop::Element;
  using TileM = typename Mainloop::TileM;
  using HeadDim = typename Mainloop::HeadDim;
  using SmemLayoutO = typename Mainloop::SmemLayoutQ;
  using TmaO = decltype(make_tma_copy(
      SM90_TMA_STORE{}, make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)), HeadsShape{}, HeadsStride{}),
      SmemLayoutO{}));
  // The two consumer warpgroups' barrier before the store (ids above CUTLASS's reserved ones).
  static constexpr uint32_t kStoreBarrier = 0;

  struct SharedStorage {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutO>, 1024> o;
  };

  struct Params {
    TmaO tma_o;
    HeadsShape shape_o;
    // Packed queries (cu_seqlens_q): O's rows stored by the threads, at these strides.
    bool packed;
    Element* o;
    int64_t o_stride_s, o_stride_h;
    // The LSE, or null: [batch, heads, seq_q] packed, or [heads, total_q] with packed queries
    // (FlashAttention's varlen LSE).
    float* lse;
  };

  // The tile of query block qb of sequence `sq` (sequence.hpp), query head h; `lse_row0`: the
  // LSE index of the sequence's row 0 for head h.
  template <class FragO>
  CUTE_DEVICE static void store(Params const& ep, SharedStorage& smem, FragO& tOrO, const float (&inv_sum)[2],
                                const float (&lse)[2], bool empty, int thread, int32_t qb, int32_t h,
                                SequenceRows const& sq, int64_t lse_row0) {
    typename Mainloop::TiledMmaPV mma_pv;
    auto thr_pv = mma_pv.get_thread_slice(thread);
    Tensor rO = make_tensor<Element>(tOrO.layout());
    if (empty) {
      fill(rO, Element(0.0f));
    } else {
      Tensor o_rows = make_tensor(tOrO.data(), acc_rowcol(tOrO.layout()));
      scale_rows(o_rows, inv_sum);
      constexpr int kN = decltype(size(tOrO))::value;
      cutlass::NumericArrayConverter<Element, float, kN> convert;
      *reinterpret_cast<cutlass::Array<Element, kN>*>(raw_pointer_cast(rO.data())) =
          convert(*reinterpret_cast<cutlass::Array<float, kN> const*>(raw_pointer_cast(tOrO.data())));
    }

    Tensor sO = make_tensor(make_smem_ptr(smem.o.data()), SmemLayoutO{});
    auto copy_o = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, Element>{}, mma_pv);
    auto thr_copy = copy_o.get_thread_slice(thread);
    copy(copy_o, thr_copy.retile_S(rO), thr_copy.partition_D(sO));
    if (!ep.packed) cutlass::arch::fence_view_async_shared();  // the TMA engine reads what the threads wrote
    cutlass::arch::NamedBarrier::sync(Mainloop::kConsumerThreads, kStoreBarrier);
    const int32_t rows = sq.len - qb * kBlockM;  // the tile's rows in the sequence (> 0)
    if (ep.packed) {
      // 16-byte chunks, consecutive threads along a row; each chunk of 8 elements is
      // contiguous in the swizzled tile (the 128-byte swizzle permutes 16-byte chunks).
      constexpr int kChunks = Mainloop::kHeadDim / 8;
      Element* o_tile = ep.o + (int64_t(sq.start) + int64_t(qb) * kBlockM) * ep.o_stride_s + int64_t(h) * ep.o_stride_h;
      for (int i = thread; i < kBlockM * kChunks; i += Mainloop::kConsumerThreads) {
        const int r = i / kChunks, c = (i % kChunks) * 8;
        if (r >= rows) break;  // i ascends with r: every later chunk is past the sequence too
        const uint4 chunk = *reinterpret_cast<const uint4*>(&sO(r, c));  // the swizzled address
        *reinterpret_cast<uint4*>(o_tile + int64_t(r) * ep.o_stride_s + c) = chunk;
      }
    } else if (thread == 0) {
      Tensor gO = local_tile(ep.tma_o.get_tma_tensor(ep.shape_o)(_, _, h, sq.batch), Shape<TileM, HeadDim>{},
                             make_coord(qb, _0{}));
      auto [tOgO, tOsO] = tma_partition(ep.tma_o, Int<0>{}, cute::Layout<_1>{}, group_modes<0, 2>(sO), group_modes<0, 2>(gO));
      copy(ep.tma_o, tOsO, tOgO);
      tma_store_arrive();
    }

    if (ep.lse != nullptr && thread % 4 == 0) {  // one lane of each quad holds its rows' LSE
      Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<TileM, HeadDim>{}));
      Tensor c_rows = make_tensor(tOcO.data(), acc_rowcol(tOcO.layout()));
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r) {
        const int32_t row = int32_t(get<0>(c_rows(r, 0)));
        if (row < rows) ep.lse[lse_row0 + int64_t(qb) * kBlockM + row] = lse[r];
      }
    }
    if (!ep.packed && thread == 0) tma_store_wait<0>();  // shared memory stays until the store has read it
  }
};

}  // namespace sparsek::detail::attention_sm90
