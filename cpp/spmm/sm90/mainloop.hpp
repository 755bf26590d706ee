// sparsek SM90: the BSR mainloop collective.
//
// Modelled on CUTLASS's MainloopSm90TmaGmmaWarpSpecialized collective
// (cutlass/gemm/collective/sm90_mma_tma_gmma_ss_warpspecialized.hpp) and plugged into
// CUTLASS's cooperative kernel (GemmUniversal + KernelTmaWarpSpecializedCooperative, see
// kernel.hpp) or our ping-pong kernel (pingpong.hpp): TMA loads into a multi-stage
// PipelineTmaAsync from one producer warp; two consumer warpgroups split the M tile
// (cooperative) or each takes whole tiles (ping-pong), and issue WGMMA from shared memory. The difference:
// the producer walks only the nonzero blocks of the tile's block-row (SparseTileIterator,
// tile_iterator.hpp), and the k count per tile comes from the tile scheduler
// (BsrTileScheduler::WorkTileInfo::k_tile_count, scheduler.hpp). It is never 0: an empty
// block-row gets one zero iteration whose TMA boxes are fully out of bounds (zero-filled),
// so WGMMA itself zeroes the accumulators and the epilogue writes beta*C.
//
// The sparse operand is the BSR values array seen as a batched row-major tensor of shape
// (bm, bk, nnzb) with strides (bk, 1, bm*bk): one TMA descriptor over it, L = block index.
// The dense operand is B seen per block column, as the batched tensor (mn, bk, K/bk) of the
// GEMM's dense side (N, or M with SparseIsB), L = block column: RowMajor B is MN-major
// (strides (1, ldb, ldb*bk)), ColMajor B is K-major (strides (ldb, 1, bk)). Seen that way,
// both operands end at each block's bk, so a k-tile that reaches past bk (TileK not dividing
// bk: 112 = 64 + 48) is zero-filled by TMA on both sides and multiplies zeros. (Skipping the
// empty k-blocks with a branch per k-block made ptxas serialize every WGMMA: C7520.)
// op(A) = A^T (SparseMN, cpp/spmm/problem.hpp): the problem's blocks are A's, listed by its
// transpose index and stored transposed, so the sparse operand is the MN-major tensor
// (bm, bk, nnzb) with strides (1, bm, bm*bk) (the TMA box's contiguous side is the tile's
// sparse extent, rows past bm zero-filled as above); WGMMA reads 16-bit operands MN-major
// from shared memory at full rate, and the iterator maps listed blocks to stored ones
// (block_id).
// Requirements: bm <= the sparse tile extent TileS (the box's rows past bm are zero-filled),
// bk % 16 == 0; the GEMM's sparse extent is (block-rows) * TileS.
//
// FP8 (8-bit Element): FP8 WGMMA accumulates with fewer bits than fp32 (about 14 of the
// mantissa's, DeepSeek-V3 section 3.3.2), and each block may carry its own scale, so every
// k-tile's product goes to a fresh accumulator that is then added, times its block's scale,
// into the fp32 one (promotion every k-tile, as DeepGEMM does; a k-tile never spans two
// blocks). The scale rides with the tile: the producer warp fetches the row's scales with its
// column indices (tile_iterator.hpp) and stores the block's into a ring of 2 x Stages slots
// before it arrives on the stage's full barrier (mbarrier.arrive releases, the consumers'
// wait acquires, so they see it). The slot of k-iteration i was last read at i - 2 x Stages,
// whose stage the consumers released before the producer could acquire i - 1's. (st.async,
// which completes on the barrier itself, needs a cluster launch; a 1-D TMA load of the
// scales faulted.) Both operands must be K-major (family.cu refuses row-major B and
// op(A) = A^T).
//
// W8A16 (SparseElement_ FP8, Element_ f16 or bf16; natural orientation, 128-row tiles): the sparse
// operand's FP8 tiles arrive by TMA in the ring stages, and each consumer thread reads its share of
// a k-tile straight into WGMMA's register fragment of A, converted to the MMA's type (exact: e4m3
// and e5m2 values are f16 and bf16 values); the WGMMAs take A from registers (RS) and B from the
// stage (mma_converted). The conversion of k-tile i + 1 runs while k-tile i's WGMMAs do, into the
// thread's other fragment; the per-block scales are promoted every k-tile as for FP8 (WGMMA
// accumulates 16-bit products in fp32, but a block's scale cannot be folded into its 16-bit values
// without rounding them; folding it where f16 holds the products, the k-tiles' WGMMAs accumulating
// into the output, measured 1.2x slower). Converting through shared memory instead (two converted
// tiles, a named barrier and a proxy fence per k-tile) left room for 2 stages at 128x128 and ran
// 1.3-1.7x slower.
//
// Orientation SparseIsB: false -> GEMM A = sparse, B = dense (C = A*B, block-row = M tile).
//                        true  -> GEMM A = dense B^T, B = sparse A^T (C^T = B^T A^T,
//                                 block-row = N tile); for bm = 64 (cooperative needs
//                                 TileM >= 128).
#pragma once

#include "cutlass/cutlass.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/numeric_types.h"
#include "cutlass/pipeline/pipeline.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cute/arch/cluster_sm90.hpp"
#include "cute/arch/copy_sm90.hpp"
#include "cute/algorithm/functional.hpp"
#include "cute/atom/mma_atom.hpp"
#include "cute/atom/copy_traits_sm90_tma.hpp"
#include "cute/algorithm/gemm.hpp"
#include "cute/tensor.hpp"

#include "core/fp8_pair.cuh"
#include "tile_iterator.hpp"

