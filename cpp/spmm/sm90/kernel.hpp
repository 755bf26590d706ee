// sparsek SM90: the Hopper (sm_90a) BSR x dense kernel of one row of kSm90Variants
// (configs.hpp), built from CUTLASS 4.2 / CuTe SM90 pieces, and its launch.
//
// Design:
//   kernel    : by the row's Schedule (configs.hpp). Cooperative: CUTLASS's own
//               cutlass::gemm::kernel::GemmUniversal with the cooperative TMA warp-specialized
//               schedule (1 producer warpgroup, 2 consumer warpgroups splitting each tile,
//               persistent), reused unchanged. PingPong: our kernel layer, pingpong.hpp
//               (consumer warpgroups alternate tiles, each skipping the other's by that
//               tile's own k count, which CUTLASS's ping-pong kernel cannot do).
//   mainloop  : mainloop.hpp - TMA + PipelineTmaAsync + WGMMA; the producer walks only the
//               nonzero blocks of the tile's block-row (tile_iterator.hpp).
//   scheduler : scheduler.hpp - persistent, (block-row, dense tile) work tiles whose
//               WorkTileInfo carries the per-tile k count; block-rows longest first.
//   gated     : rows with `gated` (configs.hpp) run gated.hpp's kernel layer: two passes of
//               the mainloop per tile (gate, then up), the GLU combine in registers, then the
//               Direct epilogue.
//   epilogue  : by the row's EpilogueKind (configs.hpp). Plain, Fused and Scaled: CUTLASS's TMA
//               warp-specialized collective epilogue (TMA loads of C when beta != 0, TMA
//               stores of D = C in place), with LinearCombination or the fused linear-layer
//               tree of epilogue.hpp (C = act(alpha*acc + bias[row of C] + beta*C), bias and
//               activation chosen at run time), or for FP8 its scaled tree (the operands'
//               scales and the bias; C not read). Direct: direct_epilogue.hpp, through shared
//               memory with ordinary stores; C's dtype and layout at run time and bm up to
//               the tile's sparse extent (the "any block" rows).
//
// Workspace: none, except for split tiles. The longest-first block-row order is built by each
// CTA in its own shared memory (BsrTileScheduler::build_order); no allocation, no extra
// kernel per launch, and nothing shared between concurrent launches. In rows compiled with
// split tiles (configs.hpp `split`), when the tiles are fewer than half the SMs, each is
// split into pieces along its k-iterations (choose_split;
// scheduler.hpp "Split tiles"): their partial sums go through a per-launch scratch buffer
// (core/split_workspace.hpp), and the launch is cooperative so every CTA is resident.
//
// Each row's kernel is compiled in a translation unit the build generates, of lines like:
//     #include "spmm/sm90/kernel.hpp"
//     SPARSEK_SM90_INSTANTIATE("sm90_f16_bm128_brow_crow")
// family.cu checks what the kernels need (kSm90Family::supports / fits) before launch_row.
// Built without sm_90a (SPARSEK_NO_SM90A), the macro only checks that the row exists.
#pragma once

#include "configs.hpp"

#ifdef SPARSEK_NO_SM90A

#define SPARSEK_SM90_INSTANTIATE(NAME) \
  static_assert(::sparsek::detail::spmm_sm90::sm90_row(NAME) >= 0, "SPARSEK_SM90_INSTANTIATE: no row " NAME " in kSm90Variants");

#else

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/numeric_types.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"

#include "core/family_util.hpp"
#include "core/split_workspace.hpp"
#include "split.hpp"
#include "core/tma_encode.hpp"  // a refused TMA encode leaves an all-zero descriptor
#include "core/tma_status.hpp"
#include "epilogue.hpp"
#include "direct_epilogue.hpp"
#include "scheduler.hpp"
#include "mainloop.hpp"
#include "pingpong.hpp"
#include "gated.hpp"

#include "cutlass/gemm/kernel/gemm_universal.hpp"

