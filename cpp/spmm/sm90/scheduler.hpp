// sparsek SM90: persistent tile scheduler over (block-row, dense-tile) work tiles.
//
// Plugged into CUTLASS's kernel layer (GemmUniversal, cooperative TMA warp-specialized)
// by specializing cutlass::gemm::kernel::detail::TileSchedulerSelector for our own tag
// (the same extension point the StreamK/Group schedulers use). Its WorkTileInfo carries
// the tile's k-iteration count (nnz blocks of the block-row * ceil(bk/TileK), see
// SparseTileIterator::k_tile_count in tile_iterator.hpp), which the kernel reads through
// get_work_k_tile_count() for the producer, the consumers and the pipeline state
// advancement - so the kernel and epilogue stay CUTLASS's own.
//
// Orientation: with SparseIsB == false the GEMM is the natural one (M = m, N = n, the
// sparse operand is A, M tile == bm, block-row = M_idx). With SparseIsB == true the GEMM
// computes C^T = B^T * A^T (M = n, N = m, the sparse operand is B, N tile == bm,
// block-row = N_idx); used for bm = 64, since the cooperative kernel needs M tiles >= 128.
//
// Order: static persistent (CTA c takes linear tiles c, c + grid, ...). Linear tiles are
// grouped into bands of `band` dense tiles; inside a band, tiles go block-row by block-row
// in order of decreasing nnz (ties by index), the band's dense tiles consecutive. So the
// longest block-rows start first in every band, and the CTAs running at one time share a
// band's slab of the dense operand (L2 reuse) while reading all of A.
//
// The block-row order is computed by every CTA for itself, in shared memory, inside
// initial_work_tile_info() (see build_order): no workspace, no extra kernel, nothing shared
// between launches, so concurrent launches on different streams cannot interfere. When
// all block-rows have the same nnz (the common top-k pattern) the order is the identity and
// costs one coalesced pass over row_ptr plus one CTA barrier. Sorting is done only when
// the host enabled it (Params::order_smem_offset >= 0: block_rows <= OrderCap).
// Split tiles (stream-K-like, for problems with fewer tiles than SMs): with Params::split =
// S > 1 every (block-row, dense tile) is S pieces, piece s taking k-iterations
// [ceil(s*kc/S), ceil((s+1)*kc/S)) of the row's kc. Pieces 1..S-1 write their fp32
// accumulators to the launch's workspace and raise a flag (fixup); piece 0 waits for them,
// adds them in piece order (a fixed order: bitwise deterministic) and runs the epilogue
// (compute_epilogue). A piece's first k-iteration reaches the producer as the work tile's
// L_idx (-1: an empty piece, which runs one zero iteration), since CUTLASS's kernel hands the
// mainloop the tile's (M, N, L) coordinates only; piece 0 starts at 0, so the epilogue sees
// L = 0. Deadlock-free: linear order puts piece 0 after its tile's other pieces, every CTA
// walks its tiles in increasing linear order, a piece waits only for lower linear indices,
// and the launch is cooperative (every CTA resident; kernel.hpp).
// Clusters (ClusterShape of 2 CTAs along the dense side, mainloop.hpp): a work unit is a
// block-row and a group of kClusterDense consecutive dense tiles; the cluster's CTAs take the
// same units, each its own dense tile of the group (so they run the same k-iterations and
// share the sparse operand's loads). The grid is clusters * kClusterDense CTAs (blockIdx.y
// is the CTA's place in a (1, 2, 1) cluster, blockIdx.x % 2 in a (2, 1, 1) one).
// CONTRACT with the kernel layer: initial_work_tile_info() is called exactly once by every
// thread of the CTA (blockDim.x threads) before any other work query; it contains a named
// barrier (kOrderBarrierId) over blockDim.x threads. CUTLASS's cooperative kernel (kernel.hpp)
// and our ping-pong kernel (pingpong.hpp) satisfy this.
#pragma once

#include <cstdint>

#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/gemm/kernel/tile_scheduler_params.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/pipeline/pipeline.hpp"

#include "tile_iterator.hpp"

