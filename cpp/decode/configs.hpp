// The Decode family's table of variants: one row per CTA tile configuration, by the
// number of columns n of B and C (decode-sized batches). Selection is the registry's rule
// (cpp/registry.hpp): the first `automatic` row, in table order, that fits; family.cu's
// fits: n <= n_max and the row's shared memory within the device's per-block opt-in limit.
// Rows go from the narrowest tile up, so a problem gets the narrowest tile that holds n
// (the columns past n are zero padding that the tensor cores multiply for nothing).
// SPARSEK_VARIANT=<name> forces any row, automatic or not, where it fits.
//
// Adding a row: its line here, its file cpp/decode/instantiations/<name>.cu (one
// SPARSEK_DECODE_INSTANTIATE line), and a test case. A row without its instantiation file
// fails at link time (undefined launch_row<row>); launch.hpp checks every row's numbers
// at compile time.
//
// Columns (the kernel and its design are described in kernel.cuh):
//   n_max        N tile: the CTA computes all n <= n_max columns at once (multiple of 8;
//                n8 groups past n are zero).
//   warps        warps per CTA.
//   gm_max       16-row groups of A per warp (accumulators: gm_max * n_max / 2 floats per
//                thread).
//   tm_max       most rows of a block a CTA covers; a CTA takes TM = 16 * (the largest
//                divisor of bm/16 that is <= tm_max/16) rows, so bm/TM CTAs (slices) share a
//                block-row and each reads B once per block. <= 16 * gm_max * warps.
//   stage_units  one ring stage holds SP k16-slabs of A (TM x 16) and of B (16 x n_max),
//                SP * (TM + n_max) <= stage_units, 32 bytes per unit: the bytes of a stage
//                stay about the same whatever bm and bk are.
//   sp_max       most slabs per stage (SP is a power of two: 2*SP divides the threads).
//   stages       cp.async ring depth (stages - 1 stages in flight).
//   min_ctas     __launch_bounds__ minimum CTAs per SM (caps registers at 64K/(threads*min_ctas)).
//   automatic    Auto may pick it; false = tuning candidate (SPARSEK_VARIANT only).
//   chosen_by    the measurement that chose the row.
#pragma once

#include <cstdint>

namespace sparsek::detail::decode_impl {

struct DecodeVariant {
  const char* name;       // the registry's name (SPARSEK_VARIANT)
  int n_max;              // N tile (fits: n <= n_max)
  int warps;              // warps per CTA
  int gm_max;             // 16-row groups per warp
  int tm_max;             // most rows of a block per CTA
  int stage_units;        // 32-byte units per ring stage: SP * (TM + n_max) <= stage_units
  int sp_max;             // most k16-slabs per stage
  int stages;             // cp.async ring depth
  int min_ctas;           // __launch_bounds__ minimum CTAs per SM
  bool automatic;         // Auto may pick it
  const char* chosen_by;  // the measurement that chose the row
};

#define SPARSEK_DECODE_DESIGN "design default, to be measured (issue 11 sweep)"

// Shared memory per CTA (launch.hpp computes it): n8 68 KiB, n16 72 KiB, n32 80 KiB, n64
// 96 KiB, n128 96 KiB: all within 99 KiB (sm_86/sm_89's opt-in limit), so every row runs
// on every cc >= 8.0 device; on an H100 (228 KiB per SM) that is 3, 3, 2, 2, 2 CTAs/SM by
// shared memory. A stage of 16 KiB of A (TM = 128) with 3 stages in flight keeps 48 KiB of
// A per CTA in flight, about twice Little's law's 3.1 TB/s * ~1 us / 132 SMs per SM even
// at one CTA per SM.
// clang-format off
inline constexpr DecodeVariant kDecodeVariants[] = {
    // name          n_max warps gm tm_max units sp stages ctas auto
    {"decode_n8",       8,    4,  2,  128,   544, 16,  4,   3,  true, SPARSEK_DECODE_DESIGN},
    {"decode_n16",     16,    4,  2,  128,   576, 16,  4,   3,  true, SPARSEK_DECODE_DESIGN},
    {"decode_n32",     32,    4,  2,  128,   640, 16,  4,   2,  true, SPARSEK_DECODE_DESIGN},
    {"decode_n64",     64,    8,  2,  128,   768, 16,  4,   2,  true, SPARSEK_DECODE_DESIGN},
    {"decode_n128",   128,    8,  2,  128,  1024, 16,  3,   1,  true, SPARSEK_DECODE_DESIGN},
};
// clang-format on

#undef SPARSEK_DECODE_DESIGN

inline constexpr int kDecodeRows = sizeof(kDecodeVariants) / sizeof(kDecodeVariants[0]);

constexpr bool decode_same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The index of the row named `name`, or -1.
constexpr int decode_row(const char* name) {
  for (int i = 0; i < kDecodeRows; ++i)
    if (decode_same_name(kDecodeVariants[i].name, name)) return i;
  return -1;
}

}  // namespace sparsek::detail::decode_impl
