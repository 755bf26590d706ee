// The WMMA SDDMM kernel: S = alpha * (A*B) ⊙ mask + beta * S, and the per-row launch that
// each row's generated unit instantiates (SPARSEK_SDDMM_WMMA_INSTANTIATE below).
//
// One CTA computes one TILE x TILE tile of one stored block j of S (block-row r, found by a
// binary search of row_ptr; block-column col_idx[j]) over the whole k: A's rows
// r*bm + .. and B's columns col_idx[j]*bn + .. stream through a cp.async ring in K_STEP 32
// slices, the warps multiply with nvcuda::wmma m16n16k16 (fp32), and the epilogue stages
// the fp32 tile in shared memory and writes it into block j (row-major, row stride bn) in
// 8-element vectors: alpha*acc (+ beta*S when beta != 0; S is not read otherwise).
// Operands contiguous along M or N (column-major A, row-major B) are staged as stored and
// read by column-major / row-major fragments; the k tail is zero-filled (cp.async with no
// source bytes): rows past k, or 8-element chunks past k where A or B is contiguous along
// k (family.cu then requires k % 8 == 0).
//
// Each element of S is written by one thread of one CTA, summing over k in a fixed order:
// bitwise reproducible. No atomics, no split-k.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "core/dtype.hpp"
#include "sddmm/problem.hpp"
#include "sddmm/wmma/configs.hpp"
#include "core/vec8.cuh"
#include "spmm/wmma/cp_async.cuh"

namespace sparsek::detail::sddmm_wmma {
namespace wmma = nvcuda::wmma;
using spmm_wmma::cp_async_16;
using spmm_wmma::cp_async_commit;
using spmm_wmma::cp_async_wait;

struct KernelArgs {
  const void* a;
  const void* b;
  void* s;  // S's values
  const int32_t* row_ptr;
  const int32_t* col_idx;
  int64_t lda, ldb;
  int64_t k;
  int32_t block_rows;
  int32_t bm, bn;
  int32_t tiles_n;      // bn / TILE
  int32_t tiles_block;  // (bm / TILE) * (bn / TILE)
  float alpha, beta;
  bool s_f32;  // S is f32 (else the input type)
};

template <int kRow, bool kACol, bool kBCol>
struct Traits {
  static constexpr SddmmWmmaVariant cfg = kSddmmWmmaVariants[kRow];
  static constexpr int kTile = cfg.tile, kK = kSddmmKStep, kStages = cfg.stages;
  static constexpr int kWarpsM = cfg.warps_m, kWarpsN = cfg.warps_n, kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpM = kTile / kWarpsM, kWarpN = kTile / kWarpsN;
  static constexpr int kFragsM = kWarpM / 16, kFragsN = kWarpN / 16;
  // Stage layouts: A [TILE][K+8] (row-major A) or [K][TILE+8] (column-major A); B [K][TILE+8]
  // (row-major B) or [TILE][K+8] (column-major B). Both take at most kStageElems.
  static constexpr int kLdA = kACol ? kTile + 8 : kK + 8;
  static constexpr int kLdB = kBCol ? kK + 8 : kTile + 8;
  static constexpr int kStageElems =
      kTile * (kK + 8) > kK * (kTile + 8) ? kTile * (kK + 8) : kK * (kTile + 8);
  static constexpr int kLdC = kTile + 4;
  static constexpr int kSmemBytes = sddmm_wmma_smem(cfg);
  static_assert(kWarpM % 16 == 0 && kWarpN % 16 == 0, "warp tiles are whole fragments");
  static_assert(kStages * 2 * kStageElems * 2 <= kSmemBytes && kTile * kLdC * 4 <= kSmemBytes, "smem");
};

// Copies one operand's TILE x K_STEP slice (chunks of 8 elements) into a stage. `contig_k`:
// the operand is contiguous along k (row-major A, column-major B): a chunk is 8 k of one
// line (line = row of A / column of B); else 8 lines of one k.
template <class Tr, bool kContigK, typename T>
__device__ __forceinline__ void load_slice(T* dst, const T* base, int64_t ld, int64_t k0, int64_t k, int ld_s) {
  constexpr int kPerLine = kContigK ? Tr::kK / 8 : Tr::kTile / 8;  // chunks per stored line
  constexpr int kChunks = Tr::kTile * Tr::kK / 8;
  for (int q = threadIdx.x; q < kChunks; q += Tr::kThreads) {
    const int line = q / kPerLine, off = (q % kPerLine) * 8;
    if constexpr (kContigK) {
      // line = tile line (row of A / column of B), off = k offset; k % 8 == 0 (family.cu).
      const int64_t kk = k0 + off;
      const bool ok = kk < k;
      cp_async_16(dst + line * ld_s + off, ok ? base + line * ld + kk : base, ok);
    } else {
      // line = k offset, off = tile offset.
      const int64_t kk = k0 + line;
      const bool ok = kk < k;
      cp_async_16(dst + line * ld_s + off, ok ? base + kk * ld + off : base, ok);
    }
  }
}

// Index of the block-row holding stored block j: the last r with row_ptr[r] <= j.
__device__ __forceinline__ int32_t block_row_of(const int32_t* row_ptr, int32_t rows, int32_t j) {
  int32_t lo = 0, hi = rows;  // row_ptr[lo] <= j < row_ptr[hi]
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (__ldg(row_ptr + mid) <= j) lo = mid;
    else hi = mid;
  }
  return lo;
}

