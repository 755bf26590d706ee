// sparsek SM90: the gated (GLU) kernel layer, for rows with `gated` (configs.hpp).
//
//     h = act(alpha * G*B + bias[gate row]) * (alpha * U*B + bias[up row])
//
// A's block-rows are (gate, up) pairs (cpp/spmm/problem.hpp: block-row 2i is the gate's
// block-row i, 2i+1 the up's, each with its own blocks); h has m/2 rows, beta = 0.
//
// Why our own layer: CUTLASS's GemmUniversal runs one mainloop into one accumulator per tile.
// A gated tile is one block-row i of h and a dense tile: its k-loop is two passes of the
// same mainloop collective (mainloop.hpp) over the same pipeline, block-row 2i's blocks into
// the gate accumulators, then block-row 2i+1's into the up accumulators. Both accumulators
// have the same fragment layout, so the GLU combine is register-local: each thread turns the
// pairs it holds into h, and the Direct epilogue (direct_epilogue.hpp, with alpha 1, no bias
// and no activation) writes h in C's dtype and layout. Nothing of h's halves goes through
// memory, and h is written once.
//
// Roles (384 threads), as CUTLASS's cooperative kernel:
//   warpgroup 0, warp 0   mainloop producer: for each tile, TMA loads of the gate row's
//                         blocks, then the up row's (each pass at least one iteration: an
//                         empty row's zero iteration, tile_iterator.hpp), into one pipeline;
//   warpgroups 1 and 2    consumers: split the tile's sparse or dense side (the TiledMma of
//                         two warpgroups), run both passes, the combine and the epilogue.
// The scheduler (scheduler.hpp, Gated) walks tiles of h's block-rows; a tile's k count is
// both passes'; the consumers and the producer split it at the gate row's count, which they
// read from row_ptr themselves.
//
// Registers: two accumulators per thread (2 * TileM * TileN / 256 floats); the rows keep
// that at 128 (configs.hpp: TileM * TileN <= 128 * 128) so the consumers do not spill.
// W8A16 (FP8 weights, f16 B): the mainloop's promotion adds a k-tile accumulator, so those
// rows keep all three within 128 registers (beside A's two 32-register fragments); the combine applies A's per-tensor scale (before
// the nonlinearity, where it belongs) and reads their bias in C's dtype.
// What it leaves out: clusters, split tiles (a split would need both passes' partial sums
// before the nonlinearity), ping-pong, W8A8, and op(A) = A^T (the gated product's rules
// refuse it).
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/arch/reg_reconfig.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/pipeline/pipeline.hpp"
#include "cute/tensor.hpp"

#include "core/activation.cuh"
#include "core/dtype.hpp"
#include "core/vec8.cuh"
#include "tile_iterator.hpp"

namespace sparsek::detail::spmm_sm90 {

// The gated epilogue's run-time arguments (the launcher, kernel.hpp, fills them from the
// Problem; the Direct epilogue then gets alpha 1, no bias, no activation).
struct GatedArguments {
  float alpha = 1.0f;
  const void* bias = nullptr;  // null or m values of the input type, in A's row order
  int32_t activation = 0;      // an Activation value
  int32_t bm = 0;              // rows per block-row
  // W8A16: A's per-tensor scale (one device value), or null. It scales both products before
  // the nonlinearity, so the combine applies it, not the epilogue (per-block scales: the
  // mainloop's promotion).
  const float* scale_a = nullptr;
  // The bias's dtype: A's 16-bit type, or with FP8 A (W8A16) C's (a DType value).
  int32_t bias_dtype = 0;
};

// The same Arguments / Params / static interface as CUTLASS's GemmUniversal (and
// BsrPingPongKernel), so BsrGemm (kernel.hpp) launches it through the same code.
template <class ProblemShape_, class CollectiveMainloop_, class CollectiveEpilogue_, class SchedulerTag_>
class BsrGatedKernel {
 public:
  using ProblemShape = ProblemShape_;
  using CollectiveMainloop = CollectiveMainloop_;
  using CollectiveEpilogue = CollectiveEpilogue_;
  using TileShape = typename CollectiveMainloop::TileShape;
  using TiledMma = typename CollectiveMainloop::TiledMma;
  using ClusterShape = typename CollectiveMainloop::ClusterShape;
  using Element = typename CollectiveMainloop::Element;
  static constexpr bool SparseIsB = CollectiveMainloop::SparseIsB;
  static_assert(cute::size(ClusterShape{}) == 1, "gated rows run without clusters");
  // 16-bit A, or FP8 A converted to 16 bits in registers (W8A16: its promotion's k-tile
  // accumulator is a third one beside two fragments of A, mainloop.hpp's mma_converted);
  // op(A) = A.
  static_assert((!CollectiveMainloop::kPromote || CollectiveMainloop::kConvert) && !CollectiveMainloop::SparseMN,
                "16-bit or W8A16 op(A) = A only");
  using TileScheduler = typename cutlass::gemm::kernel::detail::TileSchedulerSelector<
      SchedulerTag_, cutlass::arch::Sm90, TileShape, ClusterShape, 1u>::Scheduler;
  static_assert(TileScheduler::kRowsPerTile == 2, "the scheduler walks (gate, up) pairs");

