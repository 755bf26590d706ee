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
// The tile goes to C through a shared-memory chunk (SharedStorage) laid out with C's
// contiguous dimension contiguous, then in vectors of 8 elements along it: 16-byte loads and
// stores of C (two for f32), one bias load, one activation switch per vector (vec8.cuh).
// Vectors that C's alignment or the tile's edge (bm, n) cut go element by element. A rolled
// loop, so the code stays small (an unrolled per-accumulator epilogue was 0.4-1 MB of code
// and instruction-fetch bound: 85 TFLOPS at 128x128 on an H100).
//
// FP8 rows: the operands' scales beyond A's per-block ones (which the mainloop applied):
// alpha becomes alpha * sa * sb with A's and B's per-tensor scales (1 when absent), times B's
// scale of the column with per-column scales, and the bias has C's dtype. Those products are
// computed once per tile, one per dense index, into shared memory (ScaledStorage::dense_alpha),
// so the tile waits for the scales' global loads once, not in every chunk.
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

#include "core/activation.cuh"
#include "spmm/problem.hpp"
#include "core/vec8.cuh"
#include "tile_iterator.hpp"

namespace sparsek::detail::spmm_sm90 {

// Named barriers of the epilogue: ids kEpilogueBarrierId + group, one group of both consumer
// warpgroups or one per warpgroup (DirectEpilogueOp::kGroups; CUTLASS reserves ids 0..7, the
// scheduler uses 12, 13 and 15).
constexpr uint32_t kEpilogueBarrierId = 10;
constexpr uint32_t kConsumerThreads = 256;

// The run-time description of C and of the epilogue, filled by the launcher (kernel.hpp).
struct DirectEpilogueArguments {
  void* c = nullptr;          // C, read (beta != 0) and written in place
  int64_t row_stride = 0;     // elements between C(i, j) and C(i + 1, j)
  int64_t col_stride = 0;     // elements between C(i, j) and C(i, j + 1)
  DType out = DType::F16;     // C's dtype: the input type or F32
  float alpha = 1.0f;
  float beta = 0.0f;
  const void* bias = nullptr;  // null or m values of the input type (C's for FP8), one per row of C
  const float* scale_a = nullptr;     // FP8: A's per-tensor scale (one value), or null
  const float* scale_b = nullptr;     // FP8: B's per-tensor scale (one value), or null
  const float* column_scale = nullptr;  // FP8: B's per-column scales (n values), or null
  int32_t activation = 0;      // an Activation value
  int32_t bm = 0;              // rows of C per block-row
  int64_t n = 0;               // columns of C
  // Set by to_underlying_arguments: whole vectors of 8 along C's contiguous dimension are
  // 16-byte aligned (C's base and leading dimension, and bm when rows are contiguous).
  bool vector = false;
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