namespace sparsek::detail::spmm_sm90 {

// OrderCap: capacity (block-rows) of the shared-memory order array; 0 = never sort.
// Splits: compiled with split-tile support (false: Params::split is ignored, fixup() and
// compute_epilogue() are compile-time no-ops; a measuring row, configs.hpp).
// Gated: a work tile's block-row is a (gate, up) pair of A's block-rows 2i and 2i+1 (the gated
// kernel, gated.hpp): the sparse extent counts pairs, a tile's k count is both rows' (each at
// least one iteration) and the longest-first order ranks pairs by their blocks.
template <bool SparseIsB, int OrderCap = 0, bool Splits = true, bool Gated = false>
struct BsrSchedulerTag {};

// Named barrier id for build_order(); CUTLASS reserves 0..7 (ReservedNamedBarriers); the
// direct epilogue uses 14. fixup() uses kSplitBarrierId + its consumer warpgroup (12, 13).
constexpr uint32_t kOrderBarrierId = 15;
constexpr uint32_t kSplitBarrierId = 12;

template <bool SparseIsB, class TileShape, int OrderCap = 0, class ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>,
          bool Splits = true, bool Gated = false>
class BsrTileScheduler {
 public:
  static_assert(!Gated || !Splits, "gated tiles are never split");
  // A's block-rows per work tile's block-row: 2 for a gated (gate, up) pair.
  static constexpr int32_t kRowsPerTile = Gated ? 2 : 1;
  static constexpr int kClusterDense = cute::size<SparseIsB ? 0 : 1>(ClusterShape{});
  static_assert(cute::size(ClusterShape{}) == kClusterDense, "clusters along the dense side only");
  using RasterOrder = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params::RasterOrder;
  using RasterOrderOptions =
      cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90Params::RasterOrderOptions;

  static constexpr bool IsDynamicPersistent = false;
  using Pipeline = cutlass::PipelineEmpty;
  using PipelineStorage = typename Pipeline::SharedStorage;
  using ThrottlePipeline = cutlass::PipelineEmpty;
  using ThrottlePipelineStorage = typename ThrottlePipeline::SharedStorage;
  struct CLCResponse {};
  static_assert(OrderCap >= 0 && OrderCap <= 32767, "order entries are int16");
  class SharedStorage {
   public:
    int16_t order[OrderCap > 0 ? OrderCap : 1];
    CUTLASS_DEVICE PipelineStorage pipeline() { return PipelineStorage{}; }
    CUTLASS_DEVICE ThrottlePipelineStorage throttle_pipeline() { return ThrottlePipelineStorage{}; }
    CUTLASS_DEVICE CLCResponse* data() { return nullptr; }
  };

  static constexpr int TileSparse = cute::size<SparseIsB ? 1 : 0>(TileShape{});
  static constexpr int TileDense = cute::size<SparseIsB ? 0 : 1>(TileShape{});

  struct WorkTileInfo {
    int32_t M_idx = 0;
    int32_t N_idx = 0;
    int32_t L_idx = 0;
    bool is_valid_tile = false;
    int32_t k_tile_count = 0;
    int32_t piece = 0;  // split piece (0: the one that reduces and runs the epilogue)

    CUTLASS_HOST_DEVICE bool is_valid() const { return is_valid_tile; }
    CUTLASS_HOST_DEVICE static WorkTileInfo invalid_work_tile() { return {-1, -1, -1, false, 0, 0}; }
    CUTLASS_HOST_DEVICE bool is_final_split(uint32_t) const { return true; }
    CUTLASS_HOST_DEVICE int32_t reduction_subtile_idx() const { return -1; }
  };

  struct Arguments {
    const int32_t* row_ptr = nullptr;
    int32_t kpb = 1;                 // k-iterations per block = ceil(bk / TileK)
    int32_t band = 0;                // dense tiles per band; 0 = automatic
    bool sort = true;                // order block-rows by decreasing nnz (when R <= OrderCap)
    int32_t order_smem_offset = -1;  // byte offset of SharedStorage::order in the kernel's
                                     // dynamic shared memory (set by the launcher); -1 = none
    int32_t max_clusters = 0;        // clusters resident at once (launcher); 0: SMs / cluster size
    int32_t split = 1;               // pieces per tile (see above); > 1 needs the two buffers:
    float* partials = nullptr;       // (tiles, split - 1, TileM * TileN) fp32
    uint32_t* flags = nullptr;       // (tiles, split - 1, consumer warpgroups), zeroed
    // Present because the kernel layer's get_grid_shape() sets them; unused.
    int max_swizzle_size = 1;
    RasterOrderOptions raster_order = RasterOrderOptions::Heuristic;
  };

