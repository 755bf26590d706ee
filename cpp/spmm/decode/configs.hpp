// The Decode family's table of variants: one row per CTA tile configuration, by the
// number of columns n of B and C (decode-sized batches). Selection is the registry's rule
// (cpp/core/registry.hpp): the first `automatic` row, in table order, that fits; family.cu's
// fits: n <= n_max and the row's shared memory within the device's per-block opt-in limit.
// Rows go from the narrowest tile up, so a problem gets the narrowest tile that holds n
// (the columns past n are zero padding that the tensor cores multiply for nothing).
// SPARSEK_VARIANT=<name> forces any row, automatic or not, where it fits.
//
// Adding a row: its line here and a test case. The build's units generator compiles every
// row of this table whose features are built, each in a generated unit (one
// SPARSEK_DECODE_INSTANTIATE line, kernel.cuh); launch.hpp checks every row's numbers at
// compile time.
//
// Columns (the kernel and its design are described in kernel.cuh):
//   n_max        N tile: the CTA computes all n <= n_max columns at once (8 or a multiple
//                of 16; the n8 groups past n are zero).
//   warps        warps per CTA.
//   gm_max       16-row groups of A per warp (accumulators: gm_max * n_max / 2 floats per
//                thread).
//   tm_max       most rows of a block a CTA covers; a CTA takes TM = 16 * (a divisor of
//                bm/16 that is <= tm_max/16: the largest, or one down to tm_min) rows, so
//                bm/TM CTAs (slices) share a block-row and each reads B once per block.
//                <= 16 * gm_max * warps.
//   a_bytes      bytes of A per ring stage at most (16-bit rows: whole parts of tm_max x 64).
//                A stage holds NB "parts" (TM rows x KC
//                columns of one block, KC = 64, 32 or 16 dividing bk), NB as large as
//                a_bytes and the slot allow; the slot (ring stage) has room for a_bytes of
//                A and, per part of tm_max x 64 elements, n_max columns of 64 elements of B
//                (f16 rows: a_bytes + b_parts * n_max * 128 bytes).
//   b_parts      parts of B a slot has room for at least (n_max x 64 elements each): with
//                more than one, a stage takes several parts of blocks shorter than tm_max
//                rows, so 64-row blocks still stream a_bytes per stage (16-bit rows, 1: one
//                part of tm_max rows fills the slot, 8 KiB of A per stage at 64-row blocks).
//   fill_only    Auto passes over the row unless its grid keeps more bytes of A in flight per
//                wave of resident CTAs than the row right after it (same kind and n_max, its
//                partner) does for the problem, or as much (within 5 %) with a smaller
//                cluster split (launch.hpp's decode_prefers over launch_row.cuh's fill_score:
//                CTAs x stages in flight x stage bytes / waves, and S). A lighter CTA (more of
//                them per SM) whose grid fits in one wave where the partner's needs two, or
//                fills SMs the partner's leaves idle. SPARSEK_VARIANT forces it like any row.
//   tm_min       the slicing's floor: Auto (launch_row.cuh's decode_grid) weighs every TM
//                from the largest divisor of bm that is <= tm_max down to tm_min whose grid
//                fits one wave, and takes the one launch.hpp's decode_prefers keeps (the
//                most of A in flight per wave; within 5 % of that, the smallest cluster S),
//                the largest TM on a tie.
//                Fewer rows per CTA turn a few long block-rows into more, shorter-split CTAs
//                (S 8 -> 2 at the same CTAs: each streams 4x the blocks and its cluster
//                reduces 4x fewer partial tiles). 0 (tm_max): not sliced (rows not measured
//                sliced, and the W8A16 rows of n >= 16, which measured 0.89-0.94x sliced).
//   stages       ring depth (stages - 1 stages in flight).
//   min_ctas     __launch_bounds__ minimum CTAs per SM (caps registers at 64K/(threads*min_ctas)).
//   automatic    Auto may pick it; false = tuning candidate (SPARSEK_VARIANT only).
//   chosen_by    the measurement that chose the row.
//   chunked      the row takes any n (one launch per n_max columns): the fallback row.
//   fp8_a        W8A16: the row takes FP8 A (e4m3 / e5m2, 1 byte, with its scales) and B of
//                f16 or bf16; the other rows take A and B of one 16-bit type. A problem
//                runs only on rows of its kind (family.cu's fits), so each kind has its
//                own rows from the narrowest tile up.
#pragma once

