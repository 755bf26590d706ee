// sparsek: the Hopper (sm_90a) BSR x dense kernels, built from CUTLASS 4.2 / CuTe SM90 pieces.
//
// Design (see the headers for details):
//   kernel    : CUTLASS's own cutlass::gemm::kernel::GemmUniversal with the cooperative TMA
//               warp-specialized schedule (1 producer warpgroup, 2 consumer warpgroups
//               splitting each tile, persistent), reused unchanged. CUTLASS's ping-pong
//               kernel cannot be reused: it skips the other consumer warpgroup's pipeline
//               stages by one problem-wide k count, and BSR tiles each have their own. A
//               ping-pong kernel that advances by each tile's own count was prototyped and
//               measured (benches/NOTES.md, run 3): no better than cooperative here, so it
//               is not built.
//   mainloop  : collective_sparse_mma.hpp - TMA + PipelineTmaAsync + WGMMA; the producer walks
//               only the nonzero blocks of the tile's block-row (sparse_tile_iterator.hpp).
//   scheduler : bsr_tile_scheduler.hpp - persistent, (block-row, dense tile) work tiles whose
//               WorkTileInfo carries the per-tile k count; block-rows longest first.
//   epilogue  : CUTLASS's TMA warp-specialized collective epilogue (LinearCombination
//               alpha/beta, TMA loads of C when beta != 0, TMA stores of D = C in place).
//
// Workspace: none. The longest-first block-row order is built by each CTA in its own shared
// memory (BsrTileScheduler::build_order); no allocation, no extra kernel per launch, and
// nothing shared between concurrent launches.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include "problem.hpp"

#ifdef SPARSEK_NO_SM90A
// build.rs defines this when SPARSEK_CUDA_ARCHS lacks 90a: the Hopper path is absent and
// says so, and Backend::Auto falls back to the WMMA kernel.
namespace sparsek::detail {
const char* cutlass_unsupported_reason(const Problem&, int, int) {
  return "sparsek was built without sm_90a (SPARSEK_CUDA_ARCHS)";
}
cudaError_t cutlass_launch(const Problem&, cudaStream_t) { return cudaErrorInvalidDeviceFunction; }
}  // namespace sparsek::detail
#else

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/numeric_types.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"

#include "bsr_tile_scheduler.hpp"
#include "collective_sparse_mma.hpp"

#include "cutlass/gemm/kernel/gemm_universal.hpp"

