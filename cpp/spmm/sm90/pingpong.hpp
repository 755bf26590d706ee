// sparsek SM90: the ping-pong kernel layer, for rows with Schedule::PingPong (configs.hpp).
//
// Why our own: CUTLASS's ping-pong kernel moves each consumer warpgroup past the other's
// pipeline stages by one problem-wide k count, and BSR tiles each have their own (the
// block-row's nonzero blocks). Here a warpgroup skips the other's next tile by that tile's
// own count (BsrTileScheduler::peek_work). Built from CUTLASS's pieces: the mainloop
// collective (mainloop.hpp, one warpgroup per tile), CUTLASS's TMA collective epilogue with
// its non-cooperative schedule, PipelineTmaAsync, OrderedSequenceBarrier and our tile
// scheduler (scheduler.hpp).
//
// Roles (384 threads):
//   warpgroup 0, warp 0   mainloop producer: TMA loads of every tile the CTA runs, in order;
//   warpgroup 0, warp 1   C producer: TMA loads of C for the epilogue, when beta != 0;
//   warpgroups 1 and 2    consumers: warpgroup 1 takes the CTA's tiles 0, 2, 4, ..., warpgroup 2
//                         tiles 1, 3, 5, ...; each runs its tile's WGMMAs and its epilogue.
// The two consumers take turns through a two-stage ordered barrier: their MMAs alternate, and
// so do their epilogues, so one warpgroup's epilogue (C loads, conversion, TMA stores) runs
// while the other's MMAs keep the tensor cores busy - the overlap the cooperative kernel
// lacks (there both warpgroups store before either starts the next tile).
//
// Pipeline states: the producer fills stages in tile order, so a consumer's next stage after
// its own tile is past the other consumer's next tile: it advances by its tile's k count, then
// by the other's (zero when the other has none). The C load and D store pipelines advance by
// one tile's subtiles for each tile of the other warpgroup, as in CUTLASS's ping-pong.
//
// What it leaves out: clusters, split tiles (kernel.hpp never splits a ping-pong launch) and
// the any-block epilogue (direct_epilogue.hpp assumes two warpgroups per tile).
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/pipeline/pipeline.hpp"
#include "cute/tensor.hpp"

namespace sparsek::detail::spmm_sm90 {

// The same Arguments / Params / static interface as CUTLASS's GemmUniversal, so BsrGemm
// (kernel.hpp) launches either kernel layer through the same code.
template <class ProblemShape_, class CollectiveMainloop_, class CollectiveEpilogue_, class SchedulerTag_>
class BsrPingPongKernel {
 public:
  using ProblemShape = ProblemShape_;
  using CollectiveMainloop = CollectiveMainloop_;
  using CollectiveEpilogue = CollectiveEpilogue_;
  using TileShape = typename CollectiveMainloop::TileShape;
  using TiledMma = typename CollectiveMainloop::TiledMma;
  using ClusterShape = typename CollectiveMainloop::ClusterShape;
  using ElementAccumulator = typename CollectiveMainloop::ElementAccumulator;
  static_assert(cute::size(ClusterShape{}) == 1, "ping-pong rows run without clusters");
  using TileScheduler = typename cutlass::gemm::kernel::detail::TileSchedulerSelector<
      SchedulerTag_, cutlass::arch::Sm90, TileShape, ClusterShape, 1u>::Scheduler;

  using MainloopPipeline = typename CollectiveMainloop::MainloopPipeline;
  using MainloopState = typename CollectiveMainloop::PipelineState;
  using EpiLoadPipeline = typename CollectiveEpilogue::LoadPipeline;
  using EpiLoadState = typename CollectiveEpilogue::LoadPipelineState;
  using EpiStorePipeline = typename CollectiveEpilogue::StorePipeline;
  using EpiStoreState = typename CollectiveEpilogue::StorePipelineState;

