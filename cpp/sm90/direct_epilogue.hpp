// sparsek SM90: the direct epilogue of the "any block" rows (configs.hpp, EpilogueKind::Direct).
//
//     C = act(alpha * acc + bias[row of C] + beta * C_old)      (fp32, then rounded to C)
//
// The consumer warpgroups write C with ordinary loads and stores, no TMA. What that buys over
// the TMA epilogue (epilogue.hpp):
//   - everything about C is a run-time argument: its dtype (the input type or f32), its
//     layout (row and column strides), the bias and the activation, so one kernel serves
//     every output of a (input dtype, B layout, tile) row - a quarter of the instantiations;
//   - the block height bm may be smaller than the tile's sparse extent TileS: the producer's
//     TMA box of the values tensor (bm, bk, nnzb) zero-fills rows bm..TileS-1, and here the
//     GEMM row r of block-row br is C row br*bm + r, written only for r < bm. So one tile
//     serves every bm <= TileS (16x16, 32x32, 48x*, 112x*, ...), and the GEMM's sparse
//     extent is (m/bm)*TileS, not m.
// The tile goes to C through a shared-memory chunk (SharedStorage), stored in C's memory
// order; a rolled loop, so the code stays small (an unrolled per-accumulator epilogue was
// 0.4-1 MB of code and instruction-fetch bound: 85 TFLOPS at 128x128, benches/NOTES.md).
//
// Arithmetic: v = fma(alpha, acc, bias or -0.0f); v = fma(beta, C, v) only when beta != 0
// (with beta == 0 C is never read, so it may hold NaN); v = act(v); rounded to nearest - the
// order of the CPU reference and of the other epilogues (epilogue.hpp, WMMA, Decode), with
// the same activations (activation.cuh).
//
// Plugged into CUTLASS's cooperative kernel through its Sm90TmaWarpSpecializedAdapter (the
// adapter CUTLASS uses for its non-TMA epilogues), which calls operator() once per work tile
// from both consumer warpgroups, with this epilogue's SharedStorage.
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cute/tensor.hpp"

#include "activation.cuh"
#include "problem.hpp"

namespace sparsek::sm90 {

// Named barrier over the two consumer warpgroups (CUTLASS reserves ids 0..7, the
// scheduler uses 15).
constexpr uint32_t kEpilogueBarrierId = 14;
constexpr uint32_t kConsumerThreads = 256;

// The run-time description of C and of the epilogue, filled by the launcher (kernel.hpp).
struct DirectEpilogueArguments {
  void* c = nullptr;          // C, read (beta != 0) and written in place
  int64_t row_stride = 0;     // elements between C(i, j) and C(i + 1, j)
  int64_t col_stride = 0;     // elements between C(i, j) and C(i, j + 1)
  DType out = DType::F16;     // C's dtype: the input type or F32
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* bias = nullptr;  // null or m values of the input type, one per row of C
  int32_t activation = 0;      // an Activation value
  int32_t bm = 0;              // rows of C per block-row
  int64_t n = 0;               // columns of C
};

// Element: the input type (of the bias). TileShape: the CTA tile (M, N, K) of the GEMM;
// SparseIsB: the GEMM is C^T = B^T A^T (block-row on the N tile), else C = A*B (on M).
template <class Element, class TileShape, bool SparseIsB>
class DirectEpilogueOp {
 public:
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  // Nominal types for the kernel layer, which only names them: C's real dtype and strides
  // are run-time arguments.
  using ElementC = float;
  using ElementD = float;
  using ElementAccumulator = float;
  using StrideC = cute::Stride<int64_t, int64_t, int64_t>;
  using StrideD = StrideC;

  // The tile goes through shared memory in chunks of kChunk GEMM columns (fp32, one pad
  // column against bank conflicts): registers -> shared memory is unrolled (static register
  // indices), shared memory -> C is a rolled loop in C's memory order, so the code stays
  // small and the stores coalesced.
  static constexpr int TileM = cute::size<0>(TileShape{});
  static constexpr int TileN = cute::size<1>(TileShape{});
  static constexpr int kChunk = TileN < 32 ? TileN : 32;
  static constexpr int kPitch = kChunk + 1;
  static_assert(TileN % kChunk == 0, "chunks must tile the N tile");
  struct SharedStorage {
    float chunk[TileM * kPitch];
  };
  using TensorStorage = SharedStorage;
  using Arguments = DirectEpilogueArguments;
  using Params = Arguments;

  static constexpr int TileSparse = cute::size<SparseIsB ? 1 : 0>(TileShape{});
  static constexpr int TileDense = cute::size<SparseIsB ? 0 : 1>(TileShape{});

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  // The family checked C (sm90/family.cu); bm <= TileSparse is the row's promise.
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.c != nullptr && args.bm >= 1 && args.bm <= TileSparse;
  }