  struct Params {
    const int32_t* row_ptr = nullptr;
    int32_t order_smem_offset = -1;  // >= 0: build the order in shared memory at this offset
    int32_t kpb = 1;
    int32_t block_rows = 0;
    int32_t dense_tiles = 0;
    int32_t dense_groups = 0;  // groups of kClusterDense dense tiles (== dense_tiles without clusters)
    int32_t band = 1;          // dense groups per band
    int64_t total_tiles = 0;  // work units: tiles * split
    int32_t grid = 1;
    int32_t split = 1;
    float* partials = nullptr;
    uint32_t* flags = nullptr;
    // Read by GemmUniversal::get_grid_shape(); unused here.
    int32_t log_swizzle_size_ = 0;
    RasterOrder raster_order_ = RasterOrder::AlongM;
  };

  // ---- host side -------------------------------------------------------------------

  template <class ProblemShapeMNKL, class TileShape_, class ClusterShape_>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape_, ClusterShape_,
                                        cutlass::KernelHardwareInfo const& hw_info,
                                        Arguments const& args, void* = nullptr, uint32_t = 1,
                                        uint32_t = 1) {
    static_assert(cute::size(ClusterShape_{}) == kClusterDense, "the kernel's cluster shape");
    int64_t sparse_extent = cute::get<SparseIsB ? 1 : 0>(problem_shape_mnkl);
    int64_t dense_extent = cute::get<SparseIsB ? 0 : 1>(problem_shape_mnkl);
    Params p;
    p.row_ptr = args.row_ptr;
    p.kpb = args.kpb;
    p.block_rows = int32_t(sparse_extent / TileSparse);
    p.order_smem_offset = (args.sort && args.order_smem_offset >= 0 && p.block_rows > 1 &&
                           p.block_rows <= OrderCap)
                              ? args.order_smem_offset
                              : -1;
    p.dense_tiles = int32_t((dense_extent + TileDense - 1) / TileDense);
    p.dense_groups = (p.dense_tiles + kClusterDense - 1) / kClusterDense;
    p.split = args.split > 1 ? args.split : 1;
    p.partials = args.partials;
    p.flags = args.flags;
    p.total_tiles = int64_t(p.block_rows) * p.dense_groups * p.split;
    // Resident clusters: the launcher's count (clusters may not fill every SM), else SMs.
    int slots = args.max_clusters > 0 ? args.max_clusters : (hw_info.sm_count > 0 ? hw_info.sm_count : 1) / kClusterDense;
    slots = slots < 1 ? 1 : slots;
    int32_t band = args.band;
    if (band <= 0) {
      // Enough dense groups per band that one band holds about a wave of units.
      band = p.block_rows > 0 ? (slots + p.block_rows - 1) / p.block_rows : 1;
    }
    band = band < 1 ? 1 : band;
    band = (p.dense_groups > 0 && band > p.dense_groups) ? p.dense_groups : band;
    p.band = band;
    int64_t grid = p.total_tiles < slots ? p.total_tiles : slots;
    p.grid = int32_t(grid < 1 ? 1 : grid);  // clusters
    return p;
  }

  template <class ProblemShape, class TileShape_, class ClusterShape_>
  static dim3 get_grid_shape(Params const& params, ProblemShape, TileShape_, ClusterShape_,
                             cutlass::KernelHardwareInfo, Arguments = Arguments{}, bool = true) {
    return SparseIsB ? dim3(uint32_t(params.grid) * kClusterDense, 1, 1) : dim3(uint32_t(params.grid), kClusterDense, 1);
  }

  CUTLASS_HOST_DEVICE static bool can_implement(Arguments const& args) {
    return args.row_ptr != nullptr && args.kpb >= 1 &&
           (args.split <= 1 || (args.partials != nullptr && args.flags != nullptr));
  }
  // CUTLASS 4.5 on passes the hardware info too (the kernels' can_implement); before, the
  // scheduler's arguments alone. Both, here: the one place that spans the supported range.
  CUTLASS_HOST_DEVICE static bool can_implement(Arguments const& args,
                                                cutlass::KernelHardwareInfo const&) {
    return can_implement(args);
  }

  // Work units of a launch: (block-rows) * (dense tiles) * split.
  template <class ProblemShapeMNKL>
  static int64_t tiles(ProblemShapeMNKL problem_shape_mnkl) {
    const int64_t sparse_extent = cute::get<SparseIsB ? 1 : 0>(problem_shape_mnkl);
    const int64_t dense_extent = cute::get<SparseIsB ? 0 : 1>(problem_shape_mnkl);
    return sparse_extent / TileSparse * ((dense_extent + TileDense - 1) / TileDense);
  }

