// What the host side (family.cu) sees of the Decode kernel without compiling it: a row's
// shared memory and the per-problem plan (rows per CTA, slabs per stage, warp layout) as
// constexpr functions of its table numbers (the kernel and its launch use the same
// functions, so they cannot disagree), compile-time checks of the table, and the
// declarations of the per-row entry points that each cpp/decode/instantiations/<row>.cu
// instantiates (kernel.cuh defines them).
#pragma once

#include <cuda_runtime_api.h>

#include "decode/configs.hpp"
#include "problem.hpp"

namespace sparsek::detail::decode_impl {

constexpr int decode_cmax(int a, int b) { return a > b ? a : b; }
constexpr int decode_cmin(int a, int b) { return a < b ? a : b; }

constexpr int decode_threads(const DecodeVariant& v) { return 32 * v.warps; }

// One ring stage: stage_units units of 32 bytes (a 16-element row of a k16-slab).
constexpr int decode_slot_bytes(const DecodeVariant& v) { return v.stage_units * 32; }

// The fp32 partial tile, after the main loop, in the ring's memory: TM x n_max row-major
// with rows of n_max + 8 floats, or n_max x TM column-major with columns of TM + 4 floats
// (the layout of C, so the epilogue reads it along C's contiguous dimension).
constexpr int decode_partial_bytes(const DecodeVariant& v) {
  return decode_cmax(v.tm_max * (v.n_max + 8), v.n_max * (v.tm_max + 4)) * 4;
}

// Dynamic shared memory per CTA: the ring, or the partial tile if larger.
constexpr int decode_smem_bytes(const DecodeVariant& v) {
  return decode_cmax(v.stages * decode_slot_bytes(v), decode_partial_bytes(v));
}

// How one problem runs on row v (depends on bm only; k, bk and n do not change it).
struct DecodePlan {
  int tm;      // rows of the block per CTA (a multiple of 16 dividing bm)
  int slices;  // bm / tm: CTAs along one block-row (each with its own split)
  int sp;      // k16-slabs per ring stage (a power of two)
  int mw;      // warps along m: warp w takes row groups w % mw, + mw, ...
  int kw;      // warps along k: warp w takes the slabs s == w / mw (mod kw) of each stage
};

constexpr DecodePlan decode_plan(const DecodeVariant& v, int bm) {
  DecodePlan p{};
  const int groups = bm / 16, most = v.tm_max / 16;
  int d = 1;
  for (int x = decode_cmin(most, groups); x >= 1; --x)
    if (groups % x == 0) {
      d = x;
      break;
    }
  p.tm = 16 * d;
  p.slices = bm / p.tm;
  p.sp = 1;
  while (p.sp * 2 <= v.sp_max && p.sp * 2 * (p.tm + v.n_max) <= v.stage_units && p.sp * 4 <= decode_threads(v))
    p.sp *= 2;
  p.mw = (d + v.gm_max - 1) / v.gm_max;  // <= warps (checked below: tm_max <= 16 * gm_max * warps)
  p.kw = decode_cmin(v.warps / p.mw, p.sp);
  return p;
}

// ---- Compile-time rules on the table ----
// 99 KiB: the per-block opt-in limit of sm_86/sm_89 (which run the sm_80 image), the
// smallest of cc >= 8.0. Every row stays within it, so fits() never refuses a row for
// shared memory on a cc >= 8.0 device (the check stays, for other parts).
inline constexpr int kDecodeSmallestOptin = 99 * 1024;

constexpr bool decode_is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

constexpr bool decode_row_ok(const DecodeVariant& v) {
  return v.n_max % 8 == 0 && v.n_max >= 8 && (v.n_max == 8 || v.n_max % 16 == 0) && v.warps >= 1 &&
         v.tm_max % 16 == 0 && v.tm_max >= 16 && v.tm_max <= 256 && v.tm_max <= 16 * v.gm_max * v.warps &&
         v.stage_units >= v.tm_max + v.n_max && decode_is_pow2(v.sp_max) && v.sp_max * 2 <= decode_threads(v) &&
         v.stages >= 2 && v.min_ctas >= 1;
}

// Every plan over every bm (multiples of 16 up to 256) has its warps and slabs in range.
constexpr bool decode_plans_ok(const DecodeVariant& v) {
  for (int bm = 16; bm <= 256; bm += 16) {
    const DecodePlan p = decode_plan(v, bm);
    if (p.tm % 16 != 0 || bm % p.tm != 0 || p.tm > v.tm_max) return false;
    if (!decode_is_pow2(p.sp) || p.sp * (p.tm + v.n_max) > v.stage_units || 2 * p.sp > decode_threads(v)) return false;
    if (p.mw < 1 || p.mw > v.warps || p.kw < 1 || p.mw * p.kw > v.warps) return false;
    if ((p.tm / 16 + p.mw - 1) / p.mw > v.gm_max) return false;
  }
  return true;
}

constexpr bool decode_table_ok() {
  for (int i = 0; i < kDecodeRows; ++i) {
    const DecodeVariant& v = kDecodeVariants[i];
    if (!decode_row_ok(v) || !decode_plans_ok(v) || decode_smem_bytes(v) > kDecodeSmallestOptin) return false;
  }
  return true;
}

// Rows go from the narrowest N tile up (the first automatic row that fits is the narrowest).
constexpr bool decode_rows_ascend() {
  int last = 0;
  for (int i = 0; i < kDecodeRows; ++i) {
    if (!kDecodeVariants[i].automatic) continue;
    if (kDecodeVariants[i].n_max <= last) return false;
    last = kDecodeVariants[i].n_max;
  }
  return true;
}

static_assert(decode_table_ok(), "a row of kDecodeVariants breaks the rules of decode_row_ok / decode_plans_ok / 99 KiB");
static_assert(decode_rows_ascend(), "automatic rows must go from the narrowest N tile up");

// ---- Per-row entry points (kernel.cuh; instantiated by instantiations/<row>.cu) ----

// Enqueues row kRow for p: picks the input type, plans the CTAs (decode_plan) and the
// cluster size S, sets the shared-memory attribute, launches, and returns the first CUDA
// error (launch errors included).
template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream);

// One kernel of row kRow (f16), for asking the runtime whether this build carries an
// image for the current device.
template <int kRow>
const void* probe_kernel();

}  // namespace sparsek::detail::decode_impl