namespace sparsek::sm90 {

using namespace cute;

// =====================================================================================
// Kernel configurations.
//   TM x TN   : GEMM (M, N) tile; TileK = 64 (divides bk = 64 and 128).
//   SparseIsB : false -> GEMM C = A*B, tile = (bm rows of one block-row) x (TN of n): TM == bm
//               true  -> GEMM C^T = B^T*A^T, tile = (TM of n) x (bm of one block-row): TN == bm
//               (the cooperative kernel needs the GEMM M tile >= 128, hence bm = 64 runs
//               transposed there.)
//   Pingpong  : must be false (cooperative); kept as a parameter of the mainloop, whose
//               ping-pong variant needs a kernel layer that sparsek does not build.
// Stages are derived from the shared memory left after the epilogue (see BsrGemm).
// =====================================================================================
template <int TM, int TN, bool SparseIsB_, bool Pingpong_>
struct KCfg {
  static constexpr bool SparseIsB = SparseIsB_;
  static constexpr bool Pingpong = Pingpong_;
  static constexpr int BM = SparseIsB ? TN : TM;
  using TileShape = Shape<Int<TM>, Int<TN>, _64>;
};

// Defaults (every dtype / layout combination).
using DefaultCfg128 = KCfg<128, 256, false, false>;
using DefaultCfg64 = KCfg<256, 64, true, false>;

// =====================================================================================
// TUNING OVERRIDE (not an API; for measuring). The environment variable
//     SPARSEK_SM90_CONFIG=<name>[,band=<N>][,sort=0|1]
// is read once per process (first launch / can_implement). It applies only to F16 input,
// F16 output, RowMajor B and RowMajor C; every other combination always uses the default.
// For that combination an unknown name (or one for the other block height) makes the
// CUTLASS backend refuse the problem ("unknown SPARSEK_SM90_CONFIG"), so a sweep cannot
// silently measure the default. Empty / unset / "default" = the default for bm.
//   band=N : dense tiles per scheduler band (0 = automatic: about one wave per band).
//   sort=0 : do not order block-rows longest first (identity order).
//
// Measured by scripts/tuning-sweep.sh on an H100 (2026-11-22; M=N=K=8192, f16, row-major
// B/C; TFLOPS on nonzero work at block density 1/16, 1/8, 1/4):
//   name            bm   GEMM tile   orientation     1/16  1/8   1/4
//   coop_128x256    128  128x256x64  C = A*B          456  571  664   DEFAULT bm=128, 4 stages
//   coop_128x192    128  128x192x64  C = A*B          441  551  633   5 stages
//   coop_128x128    128  128x128x64  C = A*B          454  509  552   6-7 stages
//   coopT_256x128   128  256x128x64  C^T = B^T A^T    396  496  573   2 WGs split n
//   coopT_256x64     64  256x64x64   C^T = B^T A^T    364  405  427   DEFAULT bm=64
//   coopT_128x64     64  128x64x64   C^T = B^T A^T    345  364  357
//   (band=1: 477 570 635; band=4: 436 578 672; sort=0: 452 570 664 - within run noise of
//   the default's automatic band and longest-first order.)
// Define SPARSEK_SM90_TUNING_VARIANTS=0 to build only the defaults.
// =====================================================================================
#ifndef SPARSEK_SM90_TUNING_VARIANTS
#define SPARSEK_SM90_TUNING_VARIANTS 1
#endif

struct Tuning {
  char name[32] = {0};  // "" = default
  int32_t band = 0;
  bool sort = true;
};

inline Tuning parse_tuning(const char* env) {
  Tuning t;
  if (env == nullptr) {
    return t;
  }
  const char* p = env;
  size_t n = 0;
  while (p[n] != '\0' && p[n] != ',' && n + 1 < sizeof(t.name)) {
    t.name[n] = p[n];
    ++n;
  }
  t.name[n] = '\0';
  p = std::strchr(p, ',');
  while (p != nullptr) {
    ++p;
    if (std::strncmp(p, "band=", 5) == 0) {
      t.band = int32_t(std::atoi(p + 5));
    } else if (std::strncmp(p, "sort=", 5) == 0) {
      t.sort = std::atoi(p + 5) != 0;
    }
    p = std::strchr(p, ',');
  }
  if (std::strcmp(t.name, "default") == 0) {
    t.name[0] = '\0';
  }
  return t;
}

inline const Tuning& tuning() {
  static const Tuning t = parse_tuning(std::getenv("SPARSEK_SM90_CONFIG"));
  return t;
}

constexpr int kSmemCapacity = 232448;   // sm90 max dynamic shared memory per block
constexpr int kKernelSmemSlack = 1024;  // kernel-level pipelines/barriers + alignment
// Block-row ordering in shared memory (BsrTileScheduler::build_order): int16 per block-row.
// Sorting costs O(R^2 / 384) per CTA when the block-rows are unequal, so it is capped;
// above kMaxOrderRows (or above what fits next to the stages) tiles go in block-row order.
constexpr int kMaxOrderRows = 512;
constexpr int kMinOrderBytes = 256;

template <class Element, class ElementC, bool BColMajor, bool CColMajor, class Cfg>
struct BsrGemm {
  static constexpr bool SparseIsB = Cfg::SparseIsB;
  static constexpr bool Pingpong = Cfg::Pingpong;
  using TileShape = typename Cfg::TileShape;
  using ClusterShape = Shape<_1, _1, _1>;