template <int kRow, typename T, bool kACol, bool kBCol>
__global__ void __launch_bounds__(Traits<kRow, kACol, kBCol>::kThreads)
    sddmm_wmma_kernel(const KernelArgs args) {
  using Tr = Traits<kRow, kACol, kBCol>;
  constexpr int kTile = Tr::kTile, kK = Tr::kK, kStages = Tr::kStages;
  using ALayout = std::conditional_t<kACol, wmma::col_major, wmma::row_major>;
  using BLayout = std::conditional_t<kBCol, wmma::col_major, wmma::row_major>;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout>;
  using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout>;
  using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

  extern __shared__ __align__(128) unsigned char smem[];
  T* s_a = reinterpret_cast<T*>(smem);
  T* s_b = s_a + kStages * Tr::kStageElems;

  const int32_t j = static_cast<int32_t>(blockIdx.x / args.tiles_block);
  const int32_t t = static_cast<int32_t>(blockIdx.x % args.tiles_block);
  __shared__ int32_t s_row;
  if (threadIdx.x == 0) s_row = block_row_of(args.row_ptr, args.block_rows, j);
  __syncthreads();
  const int64_t row0 = int64_t(s_row) * args.bm + (t / args.tiles_n) * kTile;
  const int64_t col0 = int64_t(__ldg(args.col_idx + j)) * args.bn + (t % args.tiles_n) * kTile;

  // The tile's first row of A and first column of B (k = 0).
  const T* a0 = static_cast<const T*>(args.a) + (kACol ? row0 : row0 * args.lda);
  const T* b0 = static_cast<const T*>(args.b) + (kBCol ? col0 * args.ldb : col0);
  const int64_t steps = (args.k + kK - 1) / kK;

  auto issue = [&](int64_t step, int slot) {
    if (step < steps) {
      const int64_t k0 = step * kK;
      // Row-major A: rows of A contiguous along k; column-major: along M (k lines of lda).
      load_slice<Tr, !kACol>(s_a + slot * Tr::kStageElems, a0, args.lda, k0, args.k, Tr::kLdA);
      load_slice<Tr, kBCol>(s_b + slot * Tr::kStageElems, b0, args.ldb, k0, args.k, Tr::kLdB);
    }
    cp_async_commit();  // an empty group past the end keeps the wait count uniform
  };

  const int warp = threadIdx.x / 32;
  const int wm = (warp / Tr::kWarpsN) * Tr::kWarpM, wn = (warp % Tr::kWarpsN) * Tr::kWarpN;
  FragC acc[Tr::kFragsM][Tr::kFragsN];
#pragma unroll
  for (int i = 0; i < Tr::kFragsM; ++i)
#pragma unroll
    for (int n = 0; n < Tr::kFragsN; ++n) wmma::fill_fragment(acc[i][n], 0.0f);

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s, s);
  int slot = 0;
  for (int64_t step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // step landed; every warp is done with the slot the next issue overwrites
    issue(step + kStages - 1, (slot + kStages - 1) % kStages);
    const T* sa = s_a + slot * Tr::kStageElems;
    const T* sb = s_b + slot * Tr::kStageElems;
#pragma unroll
    for (int kk = 0; kk < kK; kk += 16) {
      FragA fa[Tr::kFragsM];
#pragma unroll
      for (int i = 0; i < Tr::kFragsM; ++i) {
        const int r = wm + i * 16;
        wmma::load_matrix_sync(fa[i], kACol ? sa + kk * Tr::kLdA + r : sa + r * Tr::kLdA + kk, Tr::kLdA);
      }
#pragma unroll
      for (int n = 0; n < Tr::kFragsN; ++n) {
        const int c = wn + n * 16;
        FragB fb;
        wmma::load_matrix_sync(fb, kBCol ? sb + c * Tr::kLdB + kk : sb + kk * Tr::kLdB + c, Tr::kLdB);
#pragma unroll
        for (int i = 0; i < Tr::kFragsM; ++i) wmma::mma_sync(acc[i][n], fa[i], fb, acc[i][n]);
      }
    }
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }

  // Epilogue: the fp32 tile through shared memory, then 8-element vectors into block j.
  cp_async_wait<0>();
  __syncthreads();
  float* s_c = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int i = 0; i < Tr::kFragsM; ++i)