// The explicit instantiation of one row's launch (a line of a generated row unit).
#define SPARSEK_SM90_INSTANTIATE(NAME)                                                                         \
  static_assert(::sparsek::detail::spmm_sm90::sm90_row(NAME) >= 0, "SPARSEK_SM90_INSTANTIATE: no row " NAME " in kSm90Variants"); \
  namespace sparsek::detail::spmm_sm90 {                                                                                    \
  template cudaError_t launch_row<sm90_row(NAME)>(const detail::Problem&, cudaStream_t);                      \
  }

namespace sparsek::detail::spmm_sm90 {

using namespace cute;

constexpr int kSmemCapacity = 232448;   // sm90 max dynamic shared memory per block
constexpr int kKernelSmemSlack = 1024;  // kernel-level pipelines/barriers + alignment
// Block-row ordering in shared memory (BsrTileScheduler::build_order): int16 per block-row.
// Sorting costs O(R^2 / 384) per CTA when the block-rows are unequal, so it is capped;
// above kMaxOrderRows (or above what fits next to the stages) tiles go in block-row order.
constexpr int kMaxOrderRows = 512;
constexpr int kMinOrderBytes = 256;
// Split tiles' scratch (flags and partial sums) above this: no split (only a forced one gets
// near it; choose_split keeps tiles * split <= SMs).
constexpr int64_t kMaxScratchBytes = int64_t(1) << 30;

// The CUTLASS element type of a DType (its traits entry, core/dtype.hpp).
template <DType kT>
struct ElementOf {
  using type = typename detail::DeviceTypeOf<kT>::cutlass_type;
};

// One kernel: Element in (A, B; W8A16: B, with A's FP8 values SparseElement), ElementC out, the layouts of B and C, the GEMM tile
// TM x TN x 64 and the orientation (SparseIsB: C^T = B^T A^T, see configs.hpp).
// The plain epilogue: CUTLASS's LinearCombination, D = alpha * acc + beta * C.
template <class ElementC>
struct PlainEpilogue {
  using Fusion = cutlass::epilogue::fusion::LinearCombination<ElementC, float, ElementC, float>;
};

template <class Element, class ElementC, bool BColMajor, bool CColMajor, int TM, int TN, int TK, bool SparseIsB,
          EpilogueKind Epi, int Cluster = 1, Schedule Sched = Schedule::Cooperative, bool Splits = true,
          bool SparseMN = false, bool Gated = false, class SparseElement = Element>
struct BsrGemm {
  static constexpr bool kPingPong = Sched == Schedule::PingPong;
  static_assert(!kPingPong || (Epi != EpilogueKind::Direct && Cluster == 1), "ping-pong: TMA epilogue, no clusters");
  static_assert(!Gated || (Epi == EpilogueKind::Direct && Cluster == 1 && !kPingPong && !Splits && !SparseMN),
                "gated rows: Direct epilogue, cooperative, no clusters, no split tiles, op(A) = A");
  using TileShape = Shape<Int<TM>, Int<TN>, Int<TK>>;
  // Cluster CTAs along the dense side share the block-row's sparse tiles (mainloop.hpp).
  using ClusterShape = cute::conditional_t<SparseIsB, Shape<Int<Cluster>, _1, _1>, Shape<_1, Int<Cluster>, _1>>;
  static constexpr int TileSparse = SparseIsB ? TN : TM;

  // Dense operand per block column, (MN, bk, K/bk) (mainloop.hpp): RowMajor B is MN-major,
  // ColMajor B is K-major.
  using DenseStride = cute::conditional_t<BColMajor, Stride<int64_t, _1, int64_t>, Stride<_1, int64_t, int64_t>>;

  // GEMM-view layout of D (= C): transposed orientation flips it.
  static constexpr bool GemmDColMajor = SparseIsB ? !CColMajor : CColMajor;
  using LayoutD = cute::conditional_t<GemmDColMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int AlignC = 128 / cutlass::sizeof_bits<ElementC>::value;

