// The SIMT row-scaling kernel: C = diag(s) * A over A's stored values, and the per-row launch
// that each row's generated unit instantiates (SPARSEK_ROWSCALE_SIMT_INSTANTIATE below).
//
// Value i of the values array is in block i / (bm * bk), at row (i % (bm * bk)) / bk of it;
// the block's block-row is found by a binary search of row_ptr. Each value is written by one
// thread: float(a) * s[row], rounded once to A's type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "rowscale/problem.hpp"
#include "rowscale/simt/configs.hpp"

namespace sparsek::detail::rowscale_simt {

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// The block-row holding stored block j: the last r with row_ptr[r] <= j.
__device__ inline int64_t block_row(const int32_t* row_ptr, int64_t block_rows, int64_t j) {
  int64_t lo = 0, hi = block_rows;  // row_ptr[lo] <= j < row_ptr[hi]
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (row_ptr[mid] <= j) lo = mid; else hi = mid;
  }
  return lo;
}

template <class T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    rowscale_kernel(const T* __restrict__ a, const int32_t* __restrict__ row_ptr, const float* __restrict__ s,
                    T* __restrict__ c, int64_t block_rows, int32_t bm, int32_t bk, int64_t count) {
  const int64_t block_len = int64_t(bm) * bk;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < count; i += int64_t(gridDim.x) * kThreads) {
    const int64_t j = i / block_len;
    const int64_t row = block_row(row_ptr, block_rows, j) * bm + (i % block_len) / bk;
    c[i] = from_float<T>(to_float(a[i]) * s[row]);
  }
}

// Enough CTAs to fill any GPU a few times over; the loop strides past it.
constexpr int64_t kMaxGrid = 1 << 16;

template <int kRow>
cudaError_t launch_row(const RowscaleProblem& p, cudaStream_t stream) {
  constexpr int kThreads = kRowscaleSimtVariants[kRow].threads;
  const int64_t count = p.count();
  const int64_t ctas = (count + kThreads - 1) / kThreads;
  const int grid = int(ctas < kMaxGrid ? ctas : kMaxGrid);
  const auto run = [&](auto tr) {
    using T = DeviceType<decltype(tr)::kDType>;
    rowscale_kernel<T, kThreads><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(p.a.values), p.a.row_ptr, p.s, static_cast<T*>(p.c_values), p.a.m / p.a.bm, p.a.bm,
        p.a.bk, count);
    return cudaGetLastError();
  };
  return dispatch<HalfDTypes>(p.a.dtype, run, [] { return cudaErrorInvalidValue; });
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&rowscale_kernel<__half, kRowscaleSimtVariants[kRow].threads>);
}

}  // namespace sparsek::detail::rowscale_simt

// Instantiates row NAME of kRowscaleSimtVariants (its generated unit, cpp/units/units.cpp).
#define SPARSEK_ROWSCALE_SIMT_INSTANTIATE(NAME)                                                        \
  namespace sparsek::detail::rowscale_simt {                                                          \
  static_assert(rowscale_simt_row(NAME) >= 0, "no row named " NAME " in kRowscaleSimtVariants");     \
  template cudaError_t launch_row<rowscale_simt_row(NAME)>(const RowscaleProblem&, cudaStream_t);    \
  template const void* probe_kernel<rowscale_simt_row(NAME)>();                                      \
  }
