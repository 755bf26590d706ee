// sparsek SDDMM on SM90: the mainloop adapter that makes CUTLASS's TMA warp-specialized
// GEMM mainloop (CollectiveMma<MainloopSm90TmaGmmaWarpSpecialized...>) compute one stored
// block of S per tile.
//
// The kernel (CUTLASS's GemmUniversal, kernel.hpp) runs the GEMM problem (bm, bn, k, nnzb):
// L = nnzb batches of one bm x bn tile each, so its persistent scheduler hands out work
// tiles (0, 0, j) and its epilogue writes batch j of D = S's values (bm x bn, row-major,
// batch stride bm*bn): block j in place. Only the loads need to know where block j's
// operands are: this adapter keeps the base mainloop's TMA descriptors over the whole of A
// (m x k) and B (k x n, as the N x K operand), built from the real (m, n, k, 1) shape, and
// turns the work tile (0, 0, j) into the base load's (r, c, 0): block-row r and
// block-column c of block j, read from coords[j] = (r, col_idx[j]) (a small kernel of
// kernel.hpp writes coords before the GEMM). No per-batch pointers and no TMA descriptor
// updates: every tile uses the same two descriptors.
//
// The producer warp reads coords[j] for its next tile while it issues the current one's
// TMA loads (the static persistent scheduler's next tile is j + the grid size; a guess
// that misses falls back to a direct read), so the index load's latency stays off the
// per-tile path when k is short (attention scores, k = the head dimension).
//
// The consumer side (mma, mma_tail) is the base's, unchanged.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"

namespace sparsek::detail::sddmm_sm90 {

template <class Base>
struct BlockListMainloop : Base {
  using BaseArguments = typename Base::Arguments;
  using BaseParams = typename Base::Params;

  struct Arguments {
    BaseArguments base;   // ptr_A, dA over A (m x k), ptr_B, dB over B as N x K
    int m = 0, n = 0;     // A's rows and B's columns
    const int2* coords = nullptr;  // coords[j] = (block-row, block-column) of block j
    int nnzb = 0;
  };

  struct Params : BaseParams {
    int m, n;
    const int2* coords;
    int nnzb;
  };

  // The base's TMA descriptors, over the whole A and B. `problem_shape` is the kernel's
  // (bm, bn, k, nnzb); the operands' shape is (m, n, k, 1).
  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                                  void* workspace) {
    const auto operands = cute::make_shape(args.m, args.n, int(cute::get<2>(problem_shape)), 1);
    Params params{Base::to_underlying_arguments(operands, args.base, workspace), args.m, args.n, args.coords,
                  args.nnzb};
    return params;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    const auto operands = cute::make_shape(args.m, args.n, int(cute::get<2>(problem_shape)), 1);
    return args.coords != nullptr && args.nnzb == int(cute::get<3>(problem_shape)) &&
           Base::can_implement(operands, args.base);
  }

  // The base's tiled views of the whole A and B: (BLK_M, BLK_K, m tiles, k tiles, 1) and
  // (BLK_N, BLK_K, n tiles, k tiles, 1). The L extent is a run-time 1, so the kernel's
  // idx2crd(L_idx, shape<4>) passes the work tile's L index (j) through unchanged.
  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& params) const {
    const int one = 1;
    return Base::load_init(cute::make_shape(params.m, params.n, int(cute::get<2>(problem_shape_MNKL)), one),
                           static_cast<BaseParams const&>(params));
  }

  // Producer: the tile (0, 0, j) loads block j's operands, A's block-row r and B's
  // block-column c, over the tile's k range.
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, typename Base::TensorStorage& shared_tensors) {
    const int j = int(cute::get<3>(blk_coord));
    const int2 rc = j == next_j_ ? next_rc_ : __ldg(params.coords + j);
    // The static persistent scheduler's next tile for this CTA.
    const int64_t next = int64_t(j) + int64_t(gridDim.x) * gridDim.y * gridDim.z;
    if (next < params.nnzb) {
      next_rc_ = __ldg(params.coords + next);
      next_j_ = int(next);
    }
    Base::load(static_cast<BaseParams const&>(params), pipeline, smem_pipe_write, load_inputs,
               cute::make_coord(rc.x, rc.y, cute::get<2>(blk_coord), 0), k_tile_iter, k_tile_count, thread_idx,
               block_rank_in_cluster, shared_tensors);
  }

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(typename Base::MainloopPipeline pipeline, typename Base::PipelineState smem_pipe_read,
                          FrgTensorC& accum, int k_tile_count, int thread_idx,
                          typename Base::TensorStorage& shared_tensors, Params const& params) {
    Base::mma(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors,
              static_cast<BaseParams const&>(params));
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    Base::prefetch_tma_descriptors(static_cast<BaseParams const&>(params));
  }

 private:
  // The producer's read-ahead of coords (per thread; only the producer warp uses it).
  int next_j_ = -1;
  int2 next_rc_ = {0, 0};
};

}  // namespace sparsek::detail::sddmm_sm90