  // Fused rows: the bias/activation epilogue (epilogue.hpp). A row of C is a GEMM row in the
  // natural orientation (bias per GEMM row: column broadcast) and a GEMM column when
  // transposed (row broadcast). Plain rows keep LinearCombination, which measured 2-8 %
  // faster at bm = 128 (configs.hpp). Direct rows: direct_epilogue.hpp.
  // Scaled rows (FP8): the scales and the bias, C not read (epilogue.hpp).
  static constexpr bool kScaled = Epi == EpilogueKind::Scaled;
  static_assert(!kScaled || cute::sizeof_bits_v<SparseElement> == 8, "Scaled rows: FP8 A");
  using Epilogue = cute::conditional_t<
      kScaled, ScaledBiasEpilogue<ElementC, TileShape, SparseIsB>,
      cute::conditional_t<Epi == EpilogueKind::Fused, BiasActEpilogue<ElementC, Element, TileShape, SparseIsB>,
                          PlainEpilogue<ElementC>>>;
  // C's element type for CUTLASS's epilogue: void where it is never read (no TMA loads of C,
  // no staging buffers for them).
  using SourceC = cute::conditional_t<kScaled, void, ElementC>;
  // Ping-pong: one warpgroup stores its own tile.
  using EpilogueSchedule = cute::conditional_t<kPingPong, cutlass::epilogue::TmaWarpSpecialized,
                                               cutlass::epilogue::TmaWarpSpecializedCooperative>;
  template <bool kDirect, class = void>
  struct EpilogueOf {
    using type = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, SourceC, LayoutD, AlignC, ElementC, LayoutD,
        AlignC, EpilogueSchedule, typename Epilogue::Fusion>::CollectiveOp;
  };
  template <class Void>
  struct EpilogueOf<true, Void> {
    using type = DirectEpilogue<SparseElement, TileShape, SparseIsB>;  // FP8 A: the FP8 scales
  };
  using CollectiveEpilogue = typename EpilogueOf<Epi == EpilogueKind::Direct>::type;

  static constexpr int EpilogueSmem = int(sizeof(typename CollectiveEpilogue::SharedStorage));
  static constexpr int TileDenseExtent = SparseIsB ? TM : TN;
  static constexpr int StageBytes = int(TileSparse * TK * sizeof(SparseElement) + TileDenseExtent * TK * sizeof(Element)) + 32;
  // Direct rows keep room for the whole block-row order (the assertion below).
  static constexpr int OrderBytes = Epi == EpilogueKind::Direct ? 2 * kMaxOrderRows : kMinOrderBytes;
  static constexpr int Stages =
      (kSmemCapacity - EpilogueSmem - kKernelSmemSlack - OrderBytes) / StageBytes;
  static_assert(Stages >= 2, "tile too large for shared memory");
  static constexpr int LeftoverBytes =
      kSmemCapacity - EpilogueSmem - kKernelSmemSlack - Stages * StageBytes;
  static constexpr int OrderCap = (LeftoverBytes / 2 < kMaxOrderRows ? LeftoverBytes / 2 : kMaxOrderRows) / 8 * 8;
  // The any-block rows serve the small blocks, where block-rows are many and skewed ones
  // gain most from the longest-first order: their epilogue must leave it room (16x16
  // skewed ran 2.3x slower without it on an H100).
  static_assert(Epi != EpilogueKind::Direct || OrderCap == kMaxOrderRows, "any-block row without the block-row order");

  using CollectiveMainloop =
      CollectiveSparseMma<Element, DenseStride, TileShape, Stages, SparseIsB, ClusterShape, kPingPong ? 1 : 2, SparseMN,
                          Epi == EpilogueKind::Direct, SparseElement>;
  using SchedulerTag = BsrSchedulerTag<SparseIsB, OrderCap, Splits, Gated>;
  using ProblemShape = Shape<int, int, int, int>;