  // Dense operand as GEMM (MN, K, L): RowMajor B is MN-major, ColMajor B is K-major.
  using DenseStride = cute::conditional_t<BColMajor, Stride<int64_t, _1, int64_t>, Stride<_1, int64_t, int64_t>>;

  // GEMM-view layout of D (= C): transposed orientation flips it.
  static constexpr bool GemmDColMajor = SparseIsB ? !CColMajor : CColMajor;
  using LayoutD = cute::conditional_t<GemmDColMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int AlignC = 128 / cutlass::sizeof_bits<ElementC>::value;

  using EpilogueSchedule = cute::conditional_t<Pingpong, cutlass::epilogue::TmaWarpSpecialized,
                                               cutlass::epilogue::TmaWarpSpecializedCooperative>;
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, LayoutD, AlignC, ElementC, LayoutD,
      AlignC, EpilogueSchedule>::CollectiveOp;

  static constexpr int EpilogueSmem = int(sizeof(typename CollectiveEpilogue::SharedStorage));
  static constexpr int StageBytes =
      int((size<0>(TileShape{}) + size<1>(TileShape{})) * size<2>(TileShape{}) * sizeof(Element)) + 32;
  static constexpr int Stages = (kSmemCapacity - EpilogueSmem - kKernelSmemSlack - kMinOrderBytes) / StageBytes;
  static_assert(Stages >= 2, "tile too large for shared memory");
  static constexpr int LeftoverBytes = kSmemCapacity - EpilogueSmem - kKernelSmemSlack - Stages * StageBytes;
  static constexpr int OrderCap = (LeftoverBytes / 2 < kMaxOrderRows ? LeftoverBytes / 2 : kMaxOrderRows) / 8 * 8;

  using CollectiveMainloop = CollectiveSparseMma<Element, DenseStride, TileShape, Stages, SparseIsB, Pingpong>;
  using SchedulerTag = BsrSchedulerTag<SparseIsB, OrderCap>;
  using ProblemShape = Shape<int, int, int, int>;

  static_assert(!Pingpong, "sparsek builds the cooperative kernel only (see the design notes above)");
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue, SchedulerTag>;
  static_assert(GemmKernel::SharedStorageSize <= kSmemCapacity, "shared storage exceeds sm90 capacity");

  // Byte offset of the scheduler's order array in the kernel's dynamic shared memory.
  static int order_smem_offset() {
    using SS = typename GemmKernel::SharedStorage;
    using TS = typename GemmKernel::TileScheduler::SharedStorage;
    return int(offsetof(SS, scheduler) + offsetof(TS, order));
  }

