// sparsek: the Hopper (sm_90a) BSR x dense kernels, built from CUTLASS 4.2 / CuTe SM90 pieces.
//
// Design (see the headers for details):
//   kernel    : CUTLASS's own cutlass::gemm::kernel::GemmUniversal with the cooperative TMA
//               warp-specialized schedule (1 producer warpgroup, 2 consumer warpgroups,
//               persistent). Reused unchanged.
//   mainloop  : collective_sparse_mma.hpp - TMA + PipelineTmaAsync + WGMMA; the producer walks
//               only the nonzero blocks of the tile's block-row (sparse_tile_iterator.hpp).
//   scheduler : bsr_tile_scheduler.hpp - persistent, (block-row, dense tile) work tiles whose
//               WorkTileInfo carries the per-tile k count; block-rows longest first.
//   epilogue  : CUTLASS's TMA warp-specialized collective epilogue (LinearCombination
//               alpha/beta, TMA loads of C when beta != 0, TMA stores of D = C in place).
//
// Pingpong: CUTLASS's pingpong kernel advances its consumer pipeline state by a fixed,
// problem-wide k count (size<3>(gA_mkl)) for the other warpgroup's tile, so it cannot take
// per-tile k counts; only the cooperative kernel is used.
//
// Workspace: when the matrix has at most kMaxSortedBlockRows block-rows, cutlass_launch
// computes on the device a permutation of block-rows by decreasing nnz (int32 per block-row)
// into memory from cudaMallocAsync on `stream`, released with cudaFreeAsync on `stream`
// after the GEMM. No host-side preprocessing and no synchronization.
#include <cstdint>
#include <cstdio>

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
// Config table: the one place to tune. Per block height bm:
//   SparseIsB : false -> GEMM C = A*B, tile = (bm rows of one block-row) x (TileN of n)
//               true  -> GEMM C^T = B^T*A^T, tile = (TileM of n) x (bm of one block-row)
//               (the cooperative kernel needs the GEMM M tile >= 128, hence bm = 64 is
//               handled transposed; its WGMMA N is then 64.)
//   TileShape : GEMM (M, N, K) tile. TileK must divide bk (64 divides 64 and 128).
// Stages are derived from the shared memory left after the epilogue (see BsrGemm).
// Candidates worth measuring: bm=128: 128x256x64 (default), 128x128x64;
//                             bm=64 : 256x64x64 (default), 128x64x64.
// =====================================================================================
template <int BM> struct TileConfig;
template <> struct TileConfig<128> {
  static constexpr bool SparseIsB = false;
  using TileShape = Shape<_128, _256, _64>;
};
template <> struct TileConfig<64> {
  static constexpr bool SparseIsB = true;
  using TileShape = Shape<_256, _64, _64>;
};

constexpr int kSmemCapacity = 232448;        // sm90 max dynamic shared memory per block
constexpr int kKernelSmemSlack = 1024;       // kernel-level pipelines/barriers + alignment
constexpr int64_t kMaxSortedBlockRows = 8192;  // above this, tiles go in block-row order

template <class Element, class ElementC, int BM, bool BColMajor, bool CColMajor>
struct BsrGemm {
  using Cfg = TileConfig<BM>;
  static constexpr bool SparseIsB = Cfg::SparseIsB;
  using TileShape = typename Cfg::TileShape;
  using ClusterShape = Shape<_1, _1, _1>;

  // Dense operand as GEMM (MN, K, L): RowMajor B is MN-major, ColMajor B is K-major.
  using DenseStride = cute::conditional_t<BColMajor, Stride<int64_t, _1, int64_t>, Stride<_1, int64_t, int64_t>>;

  // GEMM-view layout of D (= C): transposed orientation flips it.
  static constexpr bool GemmDColMajor = SparseIsB ? !CColMajor : CColMajor;
  using LayoutD = cute::conditional_t<GemmDColMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  static constexpr int AlignC = 128 / cutlass::sizeof_bits<ElementC>::value;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, LayoutD, AlignC, ElementC, LayoutD,
      AlignC, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

  static constexpr int EpilogueSmem = int(sizeof(typename CollectiveEpilogue::SharedStorage));
  static constexpr int StageBytes =
      int((size<0>(TileShape{}) + size<1>(TileShape{})) * size<2>(TileShape{}) * sizeof(Element)) + 32;
  static constexpr int Stages = (kSmemCapacity - EpilogueSmem - kKernelSmemSlack) / StageBytes;
  static_assert(Stages >= 2, "tile too large for shared memory");

  using CollectiveMainloop = CollectiveSparseMma<Element, DenseStride, TileShape, Stages, SparseIsB>;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue, BsrSchedulerTag<SparseIsB>>;
  static_assert(GemmKernel::SharedStorageSize <= kSmemCapacity, "shared storage exceeds sm90 capacity");

