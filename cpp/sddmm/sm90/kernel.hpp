// sparsek SDDMM on SM90: the kernel of one row of kSddmmSm90Variants (configs.hpp), built
// from CUTLASS 4.2 pieces, and its launch.
//
//   S = alpha * (A*B) ⊙ mask + beta * S     (S BSR, bm x bn blocks, each row-major)
//
// Design: every stored block j of S (block-row r, block-column c = col_idx[j]) is one
// bm x bn x k GEMM tile, S_j = alpha * A[r*bm.., :] * B[:, c*bn..] + beta * S_j. The kernel
// is CUTLASS's GemmUniversal, unchanged, on the batched problem (bm, bn, k, L = nnzb):
//   kernel     cooperative (128x128 blocks: two consumer warpgroups split the tile) or
//              ping-pong (64x64 blocks: each consumer warpgroup owns a tile, its epilogue
//              under the other's MMAs), TMA warp-specialized, persistent; CUTLASS's static
//              persistent scheduler walks the nnzb tiles (0, 0, j), j = CTA, CTA + grid, ...
//              so neighbouring CTAs take neighbouring blocks of one block-row (A's rows
//              shared in L2).
//   mainloop   CUTLASS's TMA + GMMA mainloop (CollectiveBuilder) behind BlockListMainloop
//              (mainloop.hpp): TMA descriptors over the whole A and B, tile (0, 0, j) loads
//              block-row r of A and block-column c of B (coords[j] = (r, c)); the k tail is
//              zero-filled by TMA.
//   epilogue   CUTLASS's TMA warp-specialized epilogue with LinearCombination on D = C =
//              S's values as the batched (bm, bn, nnzb) tensor, strides (bn, 1, bm*bn):
//              batch j is block j. With beta == 0 the source is not read
//              (LinearCombination's is_C_load_needed is false: no TMA load of C, the source
//              registers are cleared, so a NaN in S cannot leak into the result).
// Before the GEMM a small kernel writes coords (nnzb int2, one warp per block-row) into
// stream-ordered scratch (core/split_workspace.hpp), freed on the stream after the GEMM. CUTLASS asks
// for no workspace here (no split-k, no descriptor updates); run() checks that.
//
// Each element of S is written by one CTA, its k summed in a fixed order: deterministic.
//
// Each row's kernel is compiled in a translation unit the build generates, of lines like:
//     #include "sddmm/sm90/kernel.hpp"
//     SPARSEK_SDDMM_SM90_INSTANTIATE("sddmm_sm90_f16_b128_arow_bcol")
// family.cu checks what the kernels need (supports / fits) before launch_row. Built without
// sm_90a (SPARSEK_NO_SM90A), the macro only checks that the row exists.
#pragma once

#include "sddmm/sm90/configs.hpp"

#ifdef SPARSEK_NO_SM90A

#define SPARSEK_SDDMM_SM90_INSTANTIATE(NAME)                                        \
  static_assert(::sparsek::detail::sddmm_sm90::sddmm_sm90_row(NAME) >= 0,           \
                "SPARSEK_SDDMM_SM90_INSTANTIATE: no row " NAME " in kSddmmSm90Variants");

#else

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/numeric_types.h"
#include "cutlass/kernel_hardware_info.hpp"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "core/split_workspace.hpp"
#include "sddmm/sm90/mainloop.hpp"
#include "core/tma_encode.hpp"  // a refused TMA encode leaves an all-zero descriptor
#include "core/tma_status.hpp"

// The explicit instantiation of one row's launch and probe (a line of a generated row unit).
#define SPARSEK_SDDMM_SM90_INSTANTIATE(NAME)                                                            \
  static_assert(::sparsek::detail::sddmm_sm90::sddmm_sm90_row(NAME) >= 0,                               \
                "SPARSEK_SDDMM_SM90_INSTANTIATE: no row " NAME " in kSddmmSm90Variants");               \
  namespace sparsek::detail::sddmm_sm90 {                                                               \
  template cudaError_t launch_row<sddmm_sm90_row(NAME)>(const SddmmProblem&, cudaStream_t);             \
  template const void* probe_kernel<sddmm_sm90_row(NAME)>();                                            \
  }

