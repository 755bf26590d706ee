// What the host side (family.cu) sees of the Decode kernel without compiling it: a row's
// shared memory and the per-problem plan (rows per CTA, slabs per stage, warp layout) as
// constexpr functions of its table numbers (the kernel and its launch use the same
// functions, so they cannot disagree), compile-time checks of the table, and the
// declarations of the per-row entry points that each row's generated unit instantiates
// (launch_row.cuh defines them).
#pragma once

#include <cuda_runtime_api.h>

#include "spmm/decode/configs.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail::spmm_decode {

constexpr int decode_cmax(int a, int b) { return a > b ? a : b; }
constexpr int decode_cmin(int a, int b) { return a < b ? a : b; }

constexpr int decode_threads(const DecodeVariant& v) { return 32 * v.warps; }

// The widest k-chunk of a part (a ring stage holds whole parts: TM rows x KC columns of one
// block). Shared-memory rows of B (and of 16-bit A) are KC elements (128, 64 or 32 bytes),
// swizzled like the TMA's 128-, 64- or 32-byte swizzle (kernel.cuh), which makes every 8-row
// ldmatrix phase conflict-free. FP8 A's rows are KC bytes, unswizzled (kernel.cuh: its
// 16-byte row reads are conflict-free without).
inline constexpr int kDecodeKcMax = 64;
// The most parts in a ring stage: the TMA path issues a stage's boxes one part per lane of
// one warp (decode_kernel.cuh's issue_tma).
inline constexpr int kDecodeMaxParts = 32;
constexpr int decode_row_bytes(int kc) { return 2 * kc; }
constexpr int decode_a_elem_bytes(const DecodeVariant& v) { return v.fp8_a ? 1 : 2; }
constexpr int decode_a_row_bytes(const DecodeVariant& v, int kc) { return decode_a_elem_bytes(v) * kc; }

// One ring stage (slot): room for a_bytes of A and, per part of tm_max x KC = 64 elements in
// them (at least b_parts), n_max columns of B (16-bit rows: tm_max rows of A and b_parts x
// n_max columns of B). Plans with smaller TM or KC put more parts in a stage (decode_plan).
constexpr int decode_slot_bytes(const DecodeVariant& v) {
  if (!v.fp8_a) return v.a_bytes + v.b_parts * v.n_max * decode_row_bytes(kDecodeKcMax);
  const int parts = decode_cmax(v.b_parts, v.a_bytes / (v.tm_max * decode_a_row_bytes(v, kDecodeKcMax)));
  return v.a_bytes + parts * v.n_max * decode_row_bytes(kDecodeKcMax);
}

// After the main loop the ring's memory holds the fp32 partial tile, TM x n_max row-major
// with rows of n_max + 4 floats (16-byte aligned), then the cluster reduction's receive
// buffer (S slots of TM/S rows: the size of another tile).
constexpr int decode_tile_ld(const DecodeVariant& v) { return v.n_max + 4; }
constexpr int decode_tile_floats(const DecodeVariant& v) { return v.tm_max * decode_tile_ld(v); }
constexpr int decode_partial_bytes(const DecodeVariant& v) { return 2 * decode_tile_floats(v) * 4; }

// Dynamic shared memory per CTA: the ring, or the tile and receive buffer if larger, plus
// 1 KiB to align the ring to 1024 bytes (the period of the 128-byte swizzle).
constexpr int decode_smem_bytes(const DecodeVariant& v) {
  return decode_cmax(v.stages * decode_slot_bytes(v), decode_partial_bytes(v)) + 1024;
}

// Block columns of a CTA kept in (static) shared memory; a CTA with more blocks reads the
// rest from global memory (correct, slower).
inline constexpr int kDecodeColCap = 1024;

// Static shared memory per CTA (the block columns, FP8 rows' block scales, the stages'
// mbarriers), and the total the device's per-block opt-in limit must allow (fits checks it).
constexpr int decode_static_bytes(const DecodeVariant& v) {
  return kDecodeColCap * 4 * (v.fp8_a ? 2 : 1) + 8 * v.stages;
}
constexpr int decode_total_smem_bytes(const DecodeVariant& v) { return decode_smem_bytes(v) + decode_static_bytes(v); }

// How one problem runs on row v (depends on bm and bk only).
struct DecodePlan {
  int tm;      // rows of the block per CTA (a multiple of 16 dividing bm)
  int slices;  // bm / tm: CTAs along one block-row (each with its own split)
  int kc;      // columns of a part: 64, 32 or 16, dividing bk
  int kpb;     // parts per block: bk / kc
  int nb;      // parts per ring stage
  int mw;      // warps along m: warp w takes row groups w % mw, + mw, ...
  int kw;      // warps along k: warp w takes the k16-slabs f == w / mw (mod kw) of each stage
               // (FP8 rows: the parts b == w / mw (mod kw))
};