  static cudaError_t run(const detail::Problem& p, const int32_t* order, int device, int sm_count,
                         cudaStream_t stream) {
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
    mainloop.col_idx = p.a.col_idx;
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
    scheduler.order = order;
    scheduler.kpb = p.a.bk / int32_t(size<2>(TileShape{}));

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

// Permutation of block-rows by decreasing nnz (ties by index): order[rank(i)] = i.
// O(R^2 / threads); only used for R <= kMaxSortedBlockRows.
__global__ void __launch_bounds__(256) bsr_block_row_order_kernel(const int32_t* __restrict__ row_ptr,
                                                                  int32_t R, int32_t* __restrict__ order) {
  __shared__ int32_t s_nnz[256];
  const int32_t i = int32_t(blockIdx.x) * 256 + int32_t(threadIdx.x);
  const int32_t mine = i < R ? row_ptr[i + 1] - row_ptr[i] : 0;
  int32_t rank = 0;
  for (int32_t base = 0; base < R; base += 256) {
    const int32_t j = base + int32_t(threadIdx.x);
    __syncthreads();
    s_nnz[threadIdx.x] = j < R ? row_ptr[j + 1] - row_ptr[j] : -1;
    __syncthreads();
    const int32_t count = R - base < 256 ? R - base : 256;
    for (int32_t t = 0; t < count; ++t) {
      const int32_t o = s_nnz[t];
      rank += (o > mine) || (o == mine && base + t < i);
    }
  }
  if (i < R) {
    order[rank] = i;
  }
}

using LaunchFn = cudaError_t (*)(const detail::Problem&, const int32_t*, int, int, cudaStream_t);

// =====================================================================================
// Instantiation list. Each entry is one full CUTLASS kernel (~30 s, ~1.5 GB of nvcc).
// Key: input dtype, bm, B layout, C layout. C dtype == input dtype.
// =====================================================================================
template <class E, int BM, bool BCol, bool CCol>
constexpr LaunchFn fn() {
  return &BsrGemm<E, E, BM, BCol, CCol>::run;
}

struct Entry {
  DType dtype;
  int bm;
  Layout b_layout;
  Layout c_layout;
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
    {DType::F16, 128, R_, R_, fn<half_t, 128, false, false>()},
#if !SPARSEK_SM90_MIN_INSTANTIATIONS
    {DType::F16, 64, R_, R_, fn<half_t, 64, false, false>()},
    {DType::BF16, 128, R_, R_, fn<bf16_t, 128, false, false>()},
    {DType::BF16, 64, R_, R_, fn<bf16_t, 64, false, false>()},
#if !SPARSEK_SM90_ROW_MAJOR_ONLY
    {DType::F16, 128, C_, R_, fn<half_t, 128, true, false>()},
    {DType::F16, 128, R_, C_, fn<half_t, 128, false, true>()},
    {DType::F16, 128, C_, C_, fn<half_t, 128, true, true>()},
    {DType::F16, 64, C_, R_, fn<half_t, 64, true, false>()},
    {DType::F16, 64, R_, C_, fn<half_t, 64, false, true>()},
    {DType::F16, 64, C_, C_, fn<half_t, 64, true, true>()},
    {DType::BF16, 128, C_, R_, fn<bf16_t, 128, true, false>()},
    {DType::BF16, 128, R_, C_, fn<bf16_t, 128, false, true>()},
    {DType::BF16, 128, C_, C_, fn<bf16_t, 128, true, true>()},
    {DType::BF16, 64, C_, R_, fn<bf16_t, 64, true, false>()},
    {DType::BF16, 64, R_, C_, fn<bf16_t, 64, false, true>()},
    {DType::BF16, 64, C_, C_, fn<bf16_t, 64, true, true>()},
#endif
#endif
};

const Entry* find_entry(const detail::Problem& p) {
  for (const Entry& e : kEntries) {
    if (e.dtype == p.a.dtype && e.bm == p.a.bm && e.b_layout == p.b.layout && e.c_layout == p.c.layout) {
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

  const int64_t R = p.block_rows();
  int32_t* order = nullptr;
  if (R > 1 && R <= kMaxSortedBlockRows && p.a.nnzb > 0) {
    err = cudaMallocAsync(reinterpret_cast<void**>(&order), size_t(R) * sizeof(int32_t), stream);
    if (err != cudaSuccess) {
      return err;
    }
    const unsigned blocks = unsigned((R + 255) / 256);
    bsr_block_row_order_kernel<<<blocks, 256, 0, stream>>>(p.a.row_ptr, int32_t(R), order);
    err = cudaGetLastError();
    if (err != cudaSuccess) {
      cudaFreeAsync(order, stream);
      return err;
    }
  }

  err = e->launch(p, order, device, sm_count, stream);

  if (order != nullptr) {
    cudaError_t free_err = cudaFreeAsync(order, stream);
    if (err == cudaSuccess) {
      err = free_err;
    }
  }
  return err;
}

}  // namespace sparsek::detail

#endif  // SPARSEK_NO_SM90A