#include <cstdint>
#include "core/dtype.hpp"
#include "core/features.hpp"

namespace sparsek::detail::spmm_decode {

// The input types the family takes (core/dtype.hpp); a problem of another type is refused.
// 16-bit rows: A and B of one of DecodeDTypes. FP8 rows (W8A16): A of DecodeFp8DTypes, B of
// DecodeDTypes (the tensor cores' type: A's values are exact in f16 and bf16).
using DecodeDTypes = DTypeList<DType::F16, DType::BF16>;
using DecodeFp8DTypes = DTypeList<DType::E4M3, DType::E5M2>;

struct DecodeVariant {
  const char* name;       // the registry's name (SPARSEK_VARIANT)
  int n_max;              // N tile (fits: n <= n_max)
  int warps;              // warps per CTA
  int gm_max;             // 16-row groups per warp
  int tm_max;             // most rows of a block per CTA
  int a_bytes;            // most bytes of A per ring stage
  int stages;             // ring depth
  int min_ctas;           // __launch_bounds__ minimum CTAs per SM
  bool automatic;         // Auto may pick it
  const char* chosen_by;  // the measurement that chose the row
  // Takes any n by launching its kernel once per n_max columns (a registry fallback row:
  // the one kernel for wide B and C that the tensor-core families cannot take, e.g. an
  // odd ld).
  bool chunked = false;
  // W8A16: A is FP8 (1 byte per element), B f16 or bf16 (see the column list above).
  bool fp8_a = false;
  // Parts of B a ring slot has room for at least, beside a_bytes of A (see the column list).
  int b_parts = 1;
  // Auto takes the row only where it keeps more of A in flight than its partner, the next
  // row of its kind and n_max (see the column list).
  bool fill_only = false;
  // Fewest rows of a block per CTA Auto's slicing may take (see the column list); 0: none
  // below tm_max's (the largest divisor of bm that is <= tm_max).
  int tm_min = 0;
};

// The thresholds (each row's n_max, and Decode before the tensor-core families in Auto's
// order) were checked by one H100 run of `bench_report decode`, report/baseline/h100-decode.json
// (2026-11-23): for n <= 64 Decode was the fastest family in every row of the sweep (3
// shapes x 3 blocks x 2 densities), 1.5-7x faster than CUTLASS/WMMA; at n = 128 it was
// within 10 % of the best family at 128x128 blocks and 2-4x faster on 4096x4096, but up to
// 1.5x slower than WMMA on 14336x4096 with 32x32/64x64 blocks (left as is: no single
// threshold wins both); at n = 256 the tensor-core families win and Decode takes no row.
#define SPARSEK_DECODE_DESIGN "H100 decode sweep 2026-11-23, report/baseline/h100-decode.json (see above)"
// The W8A16 rows mirror the 16-bit rows' n thresholds (issue 27); their speed against the f16
// rows is fp8_check --time's decode section.
#define SPARSEK_DECODE_W8 "mirrors the 16-bit rows (issue 27; fp8_check --time, decode section)"
// One 16-row group per warp (issue 48): tests/cpp/time_decode.cu on the H100 against the
// two-group rows, the same 11 layer shapes, blocks and densities.
#define SPARSEK_DECODE_W8_ONE_GROUP                                                                  \
  "one 16-row group per warp, H100 (time_decode, issue 48): n = 33..64 1.43-1.48x the two-group "   \
  "rows' speed (geo-means over 11 layer shapes x 64x64/128x128 x d 0.5/0.3); n128 1.28x (128x128) " \
  "and 1.42x (64x64) the chunked n64 row's at n = 96..128"
// b_parts (issue 48): tests/cpp/time_decode.cu on the H100, 11 Llama-3 / Qwen2.5 layer shapes x
// 64x64 and 128x128 blocks x densities 0.5 and 0.3, weights cycled out of L2, report/NOTES.md.
#define SPARSEK_DECODE_BPARTS \
  "n = 16 over 11 layer shapes x 64x64/128x128 blocks x densities 0.5/0.3, H100 (time_decode, issue 48): " \
  "b_parts 2 1.05x geo-mean: 64x64 1.11x (up to 1.25x; 3584x3584 d 0.5 4 % slower), 128x128 unchanged"
#define SPARSEK_DECODE_N8_FILL                                                                        \
  "time_decode n = 1, 4, 8, H200 (session 36 calls B and C): 10 layer shapes x 64x64 x d 0.5/0.3: Auto " \
  "(n8_fill or n8) 1.10x geo-mean over n8 alone with random block-rows (up to 1.20x, 14336x4096), 1.04x " \
  "with even ones; worst 0.96x (11264x2048 even); 128x128 blocks stay on n8 (unchanged)"
#define SPARSEK_DECODE_N8_WIDE                                                                        \
  "time_decode n = 1 and 8, H200 (session 36 calls E and F): 18 layer shapes (8 not in the sweeps "     \
  "before) x 128x128/64x64 x d 0.5/0.3, random block-rows: Auto over the three n <= 8 rows 1.07x "        \
  "(128x128) and 1.17x (64x64) geo-mean over n8 alone, up to 1.43x, within 1 % of the best row forced; " \
  "8 small shapes x d 0.5/0.25/0.1: 1.02-1.15x, worst 0.92x (2048x2048 64x64 d 0.25, even rows)"
#define SPARSEK_DECODE_N16_FILL                                                                     \
  "time_decode n = 16, H200 (session 33 call B): 8 layer shapes x 128x128/64x64 x d 0.5/0.3, even "   \
  "and random block-rows: Auto (n16_fill or n16 by fill_score) 1.12x (even) and 1.16x (random) "      \
  "geo-mean over n16 alone, up to 1.58x (18944x3584 64x64) where n16's 2 CTAs per SM fit fewer "       \
  "clusters; 2 of 64 cases more than 3 % slower (4096x4096 d 0.3: 7 % and 4 %)"
#define SPARSEK_DECODE_N16_WIDE                                                                    \
  "time_decode n = 9 and 16, H200 (session 38 call I): 24 layer shapes x 128x128/64x64/256x256 x d " \
  "0.5/0.3, random block-rows, each row forced twice: n16_wide 1.058x geo-mean over n16 (0.94-"      \
  "1.40x); as the partner of n16_fill and n16 (fill rows) 1.039x over Auto before it, 116 of 284 "   \
  "cases more than 3 % faster, 7 slower (worst 0.94x, 1024x8192 128x128 d 0.3 n = 16)"
#define SPARSEK_DECODE_N32_FILL                                                                    \
  "time_decode n = 17 and 32, H200 (session 33 call C): 8 layer shapes x 128x128/64x64 x d 0.5/0.3: " \
  "Auto (n32_fill or n32) 1.13x (even rows) and 1.16x (random) geo-mean over n32 alone, up to 1.56x " \
  "(5120x13824 64x64); 2 of 128 cases 7 % slower (4096x4096 128x128 d 0.3, even rows)"
#define SPARSEK_DECODE_W8_N16_FILL                                                                 \
  "time_decode W8A16 n = 9 and 16, H200 (session 33 call D): 8 layer shapes x 128x128/64x64 x d "    \
  "0.5/0.3: Auto (w8_n16_fill or w8_n16) 1.10x (even rows) and 1.12x (random) geo-mean over w8_n16 " \
  "alone, up to 1.58x (4096x14336 64x64); 2 of 128 cases 8 % slower (4096x4096 128x128 d 0.3)"
#define SPARSEK_DECODE_W8_FILL \
  "n <= 8, 11 layer shapes x 64x64/128x128 blocks x d 0.5/0.3, H100 (time_decode, issue 48), with " \
  "w8_n8's b_parts 4: 64x64 1.14x geo-mean (b_parts alone 1.07x), up to 1.49x at 18944x3584; " \
  "128x128 1.03x; no case more than 2.3 % slower"
#define SPARSEK_DECODE_W8_WIDE                                                                      \
  "time_decode W8A16 n = 1 and 8, H200 (session 38 call G): 24 layer shapes x 128x128/64x64/256x256 " \
  "x d 0.5/0.3, random block-rows, each row forced twice: w8_n8_wide 1.046x geo-mean over w8_n8 "     \
  "(0.91-1.15x); as the partner of w8_n8_fill and w8_n8 (fill rows) 1.021x over Auto with it as a "   \
  "fill row, 92 of 288 cases more than 3 % faster, 9 slower (worst 0.92x, 1024x8192 256x256 d 0.3)"
#define SPARSEK_DECODE_W8_BPARTS \
  "mirrors the 16-bit rows; b_parts 4 (16 KiB stages at 64x64 blocks, 12 KiB before): time_decode, issue 48"

// Shared memory per CTA (launch.hpp; 4 KiB of static memory for the block columns on
// top) and CTAs per SM on an H100 or H200 (228 KiB per SM): n8_fill 59 KiB (3), n8_wide 103
// KiB (2), n8 69 KiB (3), n16_fill 65 KiB (3), n16 81 KiB (2), n32_fill 65 KiB (3), n32 81 KiB
// (2), n64 97 KiB (2), n128 133 KiB (1: its fp32 tile and receive buffer, and its 128 fp32
// accumulators per thread). A stage carries up to 16 KiB of A (128 x 128 blocks: 16 KiB,
// 64 x 64: 8 KiB, n16's 16 KiB (b_parts 2), 32 x 32: 12 KiB; n8_wide 32 KiB); with stages
// - 1 = 3 stages in flight
// a CTA keeps up to 48 KiB of A in flight, against Little's law's ~24 KiB per SM (3.1
// TB/s * ~1 us / 132 SMs). fits() checks the row against the device's opt-in limit: every
// row fits an H100 and an A100; on sm_86 / sm_89 (99 KiB) n8_wide, n64 and n128 do not, so
// n > 32 goes to the other families there (and n <= 8 to n8_fill and n8).
// The thresholds (n_max of each row, all automatic) are a design default: the n >= 65 row
// is near the tensor cores' mma.sync rate at full HBM bandwidth and may lose to the other
// families on some shapes; the issue-11 sweep decides.
// Two parts of B per ring slot at n = 17-64 (the rows ending _bparts2): tests/cpp/time_decode.cu
// on the H200, 11 layer shapes x d 0.5/0.3, random block-rows, each row forced (report/NOTES.md).
#define SPARSEK_DECODE_BPARTS2                                                                      \
  "two parts of B per slot, so 64-row blocks stream 16 KiB stages, H200 (time_decode, session 45): " \
  "64x64 n = 24, 32 0.83x the time of decode_n32 (0.72-1.02x), n = 40, 48 0.79x of Auto (decode_n48), " \
  "n = 40-64 0.86x; 128x128 blocks keep their rows by the fill score (there 0.96-1.11x)"
// clang-format off
inline constexpr DecodeVariant kDecodeVariants[] = {
    // name          n_max warps gm tm_max a_bytes stages ctas auto
    // n8_fill: room for two parts of B (b_parts 2), so blocks of 64 rows or fewer stream 16 KiB
    // stages where n8's hold one 8 KiB part, with one stage fewer (59 KiB, 3 CTAs per SM as
    // n8); Auto takes it where its grid keeps more of A in flight than n8's (fill_only): blocks
    // up to 64 high. At 128-row blocks a part fills the stage and n8's extra stage wins.
    {"decode_n8_fill",  8,    8,  1,  128,  16384,   3,    3,  true, SPARSEK_DECODE_N8_FILL, false, false, 2, true, 32},
    // n8_wide: two parts of 128 rows per stage (a_bytes 32 KiB: a whole 128x128 block), three
    // stages (103 KiB, 2 CTAs per SM), taken like n8_fill where its grid keeps the most of A in
    // flight of the three: where 2 CTAs per SM still hold n8's clusters (fill_score).
    {"decode_n8_wide",  8,    8,  1,  128,  32768,   3,    2,  true, SPARSEK_DECODE_N8_WIDE, false, false, 2, true, 32},
    {"decode_n8",       8,    8,  1,  128,  16384,   4,    2,  true, SPARSEK_DECODE_DESIGN, false, false, 1, false, 32},
    // n16: room for two parts of B (b_parts 2), so 64-row blocks stream 16 KiB stages.
    // n16_fill: n16's stage with one stage fewer, 65 KiB: 3 CTAs per SM where n16 (81 KiB) has
    // 2, taken where its grid keeps more of A in flight (fill_only), e.g. where n16's clusters
    // need a second wave or a smaller split.
    {"decode_n16_fill", 16,   8,  1,  128,  16384,   3,    3,  true, SPARSEK_DECODE_N16_FILL, false, false, 2, true, 32},
    // n16: a fill row now, taken where its grid is preferred over n16_wide's.
    {"decode_n16",     16,    8,  1,  128,  16384,   4,    2,  true, SPARSEK_DECODE_BPARTS, false, false, 2, true, 32},
    // n16_wide: 24 KiB of A per stage in parts of at most 64 rows (room for 3 parts of B: a
    // part of 16 columns is half its A at 32 rows), three stages (95 KiB, 2 CTAs per SM): as
    // many bytes in flight as n16 in fewer, larger stages (the stream pays per stage).
    {"decode_n16_wide", 16,   8,  1,   64,  24576,   3,    2,  true, SPARSEK_DECODE_N16_WIDE, false, false, 3, false, 32},
    // n32_fill: the same for n = 17..32 (65 KiB: 3 CTAs per SM where n32's 81 KiB has 2).
    {"decode_n32_fill", 32,   8,  1,  128,  16384,   3,    3,  true, SPARSEK_DECODE_N32_FILL, false, false, 1, true, 32},
    // n32_bparts2: n32's slot with room for two parts of B (24 KiB), so 64-row blocks stream
    // 16 KiB of A a stage where n32's hold one 8 KiB part; taken where its grid keeps more of A
    // in flight (fill_only): blocks of 64 rows or fewer, and the slices of taller ones.
    {"decode_n32_bparts2", 32, 8, 1,  128,  16384,   4,    2,  true, SPARSEK_DECODE_BPARTS2, false, false, 2, true, 32},
    {"decode_n32",     32,    8,  1,  128,  16384,   4,    2,  true, SPARSEK_DECODE_DESIGN, false, false, 1, false, 32},
    // n48_bparts2 and n64_bparts2: two parts of B per slot (28 and 32 KiB), three stages so
    // that two CTAs still fit an SM: 32 KiB of A in flight at 64-row blocks where n48 and n64
    // keep 24 (three stages of one 8 KiB part); at 128-row blocks their partners keep 48.
    {"decode_n48_bparts2", 48, 8, 2,  128,  16384,   3,    2,  true, SPARSEK_DECODE_BPARTS2, false, false, 2, true},
    {"decode_n48",     48,    8,  2,  128,  16384,   4,    2,  true,
     "added after the 2026-11-23 sweep (n in 33..48 ran on decode_n64 there): not yet measured"},
    {"decode_n64_bparts2", 64, 8, 2,  128,  16384,   3,    2,  true, SPARSEK_DECODE_BPARTS2, false, false, 2, true},
    {"decode_n64",     64,    8,  2,  128,  16384,   4,    2,  true, SPARSEK_DECODE_DESIGN},
    {"decode_n128",   128,    8,  2,  128,  16384,   3,    1,  true, SPARSEK_DECODE_DESIGN},
    {"decode_n128_chunked", 128, 8, 2,  128,  16384,   3,    1, false,
     "fallback for n > 128 that no tensor-core row takes (odd ld, unaligned B or C)", true},
    // W8A16 (FP8 A, issue 27): the same tiles; a stage holds 16 KiB of A as the f16 rows do
    // (twice the elements: one part of 128 x 128 at 128x128 blocks, four of 64 x 64 with
    // w8_n8's b_parts 4, three with the others') and its B. Shared memory:
    // w8_n8 89 KiB, w8_n16 89 KiB (4 stages), w8_n32 81 KiB (3 stages): 2 CTAs/SM on an
    // H100; w8_n48 93 KiB, w8_n64 105 KiB (3 stages): 2 CTAs/SM as well, with one 16-row
    // group per warp (8 warps along m, no k-warps at 128-row blocks): with two groups their
    // dequantized A fragments and accumulators took 248 registers, so one CTA per SM, and
    // spilled inside the mma loop under 128. With one group n64 fits 128 registers; ptxas
    // keeps one value (4 bytes) in local memory, which the e4m3 x f16 instance reloads twice
    // per ring stage (outside the mma loop). 4 KiB of each is the block scales (launch.hpp).
    // On sm_89 (99 KiB) n <= 48 runs, wider n is refused.
    // w8_n8_fill: 4 warps, 64 rows, 3 CTAs/SM (60 KiB), where its grid keeps more of A in
    // flight than w8_n8's (fill_only).
    {"decode_w8_n8_fill", 8,  4,  1,   64,   8192,   5,    3,  true, SPARSEK_DECODE_W8_FILL, false, true, 1, true, 32},
    // w8_n8: 16 KiB stages, four of them; a fill row now, taken where its grid is preferred
    // over w8_n8_wide's (a smaller split at the same bytes in flight, or more of them).
    {"decode_w8_n8",    8,    8,  1,  128,  16384,   4,    2,  true, SPARSEK_DECODE_W8_BPARTS, false, true, 4, true, 32},
    // w8_n8_wide: 24 KiB of A per stage (3-5 parts of 32-128 rows, with room for 8 parts of
    // B), three stages (107 KiB, 2 CTAs per SM): as many bytes in flight as w8_n8 in fewer,
    // larger stages. The W8A16 stream pays per stage, not per byte: W8A16 and f16 took the same
    // time at the same number of stages per CTA (4096x14336 128² n 1, ~9.5 stages each).
    {"decode_w8_n8_wide", 8,  8,  1,  128,  24576,   3,    2,  true, SPARSEK_DECODE_W8_WIDE, false, true, 8, false, 32},
    // w8_n16_fill: w8_n16 with one stage fewer (69 KiB: 3 CTAs per SM where w8_n16's 89 KiB
    // has 2), taken like the 16-bit fill rows. Its 80 registers keep 32 bytes on the stack:
    // loads once per ring stage on the issue path, none in the mma loop.
    {"decode_w8_n16_fill", 16, 8, 1,  128,  16384,   3,    3,  true, SPARSEK_DECODE_W8_N16_FILL, false, true, 1, true},
    {"decode_w8_n16",  16,    8,  1,  128,  16384,   4,    2,  true, SPARSEK_DECODE_W8, false, true},
    {"decode_w8_n32",  32,    8,  1,  128,  16384,   3,    2,  true, SPARSEK_DECODE_W8, false, true},
    {"decode_w8_n48",  48,    8,  1,  128,  16384,   3,    2,  true, SPARSEK_DECODE_W8_ONE_GROUP, false, true},
    {"decode_w8_n64",  64,    8,  1,  128,  16384,   3,    2,  true, SPARSEK_DECODE_W8_ONE_GROUP, false, true},
    // n128 with one 16-row group per warp: 204 registers, no local memory, one CTA per SM
    // (with two groups its accumulators spilled inside the mma loop: 129 LDL/STL). A is read
    // once for n = 65..128, where the chunked n64 tile reads it once per 64 columns.
    {"decode_w8_n128", 128,   8,  1,  128,  16384,   3,    1,  true, SPARSEK_DECODE_W8_ONE_GROUP, false, true},
    // n > 128 (and any ld or alignment the others refuse) runs the n64 tile in chunks of 64
    // columns (one launch each, A read once per chunk).
    {"decode_w8_n64_chunked", 64, 8, 1,  128,  16384,   3,    2, false,
     "the W8A16 fallback for n > 64 (any ld and alignment of B and C): the n64 tile",
     true, true},
};
// clang-format on

#undef SPARSEK_DECODE_DESIGN
#undef SPARSEK_DECODE_W8
#undef SPARSEK_DECODE_W8_ONE_GROUP
#undef SPARSEK_DECODE_BPARTS
#undef SPARSEK_DECODE_W8_BPARTS
#undef SPARSEK_DECODE_W8_WIDE
#undef SPARSEK_DECODE_W8_FILL
#undef SPARSEK_DECODE_N8_FILL
#undef SPARSEK_DECODE_N8_WIDE
#undef SPARSEK_DECODE_N16_FILL
#undef SPARSEK_DECODE_BPARTS2
#undef SPARSEK_DECODE_N16_WIDE
#undef SPARSEK_DECODE_N32_FILL
#undef SPARSEK_DECODE_W8_N16_FILL

inline constexpr int kDecodeRows = sizeof(kDecodeVariants) / sizeof(kDecodeVariants[0]);

constexpr bool decode_same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The build features a row needs (core/features.hpp).
constexpr uint32_t needs(const DecodeVariant& v) {
  // The chunked rows are no candidates but the fallbacks of wide problems: built with their kind.
  return (v.automatic || v.chunked ? 0u : uint32_t(detail::kFeatureTuning)) |
         (v.fp8_a ? uint32_t(detail::kFeatureFp8) : 0u);
}

// The first FP8 (W8A16) row: the family's probe of the FP8 kernels' image.
constexpr int decode_first_fp8_row() {
  for (int i = 0; i < kDecodeRows; ++i)
    if (kDecodeVariants[i].fp8_a) return i;
  return -1;
}

// The index of the row named `name`, or -1.
constexpr int decode_row(const char* name) {
  for (int i = 0; i < kDecodeRows; ++i)
    if (decode_same_name(kDecodeVariants[i].name, name)) return i;
  return -1;
}

}  // namespace sparsek::detail::spmm_decode