  // The tile goes through shared memory in chunks of kChunk GEMM columns (fp32):
  // registers -> shared memory is unrolled (static register indices), shared memory -> C a
  // rolled loop of 8-element vectors in C's memory order. The chunk is stored with C's
  // contiguous dimension contiguous: [GEMM row][kChunk] when that is the GEMM's N, its
  // 4-float groups swizzled by the row (n ^ 4*(m % 8)) against bank conflicts, or
  // [GEMM column][kPitchM] when it is M, padded by 4 floats; rows stay 16-byte aligned for
  // the vector reads. (Padding the N layout too cost 3 KB on the 256-row tiles, enough to
  // squeeze out the scheduler's block-row order: 16x16 skewed ran 2.3x slower on an H100.)
  static constexpr int TileM = cute::size<0>(TileShape{});
  static constexpr int TileN = cute::size<1>(TileShape{});
  static constexpr int kChunk = 32;
  static constexpr int kPitchM = TileM + 4;
  static constexpr int kVec = 8;
  static_assert(TileN % kChunk == 0 && TileM % kVec == 0, "chunks of whole vectors");
  static constexpr int TileSparse = cute::size<SparseIsB ? 1 : 0>(TileShape{});
  static constexpr int TileDense = cute::size<SparseIsB ? 0 : 1>(TileShape{});
  // FP8 rows: the operands' scales beyond A's per-block ones (the file comment).
  static constexpr bool kFp8 = cute::sizeof_bits_v<Element> == 8;
  // The threads that store a tile together: both consumer warpgroups (one group), or each
  // warpgroup its own rows under its own barrier (two groups), so that one may start its next
  // tile's MMAs while the other still stores. Two groups on the FP8 128x256 tile only: there
  // they measured 1.04-1.23x (H200, tests/cpp/time_fp8.cu, 6 shapes at d = 1/8 and 1/4), on
  // the 128x128 and 256x64 FP8 tiles 0.85-1.02x.
  static constexpr int kGroups = kFp8 && TileN >= 256 ? 2 : 1;
  static constexpr int kGroupThreads = int(kConsumerThreads) / kGroups;
  // A group's rows: WGMMA's m64 atoms alternate between the two consumer warpgroups.
  static constexpr int kAtomRows = 64;
  static_assert(kGroups == 1 || TileM % (2 * kAtomRows) == 0, "the warpgroups' rows alternate in blocks of 64");
  static constexpr int kGroupRows = TileM / kGroups;
  static constexpr int kVecs = kGroupRows * kChunk / kVec;  // a chunk's vectors, per group
  struct ChunkStorage {
    alignas(16) float chunk[TileM * kChunk > kChunk * kPitchM ? TileM * kChunk : kChunk * kPitchM];
  };
  // FP8: alpha times the operands' scales for each dense index of the tile, a copy per group
  // (store()). Only FP8 rows have it: the 16-bit rows' shared memory is exactly the chunk, which
  // their block-row order needs every byte beside.
  struct ScaledStorage : ChunkStorage {
    float dense_alpha[kGroups * TileDense];
  };
  using SharedStorage = cute::conditional_t<kFp8, ScaledStorage, ChunkStorage>;
  using TensorStorage = SharedStorage;
  using Arguments = DirectEpilogueArguments;
  using Params = Arguments;

  // Whether the 8 elements along C's contiguous dimension run along a row of C (the
  // columns vary) or down a column (the rows vary); see store().
  CUTLASS_HOST_DEVICE static bool m_fastest(Arguments const& a) {
    const bool c_col = a.row_stride == 1 && a.col_stride != 1;
    return SparseIsB ? !c_col : c_col;
  }
  CUTLASS_HOST_DEVICE static bool rows_vary(Arguments const& a) { return m_fastest(a) != SparseIsB; }

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    Params p = args;
    const int64_t ld = rows_vary(args) ? args.col_stride : args.row_stride;
    const int64_t unit = rows_vary(args) ? args.row_stride : args.col_stride;
    // The first element of a vector is (row0 + r, dense0 + g) with g a multiple of 8, dense0
    // one too when the dense side varies (store() takes a pulled-back tile's other vectors
    // element by element), and r a multiple of 8 when rows vary: its offset is a multiple of
    // 8 elements iff ld is, and bm too when rows vary. 16-bit C then needs a 16-byte aligned
    // base, f32 C too (two 16-byte accesses).
    p.vector = reinterpret_cast<uintptr_t>(args.c) % 16 == 0 && unit == 1 && ld % kVec == 0 &&
               (!rows_vary(args) || args.bm % kVec == 0);
    return p;
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
    float* dense_alpha = nullptr;
    if constexpr (kFp8) dense_alpha = reinterpret_cast<SharedStorage*>(smem)->dense_alpha;
    switch (params_.out) {
      case DType::F16: store<__half>(blk_shape, blk_coord, acc, tiled_mma, thread_idx, buf, dense_alpha); break;
      case DType::BF16: store<__nv_bfloat16>(blk_shape, blk_coord, acc, tiled_mma, thread_idx, buf, dense_alpha); break;
      case DType::F32: store<float>(blk_shape, blk_coord, acc, tiled_mma, thread_idx, buf, dense_alpha); break;
      default: break;  // C is f16, bf16 or f32 (the Problem's invariants)
    }
  }

 private:
  // The bias's element type as CUDA's (vec8.cuh): the input type's, or C's (Out) for FP8.
  template <class Out>
  using BiasT = cute::conditional_t<kFp8, Out,
                                    cute::conditional_t<cute::is_same_v<Element, cutlass::half_t>, __half, __nv_bfloat16>>;

