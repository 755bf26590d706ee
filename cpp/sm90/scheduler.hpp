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
// CONTRACT with the kernel layer: initial_work_tile_info() is called exactly once by every
// thread of the CTA (blockDim.x threads) before any other work query; it contains a named
// barrier (kOrderBarrierId) over blockDim.x threads. CUTLASS's cooperative kernel (the one
// kernel.hpp builds) satisfies this.
#pragma once

#include <cstdint>

#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/gemm/kernel/tile_scheduler_params.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/pipeline/pipeline.hpp"

#include "tile_iterator.hpp"

namespace sparsek::sm90 {

// OrderCap: capacity (block-rows) of the shared-memory order array; 0 = never sort.
template <bool SparseIsB, int OrderCap = 0>
struct BsrSchedulerTag {};

// Named barrier id for build_order(); CUTLASS reserves 0..7 (ReservedNamedBarriers).
constexpr uint32_t kOrderBarrierId = 15;

template <bool SparseIsB, class TileShape, int OrderCap = 0>
class BsrTileScheduler {
 public:
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

    CUTLASS_HOST_DEVICE bool is_valid() const { return is_valid_tile; }
    CUTLASS_HOST_DEVICE static WorkTileInfo invalid_work_tile() { return {-1, -1, -1, false, 0}; }
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
    int32_t band = 1;
    int64_t total_tiles = 0;
    int32_t grid = 1;
    // Read by GemmUniversal::get_grid_shape(); unused here.
    int32_t log_swizzle_size_ = 0;
    RasterOrder raster_order_ = RasterOrder::AlongM;
  };

  // ---- host side -------------------------------------------------------------------

  template <class ProblemShapeMNKL, class TileShape_, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape_, ClusterShape,
                                        cutlass::KernelHardwareInfo const& hw_info,
                                        Arguments const& args, void* = nullptr, uint32_t = 1,
                                        uint32_t = 1) {
    static_assert(cute::size(ClusterShape{}) == 1, "BsrTileScheduler: cluster 1x1x1 only");
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
    p.total_tiles = int64_t(p.block_rows) * p.dense_tiles;
    int sms = hw_info.sm_count > 0 ? hw_info.sm_count : 1;
    int32_t band = args.band;
    if (band <= 0) {
      // Enough dense tiles per band that one band holds about a wave of tiles.
      band = p.block_rows > 0 ? (sms + p.block_rows - 1) / p.block_rows : 1;
    }
    band = band < 1 ? 1 : band;
    band = (p.dense_tiles > 0 && band > p.dense_tiles) ? p.dense_tiles : band;
    p.band = band;
    int64_t grid = p.total_tiles < sms ? p.total_tiles : sms;
    p.grid = int32_t(grid < 1 ? 1 : grid);
    return p;
  }

  template <class ProblemShape, class TileShape_, class ClusterShape>
  static dim3 get_grid_shape(Params const& params, ProblemShape, TileShape_, ClusterShape,
                             cutlass::KernelHardwareInfo, Arguments = Arguments{}, bool = true) {
    return dim3(uint32_t(params.grid), 1, 1);
  }

  CUTLASS_HOST_DEVICE static bool can_implement(Arguments const& args) {
    return args.row_ptr != nullptr && args.kpb >= 1;
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
    current_ = int64_t(blockIdx.x);
    stride_ = int64_t(gridDim.x);
#endif
  }

  // Called once by every thread of the CTA (see CONTRACT above).
  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    build_order();
    return get_current_work();
  }

  CUTLASS_DEVICE WorkTileInfo get_current_work() const { return work_for_linear_idx(current_); }

  CUTLASS_DEVICE WorkTileInfo work_for_linear_idx(int64_t idx) const {
    if (idx >= params_.total_tiles) {
      return WorkTileInfo::invalid_work_tile();
    }
    int64_t band_tiles = int64_t(params_.band) * params_.block_rows;
    int32_t band_idx = int32_t(idx / band_tiles);
    int32_t rem = int32_t(idx - int64_t(band_idx) * band_tiles);
    int32_t first_dense = band_idx * params_.band;
    int32_t width = params_.dense_tiles - first_dense;
    width = width < params_.band ? width : params_.band;
    int32_t pos = rem / width;
    int32_t dense = first_dense + (rem - pos * width);
    int32_t br = order_ != nullptr ? int32_t(order_[pos]) : pos;
    WorkTileInfo w;
    w.M_idx = SparseIsB ? dense : br;
    w.N_idx = SparseIsB ? br : dense;
    w.L_idx = 0;
    w.is_valid_tile = true;
    w.k_tile_count = SparseTileIterator::k_tile_count(params_.row_ptr, br, params_.kpb);
    return w;
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

  CUTLASS_HOST_DEVICE static bool compute_epilogue(WorkTileInfo const&, Params const&) { return true; }
  CUTLASS_HOST_DEVICE static bool compute_epilogue(WorkTileInfo const&) { return true; }

  template <class FrgTensorC>
  CUTLASS_DEVICE static void fixup(Params const&, WorkTileInfo const&, FrgTensorC&, uint32_t, uint32_t) {}

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
    const int32_t nnz0 = __ldg(rp + 1) - __ldg(rp);
    uint32_t equal = 1;
    for (int32_t i = tid; i < R; i += nt) {
      equal &= uint32_t((__ldg(rp + i + 1) - __ldg(rp + i)) == nnz0);
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
      const int32_t mine = __ldg(rp + i + 1) - __ldg(rp + i);
      int32_t rank = 0;
      int32_t prev = __ldg(rp);
      for (int32_t j = 0; j < R; ++j) {
        const int32_t next = __ldg(rp + j + 1);
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
};

}  // namespace sparsek::sm90

// Extension point: GemmUniversal picks its scheduler through this selector.
namespace cutlass::gemm::kernel::detail {
template <bool SparseIsB, int OrderCap, class ArchTag, class TileShape, class ClusterShape,
          uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<sparsek::sm90::BsrSchedulerTag<SparseIsB, OrderCap>, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = sparsek::sm90::BsrTileScheduler<SparseIsB, TileShape, OrderCap>;
};
}  // namespace cutlass::gemm::kernel::detail