namespace sparsek::detail::sddmm_sm90 {

using namespace cute;

// The CUTLASS element type of a DType.
template <DType kT>
struct ElementOf {  // the CUTLASS type of the DType's traits entry (core/dtype.hpp)
  using type = typename detail::DeviceTypeOf<kT>::cutlass_type;
};

// coords[j] = (r, col_idx[j]) for every stored block j of block-row r: one warp per
// block-row, its lanes over the row's blocks. (Templated on the row: one copy per
// translation unit.)
constexpr int kCoordsThreads = 256;
template <int kRow>
__global__ void __launch_bounds__(kCoordsThreads)
    sddmm_block_coords(const int32_t* __restrict__ row_ptr, const int32_t* __restrict__ col_idx, int32_t block_rows,
                       int2* __restrict__ coords) {
  const int64_t r = (int64_t(blockIdx.x) * kCoordsThreads + threadIdx.x) / 32;
  if (r >= block_rows) return;
  const int lane = int(threadIdx.x % 32);
  const int32_t begin = row_ptr[r], end = row_ptr[r + 1];
  for (int32_t j = begin + lane; j < end; j += 32) coords[j] = make_int2(int(r), col_idx[j]);
}

// One kernel: Element in (A, B), ElementS out (S), the layouts of A and B, the square block
// (= the GEMM tile's M and N, K = 64) and the kernel schedule.
template <class Element, class ElementS, bool AColMajor, bool BColMajor, int Block, SddmmSchedule Sched>
struct SddmmGemm {
  static constexpr bool kCooperative = Sched == SddmmSchedule::Cooperative;
  static_assert(kCooperative ? Block == 128 : Block == 64, "128x128 blocks run cooperative, 64x64 ping-pong");
  using TileShape = Shape<Int<Block>, Int<Block>, _64>;
  using ClusterShape = Shape<_1, _1, _1>;
  // B (k x n) is CUTLASS's N x K operand: column-major B is K-major.
  using LayoutA = cute::conditional_t<AColMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using LayoutB = cute::conditional_t<BColMajor, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
  using LayoutS = cutlass::layout::RowMajor;  // each block row-major bm x bn
  static constexpr int kAlignAB = 128 / cutlass::sizeof_bits<Element>::value;
  static constexpr int kAlignS = 128 / cutlass::sizeof_bits<ElementS>::value;

  using KernelSchedule = cute::conditional_t<kCooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                                             cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using EpilogueSchedule = cute::conditional_t<kCooperative, cutlass::epilogue::TmaWarpSpecializedCooperative,
                                               cutlass::epilogue::TmaWarpSpecialized>;
  // D = alpha * acc + beta * C, C = D = S's values; fp32 compute.
  using Fusion = cutlass::epilogue::fusion::LinearCombination<ElementS, float, ElementS, float>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementS, LayoutS, kAlignS, ElementS, LayoutS,
      kAlignS, EpilogueSchedule, Fusion>::CollectiveOp;

