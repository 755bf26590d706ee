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
//
// Streamed launches (Params::scheduler.stream; the host decides, split.hpp
// choose_gated_stream): where the tiles are few beside the SMs (an MLP's gate and up at
// small n: Qwen2.5-7B's 148 pairs of 128-row blocks on 132 SMs leave a second round of 16
// tiles), the grid is one CTA per SM and CTA c of G takes the k-iterations
// [c * T / G, (c + 1) * T / G) of the launch's T, the tiles' iterations laid end to end in
// the scheduler's linear order (one dense tile per pair: the host streams only such
// launches, so a pair's weights are read once). A tile is then cut in pieces at the CTAs'
// boundaries; a piece runs its part of the gate pass and of the up pass (a pass it has no
// part of runs one zero iteration, as an empty row does). Every CTA's first piece may start
// inside a tile; its later pieces start at a tile's first iteration. So each CTA hands over
// at most one piece: its first, when that does not hold the tile's first iteration, written
// (the passes it ran, fp32) to the CTA's slot of the launch's scratch, and a flag raised per
// consumer warpgroup. The piece holding a tile's first iteration (the head) adds the slots
// of the CTAs after it that hold the rest of the tile, in CTA order (a fixed order: bitwise
// deterministic), then runs the combine and the epilogue. Deadlock-free: a head is its CTA's
// last piece and waits only for later CTAs' first pieces, which wait for nothing, and the
// launch is cooperative (every CTA resident; kernel.hpp).
// What it leaves out: clusters, ping-pong, FP8 (its promotion needs a third accumulator), and
// op(A) = A^T (the gated product's rules refuse it).
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
  static_assert(!CollectiveMainloop::kPromote && !CollectiveMainloop::SparseMN, "16-bit op(A) = A only");
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
  static_assert(2 * kTileM * kTileN / int(kMmaThreads) <= 128,
                "both accumulators must leave registers for the combine and the epilogue");

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
           (!args.scheduler.stream || TileScheduler::kStreams) &&
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
    // (L: a pass's first k-iteration in a streamed piece, -1 for its zero iteration;
    // mainloop.hpp reads it as the split tiles' start.)
    auto coord_with_row = [](auto const& w, int32_t row, int32_t l = 0) {
      return SparseIsB ? make_coord(w.M_idx, row, _, l) : make_coord(row, w.N_idx, _, l);
    };
    auto pair_of = [](auto const& w) { return SparseIsB ? w.N_idx : w.M_idx; };
    const bool streamed = TileScheduler::kStreams && params.scheduler.stream;

    if (role == Role::Producer) {
      cutlass::arch::warpgroup_reg_dealloc<kLoadRegisters>();
      if (warp_in_group == kMainloopWarp) {
        MainloopState write = cutlass::make_producer_start_state<MainloopPipeline>();
        if (streamed) {
          const StreamShare share = stream_share(scheduler, int32_t(params.scheduler.total_tiles), lane_idx);
          int32_t tile = share.tile;
          for (int64_t first = share.first; first < share.end; ++tile) {
            const auto w = scheduler.work_for_linear_idx(tile);
            const int32_t pair = pair_of(w);
            const int32_t gate_k = SparseTileIterator<>::k_tile_count(row_ptr, 2 * pair, kpb);
            const Piece piece = Piece::of(share, first, w.k_tile_count, gate_k);
            collective_mainloop.load(params.mainloop, mainloop_pipeline, write, load_inputs,
                                     coord_with_row(w, 2 * pair, piece.gate.start), 0, piece.gate.count, lane_idx, 0u,
                                     shared.tensors.mainloop);
            write.advance(piece.gate.count);
            collective_mainloop.load(params.mainloop, mainloop_pipeline, write, load_inputs,
                                     coord_with_row(w, 2 * pair + 1, piece.up.start), 0, piece.up.count, lane_idx, 0u,
                                     shared.tensors.mainloop);
            write.advance(piece.up.count);
            first += w.k_tile_count;
          }
          collective_mainloop.load_tail(mainloop_pipeline, write);
          return;
        }
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
    if (streamed) {
      const StreamShare share = stream_share(scheduler, int32_t(params.scheduler.total_tiles), lane_idx);
      int32_t tile = share.tile;
      for (int64_t first = share.first; first < share.end; ++tile) {
        const auto w = scheduler.work_for_linear_idx(tile);
        const int32_t pair = pair_of(w);
        const int32_t gate_k = SparseTileIterator<>::k_tile_count(row_ptr, 2 * pair, kpb);
        const Piece piece = Piece::of(share, first, w.k_tile_count, gate_k);
        Tensor gate = partition_fragment_C(tiled_mma, take<0, 2>(TileShape{}));
        Tensor up = partition_fragment_C(tiled_mma, take<0, 2>(TileShape{}));
        collective_mainloop.mma(mainloop_pipeline, read, gate, piece.gate.count, mma_thread, shared.tensors.mainloop,
                                params.mainloop);
        collective_mainloop.mma_tail(mainloop_pipeline, read, piece.gate.count);
        read.advance(piece.gate.count);
        collective_mainloop.mma(mainloop_pipeline, read, up, piece.up.count, mma_thread, shared.tensors.mainloop,
                                params.mainloop);
        collective_mainloop.mma_tail(mainloop_pipeline, read, piece.up.count);
        read.advance(piece.up.count);
        if (!piece.head) {
          hand_over(params.scheduler, int32_t(blockIdx.x), piece, gate, up, mma_thread);
        } else {
          // The rest of the tile: the pieces of the CTAs after this one, in CTA order.
          for (int32_t c = int32_t(blockIdx.x) + 1; c < int32_t(gridDim.x); ++c) {
            const Piece other = Piece::of(StreamShare::of(share.total, c), first, w.k_tile_count, gate_k);
            if (other.lo >= w.k_tile_count) break;
            if (other.lo < other.hi) take_over(params.scheduler, c, other, gate, up, mma_thread);
          }
          combine(params.gated, pair, gate, up, tiled_mma, mma_thread);
          collective_epilogue(problem_shape_mnkl, TileShape{}, coord_with_row(w, pair), gate, tiled_mma,
                              make_tuple(0, 0, _0{}), mma_thread, reinterpret_cast<char*>(&shared.tensors.epilogue));
        }
        first += w.k_tile_count;
      }
      return;
    }
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
  // ---- streamed launches (see the file comment) ----

  // CTA c's k-iterations [begin, end) of the launch's `total`, and (stream_share) the linear
  // tile holding `begin` with that tile's first iteration.
  struct StreamShare {
    int64_t total = 0, begin = 0, end = 0;
    int32_t tile = 0;
    int64_t first = 0;
    CUTLASS_DEVICE static StreamShare of(int64_t total, int32_t c) {
      StreamShare r;
      r.total = total;
      r.begin = int64_t(c) * total / int64_t(gridDim.x);
      r.end = int64_t(c + 1) * total / int64_t(gridDim.x);
      r.first = r.end;  // no tile: an empty share walks none
      return r;
    }
  };

  // A pass's part of a piece: its first k-iteration and count, or (start -1, count 1) its
  // zero iteration where the piece has none of it.
  struct PassPart {
    int32_t start = -1, count = 1;
  };
  // A tile's piece in one CTA's share: the tile's k-iterations [lo, hi) (the gate pass's
  // first, then the up pass's), whether it holds the first (head), and each pass's part.
  struct Piece {
    int32_t lo = 0, hi = 0;
    bool head = false;
    PassPart gate, up;
    CUTLASS_DEVICE static PassPart part(int32_t lo, int32_t hi, int32_t from, int32_t to) {
      const int32_t s = lo > from ? lo : from, e = hi < to ? hi : to;
      PassPart p;
      if (s < e) p.start = s - from, p.count = e - s;
      return p;
    }
    CUTLASS_DEVICE static Piece of(StreamShare const& share, int64_t first, int32_t k_count, int32_t gate_k) {
      Piece p;
      const int64_t lo = share.begin > first ? share.begin - first : 0;
      const int64_t hi = share.end - first < k_count ? share.end - first : k_count;
      p.lo = int32_t(lo < k_count ? lo : k_count);
      p.hi = int32_t(hi > p.lo ? hi : p.lo);
      p.head = p.lo == 0;
      p.gate = part(p.lo, p.hi, 0, gate_k);
      p.up = part(p.lo, p.hi, gate_k, k_count);
      return p;
    }
  };

  // Warp-collective (all 32 lanes): the launch's total k-iterations (each tile's count, one
  // dense tile per pair), this CTA's share of them, and the tile holding its first: a
  // prefix sum over the tiles 32 at a time.
  template <class Scheduler>
  CUTLASS_DEVICE static StreamShare stream_share(Scheduler const& scheduler, int32_t tiles, int lane) {
    int64_t part = 0;
    for (int32_t t = lane; t < tiles; t += 32) part += scheduler.work_for_linear_idx(t).k_tile_count;
    CUTLASS_PRAGMA_UNROLL
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    StreamShare r = StreamShare::of(part, int32_t(blockIdx.x));
    if (r.begin >= r.end) return r;
    int64_t base = 0;
    for (int32_t chunk = 0; chunk < tiles; chunk += 32) {
      const int32_t t = chunk + lane;
      const int64_t k = t < tiles ? int64_t(scheduler.work_for_linear_idx(t).k_tile_count) : 0;
      int64_t inclusive = k;
      CUTLASS_PRAGMA_UNROLL
      for (int o = 1; o < 32; o <<= 1) {
        const int64_t v = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += v;
      }
      const uint32_t hit = __ballot_sync(0xffffffffu, t < tiles && base + inclusive > r.begin);
      if (hit != 0) {
        const int l = __ffs(int(hit)) - 1;
        r.tile = chunk + l;
        r.first = base + __shfl_sync(0xffffffffu, inclusive - k, l);
        return r;
      }
      base += __shfl_sync(0xffffffffu, inclusive, 31);
    }
    return r;
  }

  // Thread t of consumer warpgroup wg: its vector i of pass `pass` in CTA c's slot, laid
  // [pass][wg][vector][thread] so that each warp moves 512 contiguous bytes.
  // (acc_floats: a thread's accumulators of one pass.)
  CUTLASS_DEVICE static float* slot_of(typename TileScheduler::Params const& s, int32_t c, int pass, int mma_thread,
                                       int acc_floats) {
    constexpr int64_t kTileFloats = int64_t(kTileM) * kTileN;
    constexpr int kThreads = cutlass::NumThreadsPerWarpGroup;
    const int wg = mma_thread / kThreads, t = mma_thread % kThreads;
    return s.partials + (int64_t(c) * 2 + pass) * kTileFloats + int64_t(wg) * kThreads * acc_floats + 4 * t;
  }
  CUTLASS_DEVICE static uint32_t* flag_of(typename TileScheduler::Params const& s, int32_t c, int mma_thread) {
    return s.flags + int64_t(c) * 2 + mma_thread / int(cutlass::NumThreadsPerWarpGroup);
  }

  // A piece that is not its tile's head: the passes it ran go to CTA c's slot, then the flag
  // of each consumer warpgroup (after the warpgroup's stores).
  template <class Acc>
  CUTLASS_DEVICE static void hand_over(typename TileScheduler::Params const& s, int32_t c, Piece const& piece,
                                       Acc const& gate, Acc const& up, int mma_thread) {
    constexpr int kAcc = int(decltype(cute::size(gate))::value);
    constexpr int kThreads = cutlass::NumThreadsPerWarpGroup;
    static_assert(kAcc % 4 == 0, "accumulator fragments are float4 vectors");
    auto store = [&](Acc const& acc, int pass) {
      float* out = slot_of(s, c, pass, mma_thread, kAcc);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kAcc; i += 4) {
        __stcg(reinterpret_cast<float4*>(out + i * kThreads), make_float4(acc(i), acc(i + 1), acc(i + 2), acc(i + 3)));
      }
    };
    if (piece.gate.start >= 0) store(gate, 0);
    if (piece.up.start >= 0) store(up, 1);
    __threadfence();
    const uint32_t barrier = kSplitBarrierId + uint32_t(mma_thread / kThreads);
    asm volatile("bar.sync %0, %1;" : : "r"(barrier), "r"(kThreads) : "memory");
    if (mma_thread % kThreads == 0) {
      asm volatile("st.release.gpu.global.u32 [%0], %1;" : : "l"(flag_of(s, c, mma_thread)), "r"(1u) : "memory");
    }
  }

  // The head adds CTA c's piece of its tile (the passes that piece ran) once its flag is up.
  template <class Acc>
  CUTLASS_DEVICE static void take_over(typename TileScheduler::Params const& s, int32_t c, Piece const& piece,
                                       Acc& gate, Acc& up, int mma_thread) {
    constexpr int kAcc = int(decltype(cute::size(gate))::value);
    constexpr int kThreads = cutlass::NumThreadsPerWarpGroup;
    constexpr int kGroup = 4;  // vectors in flight together
    static_assert((kAcc / 4) % kGroup == 0, "whole groups of vectors");
    if (mma_thread % kThreads == 0) {
      uint32_t ready = 0;
      while (true) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(ready) : "l"(flag_of(s, c, mma_thread)) : "memory");
        if (ready != 0) break;
        __nanosleep(64);
      }
    }
    const uint32_t barrier = kSplitBarrierId + uint32_t(mma_thread / kThreads);
    asm volatile("bar.sync %0, %1;" : : "r"(barrier), "r"(kThreads) : "memory");
    auto add = [&](Acc& acc, int pass) {
      const float* in = slot_of(s, c, pass, mma_thread, kAcc);
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kAcc; g += 4 * kGroup) {
        float4 v[kGroup];
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kGroup; ++j) v[j] = __ldcg(reinterpret_cast<const float4*>(in + (g + 4 * j) * kThreads));
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kGroup; ++j) {
          acc(g + 4 * j) += v[j].x;
          acc(g + 4 * j + 1) += v[j].y;
          acc(g + 4 * j + 2) += v[j].z;
          acc(g + 4 * j + 3) += v[j].w;
        }
      }
    };
    if (piece.gate.start >= 0) add(gate, 0);
    if (piece.up.start >= 0) add(up, 1);
  }

  // gate <- act(alpha * gate + bias[gate row]) * (alpha * up + bias[up row]), the order of the
  // CPU reference (src/spmm/cpu.rs) and of the Decode family (alpha * acc rounded, then the
  // bias added; no fused multiply-add). The activation is a template argument of each copy of
  // the loop (one switch per tile, none per element).
  template <class Acc, class Mma>
  CUTLASS_DEVICE static void combine(GatedArguments const& g, int32_t pair, Acc& gate, Acc const& up, Mma tiled_mma,
                                     int mma_thread) {
    using Bias = cute::conditional_t<cute::is_same_v<Element, cutlass::half_t>, __half, __nv_bfloat16>;
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
    const float alpha = g.alpha;
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