  static constexpr uint32_t kMmaThreads = cute::size(TiledMma{});
  static_assert(kMmaThreads == cutlass::NumThreadsPerWarpGroup, "one consumer warpgroup per tile");
  static constexpr uint32_t MaxThreadsPerBlock = 3 * cutlass::NumThreadsPerWarpGroup;
  static constexpr uint32_t MinBlocksPerMultiprocessor = 1;
  // Producers need few registers; each consumer holds a whole tile's accumulators.
  static constexpr uint32_t kLoadRegisters = 40;
  static constexpr uint32_t kMmaRegisters = 232;
  static_assert(cute::size<0>(TileShape{}) * cute::size<1>(TileShape{}) / kMmaThreads <= 128,
                "a consumer's accumulators must leave registers for the epilogue");

  // Stage 0: the MMAs, stage 1: the epilogue; group = consumer warpgroup.
  using MathOrderBarrier = cutlass::OrderedSequenceBarrier<2, 2>;

  struct SharedStorage {
    struct PipelineStorage : cute::aligned_struct<16, cute::_1> {
      alignas(16) typename CollectiveMainloop::PipelineStorage mainloop;
      alignas(16) typename CollectiveEpilogue::PipelineStorage epi_load;
      alignas(16) typename MathOrderBarrier::SharedStorage math_order;
    } pipelines;
    alignas(16) typename TileScheduler::SharedStorage scheduler;
    struct TensorStorage : cute::aligned_struct<128, cute::_1> {
      typename CollectiveEpilogue::TensorStorage epilogue;
      typename CollectiveMainloop::TensorStorage mainloop;
    } tensors;
  };
  static constexpr int SharedStorageSize = int(sizeof(SharedStorage));

  struct Arguments {
    cutlass::gemm::GemmUniversalMode mode{};
    ProblemShape problem_shape{};
    typename CollectiveMainloop::Arguments mainloop{};
    typename CollectiveEpilogue::Arguments epilogue{};
    cutlass::KernelHardwareInfo hw_info{};
    typename TileScheduler::Arguments scheduler{};
  };

  struct Params {
    cutlass::gemm::GemmUniversalMode mode{};
    ProblemShape problem_shape{};
    typename CollectiveMainloop::Params mainloop{};
    typename CollectiveEpilogue::Params epilogue{};
    cutlass::KernelHardwareInfo hw_info{};
    typename TileScheduler::Params scheduler{};
  };

  // ---- host side ---------------------------------------------------------------------

  static bool can_implement(Arguments const& args) {
    return args.mode == cutlass::gemm::GemmUniversalMode::kGemm && args.scheduler.split <= 1 &&
           CollectiveMainloop::can_implement(args.problem_shape, args.mainloop) &&
           CollectiveEpilogue::can_implement(args.problem_shape, args.epilogue) &&
           TileScheduler::can_implement(args.scheduler);
  }

  static size_t get_workspace_size(Arguments const& args) {
    return CollectiveEpilogue::get_workspace_size(args.problem_shape, args.epilogue);
  }

  static Params to_underlying_arguments(Arguments const& args, void* /*workspace: none*/) {
    auto problem_shape_mnkl = cute::append<4>(args.problem_shape, 1);
    cutlass::KernelHardwareInfo hw_info = args.hw_info;
    if (hw_info.sm_count <= 0) {
      hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw_info.device_id);
    }
    constexpr uint32_t kSubtiles = CollectiveEpilogue::get_store_pipe_increment(TileShape{});
    return {args.mode,
            args.problem_shape,
            CollectiveMainloop::to_underlying_arguments(args.problem_shape, args.mainloop, nullptr),
            CollectiveEpilogue::to_underlying_arguments(args.problem_shape, args.epilogue, nullptr),
            hw_info,
            TileScheduler::to_underlying_arguments(problem_shape_mnkl, TileShape{}, ClusterShape{}, hw_info,
                                                   args.scheduler, nullptr, kSubtiles)};
  }

  static dim3 get_grid_shape(Params const& params) {
    return TileScheduler::get_grid_shape(params.scheduler, params.problem_shape, TileShape{}, ClusterShape{},
                                         params.hw_info);
  }