  // The kernel layer: by the schedule, or gated.hpp's for the gated rows. (Named through a
  // selector so that a row instantiates only its own layer.)
  template <int kLayer, class = void>
  struct LayerOf {
    using type = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue, SchedulerTag>;
  };
  template <class Void>
  struct LayerOf<1, Void> {
    using type = BsrPingPongKernel<ProblemShape, CollectiveMainloop, CollectiveEpilogue, SchedulerTag>;
  };
  template <class Void>
  struct LayerOf<2, Void> {
    using type = BsrGatedKernel<ProblemShape, CollectiveMainloop, CollectiveEpilogue, SchedulerTag>;
  };
  using GemmKernel = typename LayerOf<Gated ? 2 : (kPingPong ? 1 : 0)>::type;
  static_assert(GemmKernel::SharedStorageSize <= kSmemCapacity, "shared storage exceeds sm90 capacity");

  // Byte offset of the scheduler's order array in the kernel's dynamic shared memory.
  static int order_smem_offset() {
    using SS = typename GemmKernel::SharedStorage;
    using TS = typename GemmKernel::TileScheduler::SharedStorage;
    return int(offsetof(SS, scheduler) + offsetof(TS, order));
  }

  // p passed kSm90Family's supports() and fits() for this row.
  static cudaError_t run(const detail::Problem& p, cudaStream_t stream) {
    const int64_t m = p.a.m, n = p.n(), k = p.a.k;
    // The GEMM's sparse extent: (block-rows) * TileSparse; == m unless a Direct row pads bm
    // (fits() checked that it fits int32). Gated: h's block-rows, the (gate, up) pairs.
    const int64_t sparse = (Gated ? p.block_rows() / 2 : p.block_rows()) * TileSparse;
    const int M = int(SparseIsB ? n : sparse);
    const int N = int(SparseIsB ? sparse : n);
    const int K = int(k);

    typename CollectiveMainloop::Arguments mainloop{};
    const bool empty = p.a.nnzb == 0;
    // An all-empty matrix still needs a valid TMA descriptor; it is never read.
    mainloop.values = static_cast<const SparseElement*>(empty ? p.b.data : p.a.values);
    mainloop.bm = p.a.bm;
    mainloop.bk = p.a.bk;
    mainloop.nnzb = empty ? 1 : int32_t(p.a.nnzb);
    mainloop.row_ptr = p.a.row_ptr;
    // With nnzb == 0 the C++ API allows null col_idx; no block-row has an entry to read,
    // but CUTLASS's can_implement wants a non-null pointer: row_ptr stands in.
    mainloop.col_idx = empty ? p.a.row_ptr : p.a.col_idx;
    // op(A) = A^T (SparseMN rows only, family.cu): the listed blocks' stored indices.
    mainloop.block_id = SparseMN ? (empty ? p.a.row_ptr : p.a_block_id) : nullptr;
    mainloop.dense = static_cast<const Element*>(p.b.data);
    // FP8: A's per-block scales go with the tiles (mainloop.hpp); the rest to the epilogue.
    mainloop.scales = !empty && p.a.scale_kind == ScaleKind::PerBlock ? p.a.scales : nullptr;
    const int64_t ldb = p.b.ld, bk = p.a.bk;  // L = block column: bk rows of B further
    if constexpr (BColMajor) {
      mainloop.dDense = DenseStride{ldb, Int<1>{}, bk};
    } else {
      mainloop.dDense = DenseStride{Int<1>{}, ldb, ldb * bk};
    }

    typename CollectiveEpilogue::Arguments epilogue{};
    const int64_t ldc = p.c.ld;
    // FP8: the scales beyond A's per-block ones (which the mainloop applies), for the Direct and
    // Scaled epilogues: A's per-tensor scale, B's per tensor or per column; null where absent.
    [[maybe_unused]] const float* scale_a = p.a.scale_kind == ScaleKind::PerTensor ? p.a.scales : nullptr;
    [[maybe_unused]] const float* scale_b = p.b.scale_kind == ScaleKind::PerTensor ? p.b.scales : nullptr;
    [[maybe_unused]] const float* column_scale = p.b.scale_kind == ScaleKind::PerColumn ? p.b.scales : nullptr;
    if constexpr (Epi == EpilogueKind::Direct) {
      const bool c_col = p.c.layout == Layout::ColMajor;
      epilogue.c = p.c.data;
      epilogue.row_stride = c_col ? 1 : ldc;
      epilogue.col_stride = c_col ? ldc : 1;
      epilogue.out = p.c.dtype;
      // Gated: alpha, the bias and the activation go to the combine (gated.hpp); the
      // epilogue writes h as it is.
      epilogue.alpha = Gated ? 1.0f : p.alpha;
      epilogue.beta = p.beta;
      epilogue.bias = Gated ? nullptr : p.bias;
      epilogue.activation = Gated ? 0 : static_cast<int32_t>(p.activation);
      epilogue.bm = p.a.bm;
      epilogue.n = n;
      // (Gated: A's per-tensor scale goes to the combine, before the nonlinearity.)
      epilogue.scale_a = Gated ? nullptr : scale_a;
      epilogue.scale_b = scale_b;
      epilogue.column_scale = column_scale;
    } else {
      using StrideD = typename CollectiveEpilogue::StrideD;
      using StrideC = typename CollectiveEpilogue::StrideC;
      const int64_t batch_c = ldc * (CColMajor ? n : m);
      StrideD dD;
      StrideC dC;
      if constexpr (GemmDColMajor) {
        dD = StrideD{Int<1>{}, ldc, batch_c};
        dC = StrideC{Int<1>{}, ldc, batch_c};
      } else {
        dD = StrideD{ldc, Int<1>{}, batch_c};
        dC = StrideC{ldc, Int<1>{}, batch_c};
      }
      [[maybe_unused]] auto* ptr_c = static_cast<ElementC*>(p.c.data);
      // bias: null or m values of the input type, 16-byte aligned (Problem), indexed by the
      // row of C: GEMM M in the natural orientation, GEMM N when transposed; no batch (L = 1).
      if constexpr (kScaled) {  // C is not read (beta = 0, family.cu)
        epilogue = {Epilogue::arguments(p.alpha, p.bias, scale_a, scale_b, column_scale), nullptr, dC, ptr_c, dD};
      } else if constexpr (Epi == EpilogueKind::Fused) {
        epilogue = {Epilogue::arguments(p.alpha, p.beta, p.bias, p.activation), ptr_c, dC, ptr_c, dD};
      } else {
        epilogue = {{p.alpha, p.beta}, ptr_c, dC, ptr_c, dD};
      }
    }

    // Scheduler band automatic and longest-first order on: the sweep found the
    // alternatives within noise (configs.hpp).
    using Scheduler = typename GemmKernel::TileScheduler;
    typename Scheduler::Arguments scheduler{};
    scheduler.row_ptr = p.a.row_ptr;
    scheduler.kpb = CollectiveMainloop::k_tiles_per_block(p.a.bk);
    // Gated rows: one band of every dense tile, so the tiles of a pair run back to back and
    // its weights cross HBM once (the gated product's dense side is an MLP's activations,
    // small beside its weights, which the automatic band would re-read per dense tile).
    scheduler.band = Gated ? INT32_MAX : 0;
    scheduler.sort = p.a.nnzb > 0;
    scheduler.order_smem_offset = OrderCap > 0 ? order_smem_offset() : -1;

    // Split tiles: flags (zeroed), then the partial sums, in one scratch buffer.
    const int64_t tiles = Scheduler::tiles(cute::make_shape(M, N, K, 1));
    // Cluster and ping-pong launches never split (family.cu leaves such problems to other rows).
    int split = Cluster == 1 && !kPingPong && Splits ? choose_split(p, tiles, scheduler.kpb, TK) : 1;
    constexpr int64_t kTileFloats = int64_t(TM) * TN;
    constexpr int64_t kConsumerWarpgroups = 2;
    const int64_t pieces = tiles * (split - 1);
    const int64_t flag_bytes = (pieces * kConsumerWarpgroups * 4 + 255) / 256 * 256;
    if (split > 1 && (pieces > kMaxScratchBytes / (kTileFloats * 4) ||
                      flag_bytes + pieces * kTileFloats * 4 > kMaxScratchBytes)) {
      split = 1;  // only a forced split gets here (choose_split keeps tiles * split <= SMs)
    }
    // The flags are zeroed by launch(), once the TMA descriptors are known to be good.
    void* scratch = nullptr;
    if (split > 1) {
      const cudaError_t e = detail::scratch_alloc(p.device.id, size_t(flag_bytes + pieces * kTileFloats * 4),
                                                  /*zero_bytes=*/0, stream, &scratch);
      if (e != cudaSuccess) return e;
      scheduler.split = split;
      scheduler.flags = static_cast<uint32_t*>(scratch);
      scheduler.partials = reinterpret_cast<float*>(static_cast<char*>(scratch) + flag_bytes);
    }

    cutlass::KernelHardwareInfo hw_info{};
    hw_info.device_id = p.device.id;
    hw_info.sm_count = p.device.sm_count;

    typename GemmKernel::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                        {M, N, K, 1},
                                        mainloop,
                                        epilogue,
                                        hw_info,
                                        scheduler};
    if constexpr (Gated) {
      // FP8 A (W8A16): the bias has C's dtype (the Problem's rule).
      args.gated = {p.alpha,
                    p.bias,
                    static_cast<int32_t>(p.activation),
                    p.a.bm,
                    p.a.scale_kind == ScaleKind::PerTensor ? p.a.scales : nullptr,
                    static_cast<int32_t>(detail::is_fp8(p.a.dtype) ? p.c.dtype : p.a.dtype)};
    }
    if constexpr (Cluster > 1) {
      const cudaError_t e = resident_clusters(p.device.id, &args.scheduler.max_clusters);
      if (e != cudaSuccess) {
        (void)detail::scratch_free(scratch, stream);
        return e;
      }
    }
    const cudaError_t err = launch(args, split > 1, scratch, size_t(split > 1 ? flag_bytes : 0), stream);
    const cudaError_t freed = detail::scratch_free(scratch, stream);
    return err != cudaSuccess ? err : freed;
  }