  template <class ProblemShape, class ElementAccumulator>
  static size_t get_workspace_size(Arguments const&, ProblemShape, cutlass::KernelHardwareInfo const&,
                                   uint32_t, uint32_t = 1, uint32_t = 1) {
    return 0;
  }

  template <class ProblemShape, class ElementAccumulator>
  static cutlass::Status initialize_workspace(Arguments const&, void*, cudaStream_t, ProblemShape,
                                              cutlass::KernelHardwareInfo const&, uint32_t,
                                              uint32_t = 1, uint32_t = 1,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  // ---- device side -----------------------------------------------------------------

  CUTLASS_HOST_DEVICE BsrTileScheduler() {}

  CUTLASS_DEVICE explicit BsrTileScheduler(Params const& params) : params_(params) {
#if defined(__CUDA_ARCH__)
    if constexpr (SparseIsB) {
      current_ = int64_t(blockIdx.x / kClusterDense);
      stride_ = int64_t(gridDim.x / kClusterDense);
      place_ = int32_t(blockIdx.x % kClusterDense);
    } else {
      current_ = int64_t(blockIdx.x);
      stride_ = int64_t(gridDim.x);
      place_ = int32_t(blockIdx.y);
    }
#endif
  }

  // Called once by every thread of the CTA (see CONTRACT above).
  template <class ClusterShape_>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape_) {
    build_order();
    return get_current_work();
  }

  CUTLASS_DEVICE WorkTileInfo get_current_work() const { return work_for_linear_idx(current_); }

  CUTLASS_DEVICE WorkTileInfo work_for_linear_idx(int64_t idx) const {
    if (idx >= params_.total_tiles) {
      return WorkTileInfo::invalid_work_tile();
    }
    // Inside a band: block-rows in order, each its pieces S-1 .. 0, each piece the band's
    // dense tiles.
    const int32_t split = Splits ? params_.split : 1;
    int64_t band_units = int64_t(params_.band) * params_.block_rows * split;
    int32_t band_idx = int32_t(idx / band_units);
    // band_units fits int32: band * block_rows did before splits, and kernel.hpp splits only
    // launches of few tiles (its scratch cap bounds tiles * split).
    int32_t rem = int32_t(idx - int64_t(band_idx) * band_units);
    int32_t first_group = band_idx * params_.band;
    int32_t width = params_.dense_groups - first_group;
    width = width < params_.band ? width : params_.band;
    int32_t per_row = width * split;
    int32_t pos = rem / per_row;
    int32_t r2 = rem - pos * per_row;
    int32_t piece = split - 1 - r2 / width;
    int32_t dense = (first_group + r2 % width) * kClusterDense + place_;
    int32_t br = order_ != nullptr ? int32_t(order_[pos]) : pos;
    WorkTileInfo w;
    w.M_idx = SparseIsB ? dense : br;
    w.N_idx = SparseIsB ? br : dense;
    w.L_idx = 0;
    w.is_valid_tile = true;
    const int32_t kc = Gated ? SparseTileIterator<>::k_tile_count(params_.row_ptr, 2 * br, params_.kpb) +
                                   SparseTileIterator<>::k_tile_count(params_.row_ptr, 2 * br + 1, params_.kpb)
                             : SparseTileIterator<>::k_tile_count(params_.row_ptr, br, params_.kpb);
    w.k_tile_count = kc;
    w.piece = piece;
    if (split > 1) {
      const int64_t lo = (int64_t(piece) * kc + split - 1) / split;  // piece 0 starts at 0 and
      const int64_t hi = (int64_t(piece + 1) * kc + split - 1) / split;  // is never empty
      w.k_tile_count = hi > lo ? int32_t(hi - lo) : 1;
      w.L_idx = hi > lo ? int32_t(lo) : -1;
    }
    return w;
  }

  // The work tile advance_to_next_work(advance_count) would move to: in the ping-pong kernel
  // (pingpong.hpp), the other consumer warpgroup's next tile, whose k count it skips.
  CUTLASS_DEVICE WorkTileInfo peek_work(uint32_t advance_count) const {
    return work_for_linear_idx(current_ + stride_ * int64_t(advance_count));
  }