  using BaseMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlignAB, Element, LayoutB, kAlignAB,
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<int(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using CollectiveMainloop = BlockListMainloop<BaseMainloop>;

  using ProblemShape = Shape<int, int, int, int>;  // (bm, bn, k, nnzb)
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue,
                                                          cutlass::gemm::PersistentScheduler>;

  // p passed kSddmmSm90Family's supports() and fits() for this row; nnzb > 0 (the registry
  // launches nothing for an empty S).
  template <int kRow>
  static cudaError_t run(const SddmmProblem& p, cudaStream_t stream) {
    const int m = int(p.m()), n = int(p.n()), k = int(p.k());
    const int nnzb = int(p.s.nnzb);
    const int32_t block_rows = int32_t(p.block_rows());
    if (nnzb == 0) return cudaSuccess;  // nothing to write (the registry does not call us then)

    // coords in scratch, written by the coords kernel ahead of the GEMM on the stream. The
    // GEMM's parameters (its TMA descriptors checked) come first: a failure launches nothing.
    void* scratch = nullptr;
    cudaError_t err =
        detail::scratch_alloc(p.device.id, size_t(nnzb) * sizeof(int2), /*zero_bytes=*/0, stream, &scratch);
    if (err != cudaSuccess) return err;
    auto* coords = static_cast<int2*>(scratch);
    typename GemmKernel::Params params;
    err = gemm_params(p, m, n, k, nnzb, coords, &params);
    if (err == cudaSuccess) {
      constexpr int64_t kRowsPerCta = kCoordsThreads / 32;
      const unsigned coord_ctas = unsigned((int64_t(block_rows) + kRowsPerCta - 1) / kRowsPerCta);
      sddmm_block_coords<kRow>
          <<<coord_ctas, kCoordsThreads, 0, stream>>>(p.s.row_ptr, p.s.col_idx, block_rows, coords);
      err = cudaGetLastError();
    }
    if (err == cudaSuccess) err = launch_gemm(params, stream);
    const cudaError_t freed = detail::scratch_free(scratch, stream);
    return err != cudaSuccess ? err : freed;
  }

  static cudaError_t gemm_params(const SddmmProblem& p, int m, int n, int k, int nnzb, const int2* coords,
                                 typename GemmKernel::Params* out) {
    using StrideA = typename BaseMainloop::StrideA;
    using StrideB = typename BaseMainloop::StrideB;
    using StrideC = typename CollectiveEpilogue::StrideC;
    using StrideD = typename CollectiveEpilogue::StrideD;

    typename CollectiveMainloop::Arguments mainloop{};
    mainloop.base.ptr_A = static_cast<const Element*>(p.a.data);
    mainloop.base.ptr_B = static_cast<const Element*>(p.b.data);
    const int64_t lda = p.a.ld, ldb = p.b.ld;
    // A as M x K (L = 1: its batch stride is never stepped; the whole matrix's size keeps
    // it a valid TMA stride, family.cu checks it is below 2^40 bytes).
    if constexpr (AColMajor) {
      mainloop.base.dA = StrideA{Int<1>{}, lda, lda * k};
    } else {
      mainloop.base.dA = StrideA{lda, Int<1>{}, lda * m};
    }
    // B as N x K.
    if constexpr (BColMajor) {
      mainloop.base.dB = StrideB{ldb, Int<1>{}, ldb * n};
    } else {
      mainloop.base.dB = StrideB{Int<1>{}, ldb, ldb * k};
    }
    mainloop.m = m;
    mainloop.n = n;
    mainloop.coords = coords;
    mainloop.nnzb = nnzb;

    // S's values as the batched bm x bn row-major tensor: batch j = block j.
    auto* s = static_cast<ElementS*>(p.s.values);
    const StrideD dD{int64_t(Block), Int<1>{}, int64_t(Block) * Block};
    const StrideC dC{int64_t(Block), Int<1>{}, int64_t(Block) * Block};
    typename CollectiveEpilogue::Arguments epilogue{{p.alpha, p.beta}, s, dC, s, dD};

    cutlass::KernelHardwareInfo hw_info{};
    hw_info.device_id = p.device.id;
    hw_info.sm_count = p.device.sm_count;

    typename GemmKernel::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                        {Block, Block, k, nnzb},
                                        mainloop,
                                        epilogue,
                                        hw_info,
                                        {}};
    if (!GemmKernel::can_implement(args)) {
      return cudaErrorInvalidValue;  // kSddmmSm90Family's supports()/fits() should have refused it
    }
    if (GemmKernel::get_workspace_size(args) != 0) {
      return cudaErrorInvalidValue;  // none of these pieces asks CUTLASS for one
    }
    *out = GemmKernel::to_underlying_arguments(args, nullptr);
    // A descriptor cuTensorMapEncodeTiled refused is all zeros (tma_status.hpp).
    if (!tma_encoded(out->mainloop.tma_load_a)) return tma_encode_error(TmaOperand::A);
    if (!tma_encoded(out->mainloop.tma_load_b)) return tma_encode_error(TmaOperand::B);
    if (!tma_encoded(out->epilogue.tma_load_c) || !tma_encoded(out->epilogue.tma_store_d))
      return tma_encode_error(TmaOperand::S);
    return cudaSuccess;
  }

  static cudaError_t launch_gemm(typename GemmKernel::Params const& params, cudaStream_t stream) {
    const int smem = GemmKernel::SharedStorageSize;
    auto kernel = &cutlass::device_kernel<GemmKernel>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    cudaLaunchConfig_t config{};
    config.gridDim = GemmKernel::get_grid_shape(params);
    config.blockDim = GemmKernel::get_block_shape();
    config.dynamicSmemBytes = size_t(smem);
    config.stream = stream;
    config.attrs = nullptr;
    config.numAttrs = 0;
    err = cudaLaunchKernelEx(&config, kernel, params);
    const cudaError_t last = cudaGetLastError();
    return err != cudaSuccess ? err : last;
  }
};

// The kernel of row kRow of kSddmmSm90Variants.
template <int kRow>
struct RowGemm {
  static_assert(0 <= kRow && kRow < kSddmmSm90Rows, "no such row in kSddmmSm90Variants");
  static constexpr SddmmSm90Variant v = kSddmmSm90Variants[kRow];
  using Element = typename ElementOf<v.input>::type;
  using ElementS = typename ElementOf<v.s_f32 ? DType::F32 : v.input>::type;
  using type = SddmmGemm<Element, ElementS, v.a_layout == Layout::ColMajor, v.b_layout == Layout::ColMajor, v.block,
                         v.schedule>;
};

template <int kRow>
cudaError_t launch_row(const SddmmProblem& p, cudaStream_t stream) {
  return RowGemm<kRow>::type::template run<kRow>(p, stream);
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&cutlass::device_kernel<typename RowGemm<kRow>::type::GemmKernel>);
}

}  // namespace sparsek::detail::sddmm_sm90

#endif  // SPARSEK_NO_SM90A