namespace sparsek::detail::spmm_sm90 {

using namespace cute;

// Stride of the BSR values tensor (bm, bk, nnzb): row-major blocks, K-major for the MMA; or,
// for op(A) = A^T, blocks stored transposed: MN-major.
using SparseStrideK = cute::Stride<int64_t, cute::Int<1>, int64_t>;
using SparseStrideMN = cute::Stride<cute::Int<1>, int64_t, int64_t>;

// ClusterShape_: (1, 1, 1), or 2 CTAs along the dense side ((1, 2, 1) natural, (2, 1, 1)
// transposed) that share the block-row: each loads half of the sparse operand's tile and
// multicasts it to both (TMA multicast), so the sparse operand crosses L2 once per cluster.
// MmaWarpGroups_: the consumer warpgroups that share one tile's MMAs: 2 in the cooperative
// kernel (they split the M tile), 1 in the ping-pong kernel (pingpong.hpp: each warpgroup
// owns its tile; mma() then takes the warpgroup's own thread index, 0..127).
// PullLastDense_: a last partial dense tile is loaded from dense_tile_start()
// (tile_iterator.hpp), whole within the dense operand, instead of reaching past its end; only
// for an epilogue that places the tile the same way (the Direct epilogue).
template <class Element_, class DenseStride_, class TileShape_, int Stages_, bool SparseIsB_,
          class ClusterShape_ = Shape<_1, _1, _1>, int MmaWarpGroups_ = 2, bool SparseMN_ = false,
          bool PullLastDense_ = false, class SparseElement_ = Element_>
struct CollectiveSparseMma {
  static constexpr bool SparseIsB = SparseIsB_;
  static constexpr bool kPullLastDense = PullLastDense_;
  static constexpr int TileDense = size<SparseIsB_ ? 0 : 1>(TileShape_{});
  static constexpr bool SparseMN = SparseMN_;
  using SparseStride = cute::conditional_t<SparseMN, SparseStrideMN, SparseStrideK>;
  static constexpr int TileK = size<2>(TileShape_{});
  // The sparse operand's stored type: Element_, or FP8 under a 16-bit Element_ (W8A16).
  using SparseElement = SparseElement_;
  static constexpr bool kConvert = !cute::is_same_v<SparseElement_, Element_>;
  // FP8 A (W8A8 or W8A16): per-k-tile promotion with per-block scales (see the file comment).
  static constexpr bool kPromote = cute::sizeof_bits_v<SparseElement_> == 8;
  static constexpr int KBlock = cute::sizeof_bits_v<Element_> == 8 ? 32 : 16;  // WGMMA's K for 8- and 16-bit inputs
  static_assert(!kPromote || !SparseMN_, "FP8 A is read K-major only");
  static_assert(!kConvert || (cute::sizeof_bits_v<SparseElement_> == 8 && cute::sizeof_bits_v<Element_> == 16 &&
                              !SparseIsB_ && MmaWarpGroups_ == 2 && size<0>(TileShape_{}) == 128 &&
                              size(ClusterShape_{}) == 1),
                "W8A16: FP8 A under a 16-bit B, natural orientation, cooperative 128-row tiles, no clusters");
  static constexpr int Stages = Stages_;
  using ClusterShape = ClusterShape_;
  static_assert(size<SparseIsB_ ? 1 : 0>(ClusterShape{}) == 1 && size<2>(ClusterShape{}) == 1,
                "a cluster spans dense tiles of one block-row only");
  // The TMA ops: multicast for an operand shared across the cluster (A along N, B along M).
  using GmemTiledCopyA = cute::conditional_t<(size<1>(ClusterShape{}) > 1), SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>;
  using GmemTiledCopyB = cute::conditional_t<(size<0>(ClusterShape{}) > 1), SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>;
  static_assert(MmaWarpGroups_ == 1 || MmaWarpGroups_ == 2, "cooperative (2) or ping-pong (1) consumers");
  using KernelSchedule = cute::conditional_t<MmaWarpGroups_ == 2, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                             cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using DispatchPolicy = cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<Stages, ClusterShape, KernelSchedule>;
  using TileShape = TileShape_;
  using Element = Element_;
  using DenseStride = DenseStride_;
  using ElementA = Element;
  using ElementB = Element;
  using StrideA = cute::conditional_t<SparseIsB, DenseStride, SparseStride>;
  using StrideB = cute::conditional_t<SparseIsB, SparseStride, DenseStride>;
  using ElementAccumulator = float;
  using ArchTag = cutlass::arch::Sm90;

  static constexpr bool DenseIsKMajor = cutlass::gemm::detail::is_k_major<DenseStride>();
  static constexpr GMMA::Major DenseMajor = DenseIsKMajor ? GMMA::Major::K : GMMA::Major::MN;
  static constexpr GMMA::Major SparseMajor = SparseMN ? GMMA::Major::MN : GMMA::Major::K;
  static constexpr GMMA::Major MajorA = SparseIsB ? DenseMajor : SparseMajor;
  static constexpr GMMA::Major MajorB = SparseIsB ? SparseMajor : DenseMajor;