  CUTLASS_DEVICE void advance_to_next_work(uint32_t advance_count = 1) {
    current_ += stride_ * int64_t(advance_count);
  }

  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo const&, uint32_t advance_count = 1) const {
    return current_ + stride_ * int64_t(advance_count) >= params_.total_tiles;
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }

  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w, TileSchedulerPipeline&, TileSchedulerPipelineState) {
    return fetch_next_work(w);
  }

  template <class ProblemShape, class TileShape_>
  CUTLASS_HOST_DEVICE static int get_work_k_tile_count(WorkTileInfo const& w, ProblemShape, TileShape_) {
    return w.k_tile_count;
  }

  CUTLASS_HOST_DEVICE static uint32_t get_work_k_tile_start(WorkTileInfo const&) { return 0u; }

  CUTLASS_HOST_DEVICE static bool compute_epilogue(WorkTileInfo const& w, Params const&) { return !Splits || w.piece == 0; }
  CUTLASS_HOST_DEVICE static bool compute_epilogue(WorkTileInfo const& w) { return !Splits || w.piece == 0; }

  // Called by each consumer warpgroup after its mainloop (see "Split tiles" above). The
  // warpgroup's accumulators go to and come from the workspace as float4 vectors, thread t's
  // vector i at [i][t]: each warp moves 512 contiguous bytes.
  template <class FrgTensorC>
  CUTLASS_DEVICE static void fixup(Params const& params, WorkTileInfo const& w, FrgTensorC& acc,
                                   uint32_t num_wg, uint32_t wg) {
#if defined(__CUDA_ARCH__)
    if constexpr (!Splits) {
      return;
    }
    if (params.split <= 1) {
      return;
    }
    constexpr int kThreads = cutlass::NumThreadsPerWarpGroup;
    constexpr int kFrag = int(decltype(cute::size(acc))::value);
    static_assert(kFrag % 4 == 0, "accumulator fragments are float4 vectors");
    const int t = int(threadIdx.x) % kThreads;
    const int64_t pieces = params.split - 1;
    const int64_t slot = int64_t(SparseIsB ? w.N_idx : w.M_idx) * params.dense_tiles + (SparseIsB ? w.M_idx : w.N_idx);
    const int64_t tile_floats = int64_t(num_wg) * kThreads * kFrag;
    auto partial = [&](int32_t piece) {
      return params.partials + (slot * pieces + (piece - 1)) * tile_floats + int64_t(wg) * kThreads * kFrag + 4 * t;
    };
    auto flag = [&](int32_t piece) { return params.flags + (slot * pieces + (piece - 1)) * num_wg + wg; };
    const uint32_t barrier = kSplitBarrierId + wg;
    if (w.piece > 0) {
      float* out = partial(w.piece);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kFrag; i += 4) {
        __stcg(reinterpret_cast<float4*>(out + i * kThreads), make_float4(acc(i), acc(i + 1), acc(i + 2), acc(i + 3)));
      }
      __threadfence();
      asm volatile("bar.sync %0, %1;" : : "r"(barrier), "r"(kThreads) : "memory");
      if (t == 0) {
        asm volatile("st.release.gpu.global.u32 [%0], %1;" : : "l"(flag(w.piece)), "r"(1u) : "memory");
      }
      return;
    }
    if (t == 0) {
      for (int32_t q = 1; q < params.split; ++q) {
        uint32_t ready = 0;
        while (true) {
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(ready) : "l"(flag(q)) : "memory");
          if (ready != 0) break;
          __nanosleep(64);
        }
      }
    }
    asm volatile("bar.sync %0, %1;" : : "r"(barrier), "r"(kThreads) : "memory");
    // Pieces 1, 2, ... in order for every element: a fixed order, so bitwise deterministic.
    // kGroup vectors at a time, their loads in flight together (all of them at once spill,
    // and 4 spill on the natural 256-row tile, in ptxas's output).
    constexpr int kGroup = (cute::size<0>(TileShape{}) == 256 && !SparseIsB) ? 2 : 4;
    static_assert((kFrag / 4) % kGroup == 0, "whole groups of vectors");
    const float* in = partial(1);
    const int32_t others = params.split - 1;
    CUTLASS_PRAGMA_UNROLL
    for (int g = 0; g < kFrag; g += 4 * kGroup) {
      CUTLASS_PRAGMA_NO_UNROLL
      for (int32_t q = 0; q < others; ++q) {
        const float* v_in = in + q * tile_floats + g * kThreads;
        float4 v[kGroup];
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kGroup; ++j) {
          v[j] = __ldcg(reinterpret_cast<const float4*>(v_in + 4 * j * kThreads));
        }
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kGroup; ++j) {
          acc(g + 4 * j) += v[j].x;
          acc(g + 4 * j + 1) += v[j].y;
          acc(g + 4 * j + 2) += v[j].z;
          acc(g + 4 * j + 3) += v[j].w;
        }
      }
    }