  static cudaError_t run(const detail::Problem& p, const Tuning& t, int device, int sm_count, cudaStream_t stream) {
    const int64_t m = p.a.m, n = p.n(), k = p.a.k;
    const int M = int(SparseIsB ? n : m);
    const int N = int(SparseIsB ? m : n);
    const int K = int(k);

    typename CollectiveMainloop::Arguments mainloop{};
    const bool empty = p.a.nnzb == 0;
    // An all-empty matrix still needs a valid TMA descriptor; it is never read.
    mainloop.values = static_cast<const Element*>(empty ? p.b.data : p.a.values);
    mainloop.bm = p.a.bm;
    mainloop.bk = p.a.bk;
    mainloop.nnzb = empty ? 1 : int32_t(p.a.nnzb);
    mainloop.row_ptr = p.a.row_ptr;
    // With nnzb == 0 the C++ API allows null col_idx; no block-row has an entry to read,
    // but CUTLASS's can_implement wants a non-null pointer: row_ptr stands in.
    mainloop.col_idx = empty ? p.a.row_ptr : p.a.col_idx;
    mainloop.dense = static_cast<const Element*>(p.b.data);
    const int64_t ldb = p.b.ld;
    if constexpr (BColMajor) {
      mainloop.dDense = DenseStride{ldb, Int<1>{}, ldb * n};
    } else {
      mainloop.dDense = DenseStride{Int<1>{}, ldb, ldb * k};
    }

    using StrideD = typename CollectiveEpilogue::StrideD;
    using StrideC = typename CollectiveEpilogue::StrideC;
    const int64_t ldc = p.c.ld;
    const int64_t batch_c = ldc * (p.c.layout == Layout::RowMajor ? m : n);
    StrideD dD;
    StrideC dC;
    if constexpr (GemmDColMajor) {
      dD = StrideD{Int<1>{}, ldc, batch_c};
      dC = StrideC{Int<1>{}, ldc, batch_c};
    } else {
      dD = StrideD{ldc, Int<1>{}, batch_c};
      dC = StrideC{ldc, Int<1>{}, batch_c};
    }
    auto* ptr_c = static_cast<ElementC*>(p.c.data);
    typename CollectiveEpilogue::Arguments epilogue{{p.alpha, p.beta}, ptr_c, dC, ptr_c, dD};

    typename GemmKernel::TileScheduler::Arguments scheduler{};
    scheduler.row_ptr = p.a.row_ptr;
    scheduler.kpb = p.a.bk / int32_t(size<2>(TileShape{}));
    scheduler.band = t.band;
    scheduler.sort = t.sort && p.a.nnzb > 0;
    scheduler.order_smem_offset = OrderCap > 0 ? order_smem_offset() : -1;

    cutlass::KernelHardwareInfo hw_info{};
    hw_info.device_id = device;
    hw_info.sm_count = sm_count;

    typename GemmKernel::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                        {M, N, K, 1},
                                        mainloop,
                                        epilogue,
                                        hw_info,
                                        scheduler};
    if (!GemmKernel::can_implement(args)) {
      return cudaErrorInvalidValue;  // cutlass_unsupported_reason should have refused it
    }
    if (GemmKernel::get_workspace_size(args) != 0) {
      return cudaErrorInvalidValue;  // none of our pieces needs one
    }
    typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, nullptr);

    const dim3 grid = GemmKernel::get_grid_shape(params);
    const dim3 block = GemmKernel::get_block_shape();
    const int smem = GemmKernel::SharedStorageSize;
    auto kernel = &cutlass::device_kernel<GemmKernel>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) {
      return err;
    }
    kernel<<<grid, block, smem, stream>>>(params);
    return cudaGetLastError();
  }
};

using LaunchFn = cudaError_t (*)(const detail::Problem&, const Tuning&, int, int, cudaStream_t);

// =====================================================================================
// Instantiation list. Each entry is one full CUTLASS kernel (~30 s, ~1.5 GB of nvcc).
// Key: input dtype, bm, B layout, C layout, config name ("" = the default of that key).
// C dtype == input dtype.
// =====================================================================================
template <class E, bool BCol, bool CCol, class Cfg>
constexpr LaunchFn fn() {
  return &BsrGemm<E, E, BCol, CCol, Cfg>::run;
}
template <class E, int BM, bool BCol, bool CCol>
constexpr LaunchFn fn() {
  return fn<E, BCol, CCol, cute::conditional_t<BM == 128, DefaultCfg128, DefaultCfg64>>();
}

struct Entry {
  DType dtype;
  int bm;
  Layout b_layout;
  Layout c_layout;
  const char* config;  // "" = default
  LaunchFn launch;
};

using half_t = cutlass::half_t;
using bf16_t = cutlass::bfloat16_t;
[[maybe_unused]] constexpr Layout R_ = Layout::RowMajor;
[[maybe_unused]] constexpr Layout C_ = Layout::ColMajor;

#ifndef SPARSEK_SM90_MIN_INSTANTIATIONS
#define SPARSEK_SM90_MIN_INSTANTIATIONS 0
#endif
#ifndef SPARSEK_SM90_ROW_MAJOR_ONLY
#define SPARSEK_SM90_ROW_MAJOR_ONLY 0
#endif