  // Whether every TMA descriptor in params was encoded (tma_status.hpp), else the error
  // naming the first operand whose descriptor was not.
  static cudaError_t tma_status(typename GemmKernel::Params const& params) {
    // GEMM A and B: the sparse operand is A's values, the dense one B (swapped when SparseIsB).
    if (!detail::tma_encoded(params.mainloop.tma_load_a))
      return detail::tma_encode_error(SparseIsB ? detail::TmaOperand::B : detail::TmaOperand::A);
    if (!detail::tma_encoded(params.mainloop.tma_load_b))
      return detail::tma_encode_error(SparseIsB ? detail::TmaOperand::A : detail::TmaOperand::B);
    if constexpr (Epi != EpilogueKind::Direct) {  // CUTLASS's TMA epilogue: loads C, stores D = C
      if ((!kScaled && !detail::tma_encoded(params.epilogue.tma_load_c)) ||
          !detail::tma_encoded(params.epilogue.tma_store_d))
        return detail::tma_encode_error(detail::TmaOperand::C);
    }
    return cudaSuccess;
  }

  // `zero`, `zero_bytes`: the split tiles' flags, zeroed on the stream before the launch.
  static cudaError_t launch(typename GemmKernel::Arguments const& args, bool cooperative, void* zero,
                            size_t zero_bytes, cudaStream_t stream) {
    if (!GemmKernel::can_implement(args)) {
      return cudaErrorInvalidValue;  // kSm90Family's supports() should have refused it
    }
    if (GemmKernel::get_workspace_size(args) != 0) {
      return cudaErrorInvalidValue;  // none of our pieces asks CUTLASS for one
    }
    typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, nullptr);
    cudaError_t err = tma_status(params);
    if (err != cudaSuccess) return err;  // nothing enqueued
    if (zero_bytes > 0) {
      err = cudaMemsetAsync(zero, 0, zero_bytes, stream);
      if (err != cudaSuccess) return err;
    }