// tm_cap (a multiple of 16, at most tm_max; 0: tm_max) bounds the rows per CTA below the row's
// own bound: more slices, so more CTAs, per block-row.
constexpr DecodePlan decode_plan(const DecodeVariant& v, int bm, int bk, int tm_cap = 0) {
  DecodePlan p{};
  const int groups = bm / 16, most = (tm_cap >= 16 && tm_cap < v.tm_max ? tm_cap : v.tm_max) / 16;
  int d = 1;
  for (int x = decode_cmin(most, groups); x >= 1; --x)
    if (groups % x == 0) {
      d = x;
      break;
    }
  p.tm = 16 * d;
  p.slices = bm / p.tm;
  // FP8 A: 128-byte rows where bk allows (kernel.cuh: the TMA's rate is per box row).
  p.kc = v.fp8_a && bk % 128 == 0 ? 128 : bk % 64 == 0 ? 64 : bk % 32 == 0 ? 32 : 16;
  p.kpb = bk / p.kc;
  const int a_part = p.tm * decode_a_row_bytes(v, p.kc), b_part = v.n_max * decode_row_bytes(p.kc);
  const int by_a = v.a_bytes / a_part;
  const int by_slot = decode_slot_bytes(v) / (a_part + b_part);
  p.nb = decode_cmax(1, decode_cmin(by_a, by_slot));
  // At most two A rows per thread per stage (decode_plans_ok: the cp.async path's issue), and
  // at most one part per lane of the warp that issues the TMA path's boxes.
  p.nb = decode_cmax(1, decode_cmin(decode_cmin(p.nb, 2 * decode_threads(v) / p.tm), kDecodeMaxParts));
  p.mw = (d + v.gm_max - 1) / v.gm_max;  // <= warps (checked below: tm_max <= 16 * gm_max * warps)
  // The k-warps' units: k16-slabs (16-bit A), whole parts (FP8 A: kernel.cuh).
  p.kw = decode_cmin(v.warps / p.mw, v.fp8_a ? p.nb : p.nb * p.kc / 16);
  return p;
}

// ---- Compile-time rules on the table ----

// 227 KiB: sm_90's per-block opt-in limit, the largest of cc >= 8.0.
inline constexpr int kDecodeLargestOptin = 227 * 1024;

constexpr bool decode_row_ok(const DecodeVariant& v) {
  return (v.n_max == 8 || (v.n_max % 16 == 0 && v.n_max >= 16)) && v.warps >= 1 && v.tm_max % 16 == 0 &&
         v.tm_max >= 16 && v.tm_max <= 256 && v.tm_max <= 16 * v.gm_max * v.warps &&
         v.a_bytes >= v.tm_max * decode_a_row_bytes(v, kDecodeKcMax) && v.stages >= 2 && v.min_ctas >= 1 &&
         (!v.fp8_a || v.a_bytes % (v.tm_max * kDecodeKcMax) == 0) && v.b_parts >= 1 &&
         (v.fp8_a || v.a_bytes % (v.tm_max * decode_row_bytes(kDecodeKcMax)) == 0) &&
         decode_slot_bytes(v) % 1024 == 0 && v.tm_min >= 0 && v.tm_min % 16 == 0 && v.tm_min <= v.tm_max &&
         decode_total_smem_bytes(v) <= kDecodeLargestOptin;
}

// Every plan over every block shape (multiples of 16 up to 256) fits its slot, has its warps
// in range, and issues at most two A rows per thread per stage and one part per lane. With
// all_caps, every cap on TM too (Auto's slicing, SPARSEK_DECODE_TM): params.hpp's Traits checks
// that per row, as one evaluation over the whole table would pass the compiler's constexpr
// budget. A plan depends on bk through KC alone, and on the cap through the divisor of bm it
// picks, so bk in {16, 32, 64, 128} and the caps that divide bm reach every plan.
constexpr bool decode_plans_ok(const DecodeVariant& v, bool all_caps = false) {
  for (int bm = 16; bm <= 256; bm += 16)
    for (int bk = 16; bk <= 128; bk *= 2)
      for (int cap = all_caps ? 16 : v.tm_max; cap <= v.tm_max; cap += 16) {
        if (bm % cap != 0 && cap != v.tm_max) continue;
        const DecodePlan p = decode_plan(v, bm, bk, cap);
        if (p.tm % 16 != 0 || bm % p.tm != 0 || p.tm > v.tm_max || bk % p.kc != 0) return false;
        const int part = p.tm * decode_a_row_bytes(v, p.kc) + v.n_max * decode_row_bytes(p.kc);
        if (p.nb < 1 || p.nb > kDecodeMaxParts || p.nb * part > decode_slot_bytes(v)) return false;
        if (p.nb * p.tm > 2 * decode_threads(v)) return false;
        if (p.mw < 1 || p.mw > v.warps || p.kw < 1 || p.mw * p.kw > v.warps) return false;
        if ((p.tm / 16 + p.mw - 1) / p.mw > v.gm_max) return false;
      }
  return true;
}