  using MainloopPipeline = typename CollectiveMainloop::MainloopPipeline;
  using MainloopState = typename CollectiveMainloop::PipelineState;

  static constexpr uint32_t kMmaThreads = cute::size(TiledMma{});
  static_assert(kMmaThreads == 2 * cutlass::NumThreadsPerWarpGroup, "two consumer warpgroups share a tile");
  static constexpr uint32_t MaxThreadsPerBlock = kMmaThreads + cutlass::NumThreadsPerWarpGroup;
  static constexpr uint32_t MinBlocksPerMultiprocessor = 1;
  static constexpr uint32_t kLoadRegisters = 40;
  static constexpr uint32_t kMmaRegisters = 232;
  static constexpr int kTileM = cute::size<0>(TileShape{});
  static constexpr int kTileN = cute::size<1>(TileShape{});
  static_assert((CollectiveMainloop::kConvert ? 3 : 2) * kTileM * kTileN / int(kMmaThreads) <= 128,
                "the accumulators must leave registers for the combine and the epilogue");

  struct SharedStorage {
    struct PipelineStorage : cute::aligned_struct<16, cute::_1> {
      alignas(16) typename CollectiveMainloop::PipelineStorage mainloop;
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
    GatedArguments gated{};
  };

  struct Params {
    cutlass::gemm::GemmUniversalMode mode{};
    ProblemShape problem_shape{};
    typename CollectiveMainloop::Params mainloop{};
    typename CollectiveEpilogue::Params epilogue{};
    cutlass::KernelHardwareInfo hw_info{};
    typename TileScheduler::Params scheduler{};
    GatedArguments gated{};
  };

  // ---- host side ---------------------------------------------------------------------