    const int smem = GemmKernel::SharedStorageSize;
    auto kernel = &cutlass::device_kernel<GemmKernel>;
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) {
      return err;
    }
    cudaLaunchConfig_t config{};
    config.gridDim = GemmKernel::get_grid_shape(params);
    config.blockDim = GemmKernel::get_block_shape();
    config.dynamicSmemBytes = size_t(smem);
    config.stream = stream;
    cudaLaunchAttribute attrs[1] = {};
    if (cooperative) {
      attrs[0].id = cudaLaunchAttributeCooperative;  // split pieces wait for each other
      attrs[0].val.cooperative = 1;
      config.numAttrs = 1;
    } else if (Cluster > 1) {
      attrs[0].id = cudaLaunchAttributeClusterDimension;
      attrs[0].val.clusterDim.x = unsigned(size<0>(ClusterShape{}));
      attrs[0].val.clusterDim.y = unsigned(size<1>(ClusterShape{}));
      attrs[0].val.clusterDim.z = 1;
      config.numAttrs = 1;
    }
    config.attrs = attrs;
    err = cudaLaunchKernelEx(&config, kernel, params);
    const cudaError_t last = cudaGetLastError();
    return err != cudaSuccess ? err : last;
  }

  // How many clusters of this kernel the device holds at once (asked once per device): the
  // persistent grid's size, since clusters cannot always fill every SM.
  static cudaError_t resident_clusters(int device, int32_t* out) {
    static std::atomic<int32_t> known[detail::ImageCache::kMaxDevices] = {};
    const bool cached = device >= 0 && device < detail::ImageCache::kMaxDevices;
    if (cached && (*out = known[device].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
    auto kernel = &cutlass::device_kernel<GemmKernel>;
    const int smem = GemmKernel::SharedStorageSize;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(size(ClusterShape{})), 1, 1);
    config.blockDim = GemmKernel::get_block_shape();
    config.dynamicSmemBytes = size_t(smem);
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = unsigned(size(ClusterShape{}));
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
    if (err != cudaSuccess) return err;
    *out = clusters > 0 ? clusters : 1;
    if (cached) known[device].store(*out, std::memory_order_relaxed);
    return cudaSuccess;
  }
};