  CUTLASS_HOST_DEVICE explicit DirectEpilogueOp(Params const& params, SharedStorage const& = SharedStorage())
      : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() const { return params_.beta != 0.0f; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL, BlockShapeMNK blk_shape, BlockCoordMNKL blk_coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma tiled_mma, ResidueMNK,
                                 int thread_idx, char* smem) {
    float* buf = reinterpret_cast<SharedStorage*>(smem)->chunk;
    switch (params_.out) {
      case DType::F16: store<cutlass::half_t>(blk_shape, blk_coord, acc, tiled_mma, thread_idx, buf); break;
      case DType::BF16: store<cutlass::bfloat16_t>(blk_shape, blk_coord, acc, tiled_mma, thread_idx, buf); break;
      case DType::F32: store<float>(blk_shape, blk_coord, acc, tiled_mma, thread_idx, buf); break;
    }
  }

 private:
  template <class Out, class BlockShapeMNK, class BlockCoordMNKL, class Acc, class TiledMma>
  CUTLASS_DEVICE void store(BlockShapeMNK blk_shape, BlockCoordMNKL blk_coord, Acc const& acc, TiledMma tiled_mma,
                            int thread_idx, float* buf) const {
    using namespace cute;
    const Params& p = params_;
    // The tile coordinates (GEMM row, GEMM column) of this thread's accumulators: a thread
    // offset plus a static part, so coord(i) - coord(0) is a compile-time constant.
    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor coord = thr_mma.partition_C(make_identity_tensor(take<0, 2>(blk_shape)));
    CUTE_STATIC_ASSERT_V(size(coord) == size(acc));
    constexpr int kAcc = decltype(size(acc))::value;
    const int m0 = get<0>(coord(0)), n0 = get<1>(coord(0));

    const int32_t block_row = int32_t(SparseIsB ? get<1>(blk_coord) : get<0>(blk_coord));
    const int64_t row0 = int64_t(block_row) * p.bm;  // first row of C of this block-row
    const int64_t dense0 = int64_t(SparseIsB ? get<0>(blk_coord) : get<1>(blk_coord)) * TileDense;
    Out* c = static_cast<Out*>(p.c);
    const Element* bias = static_cast<const Element*>(p.bias);
    const bool c_col = p.row_stride == 1 && p.col_stride != 1;
    // Walk a chunk along C's contiguous dimension: the GEMM's M (rows of the chunk) when
    // that is C's column index in the transposed orientation or C's row index (column-major
    // C) in the natural one.
    const bool m_fastest = SparseIsB ? !c_col : c_col;
    const int tid = thread_idx % int(kConsumerThreads);

    CUTLASS_PRAGMA_UNROLL
    for (int chunk = 0; chunk < TileN / kChunk; ++chunk) {
      asm volatile("bar.sync %0, %1;" : : "r"(kEpilogueBarrierId), "r"(kConsumerThreads) : "memory");
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kAcc; ++i) {
        const int dm = get<0>(coord(i)) - m0, dn = get<1>(coord(i)) - n0;  // static
        // WGMMA's accumulators come in groups of 8 columns with the thread's pair at n0 < 8,
        // so the chunk of element i is dn / kChunk, known at compile time.
        if (dn / kChunk == chunk) {
          buf[(m0 + dm) * kPitch + (n0 + dn - chunk * kChunk)] = float(acc(i));
        }
      }
      asm volatile("bar.sync %0, %1;" : : "r"(kEpilogueBarrierId), "r"(kConsumerThreads) : "memory");
      CUTLASS_PRAGMA_NO_UNROLL
      for (int e = tid; e < TileM * kChunk; e += int(kConsumerThreads)) {
        const int gm = m_fastest ? e % TileM : e / kChunk;
        const int gn = m_fastest ? e / TileM : e % kChunk;
        const int tile_n = chunk * kChunk + gn;
        const int32_t r = SparseIsB ? tile_n : gm;                        // row in the block
        const int64_t col = dense0 + (SparseIsB ? gm : tile_n);           // column of C
        if (r < p.bm && col < p.n) {
          const int64_t row = row0 + r;
          const int64_t off = row * p.row_stride + col * p.col_stride;
          float v = fmaf(p.alpha, buf[gm * kPitch + gn], bias != nullptr ? float(bias[row]) : -0.0f);
          if (p.beta != 0.0f) v = fmaf(p.beta, float(c[off]), v);
          c[off] = Out(detail::activate(v, p.activation));
        }
      }
    }
  }

  Params params_;
};

// The collective the kernel layer takes (GemmUniversal's CollectiveEpilogue).
template <class Element, class TileShape, bool SparseIsB>
using DirectEpilogue =
    cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<DirectEpilogueOp<Element, TileShape, SparseIsB>>;

}  // namespace sparsek::sm90