constexpr bool decode_table_ok() {
  for (int i = 0; i < kDecodeRows; ++i)
    if (!decode_row_ok(kDecodeVariants[i]) || !decode_plans_ok(kDecodeVariants[i])) return false;
  return true;
}

// The row a fill_only row is weighed against (family.cu's auto_skips), with the fill rows
// between them: the next automatic row of its kind and n_max that is not fill_only; -1 if none.
constexpr int decode_fill_partner(int row) {
  const DecodeVariant& v = kDecodeVariants[row];
  for (int j = row + 1; j < kDecodeRows; ++j) {
    const DecodeVariant& w = kDecodeVariants[j];
    if (w.automatic && !w.fill_only && w.fp8_a == v.fp8_a && w.n_max == v.n_max) return j;
  }
  return -1;
}

// Rows of each kind (16-bit, FP8 A) go from the narrowest N tile up (the first automatic row
// of a problem's kind that fits is the narrowest); fill_only rows come right before their
// partner, of the same n_max: a group of one or more fill rows and the partner, in a run.
constexpr bool decode_rows_ascend() {
  int last[2] = {0, 0};
  for (int i = 0; i < kDecodeRows; ++i) {
    const DecodeVariant& v = kDecodeVariants[i];
    if (!v.automatic) continue;
    if (v.n_max <= last[v.fp8_a]) return false;
    if (v.fill_only) {
      const int partner = decode_fill_partner(i);
      if (partner < 0) return false;
      for (int j = i + 1; j < partner; ++j)  // only the group's other fill rows in between
        if (!kDecodeVariants[j].automatic || !kDecodeVariants[j].fill_only ||
            kDecodeVariants[j].fp8_a != v.fp8_a || kDecodeVariants[j].n_max != v.n_max)
          return false;
      continue;
    }
    last[v.fp8_a] = v.n_max;
  }
  return true;
}

static_assert(decode_table_ok(), "a row of kDecodeVariants breaks the rules of decode_row_ok / decode_plans_ok");
static_assert(decode_rows_ascend(), "automatic rows must go from the narrowest N tile up");

// ---- Per-row entry points (launch_row.cuh; instantiated by each row's generated unit) ----

// Enqueues row kRow for p: picks the input type, plans the CTAs (decode_plan) and the
// cluster size S, sets the shared-memory attribute, launches, and returns the first CUDA
// error (launch errors included).
template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream);

// One kernel of row kRow (f16; FP8 rows: e4m3 A, f16 B), for asking the runtime whether this
// build carries an image for the current device (and, for FP8, which architecture it is).
template <int kRow>
const void* probe_kernel();

// How a grid fills the device: the bytes of A it keeps in flight per wave of resident CTAs
// (negative: the row cannot run the problem) and its cluster size S.
struct DecodeFill {
  double score;
  int split;
};

// Whether grid a is preferred over grid b: more than 5 % more bytes in flight, or within 5 %
// of b's and a smaller split (its CTAs each stream a longer run of blocks and their cluster
// reduces fewer partial tiles). Within a row this picks the rows per CTA (launch_row.cuh's
// decode_grid); between a fill row and the later rows of its group, the row (family.cu's
// auto_skips).
inline bool decode_prefers(const DecodeFill& a, const DecodeFill& b) {
  if (a.score < 0.0) return false;
  if (b.score < 0.0) return true;
  if (a.score * 0.95 > b.score) return true;
  return a.score >= 0.95 * b.score && a.split < b.split;
}

// Of `count` candidate grids in order (a row's plans from the largest rows per CTA down), the
// one decode_grid launches: each later candidate replaces the kept one where it is preferred,
// so a tie keeps the earlier (B read by fewer slices). 0 where count <= 1.
inline int decode_pick(const DecodeFill* fill, int count) {
  int pick = 0;
  for (int i = 1; i < count; ++i)
    if (decode_prefers(fill[i], fill[pick])) pick = i;
  return pick;
}

// Row kRow's grid for p, as DecodeFill (launch_row.cuh). Launches nothing.
template <int kRow>
DecodeFill fill_score(const Problem& p);

}  // namespace sparsek::detail::spmm_decode