#endif
  }

  CUTLASS_DEVICE static bool continue_current_work(WorkTileInfo&) { return false; }
  CUTLASS_DEVICE static bool valid_warpgroup_in_work_tile(WorkTileInfo const&) { return true; }
  CUTLASS_DEVICE static bool requires_separate_reduction(Params const&) { return false; }
  CUTLASS_DEVICE static bool need_separate_reduction(Params const&) { return false; }

 private:
  // All threads of the CTA. order_ stays nullptr (identity) unless sorting is enabled and
  // the block-rows do not all have the same nnz.
  CUTLASS_DEVICE void build_order() {
#if defined(__CUDA_ARCH__)
    order_ = nullptr;
    if (params_.order_smem_offset < 0) {
      return;  // uniform over the CTA: no barrier
    }
    extern __shared__ char sparsek_sched_smem[];
    int16_t* order = reinterpret_cast<int16_t*>(sparsek_sched_smem + params_.order_smem_offset);
    const int32_t R = params_.block_rows;
    const int32_t nt = int32_t(blockDim.x);
    const int32_t tid = int32_t(threadIdx.x);
    const int32_t* rp = params_.row_ptr;
    // Gated: block-row i of the tiles is A's pair 2i, 2i+1, whose blocks are rp[2i + 2] - rp[2i].
    const int32_t nnz0 = Gated ? __ldg(rp + 2) - __ldg(rp) : __ldg(rp + 1) - __ldg(rp);
    uint32_t equal = 1;
    for (int32_t i = tid; i < R; i += nt) {
      if constexpr (Gated) {
        equal &= uint32_t((__ldg(rp + 2 * i + 2) - __ldg(rp + 2 * i)) == nnz0);
      } else {
        equal &= uint32_t((__ldg(rp + i + 1) - __ldg(rp + i)) == nnz0);
      }
    }
    uint32_t all_equal;
    asm volatile(
        "{\n\t.reg .pred p, q;\n\t"
        "setp.ne.u32 p, %1, 0;\n\t"
        "barrier.red.and.pred q, %2, %3, p;\n\t"
        "selp.u32 %0, 1, 0, q;\n\t}"
        : "=r"(all_equal)
        : "r"(equal), "r"(kOrderBarrierId), "r"(nt)
        : "memory");
    if (all_equal) {
      return;
    }
    // rank(i) = #{j : nnz_j > nnz_i or (nnz_j == nnz_i and j < i)}; order[rank(i)] = i.
    for (int32_t i = tid; i < R; i += nt) {
      const int32_t mine = Gated ? __ldg(rp + 2 * i + 2) - __ldg(rp + 2 * i) : __ldg(rp + i + 1) - __ldg(rp + i);
      int32_t rank = 0;
      int32_t prev = __ldg(rp);
      for (int32_t j = 0; j < R; ++j) {
        const int32_t next = Gated ? __ldg(rp + 2 * j + 2) : __ldg(rp + j + 1);
        const int32_t o = next - prev;
        prev = next;
        rank += int32_t((o > mine) || (o == mine && j < i));
      }
      order[rank] = int16_t(i);
    }
    asm volatile("barrier.sync %0, %1;" : : "r"(kOrderBarrierId), "r"(nt) : "memory");
    order_ = order;
#endif
  }

  Params params_;
  const int16_t* order_ = nullptr;
  int64_t current_ = 0;
  int64_t stride_ = 1;
  int32_t place_ = 0;  // the CTA's dense tile in its cluster's group
};

}  // namespace sparsek::detail::spmm_sm90

// Extension point: GemmUniversal picks its scheduler through this selector.
namespace cutlass::gemm::kernel::detail {
template <bool SparseIsB, int OrderCap, bool Splits, bool Gated, class ArchTag, class TileShape, class ClusterShape,
          uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<sparsek::detail::spmm_sm90::BsrSchedulerTag<SparseIsB, OrderCap, Splits, Gated>, ArchTag, TileShape,
                             ClusterShape, SchedulerPipelineStageCount> {
  using Scheduler =
      sparsek::detail::spmm_sm90::BsrTileScheduler<SparseIsB, TileShape, OrderCap, ClusterShape, Splits, Gated>;
};
}  // namespace cutlass::gemm::kernel::detail