// The kernel of row kRow of kSm90Variants.
template <int kRow>
struct RowGemm {
  static_assert(0 <= kRow && kRow < kSm90Rows, "no such row in kSm90Variants");
  static constexpr Sm90Variant v = kSm90Variants[kRow];
  // B's and the MMA's type, and A's (they differ on the W8A16 rows).
  using Element = typename ElementOf<v.dense>::type;
  using SparseElement = typename ElementOf<v.input>::type;
  // Plain and Fused rows write the input type, Scaled rows (FP8) f16; a Direct row's C dtype
  // and layout are run-time.
  using ElementC = cute::conditional_t<v.output == Output::F16, cutlass::half_t, Element>;
  using type = BsrGemm<Element, ElementC, v.b_layout == Layout::ColMajor, v.c_layout == CLayout::Col, v.tile_m,
                       v.tile_n, v.tile_k, v.transposed, v.epilogue, v.cluster, v.schedule,
                       v.split != Split::Never, v.a_transposed, v.gated, SparseElement>;
};

template <int kRow>
cudaError_t launch_row(const detail::Problem& p, cudaStream_t stream) {
  return RowGemm<kRow>::type::run(p, stream);
}

}  // namespace sparsek::detail::spmm_sm90

#endif  // SPARSEK_NO_SM90A