#pragma unroll
    for (int n = 0; n < Tr::kFragsN; ++n)
      wmma::store_matrix_sync(s_c + (wm + i * 16) * Tr::kLdC + wn + n * 16, acc[i][n], Tr::kLdC,
                              wmma::mem_row_major);
  __syncthreads();
  const int64_t block_elems = int64_t(args.bm) * args.bn;
  const int64_t first = int64_t(j) * block_elems + (t / args.tiles_n) * kTile * int64_t(args.bn) +
                        (t % args.tiles_n) * kTile;
  const bool read_s = args.beta != 0.0f;
  constexpr int kChunks = kTile * kTile / 8;
  for (int q = threadIdx.x; q < kChunks; q += Tr::kThreads) {
    const int r = q / (kTile / 8), c = (q % (kTile / 8)) * 8;
    const float* src = s_c + r * Tr::kLdC + c;
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = args.alpha * src[e];
    const int64_t at = first + int64_t(r) * args.bn + c;
    if (args.s_f32) {
      float* dst = static_cast<float*>(args.s) + at;
      if (read_s) {
        float old[8];
        load8(dst, old);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] += args.beta * old[e];
      }
      store8(dst, v);
    } else {
      T* dst = static_cast<T*>(args.s) + at;
      if (read_s) {
        float old[8];
        load8(dst, old);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] += args.beta * old[e];
      }
      store8(dst, v);
    }
  }
}

// Launches row kRow's kernel for p's dtype and layouts. fits() (family.cu) checked the
// grid and the shared memory.
template <int kRow, typename T, bool kACol, bool kBCol>
cudaError_t launch_kernel(const SddmmProblem& p, cudaStream_t stream) {
  using Tr = Traits<kRow, kACol, kBCol>;
  const void* fn = reinterpret_cast<const void*>(&sddmm_wmma_kernel<kRow, T, kACol, kBCol>);
  cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return e;
  KernelArgs args{};
  args.a = p.a.data;
  args.b = p.b.data;
  args.s = p.s.values;
  args.row_ptr = p.s.row_ptr;
  args.col_idx = p.s.col_idx;
  args.lda = p.a.ld;
  args.ldb = p.b.ld;
  args.k = p.k();
  args.block_rows = static_cast<int32_t>(p.block_rows());
  args.bm = p.s.bm;
  args.bn = p.s.bn;
  args.tiles_n = p.s.bn / Tr::kTile;
  args.tiles_block = (p.s.bm / Tr::kTile) * args.tiles_n;
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.s_f32 = p.output() == DType::F32;
  const dim3 grid(static_cast<unsigned>(p.s.nnzb * args.tiles_block));
  void* params[] = {&args};
  e = cudaLaunchKernel(fn, grid, dim3(Tr::kThreads), params, static_cast<size_t>(Tr::kSmemBytes), stream);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <int kRow, typename T>
cudaError_t launch_layouts(const SddmmProblem& p, cudaStream_t stream) {
  const bool a_col = p.a.layout == Layout::ColMajor, b_col = p.b.layout == Layout::ColMajor;
  if (a_col) return b_col ? launch_kernel<kRow, T, true, true>(p, stream) : launch_kernel<kRow, T, true, false>(p, stream);
  return b_col ? launch_kernel<kRow, T, false, true>(p, stream) : launch_kernel<kRow, T, false, false>(p, stream);
}

template <int kRow>
cudaError_t launch_row(const SddmmProblem& p, cudaStream_t stream) {
  return dispatch<DTypeList<DType::F16, DType::BF16>>(
      p.input(), [&](auto tr) { return launch_layouts<kRow, DeviceType<decltype(tr)::kDType>>(p, stream); },
      [] { return cudaErrorNotSupported; });
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&sddmm_wmma_kernel<kRow, __half, false, false>);
}

}  // namespace sparsek::detail::sddmm_wmma

// A generated row unit's line: every kernel of row NAME (both input types, the four A/B
// layouts) and its entry points.
#define SPARSEK_SDDMM_WMMA_INSTANTIATE(NAME)                                                       \
  namespace sparsek::detail::sddmm_wmma {                                                           \
  static_assert(sddmm_wmma_row(NAME) >= 0, "no row named " NAME " in kSddmmWmmaVariants");         \
  template cudaError_t launch_row<sddmm_wmma_row(NAME)>(const SddmmProblem&, cudaStream_t);        \
  template const void* probe_kernel<sddmm_wmma_row(NAME)>();                                       \
  }