// SPARSEK_SM90_MIN_INSTANTIATIONS=1 keeps only the first entry (quick builds).
// SPARSEK_SM90_ROW_MAJOR_ONLY=1 keeps only RowMajor B and C (4 kernels instead of 16).
const Entry kEntries[] = {
    {DType::F16, 128, R_, R_, "", fn<half_t, 128, false, false>()},
#if !SPARSEK_SM90_MIN_INSTANTIATIONS
    {DType::F16, 64, R_, R_, "", fn<half_t, 64, false, false>()},
    {DType::BF16, 128, R_, R_, "", fn<bf16_t, 128, false, false>()},
    {DType::BF16, 64, R_, R_, "", fn<bf16_t, 64, false, false>()},
#if !SPARSEK_SM90_ROW_MAJOR_ONLY
    {DType::F16, 128, C_, R_, "", fn<half_t, 128, true, false>()},
    {DType::F16, 128, R_, C_, "", fn<half_t, 128, false, true>()},
    {DType::F16, 128, C_, C_, "", fn<half_t, 128, true, true>()},
    {DType::F16, 64, C_, R_, "", fn<half_t, 64, true, false>()},
    {DType::F16, 64, R_, C_, "", fn<half_t, 64, false, true>()},
    {DType::F16, 64, C_, C_, "", fn<half_t, 64, true, true>()},
    {DType::BF16, 128, C_, R_, "", fn<bf16_t, 128, true, false>()},
    {DType::BF16, 128, R_, C_, "", fn<bf16_t, 128, false, true>()},
    {DType::BF16, 128, C_, C_, "", fn<bf16_t, 128, true, true>()},
    {DType::BF16, 64, C_, R_, "", fn<bf16_t, 64, true, false>()},
    {DType::BF16, 64, R_, C_, "", fn<bf16_t, 64, false, true>()},
    {DType::BF16, 64, C_, C_, "", fn<bf16_t, 64, true, true>()},
#endif
#endif
    // Tuning variants (F16, RowMajor B and C only); see the TUNING OVERRIDE table.
    {DType::F16, 128, R_, R_, "coop_128x256", fn<half_t, 128, false, false>()},
    {DType::F16, 64, R_, R_, "coopT_256x64", fn<half_t, 64, false, false>()},
#if SPARSEK_SM90_TUNING_VARIANTS && !SPARSEK_SM90_MIN_INSTANTIATIONS
    {DType::F16, 128, R_, R_, "coop_128x192", fn<half_t, false, false, KCfg<128, 192, false, false>>()},
    {DType::F16, 128, R_, R_, "coop_128x128", fn<half_t, false, false, KCfg<128, 128, false, false>>()},
    {DType::F16, 128, R_, R_, "coopT_256x128", fn<half_t, false, false, KCfg<256, 128, true, false>>()},
    {DType::F16, 64, R_, R_, "coopT_128x64", fn<half_t, false, false, KCfg<128, 64, true, false>>()},
#endif
};

// Tuning variants exist only for this key.
bool tunable(const detail::Problem& p) {
  return p.a.dtype == DType::F16 && p.c.dtype == DType::F16 && p.b.layout == Layout::RowMajor &&
         p.c.layout == Layout::RowMajor;
}

