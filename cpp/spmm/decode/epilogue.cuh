// The Decode kernel's epilogue: a rank's reduced fp32 rows to C, C = act(alpha * acc +
// bias[row] + beta * C) or, gated, act(gate) * up, in C's memory order. The activation and
// C's type are template arguments, picked once per launch by write_rows_any (16-bit rows) or
// write_rows_fp8_any (FP8 rows: C's type is free of B's, and a per-tensor scale folds into
// alpha), so no element branches on them.
#pragma once

#include <cstdint>

#include <sparsek/sparsek.hpp>  // ScaleKind

#include "core/activation.cuh"
#include "core/vec8.cuh"  // to_float, from_float
#include "spmm/decode/params.hpp"

namespace sparsek::detail::spmm_decode {

template <int kAct>
__device__ __forceinline__ float activate(float x) {
  return detail::activate(x, kAct);  // kAct is a constant: the switch folds away
}

// The epilogue over `rows` x n reduced values (res: row-major, `ldr` floats per row; its
// row 0 is row grow0 of C and row bias0 of A): C = act(alpha * acc + bias[row] + beta * C)
// in fp32, rounded to nearest. Gated (res_u: the up half's rows, like res; bias0 + bm: their
// rows of A): C = act(alpha * gate + bias[gate row]) * (alpha * up + bias[up row]) (beta = 0).
// Elements go in C's memory order, consecutive threads on consecutive addresses; no branch
// per element but the uniform gated one (the activation and output type are template
// arguments). BiasT: the bias's type.
template <int kAct, typename BiasT, typename OutT, int kThreads>
__device__ __forceinline__ void write_rows(const DecodeArgs& args, float alpha, const float* res, const float* res_u,
                                           int ldr, int rows, int n, int64_t grow0, int64_t bias0) {
  OutT* c = static_cast<OutT*>(args.c);
  const BiasT* bias = static_cast<const BiasT*>(args.bias);
  const bool has_bias = bias != nullptr, read_c = args.beta != 0.0f;
  const float beta = args.beta;
  const bool c_col = args.c_col;
  const int64_t ldc = args.ldc;
  const int inner_len = c_col ? rows : n;  // C's contiguous dimension
  const int E = rows * n;
  const int d_outer = kThreads / inner_len, d_inner = kThreads - d_outer * inner_len;
  int e = threadIdx.x;
  int outer = e / inner_len, inner = e - outer * inner_len;
#pragma unroll 4
  for (; e < E; e += kThreads) {
    const int r = c_col ? inner : outer, col = c_col ? outer : inner;
    const int64_t row = grow0 + r;
    OutT* dst = c + (c_col ? col * ldc + row : row * ldc + col);
    float v = alpha * res[r * ldr + col];
    if (has_bias) v += to_float(bias[bias0 + r]);
    if (res_u != nullptr) {
      float u = alpha * res_u[r * ldr + col];
      if (has_bias) u += to_float(bias[bias0 + args.bm + r]);
      v = activate<kAct>(v) * u;
    } else {
      if (read_c) v += beta * to_float(*dst);
      v = activate<kAct>(v);
    }
    *dst = from_float<OutT>(v);
    outer += d_outer, inner += d_inner;
    if (inner >= inner_len) inner -= inner_len, ++outer;
  }
}

// The rows a rank writes: res (and res_u, gated) of `rows` x n, C's rows grow0 .., A's
// rows bias0 .. (the bias's index).
struct RowsOut {
  const float* res;
  const float* res_u;  // gated: the up half; else null
  int ldr, rows, n;
  int64_t grow0, bias0;
};

template <typename T, int kThreads>
__device__ __forceinline__ void write_rows_any(const DecodeArgs& args, const RowsOut& o) {
  const float a = args.alpha;
#define SPARSEK_ROWS(ACT, OUT) \
  write_rows<ACT, T, OUT, kThreads>(args, a, o.res, o.res_u, o.ldr, o.rows, o.n, o.grow0, o.bias0)
  switch (args.activation * 2 + (args.c_f32 ? 1 : 0)) {
    case 0: SPARSEK_ROWS(0, T); break;
    case 1: SPARSEK_ROWS(0, float); break;
    case 2: SPARSEK_ROWS(1, T); break;
    case 3: SPARSEK_ROWS(1, float); break;
    case 4: SPARSEK_ROWS(2, T); break;
    case 5: SPARSEK_ROWS(2, float); break;
    case 6: SPARSEK_ROWS(3, T); break;
    default: SPARSEK_ROWS(3, float); break;
  }
#undef SPARSEK_ROWS
}

// FP8 A: C (and the bias) f16, bf16 or f32 whatever B's type; a per-tensor scale folds into
// alpha (per-block scales were applied in the main loop).
template <int kAct, int kThreads>
__device__ __forceinline__ void write_rows_fp8(const DecodeArgs& args, float alpha, const RowsOut& o) {
#define SPARSEK_ROWS(T) write_rows<kAct, T, T, kThreads>(args, alpha, o.res, o.res_u, o.ldr, o.rows, o.n, o.grow0, o.bias0)
  switch (args.c_type) {
    case 0: SPARSEK_ROWS(__half); break;
    case 1: SPARSEK_ROWS(__nv_bfloat16); break;
    default: SPARSEK_ROWS(float); break;
  }
#undef SPARSEK_ROWS
}
template <int kThreads>
__device__ __forceinline__ void write_rows_fp8_any(const DecodeArgs& args, const RowsOut& o) {
  float alpha = args.alpha;
  if (args.a_scale_kind == static_cast<int32_t>(ScaleKind::PerTensor)) alpha *= __ldg(args.a_scales);
  switch (args.activation) {
    case 0: write_rows_fp8<0, kThreads>(args, alpha, o); break;
    case 1: write_rows_fp8<1, kThreads>(args, alpha, o); break;
    case 2: write_rows_fp8<2, kThreads>(args, alpha, o); break;
    default: write_rows_fp8<3, kThreads>(args, alpha, o); break;
  }
}

}  // namespace sparsek::detail::spmm_decode
