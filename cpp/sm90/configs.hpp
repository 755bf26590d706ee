// sparsek SM90: the table of variants of the Hopper family (kSm90Family, family.cu).
//
// One row per compiled kernel; each row is instantiated by its own translation unit,
// instantiations/<row name>.cu (SPARSEK_SM90_INSTANTIATE, kernel.hpp). Adding a tile
// configuration touches this table, one new instantiation file and a test case.
//
// Columns:
//   name         unique across families; SPARSEK_VARIANT=<name> forces the row
//                (cpp/registry.hpp). sm90_<input>_bm<bm>_b<row|col>_c<row|col>, and for a
//                tuning candidate _<tile_m>x<tile_n> (a `t` prefix when transposed).
//   input        A and B element type; output: C's.
//   bm           the BSR block height the row takes (bk may be 64 or 128: TileK = 64).
//   b_layout, c_layout   the layouts of B and C the row is compiled for.
//   tile_m x tile_n      the GEMM (M, N) tile; TileK = 64.
//   transposed   false: GEMM C = A*B, M tile = one block-row (tile_m == bm);
//                true:  GEMM C^T = B^T A^T, N tile = one block-row (tile_n == bm). The
//                cooperative kernel needs an M tile >= 128, hence bm = 64 runs transposed.
//   automatic    Backend::Auto / Backend::Cutlass may pick it (the first automatic row that
//                fits wins, cpp/registry.hpp); false = a tuning candidate, reached only
//                through SPARSEK_VARIANT.
//   chosen_by    the measurement that chose the row.
// Stages are derived from the shared memory left after the epilogue (kernel.hpp).
//
// Measured by scripts/tuning-sweep.sh on an H100 (2026-11-22, benches/NOTES.md run 3;
// M=N=K=8192, f16, row-major B/C; TFLOPS on nonzero work at block density 1/16, 1/8, 1/4;
// the names are the sweep's, then the rows here):
//   name            bm   GEMM tile   orientation     1/16  1/8   1/4
//   coop_128x256    128  128x256x64  C = A*B          456  571  664   DEFAULT bm=128, 4 stages
//   coop_128x192    128  128x192x64  C = A*B          441  551  633   5 stages
//   coop_128x128    128  128x128x64  C = A*B          454  509  552   6-7 stages
//   coopT_256x128   128  256x128x64  C^T = B^T A^T    396  496  573   2 WGs split n
//   coopT_256x64     64  256x64x64   C^T = B^T A^T    364  405  427   DEFAULT bm=64
//   coopT_128x64     64  128x64x64   C^T = B^T A^T    345  364  357
//   (scheduler band=1: 477 570 635; band=4: 436 578 672; sort=0: 452 570 664 - within run
//   noise of the default's automatic band and longest-first order, so kernel.hpp fixes
//   band = automatic and sort = on.)
//   coop_128x256 = sm90_f16_bm128_brow_crow, coop_128x192 = sm90_f16_bm128_brow_crow_128x192,
//   coop_128x128 = sm90_f16_bm128_brow_crow_128x128, coopT_256x128 =
//   sm90_f16_bm128_brow_crow_t256x128, coopT_256x64 = sm90_f16_bm64_brow_crow,
//   coopT_128x64 = sm90_f16_bm64_brow_crow_t128x64.
// Only f16 with row-major B and C was swept; the other dtype / layout rows use the tile the
// sweep chose for their block height.
#pragma once

#include <cuda_runtime_api.h>

#include <initializer_list>

#include "problem.hpp"