const Entry* find_entry(const detail::Problem& p) {
  const char* want = tunable(p) ? tuning().name : "";
  for (const Entry& e : kEntries) {
    if (e.dtype == p.a.dtype && e.bm == p.a.bm && e.b_layout == p.b.layout && e.c_layout == p.c.layout &&
        std::strcmp(e.config, want) == 0) {
      return &e;
    }
  }
  return nullptr;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace sparsek::sm90

namespace sparsek::detail {

const char* cutlass_unsupported_reason(const Problem& p, int cc_major, int cc_minor) {
  using namespace sparsek::sm90;
  if (cc_major != 9 || cc_minor != 0) {
    return "CUTLASS backend: needs compute capability 9.0 (Hopper, sm_90a)";
  }
  if (p.a.dtype != DType::F16 && p.a.dtype != DType::BF16) {
    return "CUTLASS backend: A must be F16 or BF16";
  }
  if (p.b.dtype != p.a.dtype) {
    return "CUTLASS backend: B must have A's dtype";
  }
  if (p.c.dtype != p.a.dtype) {
    return "CUTLASS backend: C must have the input dtype (F32 output not instantiated)";
  }
  const int bm = p.a.bm, bk = p.a.bk;
  if (!((bm == 64 || bm == 128) && (bk == 64 || bk == 128))) {
    return "CUTLASS backend: block shape must be 64x64, 64x128, 128x64 or 128x128";
  }
  if (find_entry(p) == nullptr) {
    if (tunable(p) && tuning().name[0] != '\0') {
      return "CUTLASS backend: unknown SPARSEK_SM90_CONFIG for this block height (tuning override)";
    }
    return "CUTLASS backend: this dtype / block height / B layout / C layout combination is not instantiated";
  }
  const int64_t m = p.a.m, n = p.n(), k = p.a.k;
  if (m <= 0 || n <= 0 || k <= 0) {
    return "CUTLASS backend: m, n and k must be positive";
  }
  if (m % bm != 0 || k % bk != 0) {
    return "CUTLASS backend: m and k must be multiples of the block shape";
  }
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || p.a.nnzb > INT32_MAX) {
    return "CUTLASS backend: m, n, k and nnzb must fit in int32";
  }
  if (p.a.nnzb < 0 || p.a.nnzb > (m / bm) * (k / bk)) {
    return "CUTLASS backend: nnzb out of range";
  }
  // TMA: 16-byte aligned base addresses, leading dimensions multiple of 16 bytes, and the
  // contiguous extent of B and C a multiple of 8 elements (16-bit types).
  if (n % 8 != 0) {
    return "CUTLASS backend: n must be a multiple of 8";
  }
  if (!aligned16(p.b.data) || !aligned16(p.c.data) || (p.a.nnzb > 0 && !aligned16(p.a.values))) {
    return "CUTLASS backend: A values, B and C must be 16-byte aligned";
  }
  if (p.b.ld % 8 != 0 || p.c.ld % 8 != 0) {
    return "CUTLASS backend: leading dimensions of B and C must be multiples of 8 elements";
  }
  const int64_t b_min_ld = p.b.layout == Layout::RowMajor ? n : k;
  const int64_t c_min_ld = p.c.layout == Layout::RowMajor ? n : m;
  if (p.b.ld < b_min_ld || p.c.ld < c_min_ld) {
    return "CUTLASS backend: leading dimension smaller than the matrix";
  }
  // TMA global strides must be below 2^40 bytes.
  const int64_t b_batch = p.b.ld * (p.b.layout == Layout::RowMajor ? k : n);
  const int64_t c_batch = p.c.ld * (p.c.layout == Layout::RowMajor ? m : n);
  if (b_batch >= (int64_t(1) << 39) || c_batch >= (int64_t(1) << 39) ||
      int64_t(bm) * bk * 2 >= (int64_t(1) << 39)) {
    return "CUTLASS backend: matrix too large for TMA strides";
  }
  return nullptr;
}

cudaError_t cutlass_launch(const Problem& p, cudaStream_t stream) {
  using namespace sparsek::sm90;
  const Entry* e = find_entry(p);
  if (e == nullptr) {
    return cudaErrorNotSupported;
  }
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) {
    return err;
  }
  int sm_count = 0;
  err = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) {
    return err;
  }

  return e->launch(p, tuning(), device, sm_count, stream);
}

}  // namespace sparsek::detail

#endif  // SPARSEK_NO_SM90A