  // Index of chunk element (GEMM row tm, chunk column tn) in the chunk (see SharedStorage).
  CUTLASS_DEVICE static int chunk_index(bool m_fast, int tm, int tn) {
    return m_fast ? tn * kPitchM + tm : tm * kChunk + (tn ^ ((tm & 7) << 2));
  }
  // Row lr (0 .. kGroupRows - 1) of a group's rows, as a GEMM row of the tile.
  CUTLASS_DEVICE static int tile_row(int group, int lr) {
    return kGroups == 1 ? lr : lr / kAtomRows * (2 * kAtomRows) + group * kAtomRows + lr % kAtomRows;
  }

  // The vectors of chunk `chunk` of a whole tile (store()'s whole_tile) of a C = A*B row
  // (!SparseIsB: the tile's rows are the block-row's), C's memory order a constant: the same
  // values as the general loop's vector branch (same fma, activation and rounding), addressed
  // from the tile's first element of C with unit stride along the vector. (On the transposed
  // rows' 256x64 FP8 tile the same path measured 0.95-1.03x and spilled 16 bytes more, so
  // those keep the general loop.)
  template <bool kMFast, class Out>
  CUTLASS_DEVICE void store_whole(int chunk, int gtid, int group, const float* buf, const float* group_alpha,
                                  int64_t row0, int64_t dense0) const {
    static_assert(!SparseIsB, "C = A*B rows only");
    constexpr bool kRows = kMFast;  // the vector runs down a column of C
    const Params& p = params_;
    // The tile's first element of C, C's stride across its contiguous dimension, the bias of
    // the tile's first row.
    Out* c_tile = static_cast<Out*>(p.c) + row0 * p.row_stride + dense0 * p.col_stride;
    const int64_t ld = kRows ? p.col_stride : p.row_stride;
    const BiasT<Out>* bias_tile = p.bias != nullptr ? static_cast<const BiasT<Out>*>(p.bias) + row0 : nullptr;
    CUTLASS_PRAGMA_NO_UNROLL
    for (int q = gtid; q < kVecs; q += kGroupThreads) {
      const int r = tile_row(group, kMFast ? q % (kGroupRows / kVec) * kVec : q / (kChunk / kVec));  // in the block-row
      const int gn = kMFast ? q / (kGroupRows / kVec) : q % (kChunk / kVec) * kVec;
      const float4 x = *reinterpret_cast<const float4*>(buf + chunk_index(kMFast, r, gn));
      const float4 y =
          *reinterpret_cast<const float4*>(buf + chunk_index(kMFast, r + (kMFast ? 4 : 0), gn + (kMFast ? 0 : 4)));
      float v[kVec] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
      const int d = chunk * kChunk + gn;  // dense index in the tile
      float b[kVec];
      if (bias_tile == nullptr) {
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kVec; ++j) b[j] = -0.0f;
      } else if (kRows) {
        detail::load8(bias_tile + r, b);
      } else {
        const float br = detail::to_float(bias_tile[r]);
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kVec; ++j) b[j] = br;
      }
      if constexpr (kFp8) {
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kVec; ++j) v[j] = fmaf(group_alpha[kRows ? d : d + j], v[j], b[j]);
      } else {
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kVec; ++j) v[j] = fmaf(p.alpha, v[j], b[j]);
      }
      detail::activate8(v, p.activation);
      // Unit stride along the vector (params_.vector): C(r + j, d) or C(r, d + j).
      detail::store8(c_tile + (kRows ? int64_t(d) * ld + r : int64_t(r) * ld + d), v);
    }
  }

  template <class Out, class BlockShapeMNK, class BlockCoordMNKL, class Acc, class TiledMma>
  CUTLASS_DEVICE void store(BlockShapeMNK blk_shape, BlockCoordMNKL blk_coord, Acc const& acc, TiledMma tiled_mma,
                            int thread_idx, float* buf, float* dense_alpha) const {
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
    // The tile's first dense row as the mainloop loaded it (pulled back for a last partial
    // tile) and the first it writes: rows below dense_lo are the tile before's.
    const int64_t dense_tile = SparseIsB ? get<0>(blk_coord) : get<1>(blk_coord);
    const int64_t dense0 = dense_tile_start(dense_tile, p.n, TileDense);
    const int64_t dense_lo = dense_tile * TileDense;
    Out* c = static_cast<Out*>(p.c);
    const BiasT<Out>* bias = static_cast<const BiasT<Out>*>(p.bias);
    // FP8: alpha times A's and B's per-tensor scales and B's scale of the column, one value
    // per dense index of the tile (dense_alpha, the group's copy staged in the first chunk
    // below: the scales' global loads once per tile, not one per vector and chunk).
    const float alpha = p.alpha;
    // C's contiguous dimension is the GEMM's M (m_fastest) or N; along it, a vector of 8
    // covers 8 rows of C (rows_vary) or 8 columns.
    const bool m_fast = m_fastest(p), rows = rows_vary(p);
    const bool read_c = p.beta != 0.0f;
    int tid = thread_idx % int(kConsumerThreads);
    if constexpr (kGroups > 1) {
      // Keeps the values below from being hoisted out of the kernel's tile loop, where they
      // would stay live through the mainloop (the 128x256 FP8 tile then spilled into its k loop).
      asm volatile("" : "+r"(tid));
    }
    const int group = tid / kGroupThreads, gtid = tid % kGroupThreads;
    const uint32_t barrier = kEpilogueBarrierId + uint32_t(group);
    float* group_alpha = dense_alpha + (kFp8 ? group * TileDense : 0);
    // A whole tile: every vector of it lies inside C, in whole and 16-byte aligned (the tile
    // not pulled back, inside n, all bm == TileSparse rows of its block-row; C's alignment),
    // and C is not read. Its vectors go through store_whole, without the checks and the
    // run-time strides of the loop below (on the 128x256 FP8 tile that loop issued ~160
    // instructions per vector, and the epilogue half of the consumers' issue slots).
    const bool whole_tile = !SparseIsB && p.vector && !read_c && dense0 == dense_lo && dense0 + TileDense <= p.n &&
                            p.bm == TileSparse;

    // FP8: this thread's dense indices of the tile (gtid + k * kGroupThreads), their column
    // scales loaded before the first barrier so that their latency overlaps it and the first
    // chunk's copy (ncu had put ~5 % of the 128x256 tile's stall samples on these loads).
    constexpr int kScalesPerThread = kFp8 ? (TileDense + kGroupThreads - 1) / kGroupThreads : 0;
    float column_scale[kScalesPerThread > 0 ? kScalesPerThread : 1];
    if constexpr (kFp8) {
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kScalesPerThread; ++k) {
        const int t = gtid + k * kGroupThreads;
        column_scale[k] = p.column_scale != nullptr && t < TileDense && dense0 + t < p.n ? p.column_scale[dense0 + t] : 1.0f;
      }
    }

    // The chunk loop stays rolled, so the store loops below (with their activation code) are
    // compiled once per C dtype; only the register -> shared memory copy needs the chunk
    // as a constant (static register indices), one unrolled copy per chunk.
    CUTLASS_PRAGMA_NO_UNROLL
    for (int chunk = 0; chunk < TileN / kChunk; ++chunk) {
      asm volatile("bar.sync %0, %1;" : : "r"(barrier), "r"(kGroupThreads) : "memory");
      CUTLASS_PRAGMA_UNROLL
      for (int cc = 0; cc < TileN / kChunk; ++cc) {
        if (cc != chunk) continue;
        // WGMMA's accumulators come in groups of 8 columns with the thread's pair at n0 < 8,
        // so the chunk of element i is dn / kChunk, known at compile time.
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kAcc; ++i) {
          const int dm = get<0>(coord(i)) - m0, dn = get<1>(coord(i)) - n0;  // static
          if (dn / kChunk == cc) {
            const int tm = m0 + dm, tn = n0 + dn - cc * kChunk;
            buf[chunk_index(m_fast, tm, tn)] = float(acc(i));
          }
        }
      }
      if constexpr (kFp8) {
        // Between the chunk's two barriers: the last tile's readers are past the first, and
        // the second makes the values visible. The product in the order alpha, A's scale,
        // B's, the column's.
        if (chunk == 0) {
          float a = alpha;
          if (p.scale_a != nullptr) a *= *p.scale_a;
          if (p.scale_b != nullptr) a *= *p.scale_b;
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < kScalesPerThread; ++k) {
            const int t = gtid + k * kGroupThreads;
            if (t < TileDense) group_alpha[t] = p.column_scale != nullptr && dense0 + t < p.n ? a * column_scale[k] : a;
          }
        }
      }
      asm volatile("bar.sync %0, %1;" : : "r"(barrier), "r"(kGroupThreads) : "memory");
      if constexpr (!SparseIsB) {
        if (whole_tile) {
          if (m_fast) {
            store_whole<true, Out>(chunk, gtid, group, buf, group_alpha, row0, dense0);
          } else {
            store_whole<false, Out>(chunk, gtid, group, buf, group_alpha, row0, dense0);
          }
          continue;
        }
      }
      CUTLASS_PRAGMA_NO_UNROLL
      for (int q = gtid; q < kVecs; q += kGroupThreads) {
        // The vector's first element (GEMM row gm, chunk column gn) and its shared memory.
        const int gm = tile_row(group, m_fast ? q % (kGroupRows / kVec) * kVec : q / (kChunk / kVec));
        const int gn = m_fast ? q / (kGroupRows / kVec) : q % (kChunk / kVec) * kVec;
        // Element j of the vector: (gm + j, gn) or (gm, gn + j); 4-float groups stay whole.
        auto at_chunk = [&](int j) { return buf + chunk_index(m_fast, gm + (m_fast ? j : 0), gn + (m_fast ? 0 : j)); };
        const int tile_n = chunk * kChunk + gn;
        const int32_t r = SparseIsB ? tile_n : gm;               // row in the block
        const int64_t col = dense0 + (SparseIsB ? gm : tile_n);  // column of C
        const int64_t row = row0 + r;
        // A vector along the dense side needs dense0 a multiple of 8 (16-byte aligned; it
        // then lies wholly on one side of dense_lo, a multiple of 8); a pulled-back tile's
        // may not be (tile_iterator.hpp).
        const bool whole = col >= dense_lo && (rows ? r + kVec <= p.bm && col < p.n
                                                    : dense0 % kVec == 0 && r < p.bm && col + kVec <= p.n);
        if (p.vector && whole) {
          const int64_t off = row * p.row_stride + col * p.col_stride;
          float v[kVec], b[kVec];
          const float4 x = *reinterpret_cast<const float4*>(at_chunk(0));
          const float4 y = *reinterpret_cast<const float4*>(at_chunk(4));
          v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
          // A null bias adds -0.0f, which leaves every value as it is (epilogue.hpp).
          if (bias == nullptr) {
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) b[j] = -0.0f;
          } else if (rows) {
            detail::load8(bias + row, b);  // row is a multiple of 8, bias 16-byte aligned
          } else {
            const float br = detail::to_float(bias[row]);
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) b[j] = br;
          }
          if constexpr (kFp8) {
            const int d = int(col - dense0);  // the vector's first dense index in the tile
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) v[j] = fmaf(group_alpha[rows ? d : d + j], v[j], b[j]);
          } else {
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) v[j] = fmaf(alpha, v[j], b[j]);
          }
          if (read_c) {
            float old[kVec];
            detail::load8(c + off, old);
            CUTLASS_PRAGMA_UNROLL
            for (int j = 0; j < kVec; ++j) v[j] = fmaf(p.beta, old[j], v[j]);
          }
          detail::activate8(v, p.activation);
          detail::store8(c + off, v);
        } else {
          CUTLASS_PRAGMA_NO_UNROLL
          for (int j = 0; j < kVec; ++j) {
            const int32_t rj = rows ? r + j : r;
            const int64_t cj = rows ? col : col + j;
            if (rj < p.bm && cj >= dense_lo && cj < p.n) {
              const int64_t at = (row0 + rj) * p.row_stride + cj * p.col_stride;
              const float a = kFp8 ? group_alpha[cj - dense0] : alpha;
              float v = fmaf(a, *at_chunk(j), bias != nullptr ? detail::to_float(bias[row0 + rj]) : -0.0f);
              if (read_c) v = fmaf(p.beta, detail::to_float(c[at]), v);
              c[at] = detail::from_float<Out>(detail::activate(v, p.activation));
            }
          }
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

}  // namespace sparsek::detail::spmm_sm90