namespace sparsek::sm90 {

struct Sm90Variant {
  const char* name;
  DType input;
  DType output;
  int bm;
  Layout b_layout, c_layout;
  int tile_m, tile_n;
  bool transposed;  // C^T = B^T A^T
  bool automatic;
  const char* chosen_by;
  // The fused bias/activation epilogue (epilogue.hpp); plain rows take no bias/activation.
  bool fused = false;
};

// The table's vocabulary (kept out of sparsek::sm90 itself: single-letter names).
namespace table {
constexpr DType F16 = DType::F16;
constexpr DType BF16 = DType::BF16;
constexpr Layout Row = Layout::RowMajor;
constexpr Layout Col = Layout::ColMajor;
constexpr bool T = true;        // transposed: C^T = B^T A^T
constexpr bool N = false;       // natural: C = A*B
constexpr bool Auto = true;     // automatic
constexpr bool Tune = false;    // tuning candidate

constexpr const char kSwept128[] =
    "H100 sweep 2026-11-22 (scripts/tuning-sweep.sh, benches/NOTES.md run 3): coop_128x256 456/571/664 "
    "TFLOPS at density 1/16, 1/8, 1/4, the fastest bm=128 tile at 1/8 and 1/4";
constexpr const char kSwept64[] =
    "H100 sweep 2026-11-22 (scripts/tuning-sweep.sh, benches/NOTES.md run 3): coopT_256x64 364/405/427 "
    "TFLOPS at density 1/16, 1/8, 1/4, the fastest bm=64 tile at every density";
constexpr const char kSame128[] =
    "the bm=128 tile of the H100 sweep 2026-11-22 (benches/NOTES.md run 3, f16 row-major B/C: 456/571/664 "
    "TFLOPS at 1/16, 1/8, 1/4); this dtype/layout was not swept";
constexpr const char kSame64[] =
    "the bm=64 tile of the H100 sweep 2026-11-22 (benches/NOTES.md run 3, f16 row-major B/C: 364/405/427 "
    "TFLOPS at 1/16, 1/8, 1/4); this dtype/layout was not swept";

constexpr const char kFused[] =
    "the default tile with the fused bias/activation epilogue, only for problems that ask for it: on plain "
    "problems it measured 2-8 % slower than LinearCombination at bm=128 (H100, bench_report gate, 2026-11-23)";

// clang-format off
inline constexpr Sm90Variant kSm90Variants[] = {
    // name                                 in    out   bm   B    C    tile_m tile_n  T/N  automatic  chosen_by
    // ---- defaults: one automatic row per (dtype, bm, B layout, C layout) ----
    {"sm90_f16_bm128_brow_crow",            F16,  F16,  128, Row, Row, 128,   256,    N,   Auto,      kSwept128},
    {"sm90_f16_bm128_brow_ccol",            F16,  F16,  128, Row, Col, 128,   256,    N,   Auto,      kSame128},
    {"sm90_f16_bm128_bcol_crow",            F16,  F16,  128, Col, Row, 128,   256,    N,   Auto,      kSame128},
    {"sm90_f16_bm128_bcol_ccol",            F16,  F16,  128, Col, Col, 128,   256,    N,   Auto,      kSame128},
    {"sm90_f16_bm64_brow_crow",             F16,  F16,   64, Row, Row, 256,    64,    T,   Auto,      kSwept64},
    {"sm90_f16_bm64_brow_ccol",             F16,  F16,   64, Row, Col, 256,    64,    T,   Auto,      kSame64},
    {"sm90_f16_bm64_bcol_crow",             F16,  F16,   64, Col, Row, 256,    64,    T,   Auto,      kSame64},
    {"sm90_f16_bm64_bcol_ccol",             F16,  F16,   64, Col, Col, 256,    64,    T,   Auto,      kSame64},
    {"sm90_bf16_bm128_brow_crow",           BF16, BF16, 128, Row, Row, 128,   256,    N,   Auto,      kSame128},
    {"sm90_bf16_bm128_brow_ccol",           BF16, BF16, 128, Row, Col, 128,   256,    N,   Auto,      kSame128},
    {"sm90_bf16_bm128_bcol_crow",           BF16, BF16, 128, Col, Row, 128,   256,    N,   Auto,      kSame128},
    {"sm90_bf16_bm128_bcol_ccol",           BF16, BF16, 128, Col, Col, 128,   256,    N,   Auto,      kSame128},
    {"sm90_bf16_bm64_brow_crow",            BF16, BF16,  64, Row, Row, 256,    64,    T,   Auto,      kSame64},
    {"sm90_bf16_bm64_brow_ccol",            BF16, BF16,  64, Row, Col, 256,    64,    T,   Auto,      kSame64},
    {"sm90_bf16_bm64_bcol_crow",            BF16, BF16,  64, Col, Row, 256,    64,    T,   Auto,      kSame64},
    {"sm90_bf16_bm64_bcol_ccol",            BF16, BF16,  64, Col, Col, 256,    64,    T,   Auto,      kSame64},
    // ---- tuning candidates (SPARSEK_VARIANT only) ----
    {"sm90_f16_bm128_brow_crow_128x192",    F16,  F16,  128, Row, Row, 128,   192,    N,   Tune,
     "H100 sweep 2026-11-22 (benches/NOTES.md run 3): coop_128x192 441/551/633 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    {"sm90_f16_bm128_brow_crow_128x128",    F16,  F16,  128, Row, Row, 128,   128,    N,   Tune,
     "H100 sweep 2026-11-22 (benches/NOTES.md run 3): coop_128x128 454/509/552 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    {"sm90_f16_bm128_brow_crow_t256x128",   F16,  F16,  128, Row, Row, 256,   128,    T,   Tune,
     "H100 sweep 2026-11-22 (benches/NOTES.md run 3): coopT_256x128 396/496/573 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    {"sm90_f16_bm64_brow_crow_t128x64",     F16,  F16,   64, Row, Row, 128,    64,    T,   Tune,
     "H100 sweep 2026-11-22 (benches/NOTES.md run 3): coopT_128x64 345/364/357 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    // ---- the fused linear-layer epilogue, in the layout of y = x*W^T (column-major B and C) ----
    {"sm90_f16_bm128_bcol_ccol_fused",      F16,  F16,  128, Col, Col, 128,   256,    N,   Auto,      kFused, true},
    {"sm90_f16_bm64_bcol_ccol_fused",       F16,  F16,   64, Col, Col, 256,    64,    T,   Auto,      kFused, true},
    {"sm90_bf16_bm128_bcol_ccol_fused",     BF16, BF16, 128, Col, Col, 128,   256,    N,   Auto,      kFused, true},
    {"sm90_bf16_bm64_bcol_ccol_fused",      BF16, BF16,  64, Col, Col, 256,    64,    T,   Auto,      kFused, true},
};
// clang-format on
}  // namespace table

using table::kSm90Variants;

inline constexpr int kSm90Rows = int(sizeof(kSm90Variants) / sizeof(kSm90Variants[0]));

constexpr bool same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The row called `name`, or -1.
constexpr int sm90_row(const char* name) {
  for (int i = 0; i < kSm90Rows; ++i)
    if (same_name(kSm90Variants[i].name, name)) return i;
  return -1;
}

// The launch of row kRow: defined in kernel.hpp, explicitly instantiated for each row by
// instantiations/<row name>.cu (a missing file is an undefined symbol at link time).
template <int kRow>
cudaError_t launch_row(const detail::Problem& p, cudaStream_t stream);

// ---- what the table promises (checked at compile time) ----
namespace table {
constexpr bool names_unique() {
  for (int i = 0; i < kSm90Rows; ++i)
    if (sm90_row(kSm90Variants[i].name) != i) return false;
  return true;
}
constexpr bool well_formed(const Sm90Variant& v) {
  const bool dtypes = (v.input == F16 || v.input == BF16) && v.output == v.input;  // kernel.hpp: no f32 C row
  const bool block = v.bm == 64 || v.bm == 128;
  const bool tile = (v.transposed ? v.tile_n : v.tile_m) == v.bm && v.tile_m >= 128 &&  // cooperative: M tile >= 128
                    (v.transposed ? v.tile_m : v.tile_n) % 64 == 0;
  return dtypes && block && tile && v.name != nullptr && v.chosen_by != nullptr;
}
constexpr bool all_well_formed() {
  for (const Sm90Variant& v : kSm90Variants)
    if (!well_formed(v)) return false;
  return true;
}
constexpr bool same_key(const Sm90Variant& a, const Sm90Variant& b) {
  return a.input == b.input && a.output == b.output && a.bm == b.bm && a.b_layout == b.b_layout &&
         a.c_layout == b.c_layout;
}
// Exactly one automatic plain row per (dtype, bm, B layout, C layout): family.cu's
// supports() accepts every such key, so Auto always finds a row for a plain problem (fused
// rows exist for column-major B and C only).
constexpr int automatic_rows(DType t, int bm, Layout b, Layout c) {
  int count = 0;
  for (const Sm90Variant& v : kSm90Variants)
    if (v.automatic && !v.fused && same_key(v, Sm90Variant{"", t, t, bm, b, c, 0, 0, false, true, ""})) ++count;
  return count;
}
constexpr bool one_automatic_row_per_key() {
  for (DType t : {F16, BF16})
    for (int bm : {64, 128})
      for (Layout b : {Row, Col})
        for (Layout c : {Row, Col})
          if (automatic_rows(t, bm, b, c) != 1) return false;
  return true;
}
static_assert(names_unique(), "kSm90Variants: names must be unique");
static_assert(all_well_formed(), "kSm90Variants: a row has an unsupported dtype, block height or tile");
static_assert(one_automatic_row_per_key(), "kSm90Variants: need exactly one automatic row per dtype/bm/B/C key");
}  // namespace table

}  // namespace sparsek::sm90