  static bool can_implement(Arguments const& args) {
    return args.mode == cutlass::gemm::GemmUniversalMode::kGemm && args.scheduler.split <= 1 &&
           args.gated.bm >= 1 && args.gated.bm <= (SparseIsB ? kTileN : kTileM) &&
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
    return {args.mode,
            args.problem_shape,
            CollectiveMainloop::to_underlying_arguments(args.problem_shape, args.mainloop, nullptr),
            CollectiveEpilogue::to_underlying_arguments(args.problem_shape, args.epilogue, nullptr),
            hw_info,
            TileScheduler::to_underlying_arguments(problem_shape_mnkl, TileShape{}, ClusterShape{}, hw_info,
                                                   args.scheduler, nullptr, 1u),
            args.gated};
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

    SharedStorage& shared = *reinterpret_cast<SharedStorage*>(smem_buf);
    const int thread_idx = int(threadIdx.x);
    const int lane_idx = cutlass::canonical_lane_idx();
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const int warp_in_group = warp_idx % cutlass::NumWarpsPerWarpGroup;
    const int group_thread = thread_idx % int(cutlass::NumThreadsPerWarpGroup);
    const Role role = Role(cutlass::canonical_warp_group_idx());

    if (warp_idx == 0 && cute::elect_one_sync()) {
      CollectiveMainloop::prefetch_tma_descriptors(params.mainloop);
    }

    typename MainloopPipeline::Params mainloop_params;
    if (role == Role::Producer && warp_in_group == kMainloopWarp) {
      mainloop_params.role = MainloopPipeline::ThreadCategory::Producer;
    }
    if (role != Role::Producer) {
      mainloop_params.role = MainloopPipeline::ThreadCategory::Consumer;
    }
    mainloop_params.is_leader = group_thread == 0;
    mainloop_params.num_consumers = kMmaThreads;
    mainloop_params.num_producers = CollectiveMainloop::NumProducerThreadEvents;
    mainloop_params.transaction_bytes = params.mainloop.tma_transaction_bytes;
    MainloopPipeline mainloop_pipeline(shared.pipelines.mainloop, mainloop_params, ClusterShape{});

    // Barrier initialization visible to every thread before any use.
    __syncthreads();

    auto problem_shape_mnkl = append<4>(params.problem_shape, Int<1>{});
    TiledMma tiled_mma;
    CollectiveMainloop collective_mainloop;
    auto load_inputs = collective_mainloop.load_init(problem_shape_mnkl, params.mainloop);

    // Every thread (the scheduler's contract: the pair order is built here).
    TileScheduler scheduler{params.scheduler};
    auto work = scheduler.initial_work_tile_info(ClusterShape{});
    const int32_t* row_ptr = params.scheduler.row_ptr;
    const int32_t kpb = params.scheduler.kpb;
    // Tile coordinates with the block-row `row` of A in the sparse position (the producer's
    // view of one pass), or h's block-row (the tile's own, for the epilogue).
    auto coord_with_row = [](auto const& w, int32_t row) {
      return SparseIsB ? make_coord(w.M_idx, row, _, 0) : make_coord(row, w.N_idx, _, 0);
    };
    auto pair_of = [](auto const& w) { return SparseIsB ? w.N_idx : w.M_idx; };

    if (role == Role::Producer) {
      cutlass::arch::warpgroup_reg_dealloc<kLoadRegisters>();
      if (warp_in_group == kMainloopWarp) {
        MainloopState write = cutlass::make_producer_start_state<MainloopPipeline>();
        while (work.is_valid()) {
          const int32_t pair = pair_of(work);
          const int gate_k = SparseTileIterator<>::k_tile_count(row_ptr, 2 * pair, kpb);
          const int up_k = work.k_tile_count - gate_k;
          collective_mainloop.load(params.mainloop, mainloop_pipeline, write, load_inputs,
                                   coord_with_row(work, 2 * pair), 0, gate_k, lane_idx, 0u, shared.tensors.mainloop);
          write.advance(gate_k);
          collective_mainloop.load(params.mainloop, mainloop_pipeline, write, load_inputs,
                                   coord_with_row(work, 2 * pair + 1), 0, up_k, lane_idx, 0u, shared.tensors.mainloop);
          write.advance(up_k);
          scheduler.advance_to_next_work();
          work = scheduler.get_current_work();
        }
        collective_mainloop.load_tail(mainloop_pipeline, write);
      }
      return;
    }

    cutlass::arch::warpgroup_reg_alloc<kMmaRegisters>();
    const int mma_thread = thread_idx - int(cutlass::NumThreadsPerWarpGroup);  // 0..255
    CollectiveEpilogue collective_epilogue(params.epilogue, shared.tensors.epilogue);
    MainloopState read;
    while (work.is_valid()) {
      const int32_t pair = pair_of(work);
      const int gate_k = SparseTileIterator<>::k_tile_count(row_ptr, 2 * pair, kpb);
      const int up_k = work.k_tile_count - gate_k;
      Tensor gate = partition_fragment_C(tiled_mma, take<0, 2>(TileShape{}));  // (MMA,MMA_M,MMA_N)
      Tensor up = partition_fragment_C(tiled_mma, take<0, 2>(TileShape{}));
      collective_mainloop.mma(mainloop_pipeline, read, gate, gate_k, mma_thread, shared.tensors.mainloop,
                              params.mainloop);
      collective_mainloop.mma_tail(mainloop_pipeline, read, gate_k);
      read.advance(gate_k);
      collective_mainloop.mma(mainloop_pipeline, read, up, up_k, mma_thread, shared.tensors.mainloop,
                              params.mainloop);
      collective_mainloop.mma_tail(mainloop_pipeline, read, up_k);
      read.advance(up_k);

      combine(params.gated, pair, gate, up, tiled_mma, mma_thread);

      // h's tile: block-row `pair` of h; the Direct epilogue writes its rows r < bm.
      collective_epilogue(problem_shape_mnkl, TileShape{}, coord_with_row(work, pair), gate, tiled_mma,
                          make_tuple(0, 0, _0{}), mma_thread, reinterpret_cast<char*>(&shared.tensors.epilogue));

      scheduler.advance_to_next_work();
      work = scheduler.get_current_work();
    }
#else
    (void)params;
    (void)smem_buf;
#endif
  }