  static dim3 get_block_shape() { return dim3(MaxThreadsPerBlock, 1, 1); }

  // ---- device side -------------------------------------------------------------------

  CUTLASS_DEVICE void operator()(Params const& params, char* smem_buf) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace cute;
    enum class Role { Producer = 0, Consumer0 = 1, Consumer1 = 2 };
    constexpr int kMainloopWarp = 0;
    constexpr int kEpilogueLoadWarp = 1;

    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);
    const int thread_idx = int(threadIdx.x);
    const int lane_idx = cutlass::canonical_lane_idx();
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_in_group = warp_idx % cutlass::NumWarpsPerWarpGroup;
    const int group_thread = thread_idx % int(cutlass::NumThreadsPerWarpGroup);
    const Role role = Role(cutlass::canonical_warp_group_idx());
    const bool consumer = role != Role::Producer;

    if (warp_idx == 0 && cute::elect_one_sync()) {
      CollectiveMainloop::prefetch_tma_descriptors(params.mainloop);
      CollectiveEpilogue::prefetch_tma_descriptors(params.epilogue);
    }

    // Each stage is consumed by one warpgroup, the one whose tile it belongs to.
    typename MainloopPipeline::Params mainloop_params;
    if (role == Role::Producer && warp_in_group == kMainloopWarp) {
      mainloop_params.role = MainloopPipeline::ThreadCategory::Producer;
    }
    if (consumer) {
      mainloop_params.role = MainloopPipeline::ThreadCategory::Consumer;
    }
    mainloop_params.is_leader = group_thread == 0;
    mainloop_params.num_consumers = cutlass::NumThreadsPerWarpGroup;
    mainloop_params.num_producers = CollectiveMainloop::NumProducerThreadEvents;
    mainloop_params.transaction_bytes = params.mainloop.tma_transaction_bytes;
    MainloopPipeline mainloop_pipeline(shared.pipelines.mainloop, mainloop_params, ClusterShape{});

    typename EpiLoadPipeline::Params epi_load_params;
    if (role == Role::Producer && warp_in_group == kEpilogueLoadWarp) {
      epi_load_params.role = EpiLoadPipeline::ThreadCategory::Producer;
    }
    if (consumer) {
      epi_load_params.role = EpiLoadPipeline::ThreadCategory::Consumer;
    }
    epi_load_params.dst_blockid = 0;  // no clusters
    epi_load_params.producer_arv_count = cutlass::NumThreadsPerWarp;
    epi_load_params.consumer_arv_count = cutlass::NumThreadsPerWarpGroup;
    if constexpr (CollectiveEpilogue::RequiresTransactionBytes) {
      epi_load_params.transaction_bytes = params.epilogue.tma_transaction_bytes;
    }
    EpiLoadPipeline epi_load_pipeline(shared.pipelines.epi_load, epi_load_params);

    typename EpiStorePipeline::Params epi_store_params;
    epi_store_params.always_wait = true;
    EpiStorePipeline epi_store_pipeline(epi_store_params);

    typename MathOrderBarrier::Params order_params;
    order_params.group_id = role == Role::Consumer1 ? 1 : 0;  // the producers never use it
    order_params.group_size = cutlass::NumThreadsPerWarpGroup;
    MathOrderBarrier math_order(shared.pipelines.math_order, order_params);

    // Barrier initialization visible to every thread before any use.
    __syncthreads();

    auto problem_shape_mnkl = append<4>(params.problem_shape, Int<1>{});
    TiledMma tiled_mma;
    CollectiveMainloop collective_mainloop;
    CollectiveEpilogue collective_epilogue(params.epilogue, shared.tensors.epilogue);
    auto load_inputs = collective_mainloop.load_init(problem_shape_mnkl, params.mainloop);

    // Every thread (the scheduler's contract: the block-row order is built here).
    TileScheduler scheduler{params.scheduler};
    auto work = scheduler.initial_work_tile_info(ClusterShape{});
    auto tile_coord = [](auto const& w) { return make_coord(w.M_idx, w.N_idx, _, w.L_idx); };

    if (role == Role::Producer) {
      cutlass::arch::warpgroup_reg_dealloc<kLoadRegisters>();
      if (warp_in_group == kMainloopWarp) {
        MainloopState write = cutlass::make_producer_start_state<MainloopPipeline>();
        while (work.is_valid()) {
          collective_mainloop.load(params.mainloop, mainloop_pipeline, write, load_inputs, tile_coord(work), 0,
                                   work.k_tile_count, lane_idx, 0u, shared.tensors.mainloop);
          write.advance(work.k_tile_count);
          scheduler.advance_to_next_work();
          work = scheduler.get_current_work();
        }
        collective_mainloop.load_tail(mainloop_pipeline, write);
      } else if (warp_in_group == kEpilogueLoadWarp && collective_epilogue.is_producer_load_needed()) {
        EpiLoadState write = cutlass::make_producer_start_state<EpiLoadPipeline>();
        while (work.is_valid()) {
          write = collective_epilogue.load(epi_load_pipeline, write, problem_shape_mnkl, TileShape{}, tile_coord(work),
                                           tiled_mma, lane_idx, shared.tensors.epilogue);
          scheduler.advance_to_next_work();
          work = scheduler.get_current_work();
        }
        collective_epilogue.load_tail(epi_load_pipeline, write);
      }
      return;
    }

    cutlass::arch::warpgroup_reg_alloc<kMmaRegisters>();
    constexpr int kLoadSubtiles = CollectiveEpilogue::get_load_pipe_increment(TileShape{});
    constexpr int kStoreSubtiles = CollectiveEpilogue::get_store_pipe_increment(TileShape{});
    MainloopState read;
    EpiLoadState epi_read;
    EpiStoreState epi_write = cutlass::make_producer_start_state<EpiStorePipeline>();
    if (role == Role::Consumer1) {
      // Start at the CTA's second tile, past the first one's stages.
      if (work.is_valid()) {
        read.advance(work.k_tile_count);
      }
      epi_read.advance(kLoadSubtiles);
      epi_write.advance(kStoreSubtiles);
      scheduler.advance_to_next_work();
      work = scheduler.get_current_work();
    }

    while (work.is_valid()) {
      Tensor accumulators = partition_fragment_C(tiled_mma, take<0, 2>(TileShape{}));  // (MMA,MMA_M,MMA_N)

      math_order.wait();  // the other warpgroup's MMAs of its previous tile have been issued
      collective_mainloop.mma(mainloop_pipeline, read, accumulators, work.k_tile_count, group_thread,
                              shared.tensors.mainloop, params.mainloop);
      math_order.arrive();
      collective_mainloop.mma_tail(mainloop_pipeline, read, work.k_tile_count);

      // Past this tile's stages and the other warpgroup's next tile's.
      read.advance(work.k_tile_count);
      const auto other = scheduler.peek_work(1);
      if (other.is_valid()) {
        read.advance(other.k_tile_count);
      }

      math_order.wait();  // the other warpgroup's previous epilogue is done with shared memory
      auto [epi_read_next, epi_write_next] =
          collective_epilogue.store(epi_load_pipeline, epi_read, epi_store_pipeline, epi_write, problem_shape_mnkl,
                                    TileShape{}, tile_coord(work), accumulators, tiled_mma, group_thread,
                                    shared.tensors.epilogue);
      // Only the storing warp can wait for its TMA stores: wait before handing the epilogue's
      // shared memory to the other warpgroup.
      auto [epi_read_done, epi_write_done] =
          collective_epilogue.store_tail(epi_load_pipeline, epi_read_next, epi_store_pipeline, epi_write_next);
      epi_read = epi_read_done;
      epi_write = epi_write_done;
      epi_read.advance(kLoadSubtiles);
      epi_write.advance(kStoreSubtiles);
      math_order.arrive();

      scheduler.advance_to_next_work(2);
      work = scheduler.get_current_work();
    }
#else
    (void)params;
    (void)smem_buf;
#endif
  }
};

}  // namespace sparsek::detail::spmm_sm90
