// The WMMA family's table of variants: one row per tile configuration. Selection is the
// registry's rule (cpp/core/registry.hpp): the first `automatic` row, in table order, that fits
// (family.cu's fits: TILE_M divides bm, the grid has at least min_grid_ctas CTAs, the row's
// shared memory is within the device's per-block opt-in limit, and the grid limits hold).
// SPARSEK_VARIANT=<name> forces any row, automatic or not, where it fits.
//
// Adding a row: its line here and a test case. The build's units generator compiles every
// row of this table whose features are built, each in a generated unit (one
// SPARSEK_WMMA_INSTANTIATE line, kernel.cuh); the checks in launch.hpp reject, at compile
// time, a row whose shared memory breaks the rules stated there.
//
// Why the rows are what they are:
//  * A CTA reuses its staged B rows only across the bm rows of one block-row (other
//    block-rows have other column patterns), so TILE_M is bm's largest divisor in
//    {128, 64, 32, 16}. B traffic from L2 is therefore ~2 bytes per 2*bm flops whatever
//    the tile; what the tile controls is A's re-reads (one per n-tile: bm/TILE_N of the
//    B traffic) and shared-memory bandwidth (fragment loads per mma_sync). Hence wide
//    TILE_N and warp tiles as square as the CTA allows.
//  * 128 x 256, 8 warps of 64 x 64 (4 A + 4 B fragment loads per 16 mma_sync, 128 fp32
//    accumulators per thread, one CTA/SM), 3 stages: the shape of the classic Ampere
//    128x256 GEMM; halves A's re-reads compared with 128 x 128. Its fp32 tile (133 KiB)
//    does not fit at once, so the epilogue runs in two passes of 64 rows.
//  * 128 x 128, 8 warps of 64 x 32, 4 stages, two CTAs/SM (128 registers, no spills).
//  * 64 x 256, 8 warps of 32 x 64; 3 stages (4 would pass 99 KiB with column-major B).
//  * 32 x 256, 8 warps of 32 x 32; 16 x 256, 8 warps of 16 x 32: small bm leaves few rows,
//    so all warps go along N.
//  * Each bm class (TILE_M 128, 64, 32, 16) has, in this order:
//      - on 128, 64, 32, a large-shared-memory "upgrade" row measured faster on an H100
//        (up to 227 KiB per block on sm_90); it fits where the device's opt-in limit allows
//        and, like the wide row, only on grids of >= kMinCtasForWide CTAs;
//      - a "wide" row (TILE_N 256) within 99 KiB, for grids of >= kMinCtasForWide CTAs;
//      - a "narrow" row (TILE_N 128, same or smaller warp tile, more CTAs per SM) that
//        always fits: small problems need more, smaller CTAs to fill ~132 SMs.
//    The classes go from the largest TILE_M down, so the first class whose TILE_M divides
//    bm is bm's class, and its narrow row ends the search.
//  * The wide and narrow rows keep their shared memory <= 99 KiB (the per-block opt-in
//    limit of sm_86/sm_89, which run the sm_80 image), so on every cc >= 8.0 device each
//    class has its wide and narrow rows; an upgrade row falls back to the wide row with the
//    same tile and grid condition (launch.hpp checks both at compile time).
//  * Stages: 3-4 for K_STEP 32 (2-3 k-steps in flight hide L2 latency), 5-6 for K_STEP
//    16 (about the same bytes in flight).
//  * K_STEP is 32 when bk % 32 == 0, else 16 (bk = 16, 48, 80, ...): a k-step never
//    straddles two blocks, since the next block's B rows are elsewhere. Rows with k_max 64
//    use 64 when bk % 64 == 0 (f16 only): half the barriers per flop.
//  * pipelined rows double-buffer the fragments in registers and move the per-step
//    wait + barrier before the last 16-deep slice (see the kernel), so the barrier and
//    the ldmatrix latency at a step boundary overlap tensor-core work. They were tuned with
//    the max-shared-memory carveout hint, which their launch sets (kernel.cuh).
//  * min_ctas feeds __launch_bounds__ and so caps registers at 64K / (threads * min_ctas);
//    rows with min_ctas 1 get the fully unrolled k loop (more registers, more overlap of
//    fragment loads with mma), the others keep it rolled to stay spill-free.
// The result does not depend on the row chosen: every output element sums its products
// in the same order (block order, then k), so any row gives bitwise-identical output.
//
// The measurements: scripts/tuning-sweep.sh on an H100 80GB HBM3, 2026-11-22 (M=N=K=8192,
// f16 in/out, density 1/8, row-major B/C, block bm x bm; TFLOPS on nonzero work):
//   bm 128: w128x256 252.8 | p128x256 321.5 | h128x256k64 336.7 | h128x256k32s5 343.5 |
//           h128x128x4w 303.8 | h128x256k64s3 337.5
//   bm  64: w64x256 235.2 | h64x256k64 221.6 | h64x256s6 218.3 | h64x256x4w 256.8
//   bm  32: w32x256 141.0 | h32x256s5 146.1 | h32x256x4w 146.3
// The wide rows (w*x256) were the first defaults; their rows' chosen_by keep their first
// measurement.
#pragma once