  // Cooperative: two consumer warpgroups split the M tile; ping-pong: one takes all of it.
  using MmaWarpGroupLayout = Shape<Int<MmaWarpGroups_>, _1, _1>;
  // FP8 tiles wider than 128 along N run on n128 atoms: mma_promoted promotes one atom column
  // at a time, so its k-tile accumulator is one column's (64 registers), not the tile's.
  static constexpr int AtomN =
      kPromote && size<1>(TileShape_{}) > 128 && size<1>(TileShape_{}) % 128 == 0 ? 128 : size<1>(TileShape_{});
  using AtomTile = Shape<decltype(get<0>(TileShape_{})), Int<AtomN>, decltype(get<2>(TileShape_{}))>;
  // W8A16: WGMMA's A from registers (the FP8 tile converted in each thread's fragment).
  using MmaOp = cute::conditional_t<kConvert,
                                    decltype(cute::GMMA::rs_op_selector<Element, Element, float, AtomTile, GMMA::Major::K, MajorB>()),
                                    decltype(cute::GMMA::ss_op_selector<Element, Element, float, AtomTile, MajorA, MajorB>())>;
  using TiledMma = decltype(cute::make_tiled_mma(MmaOp{}, cute::Layout<MmaWarpGroupLayout>{}));

  using SmemLayoutAtomA = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   MajorA, Element, decltype(get<0>(TileShape{})), decltype(get<2>(TileShape{}))>());
  using SmemLayoutAtomB = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                   MajorB, Element, decltype(get<1>(TileShape{})), decltype(get<2>(TileShape{}))>());
  // WGMMA's A: the ring's stages (W8A16: one tile's shape, for its register fragment).
  static constexpr int kABuffers = kConvert ? 1 : Stages;
  using SmemLayoutA = decltype(tile_to_shape(
      SmemLayoutAtomA{}, make_shape(shape<0>(TileShape{}), shape<2>(TileShape{}), Int<kABuffers>{}),
      cute::conditional_t<MajorA == GMMA::Major::MN, Step<_2, _1, _3>, Step<_1, _2, _3>>{}));
  using SmemLayoutB = decltype(tile_to_shape(
      SmemLayoutAtomB{}, make_shape(shape<1>(TileShape{}), shape<2>(TileShape{}), Int<Stages>{}),
      cute::conditional_t<MajorB == GMMA::Major::MN, Step<_2, _1, _3>, Step<_1, _2, _3>>{}));
  // W8A16: the FP8 tiles' ring stages (K-major, swizzled as the TMA writes them); otherwise
  // the sparse operand's tiles are WGMMA's A (or B) itself.
  using SmemLayoutAtomSparse = decltype(cutlass::gemm::collective::detail::ss_smem_selector<
                                        GMMA::Major::K, SparseElement, decltype(get<0>(TileShape{})),
                                        decltype(get<2>(TileShape{}))>());
  using SmemLayoutSparse = cute::conditional_t<
      kConvert,
      decltype(tile_to_shape(SmemLayoutAtomSparse{},
                             make_shape(shape<0>(TileShape{}), shape<2>(TileShape{}), Int<Stages>{}),
                             Step<_1, _2, _3>{})),
      cute::conditional_t<SparseIsB, decltype(SmemLayoutB{}), decltype(SmemLayoutA{})>>;
  // What the producer's TMA writes for GEMM A: the sparse tiles' stages, or WGMMA's A.
  using SmemLayoutTmaA = cute::conditional_t<kConvert, SmemLayoutSparse, SmemLayoutA>;

  using MainloopPipeline = cutlass::PipelineTmaAsync<Stages>;
  using PipelineState = cutlass::PipelineState<Stages>;
  using PipelineParams = typename MainloopPipeline::Params;
  static constexpr int NumProducerThreadEvents = 1;

  // Let TMA move raw bits.
  using InternalElement = cute::uint_bit_t<cute::sizeof_bits_v<Element>>;
  using InternalSparse = cute::uint_bit_t<cute::sizeof_bits_v<SparseElement>>;
  using InternalElementA = cute::conditional_t<SparseIsB, InternalElement, InternalSparse>;
  using InternalElementB = cute::conditional_t<SparseIsB, InternalSparse, InternalElement>;

  struct TensorStorageSame : cute::aligned_struct<128, _0> {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutA>> smem_A;
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutB>> smem_B;
    // FP8: the block scales of the last 2 x Stages k-iterations (scale_slot).
    cute::array_aligned<float, kPromote ? 2 * Stages : 1, 16> smem_scales;
  };
  // W8A16: smem_sparse holds the FP8 ring stages (WGMMA reads A from registers).
  struct TensorStorageConvert : cute::aligned_struct<128, _0> {
    cute::array_aligned<Element, cute::cosize_v<SmemLayoutB>> smem_B;
    cute::array_aligned<SparseElement, cute::cosize_v<SmemLayoutSparse>, 128> smem_sparse;
    cute::array_aligned<float, 2 * Stages, 16> smem_scales;
  };
  struct SharedStorage {
    using TensorStorage = cute::conditional_t<kConvert, TensorStorageConvert, TensorStorageSame>;
    TensorStorage tensors;
    using PipelineStorage = typename MainloopPipeline::SharedStorage;
    PipelineStorage pipeline;
  };
  using TensorStorage = typename SharedStorage::TensorStorage;
  using PipelineStorage = typename SharedStorage::PipelineStorage;

  // Where the producer's TMA writes GEMM A's tiles.
  CUTLASS_DEVICE static auto* tma_a_smem(TensorStorage& t) {
    if constexpr (kConvert) {
      return t.smem_sparse.data();
    } else {
      return t.smem_A.data();
    }
  }

  // A stage's bytes: the sparse tile's and the dense tile's.
  static constexpr uint32_t TmaTransactionBytes =
      uint32_t(size<0>(SmemLayoutSparse{}) * size<1>(SmemLayoutSparse{}) * cute::sizeof_bits_v<SparseElement> / 8 +
               (SparseIsB ? size<0>(SmemLayoutA{}) * size<1>(SmemLayoutA{})
                          : size<0>(SmemLayoutB{}) * size<1>(SmemLayoutB{})) *
                   cute::sizeof_bits_v<Element> / 8);

  // Host-side arguments.
  struct Arguments {
    SparseElement const* values = nullptr;  // BSR values, nnzb blocks of bm x bk, row-major (SparseMN: column-major)
    int32_t const* block_id = nullptr;  // SparseMN: stored block of each listed block; else null
    int32_t bm = 0, bk = 0;
    int32_t nnzb = 0;                 // >= 1 (use a dummy block when the matrix is empty)
    int32_t const* row_ptr = nullptr;
    int32_t const* col_idx = nullptr;
    Element const* dense = nullptr;   // B
    DenseStride dDense{};             // B as (MN, bk, K/bk): block column = L
    float const* scales = nullptr;    // FP8: one per block (nnzb values), or null (scale 1)
  };

  static auto dummy_tensor_a() {
    return make_tensor(static_cast<InternalElementA const*>(nullptr), repeat_like(StrideA{}, int32_t(0)), StrideA{});
  }
  static auto dummy_tensor_b() {
    return make_tensor(static_cast<InternalElementB const*>(nullptr), repeat_like(StrideB{}, int32_t(0)), StrideB{});
  }

  struct Params {
    using TMA_A = decltype(make_tma_copy_A_sm90(GmemTiledCopyA{}, dummy_tensor_a(), SmemLayoutTmaA{}(_, _, Int<0>{}),
                                                TileShape{}, ClusterShape{}));
    using TMA_B = decltype(make_tma_copy_B_sm90(GmemTiledCopyB{}, dummy_tensor_b(), SmemLayoutB{}(_, _, Int<0>{}),
                                                TileShape{}, ClusterShape{}));
    TMA_A tma_load_a;
    TMA_B tma_load_b;
    uint32_t tma_transaction_bytes = TmaTransactionBytes;
    int32_t const* row_ptr = nullptr;
    int32_t const* col_idx = nullptr;
    int32_t const* block_id = nullptr;
    int32_t kpb = 1;            // k-iterations per block: ceil(bk / TileK)
    int32_t bm = 0, bk = 0, nnzb = 0;
    int32_t block_cols = 0;     // K / bk: first out-of-bounds L of the dense operand
    int32_t dense_extent = 0;   // the dense operand's MN extent (n)
    float const* scales = nullptr;  // FP8: per-block scales, or null
  };

  // k-iterations per block (the scheduler's WorkTileInfo counts with the same value).
  CUTE_HOST_DEVICE static int32_t k_tiles_per_block(int32_t bk) { return (bk + TileK - 1) / TileK; }

  // problem_shape = (M, N, K, L) of the GEMM as CUTLASS sees it (see orientation above).
  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void*) {
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    auto ptr_s = reinterpret_cast<InternalSparse const*>(args.values);
    auto ptr_d = reinterpret_cast<InternalElement const*>(args.dense);
    SparseStride dS{};
    if constexpr (SparseMN) {
      dS = SparseStride{Int<1>{}, int64_t(args.bm), int64_t(args.bm) * int64_t(args.bk)};
    } else {
      dS = SparseStride{int64_t(args.bk), Int<1>{}, int64_t(args.bm) * int64_t(args.bk)};
    }
    Tensor t_sparse = make_tensor(ptr_s, make_layout(make_shape(int32_t(args.bm), int32_t(args.bk), int32_t(args.nnzb)), dS));
    int32_t dense_mn = SparseIsB ? int32_t(M) : int32_t(N);
    Tensor t_dense = make_tensor(ptr_d, make_layout(make_shape(dense_mn, args.bk, int32_t(K) / args.bk), args.dDense));
    Params p;
    if constexpr (SparseIsB) {
      p.tma_load_a = make_tma_copy_A_sm90(GmemTiledCopyA{}, t_dense, SmemLayoutA{}(_, _, Int<0>{}), TileShape{}, ClusterShape{});
      p.tma_load_b = make_tma_copy_B_sm90(GmemTiledCopyB{}, t_sparse, SmemLayoutB{}(_, _, Int<0>{}), TileShape{}, ClusterShape{});
    } else {
      p.tma_load_a = make_tma_copy_A_sm90(GmemTiledCopyA{}, t_sparse, SmemLayoutTmaA{}(_, _, Int<0>{}), TileShape{}, ClusterShape{});
      p.tma_load_b = make_tma_copy_B_sm90(GmemTiledCopyB{}, t_dense, SmemLayoutB{}(_, _, Int<0>{}), TileShape{}, ClusterShape{});
    }
    p.tma_transaction_bytes = TmaTransactionBytes;
    p.row_ptr = args.row_ptr;
    p.col_idx = args.col_idx;
    p.block_id = SparseMN ? args.block_id : nullptr;
    p.kpb = k_tiles_per_block(args.bk);
    p.bm = args.bm;
    p.bk = args.bk;
    p.nnzb = args.nnzb;
    p.block_cols = int32_t(K) / args.bk;
    p.dense_extent = dense_mn;
    if constexpr (kPromote) {
      p.scales = args.scales;
    }
    return p;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    constexpr int TileS = size<SparseIsB ? 1 : 0>(TileShape{});
    auto [M, N, K, L] = append<4>(problem_shape, 1);
    int64_t sparse_extent = SparseIsB ? int64_t(N) : int64_t(M);
    bool ok = args.values != nullptr && args.dense != nullptr && args.row_ptr != nullptr && args.col_idx != nullptr;
    // bm < TileS: the TMA box's rows bm..TileS-1 are out of bounds (zero-filled), and the
    // GEMM's sparse extent is (block-rows) * TileS (direct_epilogue.hpp).
    ok = ok && args.bm >= 1 && args.bm <= TileS && args.bk >= KBlock && args.bk % KBlock == 0 && args.nnzb >= 1;
    ok = ok && sparse_extent % TileS == 0 && int64_t(K) % args.bk == 0;
    constexpr int align = 128 / cute::sizeof_bits_v<Element>;
    int32_t dense_mn = SparseIsB ? int32_t(M) : int32_t(N);
    ok = ok && cutlass::detail::check_alignment<align>(
                   cute::make_shape(dense_mn, args.bk, int32_t(int64_t(K) / args.bk)), args.dDense);
    ok = ok && (reinterpret_cast<uintptr_t>(args.values) % 16 == 0) && (reinterpret_cast<uintptr_t>(args.dense) % 16 == 0);
    // MN-major blocks: their row stride bm must be 16-byte aligned too.
    ok = ok && (!SparseMN || (args.bm % align == 0 && args.block_id != nullptr));
    return ok;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& p) {
    cute::prefetch_tma_descriptor(p.tma_load_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(p.tma_load_b.get_tma_descriptor());
  }

  // FP8: the scale slot of a k-iteration: its stage, in the ring's first or second half by the
  // consumers' phase (so two consecutive uses of a stage take different slots). The producer's
  // state of the same iteration has the opposite phase (make_producer_start_state).
  CUTLASS_DEVICE static int scale_slot(PipelineState const& state, bool producer) {
    return state.index() + ((state.phase() != 0) != producer ? Stages : 0);
  }

  // Contract with the kernel layer: get<0> has shape (BLK_M,BLK_K,m,k,l), get<1> has shape
  // (BLK_N,BLK_K,n,k,l); the kernel only uses their modes 2 and 4 to turn tile indices into
  // coordinates (identity for integral extents), and mode 3 for a k iterator we ignore.
  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL, Params const& p) const {
    using X = Underscore;
    auto [M, N, K, L] = problem_shape_MNKL;
    auto sparse_shape = make_shape(p.bm, p.bk, p.nnzb);
    auto dense_shape = make_shape(SparseIsB ? int32_t(M) : int32_t(N), p.bk, p.block_cols);
    if constexpr (SparseIsB) {
      Tensor mA = p.tma_load_a.get_tma_tensor(dense_shape);
      Tensor mB = p.tma_load_b.get_tma_tensor(sparse_shape);
      Tensor gA = local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, X, _1>{});  // (BLK_M,BLK_K,m,kpb,cols)
      Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<X, _1, _1>{});  // (BLK_N,BLK_K,1,kpb,nnzb)
      return cute::make_tuple(gA, gB);
    } else {
      Tensor mA = p.tma_load_a.get_tma_tensor(sparse_shape);
      Tensor mB = p.tma_load_b.get_tma_tensor(dense_shape);
      Tensor gA = local_tile(mA, TileShape{}, make_coord(_, _, _), Step<_1, X, _1>{});  // (BLK_M,BLK_K,1,kpb,nnzb)
      Tensor gB = local_tile(mB, TileShape{}, make_coord(_, _, _), Step<X, _1, _1>{});  // (BLK_N,BLK_K,n,kpb,cols)
      return cute::make_tuple(gA, gB);
    }
  }

  // Producer: called by all 32 lanes of the mainloop producer warp.
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& p, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator /*unused*/, int k_tile_count, int lane_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    int lane_predicate = cute::elect_one_sync();
    if (k_tile_count <= 0) {
      return;
    }
    Tensor sA = make_tensor(make_smem_ptr(tma_a_smem(shared_tensors)), SmemLayoutTmaA{});  // (BLK_M,BLK_K,PIPE)
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});   // (BLK_N,BLK_K,PIPE)

    auto m_coord = get<0>(blk_coord);
    auto n_coord = get<1>(blk_coord);
    int32_t block_row = SparseIsB ? int32_t(n_coord) : int32_t(m_coord);
    int32_t dense_tile = SparseIsB ? int32_t(m_coord) : int32_t(n_coord);

    // This CTA's part of a multicast box, and the CTAs that receive it (the cluster's
    // row for A, its column for B).
    constexpr int kClusterM = size<0>(ClusterShape{});
    const int cluster_m = int(block_rank_in_cluster) % kClusterM;
    const int cluster_n = int(block_rank_in_cluster) / kClusterM;
    uint16_t mcast_mask_a = 0, mcast_mask_b = 0;
    auto block_layout = cute::Layout<ClusterShape>{};  // (m, n) -> block rank
    if constexpr (cute::is_same_v<GmemTiledCopyA, SM90_TMA_LOAD_MULTICAST>) {
      for (int n = 0; n < size<1>(block_layout); ++n) mcast_mask_a |= uint16_t(1) << block_layout(cluster_m, n, Int<0>{});
    }
    if constexpr (cute::is_same_v<GmemTiledCopyB, SM90_TMA_LOAD_MULTICAST>) {
      for (int m = 0; m < size<0>(block_layout); ++m) mcast_mask_b |= uint16_t(1) << block_layout(m, cluster_n, Int<0>{});
    }
    auto tma_a = p.tma_load_a.get_slice(cluster_n);
    auto tma_b = p.tma_load_b.get_slice(cluster_m);
    Tensor tAsA = tma_a.partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
    Tensor tBsB = tma_b.partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
    // Sparse operand: (TILE,BLK_K,kpb,nnzb); dense operand: (TILE,BLK_K,kpb,cols).
    auto slice_sparse = [](auto const& g) { return g(_, _, 0, _, _); };
    // A pulled-back last tile (kPullLastDense): its box starts `pull` rows before the tile's.
    const int32_t pull =
        kPullLastDense ? int32_t(int64_t(dense_tile) * TileDense - dense_tile_start(dense_tile, p.dense_extent, TileDense))
                       : 0;
    auto slice_dense = [dense_tile, pull](auto const& g) {
      return domain_offset(make_coord(-pull, 0, 0, 0), g(_, _, dense_tile, _, _));
    };
    auto gA = [&]() {
      if constexpr (SparseIsB) { return slice_dense(get<0>(load_inputs)); }
      else { return slice_sparse(get<0>(load_inputs)); }
    }();
    auto gB = [&]() {
      if constexpr (SparseIsB) { return slice_sparse(get<1>(load_inputs)); }
      else { return slice_dense(get<1>(load_inputs)); }
    }();
    Tensor tAgA = tma_a.partition_S(gA);
    Tensor tBgB = tma_b.partition_S(gB);

    // L: the first k-iteration of a split piece, -1 for an empty one (scheduler.hpp).
    const int32_t l_start = int32_t(get<3>(blk_coord));
    float const* scales = nullptr;
    if constexpr (kPromote) scales = p.scales;
    SparseTileIterator<SparseMN> it(p.row_ptr, p.col_idx, p.block_id, block_row, p.kpb, lane_idx, l_start < 0 ? 0 : l_start,
                          l_start < 0, scales);

    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      int32_t dense_l = it.dense_block();  // warp-collective
      int32_t sparse_l = it.sparse_block();
      float block_scale = 0.0f;
      if constexpr (kPromote) {
        if (scales != nullptr) block_scale = it.scale();  // warp-collective
      }
      const int32_t k = it.ktile();
      if (it.empty()) {  // zero iteration: both tiles out of bounds -> zero-filled by TMA
        dense_l = p.block_cols;
        sparse_l = p.nnzb;
      }
      if (lane_predicate) {
        if constexpr (kPromote) {
          // Before the arrive in producer_acquire (see the file comment); the empty asm keeps
          // the compiler from moving the store past it. The zero iteration's tile is zero
          // whatever its scale.
          if (scales != nullptr) shared_tensors.smem_scales[scale_slot(smem_pipe_write, true)] = block_scale;
          asm volatile("" ::: "memory");
        }
        pipeline.producer_acquire(smem_pipe_write);
        using BarrierType = typename MainloopPipeline::ProducerBarrierType;
        BarrierType* tma_barrier = pipeline.producer_get_barrier(smem_pipe_write);
        int stage = smem_pipe_write.index();
        if constexpr (SparseIsB) {
          copy(p.tma_load_a.with(*tma_barrier, mcast_mask_a), tAgA(_, _, _, k, dense_l), tAsA(_, _, _, stage));
          copy(p.tma_load_b.with(*tma_barrier, mcast_mask_b), tBgB(_, _, _, k, sparse_l), tBsB(_, _, _, stage));
        } else {
          copy(p.tma_load_a.with(*tma_barrier, mcast_mask_a), tAgA(_, _, _, k, sparse_l), tAsA(_, _, _, stage));
          copy(p.tma_load_b.with(*tma_barrier, mcast_mask_b), tBgB(_, _, _, k, dense_l), tBsB(_, _, _, stage));
        }
      }
      ++it;
      ++smem_pipe_write;
    }
  }

  CUTLASS_DEVICE void load_tail(MainloopPipeline pipeline, PipelineState smem_pipe_write) {
    int lane_predicate = cute::elect_one_sync();
    if (lane_predicate) {
      pipeline.producer_tail(smem_pipe_write);
    }
  }

  static constexpr int K_PIPE_MMAS = 1;

  // Consumer: the tile's MMA warpgroups (both in the cooperative kernel, one in ping-pong).
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                          int k_tile_count, int thread_idx, TensorStorage& shared_tensors, Params const& params) {
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");
    if constexpr (kConvert) {
      mma_converted(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors, params);
    } else if constexpr (kPromote) {
      mma_promoted(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors, params);
    } else {
      mma_same(pipeline, smem_pipe_read, accum, k_tile_count, thread_idx, shared_tensors);
    }
  }

  // 16-bit consumer: K_PIPE_MMAS batches of WGMMAs in flight.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma_same(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                               int k_tile_count, int thread_idx, TensorStorage& shared_tensors) {
    // k_tile_count >= 1 always: an empty block-row gets one zero-filled iteration from the
    // producer (SparseTileIterator::k_tile_count), so WGMMA with ScaleOut::Zero clears the
    // accumulators. Do not add a cute::clear() path here: ptxas then serializes all WGMMAs.

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});

    constexpr int MmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    auto warp_group_thread_layout = make_layout(Int<MmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);

    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
    Tensor tCsA = thread_mma.partition_A(sA);          // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thread_mma.partition_B(sB);          // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thread_mma.make_fragment_A(tCsA);    // descriptors
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);

    CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<2>(accum));
    CUTE_STATIC_ASSERT_V(size<2>(tCsA) == size<2>(tCsB));

    PipelineState smem_pipe_release = smem_pipe_read;

    // First k-tile: overwrite the accumulators (ScaleOut::Zero on the first k-block).
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(accum);
    {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      int read_stage = smem_pipe_read.index();
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), accum);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      ++smem_pipe_read;
    }
    tiled_mma.accumulate_ = GMMA::ScaleOut::One;
    warpgroup_fence_operand(accum);

    k_tile_count -= 1;  // K_PIPE_MMAS prologue tiles
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      int read_stage = smem_pipe_read.index();
      warpgroup_fence_operand(accum);
      warpgroup_arrive();
      cute::gemm(tiled_mma, tCrA(_, _, _, read_stage), tCrB(_, _, _, read_stage), accum);
      warpgroup_commit_batch();
      // Keep K_PIPE_MMAS batches in flight; the previous stage can then be released.
      warpgroup_wait<K_PIPE_MMAS>();
      warpgroup_fence_operand(accum);
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_read;
      ++smem_pipe_release;
    }
    warpgroup_fence_operand(accum);
  }

  // FP8 consumer: each k-tile into `tile` from zero, waited for, then accum += scale * tile in
  // fp32 (one fma per accumulator, in k order: deterministic), and its stage released at once.
  // So the WGMMAs of one k-tile do not overlap the next's; the other consumer warpgroup and
  // the producer's prefetched stages keep the tensor cores fed (DeepGEMM's schedule).
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma_promoted(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                                   int k_tile_count, int thread_idx, TensorStorage& shared_tensors,
                                   Params const& params) {
    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});
    constexpr int MmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    auto warp_group_thread_layout = make_layout(Int<MmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
    Tensor tCsA = thread_mma.partition_A(sA);
    Tensor tCsB = thread_mma.partition_B(sB);
    Tensor tCrA = thread_mma.make_fragment_A(tCsA);
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accum); ++i) accum(i) = 0.0f;
    const float* scales = shared_tensors.smem_scales.data();
    constexpr int kCols = decltype(size<2>(accum))::value;  // atom columns (AtomN)
    if constexpr (kCols > 1) {
      mma_promoted_by_column(pipeline, smem_pipe_read, accum, k_tile_count, tiled_mma, tCrA, tCrB, scales, params);
      return;
    }
    Tensor tile = make_fragment_like(accum);
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      const int read_stage = smem_pipe_read.index();
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(tile);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), tile);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<0>();
      warpgroup_fence_operand(tile);
      const float scale = params.scales != nullptr ? scales[scale_slot(smem_pipe_read, false)] : 1.0f;
      pipeline.consumer_release(smem_pipe_read);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) = fmaf(scale, tile(i), accum(i));
      ++smem_pipe_read;
    }
  }

  // W8A16: this thread's share of a k-tile's FP8 tile (one stage of the ring) as WGMMA's
  // register fragment of A in the MMA's type. The fragment of m64 x k16 block kb holds, in its
  // four registers, rows r and r + 8 (r = 16 * warp + lane / 4 of the warpgroup's 64 rows) at
  // k = 16 kb + 2 (lane % 4) + {0, 1} and the same 8 further along k (PTX ISA, wgmma register
  // fragments). Each pair is two bytes of the stage where the TMA's 128-byte swizzle put them:
  // rows 128 bytes apart, and the 16-byte chunk at shared address a moved to a ^ (((a >> 7) %
  // 8) << 4) (the address's bits, not the offset's: the ring starts at a 128-byte boundary).
  // `row_addr`: the shared address of row r's first byte in this stage, plus 2 (lane % 4).
  static constexpr int kKBlocks = size<2>(TileShape{}) / 16;
  static_assert(!kConvert || (size<2>(TileShape{}) * int(sizeof(SparseElement)) == 128 &&
                              cute::is_same_v<SmemLayoutAtomSparse, GMMA::Layout_K_SW128_Atom<SparseElement>>),
                "W8A16: one 128-byte swizzled row of FP8 values per k-tile");
  template <class FragA>
  CUTLASS_DEVICE static void convert_fragment(FragA& frag, uint32_t row_addr) {
    constexpr bool kSparseE5m2 = cute::is_same_v<SparseElement, cutlass::float_e5m2_t>;
    constexpr bool kBf16 = cute::is_same_v<Element, cutlass::bfloat16_t>;
    static_assert(decltype(size(frag))::value == 8 * kKBlocks, "8 values per thread and k-block");
    uint32_t* regs = reinterpret_cast<uint32_t*>(raw_pointer_cast(frag.data()));
    const uint32_t key = ((row_addr >> 7) & 7u) << 4;  // rows r and r + 8 alike (1024 bytes apart)
    CUTLASS_PRAGMA_UNROLL
    for (int kb = 0; kb < kKBlocks; ++kb) {
      const uint32_t q = row_addr + ((uint32_t(kb) << 4) ^ key);
      auto pair = [](uint32_t addr) {
        uint32_t two;
        // volatile: after the stage's barrier wait (also volatile asm), never hoisted above it.
        asm volatile("ld.shared.u16 %0, [%1];\n" : "=r"(two) : "r"(addr));
        return ::sparsek::detail::fp8x2_to_16<kSparseE5m2, kBf16>(two);
      };
      regs[4 * kb + 0] = pair(q);
      regs[4 * kb + 1] = pair(q + 8 * 128);
      regs[4 * kb + 2] = pair(q + 8);
      regs[4 * kb + 3] = pair(q + 8 * 128 + 8);
    }
  }

  // W8A16 consumer: per k-tile, WGMMA (A from registers) into `tile` from zero, then accum +=
  // scale * tile in fp32 (mma_promoted's order). While k-tile i's WGMMAs run, each thread
  // converts k-tile i + 1 into its other fragment; the warps need no barrier between them, as
  // a thread's fragment is its own.
  template <class FrgTensorC>
  CUTLASS_DEVICE void mma_converted(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                                    int k_tile_count, int thread_idx, TensorStorage& shared_tensors,
                                    Params const& params) {
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});  // (N,K,PIPE)
    // A's shape only: the fragments are registers.
    Tensor sA = make_tensor(make_smem_ptr(static_cast<Element const*>(nullptr)), SmemLayoutA{});
    constexpr int MmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    auto warp_group_thread_layout = make_layout(Int<MmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    const int wg = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
    const int wg_thread = thread_idx % int(cutlass::NumThreadsPerWarpGroup);
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(wg));
    Tensor tCsB = thread_mma.partition_B(sB);
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);  // descriptors
    Tensor frag0 = thread_mma.partition_fragment_A(sA(_, _, 0));  // (MMA,MMA_M,MMA_K) registers
    Tensor frag1 = make_fragment_like(frag0);
    // This thread's row r of the tile (64 * wg + 16 * warp + lane / 4) at its first two k in
    // stage 0 (convert_fragment); the stages are whole K-major tiles, 1024-byte multiples apart.
    const int row = 64 * wg + 16 * (wg_thread / 32) + (wg_thread % 32) / 4;
    const uint32_t sparse = cute::cast_smem_ptr_to_uint(shared_tensors.smem_sparse.data());
    const uint32_t stage_bytes = uint32_t(size<0>(TileShape{}) * size<2>(TileShape{}) * int(sizeof(SparseElement)));
    const uint32_t row0 = sparse + uint32_t(row * 128 + 2 * (wg_thread % 4));
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accum); ++i) accum(i) = 0.0f;
    const float* scales = shared_tensors.smem_scales.data();
    Tensor tile = make_fragment_like(accum);
    {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      convert_fragment(frag0, row0 + smem_pipe_read.index() * stage_bytes);
    }
    // One k-tile from `cur`, the next one's conversion into `nxt`.
    auto k_tile = [&](auto& cur, auto& nxt) {
      const int read_stage = smem_pipe_read.index();
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(tile);
      warpgroup_fence_operand(cur);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(cur); ++k_block) {
        cute::gemm(tiled_mma, cur(_, _, k_block), tCrB(_, _, k_block, read_stage), tile);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      PipelineState next = smem_pipe_read;
      ++next;
      if (k_tile_count > 1) {
        auto barrier_token = pipeline.consumer_try_wait(next);
        pipeline.consumer_wait(next, barrier_token);
        convert_fragment(nxt, row0 + next.index() * stage_bytes);
      }
      warpgroup_wait<0>();
      warpgroup_fence_operand(tile);
      warpgroup_fence_operand(cur);
      const float scale = params.scales != nullptr ? scales[scale_slot(smem_pipe_read, false)] : 1.0f;
      pipeline.consumer_release(smem_pipe_read);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) accum(i) = fmaf(scale, tile(i), accum(i));
      smem_pipe_read = next;
      --k_tile_count;
    };
    CUTLASS_PRAGMA_NO_UNROLL
    while (k_tile_count > 0) {
      k_tile(frag0, frag1);
      if (k_tile_count == 0) break;
      k_tile(frag1, frag0);
    }
  }

  // mma_promoted for a tile of several atom columns: each k-tile's WGMMAs one column at a
  // time into a one-column accumulator, waited for and promoted into that column of accum
  // (so the k-tile accumulator takes a column's registers); the stage is released after the
  // last column. Each accumulator still sums its k-tiles in k order.
  template <class FrgTensorC, class FragA, class FragB>
  CUTLASS_DEVICE void mma_promoted_by_column(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC& accum,
                                             int k_tile_count, TiledMma& tiled_mma, FragA const& tCrA,
                                             FragB const& tCrB, const float* scales, Params const& params) {
    constexpr int kCols = decltype(size<2>(accum))::value;
    constexpr int kRows = decltype(size<1>(accum))::value;
    Tensor tile = make_fragment_like(accum(_, _, 0));  // (MMA, MMA_M)
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count > 0; --k_tile_count) {
      auto barrier_token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, barrier_token);
      const int read_stage = smem_pipe_read.index();
      const float scale = params.scales != nullptr ? scales[scale_slot(smem_pipe_read, false)] : 1.0f;
      CUTLASS_PRAGMA_UNROLL
      for (int col = 0; col < kCols; ++col) {
        tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
        warpgroup_fence_operand(tile);
        warpgroup_arrive();
        CUTLASS_PRAGMA_UNROLL
        for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
          CUTLASS_PRAGMA_UNROLL
          for (int m = 0; m < kRows; ++m) {
            auto tile_m = tile(_, m);
            cute::gemm(tiled_mma, tCrA(_, m, k_block, read_stage), tCrB(_, col, k_block, read_stage), tile_m);
          }
          tiled_mma.accumulate_ = GMMA::ScaleOut::One;
        }
        warpgroup_commit_batch();
        warpgroup_wait<0>();
        warpgroup_fence_operand(tile);
        if (col == kCols - 1) pipeline.consumer_release(smem_pipe_read);
        Tensor acc_col = accum(_, _, col);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(tile); ++i) acc_col(i) = fmaf(scale, tile(i), acc_col(i));
      }
      ++smem_pipe_read;
    }
  }

  // Consumer tail: wait for the last WGMMAs and release the stages they read.
  CUTLASS_DEVICE void mma_tail(MainloopPipeline pipeline, PipelineState smem_pipe_release, int k_tile_count) {
    if constexpr (kPromote) {  // mma_promoted released every stage it read
      warpgroup_wait<0>();
      return;
    }
    int prologue = k_tile_count < K_PIPE_MMAS ? k_tile_count : K_PIPE_MMAS;
    // Unconditional, so ptxas sees every path to the epilogue wait for the WGMMAs.
    warpgroup_wait<0>();
    smem_pipe_release.advance(k_tile_count - prologue);
    for (int i = 0; i < prologue; ++i) {
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
    }
  }
};

}  // namespace sparsek::detail::spmm_sm90