 private:
  // gate <- act(alpha * gate + bias[gate row]) * (alpha * up + bias[up row]), the order of the
  // CPU reference (src/spmm/cpu.rs) and of the Decode family (alpha * acc rounded, then the
  // bias added; no fused multiply-add). The activation is a template argument of each copy of
  // the loop (one switch per tile, none per element).
  template <class Acc, class Mma>
  CUTLASS_DEVICE static void combine(GatedArguments const& g, int32_t pair, Acc& gate, Acc const& up, Mma tiled_mma,
                                     int mma_thread) {
    using Input = cute::conditional_t<cute::is_same_v<Element, cutlass::half_t>, __half, __nv_bfloat16>;
    if constexpr (CollectiveMainloop::kConvert) {  // W8A16: the bias has C's dtype
      if (g.bias_dtype == static_cast<int32_t>(DType::F32)) return combine_with<float>(g, pair, gate, up, tiled_mma, mma_thread);
      if (g.bias_dtype == static_cast<int32_t>(DType::BF16))
        return combine_with<__nv_bfloat16>(g, pair, gate, up, tiled_mma, mma_thread);
      return combine_with<__half>(g, pair, gate, up, tiled_mma, mma_thread);
    } else {
      return combine_with<Input>(g, pair, gate, up, tiled_mma, mma_thread);
    }
  }

  template <class Bias, class Acc, class Mma>
  CUTLASS_DEVICE static void combine_with(GatedArguments const& g, int32_t pair, Acc& gate, Acc const& up,
                                          Mma tiled_mma, int mma_thread) {
    switch (g.activation) {
      case static_cast<int32_t>(Activation::Relu): combine_as<int32_t(Activation::Relu), Bias>(g, pair, gate, up, tiled_mma, mma_thread); break;
      case static_cast<int32_t>(Activation::GeluTanh): combine_as<int32_t(Activation::GeluTanh), Bias>(g, pair, gate, up, tiled_mma, mma_thread); break;
      case static_cast<int32_t>(Activation::Silu): combine_as<int32_t(Activation::Silu), Bias>(g, pair, gate, up, tiled_mma, mma_thread); break;
      default: combine_as<int32_t(Activation::None), Bias>(g, pair, gate, up, tiled_mma, mma_thread); break;
    }
  }

  template <int32_t kAct, class Bias, class Acc, class Mma>
  CUTLASS_DEVICE static void combine_as(GatedArguments const& g, int32_t pair, Acc& gate, Acc const& up,
                                        Mma tiled_mma, int mma_thread) {
    using namespace cute;
    constexpr int kAcc = decltype(size(gate))::value;
    // alpha * sa, as the Direct epilogue folds an FP8 per-tensor scale.
    const float alpha = g.scale_a != nullptr ? g.alpha * __ldg(g.scale_a) : g.alpha;
    const Bias* bias = static_cast<const Bias*>(g.bias);
    if (bias == nullptr) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kAcc; ++i) {
        gate(i) = detail::activate(__fmul_rn(alpha, gate(i)), kAct) * __fmul_rn(alpha, up(i));
      }
      return;
    }
    // The row of the block each accumulator holds: a thread offset plus a static part.
    auto thr_mma = tiled_mma.get_thread_slice(mma_thread);
    Tensor coord = thr_mma.partition_C(make_identity_tensor(take<0, 2>(TileShape{})));
    const int64_t gate_row0 = int64_t(2 * pair) * g.bm, up_row0 = gate_row0 + g.bm;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kAcc; ++i) {
      const int r = SparseIsB ? get<1>(coord(i)) : get<0>(coord(i));
      // Rows past bm are the tile's zero padding, never written: their bias is not read.
      const bool in = r < g.bm;
      const float bg = in ? detail::to_float(bias[gate_row0 + r]) : 0.0f;
      const float bu = in ? detail::to_float(bias[up_row0 + r]) : 0.0f;
      gate(i) = detail::activate(__fadd_rn(__fmul_rn(alpha, gate(i)), bg), kAct) * __fadd_rn(__fmul_rn(alpha, up(i)), bu);
    }
  }
};

}  // namespace sparsek::detail::spmm_sm90