#include <cstdint>
#include "core/dtype.hpp"
#include "core/features.hpp"

namespace sparsek::detail::spmm_wmma {

// The input types the family takes (core/dtype.hpp); a problem of another type is refused.
using WmmaDTypes = DTypeList<DType::F16, DType::BF16>;

struct WmmaVariant {
  const char* name;                        // the registry's name (SPARSEK_VARIANT)
  int tile_m, tile_n;                      // CTA tile of C
  int warps_m, warps_n;                    // warp grid; warp tile = tile_m/warps_m x tile_n/warps_n
  int k_max;                               // largest K_STEP the row may use (32 or 64)
  int stages_k64, stages_k32, stages_k16;  // cp.async ring depth per K_STEP
  int min_ctas;                            // __launch_bounds__ minimum CTAs per SM (caps registers)
  bool pipelined;                          // software-pipelined main loop (see the kernel); else classic
  int64_t min_grid_ctas;                   // fits only on grids of at least this many CTAs; 0 = always
  bool automatic;                          // Auto may pick it; false = tuning candidate (SPARSEK_VARIANT)
  const char* chosen_by;                   // the measurement that chose the row
};

// Below this many CTAs a TILE_N 256 row leaves SMs idle: about two waves of an H100's
// 132 SMs (a design choice, not measured), so such grids take their class's narrow row.
inline constexpr int64_t kMinCtasForWide = 264;

#define SPARSEK_WMMA_SWEEP "H100 sweep 2026-11-22 (scripts/tuning-sweep.sh, M=N=K=8192, f16, density 1/8): "

// clang-format off
inline constexpr WmmaVariant kWmmaVariants[] = {
    // name                 tm   tn wm wn kmax s64 s32 s16 ctas pipe   min_grid_ctas  auto
    // ---- bm % 128 == 0 ----
    {"wmma_h128x256k32s5", 128, 256, 2, 4, 32, 0, 5, 8, 1, true,  kMinCtasForWide, true,
     SPARSEK_WMMA_SWEEP "343.5 TFLOPS at bm 128, the fastest bm-128 row (w128x256 252.8, p128x256 321.5, "
     "h128x256k64 336.7, h128x256k64s3 337.5, h128x128x4w 303.8); 132.5 KiB of shared memory (K_STEP 32, row-major B)"},
    {"wmma_w128x256",      128, 256, 2, 4, 32, 0, 3, 5, 1, false, kMinCtasForWide, true,
     "run 1 2026-11-22 (H100, report/NOTES.md): 251 TFLOPS at bm 128, density 1/8; " SPARSEK_WMMA_SWEEP
     "252.8; the bm-128 row within 99 KiB for grids of >= 264 CTAs"},
    {"wmma_w128x128",      128, 128, 2, 4, 32, 0, 4, 6, 2, false, 0,               true,
     "design, not measured: the bm-128 row for grids under 264 CTAs (two CTAs/SM)"},
    // ---- bm % 64 == 0 ----
    {"wmma_h64x256x4w",     64, 256, 1, 4, 32, 0, 5, 8, 2, true,  kMinCtasForWide, true,
     SPARSEK_WMMA_SWEEP "256.8 TFLOPS at bm 64, the fastest bm-64 row (w64x256 235.2, h64x256k64 221.6, "
     "h64x256s6 218.3)"},
    {"wmma_w64x256",        64, 256, 2, 4, 32, 0, 3, 6, 2, false, kMinCtasForWide, true,
     "run 1 2026-11-22 (H100, report/NOTES.md): 215 TFLOPS at bm 64, density 1/8; " SPARSEK_WMMA_SWEEP
     "235.2; the bm-64 row within 99 KiB for grids of >= 264 CTAs"},
    {"wmma_w64x128",        64, 128, 2, 2, 32, 0, 4, 6, 3, false, 0,               true,
     "design, not measured: the bm-64 row for grids under 264 CTAs (three CTAs/SM)"},
    // ---- bm % 32 == 0 ----
    {"wmma_h32x256x4w",     32, 256, 1, 4, 32, 0, 5, 8, 2, true,  kMinCtasForWide, true,
     SPARSEK_WMMA_SWEEP "146.3 TFLOPS at bm 32, the fastest bm-32 row (w32x256 141.0, h32x256s5 146.1)"},
    {"wmma_w32x256",        32, 256, 1, 8, 32, 0, 4, 6, 2, false, kMinCtasForWide, true,
     "run 1 2026-11-22 (H100, report/NOTES.md): 139 TFLOPS at bm 32, density 1/8; " SPARSEK_WMMA_SWEEP
     "141.0; the bm-32 row within 99 KiB for grids of >= 264 CTAs"},
    {"wmma_w32x128",        32, 128, 1, 4, 32, 0, 4, 6, 4, false, 0,               true,
     "design, not measured: the bm-32 row for grids under 264 CTAs (four CTAs/SM)"},
    // ---- bm % 16 == 0 (no measured upgrade) ----
    {"wmma_w16x256",        16, 256, 1, 8, 32, 0, 4, 6, 2, false, kMinCtasForWide, true,
     "design, not measured: the bm-16 row for grids of >= 264 CTAs"},
    {"wmma_w16x128",        16, 128, 1, 4, 32, 0, 4, 6, 4, false, 0,               true,
     "design, not measured: the bm-16 row for grids under 264 CTAs, the last resort of every bm"},
    // ---- tuning candidates: SPARSEK_VARIANT only; measured slower than the rows above ----
    {"wmma_p128x256",      128, 256, 2, 4, 32, 0, 3, 5, 1, true,  0, false,
     SPARSEK_WMMA_SWEEP "321.5 TFLOPS at bm 128 (w128x256 with the pipelined loop only); h128x256k32s5 is faster"},
    {"wmma_h128x256k64",   128, 256, 2, 4, 64, 4, 6, 8, 1, true,  0, false,
     SPARSEK_WMMA_SWEEP "336.7 TFLOPS at bm 128 (K_STEP 64, 204 KiB); h128x256k32s5 is faster"},
    {"wmma_h128x128x4w",   128, 128, 2, 2, 64, 3, 5, 8, 2, true,  0, false,
     SPARSEK_WMMA_SWEEP "303.8 TFLOPS at bm 128 (4 warps of 64x64, 2 CTAs/SM, 105 KiB); h128x256k32s5 is faster"},
    {"wmma_h128x256k64s3", 128, 256, 2, 4, 64, 3, 5, 8, 1, true,  0, false,
     SPARSEK_WMMA_SWEEP "337.5 TFLOPS at bm 128 (as h128x256k64 with 3 stages, 153 KiB); h128x256k32s5 is faster"},
    {"wmma_h64x256k64",     64, 256, 2, 4, 64, 4, 6, 8, 1, true,  0, false,
     SPARSEK_WMMA_SWEEP "221.6 TFLOPS at bm 64 (K_STEP 64, 168 KiB); h64x256x4w is faster"},
    {"wmma_h64x256s6",      64, 256, 2, 4, 32, 0, 6, 8, 1, true,  0, false,
     SPARSEK_WMMA_SWEEP "218.3 TFLOPS at bm 64 (K_STEP 32, 6 stages, 129 KiB); h64x256x4w is faster"},
    {"wmma_h32x256s5",      32, 256, 1, 8, 32, 0, 5, 8, 2, true,  0, false,
     SPARSEK_WMMA_SWEEP "146.1 TFLOPS at bm 32 (5 stages, 2 CTAs/SM); h32x256x4w is as fast (146.3)"},
};
// clang-format on

#undef SPARSEK_WMMA_SWEEP

inline constexpr int kWmmaRows = sizeof(kWmmaVariants) / sizeof(kWmmaVariants[0]);

constexpr bool wmma_same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The build features a row needs (core/features.hpp).
constexpr uint32_t needs(const WmmaVariant& v) {
  return v.automatic ? 0u : uint32_t(detail::kFeatureTuning);
}

// The index of the row named `name`, or -1.
constexpr int wmma_row(const char* name) {
  for (int i = 0; i < kWmmaRows; ++i)
    if (wmma_same_name(kWmmaVariants[i].name, name)) return i;
  return -1;
}

}  // namespace sparsek::detail::spmm_wmma
