// sparsek SM90: the table of variants of the Hopper family (kSm90Family, family.cu).
//
// One row per compiled kernel. Adding a tile configuration touches this table and a test
// case: the build's units generator compiles every row whose features are built, in
// generated units of SPARSEK_SM90_INSTANTIATE lines (kernel.hpp).
//
// Columns:
//   name         unique across families; SPARSEK_VARIANT=<name> forces the row
//                (cpp/core/registry.hpp). sm90_<input>_bm<bm>_b<row|col>_c<row|col>, and for a
//                tuning candidate _<tile_m>x<tile_n> (a `t` prefix when transposed); an
//                any-block row is sm90_<input>_bm_le<largest bm>_k<tile_k>_b<row|col>.
//   input        A and B element type; output: C's (Same: the input type; OrF32: the input
//                type or f32, chosen at run time).
//   bm           Plain/Fused rows: the block height they take (bk 64 or 128, TileK = 64).
//                Direct rows: the largest block height; smaller ones are zero-padded.
//   b_layout, c_layout   the layouts of B and C the row is compiled for (CAny: run time).
//   tile_m x tile_n      the GEMM (M, N) tile; tile_k (last column, default 64) its K.
//                Direct rows take any bk % 16: the last k-tile of a block may reach past
//                it (zero-filled by TMA; family.cu caps the waste).
//   transposed   false: GEMM C = A*B, M tile = one block-row (tile_m == bm);
//                true:  GEMM C^T = B^T A^T, N tile = one block-row (tile_n == bm). The
//                cooperative kernel needs an M tile >= 128, hence bm <= 64 runs transposed.
//   automatic    Backend::Auto / Backend::Hopper may pick it (the first automatic row that
//                fits wins, cpp/core/registry.hpp); false = a tuning candidate, reached only
//                through SPARSEK_VARIANT.
//   chosen_by    the measurement that chose the row.
//   epilogue     Plain / Fused (TMA epilogues, kernel.hpp) or Direct (direct_epilogue.hpp).
//   cluster      CTAs per cluster along the dense side (1 or 2; last column, default 1):
//                two CTAs of a block-row share its sparse tiles by TMA multicast
//                (mainloop.hpp); the row takes only n that fill whole cluster groups.
//   max_n        (after cluster) Auto takes the row only for n <= max_n; 0: any n.
//   schedule     (last column, default Cooperative) the kernel layer: Cooperative (CUTLASS's
//                GemmUniversal, two consumer warpgroups share each tile) or PingPong
//                (pingpong.hpp: each consumer warpgroup owns a tile, and one's epilogue runs
//                under the other's mainloop). PingPong rows: one warpgroup's accumulators
//                (tile_m * tile_n <= 128 * 128), no clusters, no split tiles.
//   max_row_depth (after schedule) Auto takes the row only where the block-rows' average
//                depth (nonzero blocks * bk) is at most this; 0: any.
//   a_transposed (after split, default false) the row runs op(A) = A^T (cpp/spmm/problem.hpp): its
//                blocks are read through the transpose index and MN-major (mainloop.hpp);
//                `bm` is then A^T's block height (A's bk). Every other row runs op(A) = A.
//   dense        (last, default: the input type) B's element type and the MMA's: the input
//                type, or f16 on the W8A16 rows (FP8 A, each k-tile of it converted to f16 in
//                the consumer threads' registers, WGMMA's A operand, mainloop.hpp; natural
//                128-row tiles, no clusters).
//   one_wave_from_n (after dense, default 0) from this n on, Auto takes the row only where its
//                tiles are at most the SMs (family.cu's auto_skips); 0: no such bound.
//   less_waste_than (last, default 0) where that bound applies, Auto takes the row anyway where
//                its dense tiles leave fewer columns of n empty than tiles this wide would.
//   gated        (after split, default false) the row runs the gated (GLU) product and only it
//                (SpmmOptions::gated, cpp/spmm/problem.hpp): gated.hpp's kernel layer, a tile
//                one block-row of h, its gate and up rows in two passes of the mainloop into
//                two accumulators, combined in registers, written by the Direct epilogue.
//                Cooperative, Direct, no clusters, no split tiles; both accumulators within
//                128 registers (tile_m * tile_n <= 128 * 128).
//   split        (after max_row_depth, default Where) split tiles (scheduler.hpp "Split tiles"): Never
//                (compiled without them), Where (compiled with them; a launch splits where
//                choose_split > 1, split.hpp) or Only (the same, and Auto takes the row only
//                where the launch splits: the twin, ahead in the table, of a Never row, or
//                for a Direct row the any-block rows).
//                The support costs a launch that does not split up to 4.5 % (see the measurement above the table), so
//                the common keys (B and C both row- or both column-major) are Never rows,
//                each with an Only twin; the other rows keep Where.
// Stages are derived from the shared memory left after the epilogue (kernel.hpp).
//
// Measured by scripts/tuning-sweep.sh on an H100 (2026-11-22;
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

#include "core/dtype.hpp"
#include "core/features.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail::spmm_sm90 {

// How a row writes C.
enum class EpilogueKind {
  Plain,  // CUTLASS's TMA epilogue with LinearCombination: D = alpha * acc + beta * C
  Fused,  // the TMA epilogue with the bias/activation tree (epilogue.hpp)
  Scaled,  // FP8: the TMA epilogue with the operands' scales and the bias, f16 C not read
           // (epilogue.hpp's ScaledBiasEpilogue): no activation, beta = 0
  Direct  // registers to global (direct_epilogue.hpp): C's dtype and layout, the bias and the
          // activation at run time; any bm up to the tile's sparse extent
};
// The kernel layer of a row (kernel.hpp).
enum class Schedule {
  Cooperative,  // CUTLASS's GemmUniversal, cooperative: two consumer warpgroups split each tile
  PingPong      // pingpong.hpp: consumer warpgroups alternate tiles, epilogue under the other's MMAs
};
// Split tiles (scheduler.hpp): whether a row's kernel has them, and where Auto takes it.
enum class Split {
  Never,  // compiled without split tiles: nothing of them on the per-tile path
  Where,  // compiled with them: splits where choose_split > 1, whole tiles elsewhere
  Only    // compiled with them, and automatic only where the launch splits
};
// Which C dtypes a row writes.
enum class Output {
  Same,       // the input type
  SameOrF32,  // the input type or f32, chosen at run time (Direct rows)
  Wide,       // f16, bf16 or f32, chosen at run time (the FP8 rows, Direct)
  F16         // f16 only (the FP8 rows with a TMA epilogue)
};
// Which C layouts a row writes.
enum class CLayout { Row, Col, Any };

// The input types the family takes (core/dtype.hpp): its rows' `input`s, checked below.
using Sm90DTypes = detail::DTypeList<DType::F16, DType::BF16, DType::E4M3, DType::E5M2>;
// The 16-bit inputs, whose every (bm, B, C) key has a TMA-epilogue default and every block an
// any-block row (checked below); FP8 has the Direct rows only.
inline constexpr DType kSm90InputTypes[] = {DType::F16, DType::BF16};

struct Sm90Variant {
  const char* name;
  DType input;
  Output output;
  // Plain and Fused rows: the one block height they take. Direct rows: the largest (the
  // tile's sparse extent); a smaller bm runs with the tile's extra rows zero-filled.
  int bm;
  Layout b_layout;
  CLayout c_layout;
  int tile_m, tile_n;
  bool transposed;  // C^T = B^T A^T
  bool automatic;
  const char* chosen_by;
  EpilogueKind epilogue = EpilogueKind::Plain;
  // GEMM tile K (Plain and Fused rows: bk = 64 or 128, tile_k = 64; Direct rows: any bk % 16).
  int tile_k = 64;
  // CTAs per cluster along the dense side, sharing the sparse operand (mainloop.hpp).
  int cluster = 1;
  // > 0: automatic only for n <= max_n (cpp/core/registry.hpp), where the row measured faster.
  int64_t max_n = 0;
  Schedule schedule = Schedule::Cooperative;
  // > 0: automatic only where the block-rows' average depth (nonzero blocks * bk) is at most
  // this (cpp/core/registry.hpp), where the row measured faster.
  int64_t max_row_depth = 0;
  // Split tiles (scheduler.hpp): Never, Where or Only (above).
  Split split = Split::Where;
  // Runs op(A) = A^T (above).
  bool a_transposed = false;
  // Runs the gated (GLU) product (above).
  bool gated = false;
  // B's and the MMA's element type (above).
  DType dense = input;
  // > 0: from n = one_wave_from_n on, automatic only where its tiles fit one wave (at most one
  // per SM, family.cu's auto_skips): the narrow rows (from n = 1), whose 64-wide tiles would
  // read a long block-row's weights once per tile, and the 128x128 rows on 128-deep k-tiles
  // past n = 128.
  int64_t one_wave_from_n = 0;
  // > 0: where the one-wave bound applies, the row is automatic anyway where its dense tiles
  // leave fewer columns of n empty than tiles less_waste_than wide would (the rows after it):
  // the 128x128 rows on 128-deep k-tiles against the 128x256 rows.
  int64_t less_waste_than = 0;
};

// The table's vocabulary (kept out of spmm_sm90 itself: single-letter names).
namespace table {
constexpr DType F16 = DType::F16;
constexpr DType BF16 = DType::BF16;
constexpr DType E4M3 = DType::E4M3;
constexpr DType E5M2 = DType::E5M2;
constexpr Output Same = Output::Same;
constexpr Output OrF32 = Output::SameOrF32;
constexpr Output Wide = Output::Wide;
constexpr Output OutF16 = Output::F16;
constexpr Layout BRow = Layout::RowMajor;
constexpr Layout BCol = Layout::ColMajor;
constexpr CLayout CRow = CLayout::Row;
constexpr CLayout CCol = CLayout::Col;
constexpr CLayout CAny = CLayout::Any;
constexpr EpilogueKind Plain = EpilogueKind::Plain;
constexpr EpilogueKind Fused = EpilogueKind::Fused;
constexpr EpilogueKind Scaled = EpilogueKind::Scaled;
constexpr EpilogueKind Direct = EpilogueKind::Direct;
constexpr Schedule Coop = Schedule::Cooperative;
constexpr Schedule PingPong = Schedule::PingPong;
constexpr Split Never = Split::Never;
constexpr Split Where = Split::Where;
constexpr Split Only = Split::Only;
constexpr bool AT = true;       // a_transposed: op(A) = A^T
constexpr bool NT = false;      // a_transposed: op(A) = A
constexpr bool Glu = true;      // gated
constexpr bool T = true;        // transposed: C^T = B^T A^T
constexpr bool N = false;       // natural: C = A*B
constexpr bool Auto = true;     // automatic
constexpr bool Tune = false;    // tuning candidate

constexpr const char kSwept128[] =
    "H100 sweep 2026-11-22 (scripts/tuning-sweep.sh, report/NOTES.md run 3): coop_128x256 456/571/664 "
    "TFLOPS at density 1/16, 1/8, 1/4, the fastest bm=128 tile at 1/8 and 1/4";
constexpr const char kSwept64[] =
    "H100 sweep 2026-11-22 (scripts/tuning-sweep.sh, report/NOTES.md run 3): coopT_256x64 364/405/427 "
    "TFLOPS at density 1/16, 1/8, 1/4, the fastest bm=64 tile at every density";
constexpr const char kSame128[] =
    "the bm=128 tile of the H100 sweep 2026-11-22 (report/NOTES.md run 3, f16 row-major B/C: 456/571/664 "
    "TFLOPS at 1/16, 1/8, 1/4); this dtype/layout was not swept";
constexpr const char kSame64[] =
    "the bm=64 tile of the H100 sweep 2026-11-22 (report/NOTES.md run 3, f16 row-major B/C: 364/405/427 "
    "TFLOPS at 1/16, 1/8, 1/4); this dtype/layout was not swept";

constexpr const char kCluster128[] =
    "H100 2026-11-23 (report/NOTES.md session 11 run 2, spmm_check m = k = 8192, f16): the default tile in "
    "1x2 clusters, TFLOPS at density 1/16, 1/8, 1/4: n = 1024 360/513/616 vs 348/479/579 (+3-7 %); n = 8192 "
    "423/553/648 vs 439/550/643 (-4 % at 1/16), so only up to n = 2048";
constexpr const char kCluster64[] =
    "H100 2026-11-23 (report/NOTES.md session 11 run 2, spmm_check m = k = 8192, f16): the default tile in "
    "2x1 clusters, TFLOPS at density 1/16, 1/8, 1/4: n = 1024 269/339/394 vs 263/330/385 (+2-3 %); n = 8192 "
    "343/399/424 vs 341/396/423 (within 1 %), so only up to n = 2048 like bm = 128";

constexpr const char kPingPong128[] =
    "H100 2026-11-23 (report/NOTES.md session 12 run 1, spmm_check m = k = 8192, bk = 128): the ping-pong "
    "kernel, 128x128 per consumer warpgroup, against the cooperative default, f16 TFLOPS at density 1/16, 1/8, "
    "1/4: n = 8192 454/500/536 vs 438/549/639, n = 2048 397/474/507 vs 387/513/617; bf16 n = 8192 1/16 469 vs "
    "447, 1/4 536 vs 669. So only for block-rows of depth <= 512 (1/16 of 8192)";
constexpr const char kPingPong64[] =
    "H100 2026-11-23 (report/NOTES.md session 12 run 1, spmm_check m = k = 8192, bk = 64): the ping-pong "
    "kernel, transposed 256x64 per consumer warpgroup, against the cooperative default, f16 TFLOPS at density "
    "1/16, 1/8, 1/4: n = 8192 384/400/412 vs 339/395/422, n = 2048 322/374/394 vs 295/363/400; bf16 n = 8192 "
    "1/16 386 vs 345, 1/4 411 vs 426. So only for block-rows of depth <= 1024 (1/8 of 8192)";

// The common keys' defaults are Never rows, each with an Only twin: H100 2026-11-23
// (spmm_check m = n = k = 8192, f16, 3 repeats, µs), the default tile without split tiles vs
// with them: bm 128 at 1/16 153.3 vs 156.5, 1/8 246.2 vs 251.4; bm 64 at 1/16 191.9 vs
// 200.6, 1/8 340.7 vs 347.2, 1/4 647.4 vs 648.6. A build without split support: 151.3,
// 243.4, 189.0, 339.3, 640.9. ncu, bm 64 at 1/16: 44.5 M instructions executed vs 47.5 M.
constexpr const char kSplitTwin[] =
    "the default tile with split tiles, automatic only where the launch splits (split.hpp: few tiles with long "
    "block-rows, 1.4-1.9x faster, report/NOTES.md session 11 run 2); the split-free twin takes the rest";

// The narrow split rows: the MLP's down projection at n = 16-128 has few block-rows (Llama-3-8B
// 4096x14336: 32 of 128) whose whole-width tiles leave most SMs idle. Measured on an H200
// (2026-11-29, spmm_check, f16 128x128 blocks d 0.5, B and C column-major, us, n = 16 / 32 / 64
// / 128): the 128x256 split row 52.4 / 54.3 / 46.8 / 48.5 and Decode 21.3 / 28.9 / 41.7 / 82.0
// on 4096x14336; ncu of the split row at n = 64: 1.18 TB/s (24 % of DRAM), 3 stages of 16 KiB
// of A, 91 % of cycles without an eligible warp. A 128x64 tile in 128-deep k-tiles holds 4
// stages of 32 KiB of A (one whole 128-wide block each) beside a 16 KiB box of B.
// The same run, the narrow f16 row forced (its split by the rule): 4096x14336 28.0 / 27.4 / 27.0 /
// 27.0, 3584x18944 29.8 / 29.8 / 29.4 / 30.9 (Decode 23.9 / 34.0 / 34.4 / 58.8), 5120x13824
// unsplit at n = 96-128 (80 tiles) 32.1 / 31.9 against the 128x256 rows' 58.0 / 54.4, and smaller
// shapes (3072x8192, 1536x8960, 2560x6912) 15-18 us at n = 64-128 against Decode's 17-30; so
// Decode keeps n <= 32, where it measured faster on most shapes (n = 16 by 20-40 %).
constexpr const char kNarrowSplit[] =
    "H200 2026-11-29 (spmm_check, see above): 128x64 on k-tiles of 128, automatic for n <= 512 where its "
    "tiles fit one wave, split by the rule: the MLP's down projection at n = 64 27.0 us on 4096x14336 "
    "against Decode's 42.1 and the 128x256 split row's 46.8; at n = 192-512 1.2-1.8x the rows Auto ran "
    "before wherever its tiles fit one wave (spmm_check, see above kDeep128)";
// Where the narrow rows' tiles outnumber the SMs (14336x4096 at n = 96-128: 224 tiles) Auto ran
// the 128x256 rows (3 stages of 16 KiB of A): 52.1 / 45.3 us at n = 96 / 128 against dense
// cuBLAS's 33.7 / 34.5, while the W8A16 128x128 row (k-tiles of 128) took the same shape in 34.4
// / 34.1 (H200, 2026-11-29, bench_report decode and fp8, d 0.5). The 128x128 rows on k-tiles of
// 128, forced, against the 128x256 Plain row (spmm_check, f16 d 0.5, B and C column-major, us, n
// = 96 / 128 / 256): 14336x4096 26.1 / 24.5 / 38.1 against 49.6 / 44.6 / 30.8, 18944x3584 38.9 /
// 37.1 / 55.7 against 65.9 / 59.4 / 49.3, 13824x5120 29.4 / 27.4 / 44.2 against 57.2 / 50.9 /
// 35.5, 11008x4096 22.3 / 21.6 / 36.9 against 38.5 / 35.6 / 28.5; so up to n = 128.
// Past n = 128 (H200, 2026-11-29, spmm_check f16 d 0.5, 128x128 blocks, B and C column-major,
// us; Auto (the 128x256 rows) | the 128x128 row | the narrow row, n = 192 / 256 / 384 / 512;
// where a row's tiles fit one wave): 4096x14336 (32 block-rows) 45.3 | 38.1 | 32.0, 43.9 | 37.0 |
// 32.6, 62.7 | 48.0 | 67.4, 54.3 | 50.8 | 65.1; 3584x18944 (28) 49.6 | 43.9 | 39.0, 48.6 | 42.6 |
// 39.7, 72.2 | 60.0 | 85.4, 64.1 | 61.7 | 83.2; 5120x13824 (40) 49.2 | 48.0 | 32.6, 46.7 | 46.4 |
// 54.5, 75.3 | 49.3 | 61.4, 72.3 | 89.3 | 83.3; 2048x8192 (16) 29.7 | 22.7 | 16.8, 29.5 | 21.7 |
// 17.9, 33.9 | 23.4 | 18.7, 32.0 | 25.1 | 20.4; 14336x4096 (112, no row in one wave) 34.7 | 41.6
// | 37.5, 30.6 | 37.3 | 45.3, 73.6 | 55.2 | 63.7, 52.0 | 69.5 | 75.6. So past n = 128 the narrow
// row where its tiles fit one wave, else the 128x128 row where its tiles do, else the rows after,
// but for n whose last 256-wide tile would be at most half full, where the 128x128 row won on
// shapes of many block-rows (H200, 2026-11-29, spmm_check as above, Auto | the 128x128 row, n =
// 320 / 384; and n = 160 / 448, where the last tiles fill alike): 14336x4096 78.6 | 56.2, 68.6 |
// 54.7 (39.1 | 41.6, 60.3 | 72.9); 18944x3584 102.3 | 74.6, 90.4 | 72.2 (57.6 | 58.2, 80.1 |
// 93.3); 13824x5120 89.1 | 67.1, 80.7 | 65.5 (45.2 | 48.3, 69.1 | 87.0); 11008x4096 68.2 | 40.4,
// 63.0 | 38.8 (32.4 | 39.8, 54.8 | 56.2); 28672x8192 272.7 | 215.7, 246.6 | 214.4 (144.3 | 148.6,
// 220.0 | 262.8); 7168x18944 154.0 | 123.5, 131.9 | 124.1 (65.2 | 65.3, 106.1 | 140.6); 8192x28672
// 245.6 | 178.9, 223.1 | 182.4 (99.4 | 99.3, 184.4 | 217.9).
constexpr const char kDeep128[] =
    "H200 2026-11-29 (spmm_check, see above): 128x128 on k-tiles of 128 (3 stages of 32 KiB of A) for n <= "
    "128 where the narrow rows do not fit one wave, 1.6-1.9x faster than the 128x256 rows there; for n = "
    "129-512 where its own tiles fit one wave (1.0-1.5x the 128x256 rows there, slower on 112 block-rows "
    "at n = 256) or the 128x256 rows' last tile would be at most half full (n = 320, 384: 1.06-1.69x)";
// The W8A16 narrow row (H200, 2026-11-29, bench_report fp8, e4m3 d 0.5 with f16 B, us, n = 64 / 96 /
// 128): 4096x14336 27.3 / 38.7 / 38.6, where the W8A16 128x128 row took 45.2 / 45.8 / 45.7 in an
// earlier run (2026-11-29); f16 on the narrow row 27.8 / 28.0 / 28.0 in the same run.
constexpr const char kNarrowW8A16[] =
    "H200 2026-11-29 (bench_report fp8, see above): the narrow f16 row's tile for W8A16 (at n <= 64 one tile "
    "along n converts each FP8 block once): 4096x14336 n = 64 27.3 us against the W8A16 128x128 row's 45.2 "
    "(another run)";

constexpr const char kFused[] =
    "the default tile with the fused bias/activation epilogue, only for problems that ask for it: on plain "
    "problems it measured 2-8 % slower than LinearCombination at bm=128 (H100, bench_report gate, 2026-11-23)";

constexpr const char kTransposedTma[] =
    "op(A) = A^T on the A*B defaults' tiles and TMA epilogue (B and C row/row for A^T*B, col/col for D*A); "
    "not yet measured against A*B";
constexpr const char kTransposed[] =
    "op(A) = A^T on the any-block rows' tiles with tile_k 64 (the 64- and 128-high blocks' tiles of the A*B "
    "defaults); not yet measured against A*B";

// The FP8 rows, measured on an H100 (2026-11-27, tests/cpp/time_fp8.cu: e4m3, A's scales per
// block, B's per column, C f16 column-major, random patterns of equal and of random block-row
// lengths, TFLOPS on the nonzero blocks, ranges over two patterns and three runs (6144^3: one);
// 128x128 | 128x192 (a row then) for 128x128 blocks):
//   4096^3         d = 1/8 252-259 | 240-251    d = 1/4 404-425 | 392-416
//   6144^3         d = 1/8 361-362 | 307-352    d = 1/4 535-561 | 525-588
//   8192^3         d = 1/8 333-423 | 359-457    d = 1/4 591-656 | 631-679
//   4096x8192x14336 (m x n x k)  1/8 447-516 | 447-535    1/4 663-753 | 726-794
// The same patterns in the same run, 128x192 against 128x128: n = 8192 -3 to +13 % (median
// +6 %), n = 4096 -2 to -5 %.
// Double-buffered promotions (k-tile i + 1's QGMMAs while k-tile i is promoted) measured no
// faster on the same patterns: two whole-tile k-tile accumulators beside accum (192 registers)
// spilled 100-200 bytes and made ptxas inject waits (C7517): 128x128 up to 10 % slower,
// 256x64 10-23 % slower; a k-tile issued as two half-width batches (atoms of n64, or the two
// m64 atoms; 128 registers) had no spills but ptxas serialized the WGMMAs (C7514): 128x128
// 5-21 % slower, 256x64 from 10 % slower to 8 % faster (8192^3 1/8). The two consumer
// warpgroups taking turns to issue their k-tiles (named barriers) measured within noise.
constexpr const char kFp8[] =
    "H100 2026-11-27 (tests/cpp/time_fp8.cu, see above): 128x128 natural; 256x64 transposed for bm = 64 (the "
    "bm = 64 sweep's tile: 4096^3-8192^3 238-489 TFLOPS, 0.76-1.17x f16); tile_k = bk, one block per k-tile. "
    "H200 2026-11-28 (see below): 128x128 for every n the cluster row does not take (the 128x192 row it "
    "replaced there measured the same, 0.79-1.05x)";
// The FP8 cluster row, measured on an H200 (2026-11-28, tests/cpp/time_fp8.cu --rows, the same
// patterns in one process, e4m3 128x128 blocks, B's scales per column, TFLOPS on the nonzero
// blocks; the epilogue with its scales staged once per tile): 128x256 tiles on n128 atoms
// promoted a column at a time (mainloop.hpp), two CTAs along n sharing the sparse tile, against
// the row Auto took before (128x128 up to n = 4096, 128x192 above; now 128x128):
//   4096^3            d = 1/8 343 vs 308 (128x128)   d = 1/4 544 vs 477
//   6144^3                1/8 429 vs 336 (128x192)       1/4 684 vs 575
//   8192^3                1/8 523 vs 401                 1/4 775 vs 720
//   4096x8192x14336       1/8 634 vs 489                 1/4 866 vs 743
//   14336x6144x4096       1/8 282 vs 246                 1/4 581 vs 508
//   5120x13824x5120       1/8 378 vs 329                 1/4 622 vs 571
// The same tiles without the cluster, and 128x128 with one, measured between the two (e.g.
// 8192^3 1/4 735 and 709). With the staged scales the 128x192 row (Auto's past n = 4096 before)
// ran 0.79-1.05x the 128x128 one where it ran (n > 4096; median 1.00; 6144^3 1/8 336 vs 426), so
// it left the table and 128x128 takes every n that the cluster row does not.
// 256x64 with a cluster against 256x64 for 64-high blocks: -6 % to
// +14 %, so that row stays. Staging the scales once per tile (direct_epilogue.hpp) gained a
// median 10 % on the 128-high rows (60 cases, 0.94-1.28x) and 8 % on the 64-high one (24,
// 0.94-1.16x): ncu's stall sampling (8192^3, 1/4) had put about a third of the warps'
// samples in the epilogue, its largest single stall on the column scale's load.
constexpr const char kW8A16[] =
    "H200 2026-11-29 (report/NOTES.md sessions 39 and 43; bench_report decode --mlp-only and time_fp8 --w8a16, "
    "e4m3 d 0.5), no sweep: 128-deep k-tiles, one 128-wide block each (64-wide blocks go to Decode), A converted "
    "into WGMMA's register fragments (4 stages at 128x128): 4096x512x14336 87.6 -> 54.8 us against the "
    "conversion through shared memory (2 stages), the Llama-3-8B MLP 1.37 -> 0.71x the dense MLP at n = 512; "
    "the FP8 128x128 row's tile, and the f16 gated rows' 128x64 (three accumulators in 96 registers)";
constexpr const char kFp8Cluster[] =
    "H200 2026-11-28 (tests/cpp/time_fp8.cu --rows, see above): 128x256 on n128 atoms, clusters of 2 along n, "
    "where n fills whole clusters: 1.08-1.30x the rows before on 6 shapes at d = 1/8 and 1/4 (8192^3 1/8 523 "
    "TFLOPS vs 401)";
// The FP8 rows with f16 C through CUTLASS's TMA epilogue (EpilogueKind::Scaled), measured on an
// H200 (2026-11-29, tests/cpp/time_fp8.cu --rows, e4m3 128x128 blocks, A's scales per block, B's
// per column, both patterns of each density, us, Scaled vs the Direct row of the same tile; every
// C bitwise equal to the Direct rows'). Tiles were ~40 % epilogue: the same row without its
// stores ran 8192^3 d 1/8 198 -> 119 us, 10240x5120x2560 108 -> 44. The Direct epilogue's
// chunked copies through shared memory and ordinary stores ran with the tensor cores idle;
// TMA stores leave the consumers as soon as a subtile is in shared memory:
//   128x256, clusters of 2 (n a multiple of 512), C column-major | row-major:
//     8192^3 d 1/8 196 / 213 -> 154 / 168 | 152 / 161;  d 1/4 294 / 319 -> 252 / 277 | 252 / 276
//     4096^3 1/8 41 / 47 -> 31 / 36;  14336x6144x4096 1/8 187 / 199 -> 129 / 137 | 127 / 133
//     10240x5120x2560 1/8 108 / 111 -> 74 / 73;  11008x2560x4096 1/8 66 / 74 -> 48 / 55 | 46 / 53
//   128x256 without clusters (any n): 5120x4000x13824 1/8 124 / 110 (the Direct 128x128 row)
//     -> 80 / 85, 1/4 164 / 173 -> 132 / 142 (128x128 Scaled: 93 / 94, 150 / 158); 8192^3 1/8
//     163 / 164 (128x128 Scaled 189 / 190)
//   128x128 up to n = 256 (tiles of 256 columns half empty below), column-major C, d 1/4 | 1/2,
//     against 128x256 Scaled and the Direct 128x128 row: 4096x128x4096 10.0 | 15.5 vs 14.2 | 22.0
//     and 11.2 | 16.7; 8192x192x8192 15.7 | 24.5 vs 23.8 | 33.1 and 17.0 | 24.5; 18944x96x3584
//     16.1 | 23.0 vs 25.5 | 37.2 and 21.2 | 28.0; but 14336x256x4096 (112 block-rows: one wave of
//     128x256 tiles) 17.0 | 24.2 vs 14.8 | 21.3.
// Without the activation and C's loads: the bias/activation tree (the Fused rows') on this tile
// ran 3-4x slower than LinearCombination (ncu: over half of the warps' stalls on instruction
// fetch, the run-time activation unrolled over 128 accumulators), and C's staging buffers
// left 3 stages of 48 KB instead of 4 (the tile with them 5-10 % slower).
constexpr const char kFp8ScaledCluster[] =
    "H200 2026-11-29 (tests/cpp/time_fp8.cu --rows, see above): the cluster row's 128x256 tiles with CUTLASS's TMA "
    "epilogue, 1.08-1.51x the best Direct row on 9 shapes at d = 1/8, 1/4 (8192^3 1/8 196 -> 154 us), the same "
    "bits";
constexpr const char kFp8ScaledWide[] =
    "H200 2026-11-29 (tests/cpp/time_fp8.cu --rows, see above): 128x256 with the TMA epilogue for n the clusters do "
    "not fill: 5120x4000x13824 1/8 124 -> 80 us against the Direct 128x128 row (128x128 with the TMA epilogue 93)";
constexpr const char kFp8Scaled[] =
    "H200 2026-11-29 (tests/cpp/time_fp8.cu --rows, see above): 128x128 with the TMA epilogue up to n = 256, where "
    "256-wide tiles are half empty: 8192x192x8192 d 1/4 15.7 us vs 23.8 (128x256) and 17.0 (Direct)";
// The 64-high Scaled rows (the same tool and patterns, 64x64 blocks, µs, Direct 64-high row ->
// Scaled column- | row-major C): 8192^3 d 1/8 443 / 329 -> 257 / 255 | 262 / 259, d 1/4 511 / 577
// -> 442 / 455 | 447 / 457; 4096^3 1/8 61 / 68 -> 46 / 49; 14336x6144x4096 1/8 382 / 306 -> 200 /
// 204; 5120x4000x13824 1/8 147 / 156 -> 129 / 133, 1/4 245 / 262 -> 225 / 239; 7168x2048x7168
// 1/4 106 / 115 -> 93 / 101; the same bits.
constexpr const char kFp8Scaled64[] =
    "H200 2026-11-29 (tests/cpp/time_fp8.cu --rows, see above): the Direct 64-high row's transposed 256x64 tile "
    "with the TMA epilogue, 1.09-1.91x it on 6 shapes at d = 1/8, 1/4 (14336x6144x4096 1/8 306 -> 204 us)";
constexpr const char kFp8E5m2[] =
    "the e4m3 rows' tiles (kFp8) for e5m2, which was not measured on its own (no cluster row)";

// The gated rows, measured on an H100 (2026-11-27, tests/cpp/check_gated.cu --time with
// check_gated_rows.cu: f16, d = 0.5, 128x128 blocks, SiLU, x and h column-major; us per gated
// product, Qwen2.5-7B 3584/18944 | Llama-3-8B 4096/14336 | Phi-3-mini 3072/8192; one run):
//   n           16               64               128              192              256               512
//   128x64 k128 79.4|59.2|32.9   74.7|56.1|29.2   78.0|62.7|29.5   89.8|77.9|42.1   106.5|96.3|40.7   199.3|173.5|77.4
//   128x64 k64  83.2|60.6|33.3   76.9|57.5|29.4   78.8|63.1|30.0   90.3|77.5|40.7   107.7|96.3|39.8   180.5|163.8|73.7
//   128x128 k64 104.4|80.2|48.3  101.9|68.6|40.9  91.4|63.1|35.5   121.7|111.0|46.8 102.7|81.7|35.8   166.7|144.7|61.6
//   128x128 k128 109.0|89.3|49.7 102.3|71.2|42.2  93.1|60.8|36.8   128.3|116.0|49.7 108.1|84.7|37.6   165.2|144.1|61.8
//   Decode      82.6|55.9|36.8   95.5|63.1|45.7   159.3|121.7|53.6 308.6|236.9|104.1 332.4|243.0|105.6 645.2|500.8|219.3
//   cuBLAS dense gate|up GEMM (f16, the same run): n = 16 101.2|89.9|39.6, 64 106.2|89.9|42.9,
//   128 106.0|91.1|42.5, 256 117.4|106.0|46.4, 512 202.6|171.0|73.0.
// The two 128-row tiles are the largest natural ones whose two accumulators fit 128 registers
// per thread. All gated rows take one band of every dense tile (kernel.hpp): before that, the
// automatic band re-read a pair's weights per dense tile (Qwen2.5-7B n = 512, 128x128: 229.0
// us vs 169.8 after). Splitting a tile in its gate and up passes on two CTAs (tried: a hand-over
// through scratch as the split tiles') measured no faster: Qwen2.5-7B n = 64 74.3 vs 76.4 us,
// n = 512 259.7 vs 229.0; Phi-3-mini n = 64 (64 tiles, half the SMs idle) 33.1 vs 29.2.
constexpr const char kGated128[] =
    "H100 2026-11-27 (check_gated --time, f16 d = 0.5 128x128 blocks, see above): 128x128 with k-tiles of 64 "
    "fastest from n = 256 (Qwen2.5-7B n = 512 166.7 us vs 128x64 180.5 and Decode 645.2)";
constexpr const char kGatedNarrow[] =
    "H100 2026-11-27 (check_gated --time, see above): 128x64 up to n = 192 (one weight read per pair; Qwen2.5-7B "
    "n = 192 90.3 us vs 128x128 121.7), for bk other than 128 (k-tiles of 64)";
constexpr const char kGatedDeep[] =
    "H100 2026-11-27 (check_gated --time, see above): 128x64 with k-tiles of a whole 128-wide block (one "
    "contiguous 32 KB of weights per stage), 1-5 % faster than k-tiles of 64 up to n = 128 (Qwen2.5-7B n = 16 "
    "79.4 us vs 83.2), even at 192";
constexpr const char kGatedDeepWide[] =
    "H100 2026-11-27 (check_gated --time, see above): 128x128 with k-tiles of 128, no faster than k-tiles of 64 "
    "(Qwen2.5-7B n = 256 108.1 us vs 102.7, n = 512 165.2 vs 166.7)";
constexpr const char kGated64[] =
    "H100 2026-11-27 (check_gated --time, f16 d = 0.5 64x64 blocks): transposed 128x64 (block-row on the N "
    "tile), the fastest gated row for 64-high blocks at every n (Qwen2.5-7B n = 128 84.9 us vs natural 128x64 "
    "151.7, 128x128 140.9, Decode 170.6; n = 512 211.3 vs 515.9, 407.3, 703.7)";

constexpr const char kAnyBlock[] =
    "H100 2026-11-23 (report/NOTES.md, session 9): the any-block rows, larger tile_k first (run 1: at 32x32 "
    "k32 161/197 TFLOPS vs k16 122/132 at density 1/8, 1/4); the E table of run 2 rates them";

// clang-format off
inline constexpr Sm90Variant kSm90Variants[] = {
    // name                                 in    out   bm   B    C    tile_m tile_n  T/N  automatic  chosen_by
    // ---- split tiles: first, automatic only where the launch splits (few tiles, long block-rows) ----
    // The narrow rows: n <= 512 (W8A16 128) where their tiles fit one wave, split where the rule splits.
    {"sm90_f16_bm_le128_k128_bcol_128x64",   F16,  OrF32, 128, BCol, CAny, 128,    64,    N,   Auto,
     kNarrowSplit, Direct, 128, 1, 512, Coop, 0, Where, NT, false, F16, 1},
    {"sm90_bf16_bm_le128_k128_bcol_128x64",  BF16, OrF32, 128, BCol, CAny, 128,    64,    N,   Auto,
     kNarrowSplit, Direct, 128, 1, 512, Coop, 0, Where, NT, false, BF16, 1},
    {"sm90_e4m3_f16_bm_le128_k128_bcol_128x64", E4M3, Wide, 128, BCol, CAny, 128,    64,    N,   Auto,
     kNarrowW8A16, Direct, 128, 1, 128, Coop, 0, Where, NT, false, F16, 1},
    // Then 128x128 on 128-deep k-tiles where the narrow rows' tiles do not fit one wave: every
    // n <= 128, and n = 129-512 where its own tiles fit one wave or the 128x256 rows' last tile
    // would be at most half full.
    {"sm90_f16_bm_le128_k128_bcol_128x128",  F16,  OrF32, 128, BCol, CAny, 128,   128,    N,   Auto,
     kDeep128, Direct, 128, 1, 512, Coop, 0, Where, NT, false, F16, 129, 256},
    {"sm90_bf16_bm_le128_k128_bcol_128x128", BF16, OrF32, 128, BCol, CAny, 128,   128,    N,   Auto,
     kDeep128, Direct, 128, 1, 512, Coop, 0, Where, NT, false, BF16, 129, 256},
    {"sm90_f16_bm128_brow_crow_split",       F16, Same, 128, BRow, CRow, 128,   256,    N,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_f16_bm128_bcol_ccol_split",       F16, Same, 128, BCol, CCol, 128,   256,    N,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_f16_bm64_brow_crow_split",        F16, Same,  64, BRow, CRow, 256,    64,    T,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_f16_bm64_bcol_ccol_split",        F16, Same,  64, BCol, CCol, 256,    64,    T,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_bf16_bm128_brow_crow_split",      BF16,Same, 128, BRow, CRow, 128,   256,    N,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_bf16_bm128_bcol_ccol_split",      BF16,Same, 128, BCol, CCol, 128,   256,    N,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_bf16_bm64_brow_crow_split",       BF16,Same,  64, BRow, CRow, 256,    64,    T,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    {"sm90_bf16_bm64_bcol_ccol_split",       BF16,Same,  64, BCol, CCol, 256,    64,    T,   Auto,
     kSplitTwin, Plain, 64, 1, 0, Coop, 0, Only},
    // ---- ping-pong: then automatic on short block-rows, where it measured faster ----
    {"sm90_f16_bm128_brow_crow_pp",         F16, Same,  128, BRow, CRow, 128,   128,    N,   Auto,
     kPingPong128, Plain, 64, 1, 0, PingPong, 512, Never},
    {"sm90_f16_bm64_brow_crow_pp",          F16, Same,   64, BRow, CRow, 256,    64,    T,   Auto,
     kPingPong64, Plain, 64, 1, 0, PingPong, 1024, Never},
    {"sm90_bf16_bm128_brow_crow_pp",        BF16, Same, 128, BRow, CRow, 128,   128,    N,   Auto,
     kPingPong128, Plain, 64, 1, 0, PingPong, 512, Never},
    {"sm90_bf16_bm64_brow_crow_pp",         BF16, Same,  64, BRow, CRow, 256,    64,    T,   Auto,
     kPingPong64, Plain, 64, 1, 0, PingPong, 1024, Never},
    // ---- clusters: before the defaults, automatic where they measured faster (n <= 2048) ----
    {"sm90_f16_bm128_brow_crow_c2",         F16, Same,  128, BRow, CRow, 128,   256,    N,   Auto,
     kCluster128, Plain, 64, 2, 2048, Coop, 0, Never},
    {"sm90_f16_bm64_brow_crow_c2",          F16, Same,   64, BRow, CRow, 256,    64,    T,   Auto,
     kCluster64, Plain, 64, 2, 2048, Coop, 0, Never},
    // ---- defaults: one automatic row per (dtype, bm, B layout, C layout) ----
    {"sm90_f16_bm128_brow_crow",            F16, Same,  128, BRow, CRow, 128,   256,    N,   Auto,      kSwept128,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_f16_bm128_brow_ccol",            F16, Same,  128, BRow, CCol, 128,   256,    N,   Auto,      kSame128},
    {"sm90_f16_bm128_bcol_crow",            F16, Same,  128, BCol, CRow, 128,   256,    N,   Auto,      kSame128},
    {"sm90_f16_bm128_bcol_ccol",            F16, Same,  128, BCol, CCol, 128,   256,    N,   Auto,      kSame128,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_f16_bm64_brow_crow",             F16, Same,   64, BRow, CRow, 256,    64,    T,   Auto,      kSwept64,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_f16_bm64_brow_ccol",             F16, Same,   64, BRow, CCol, 256,    64,    T,   Auto,      kSame64},
    {"sm90_f16_bm64_bcol_crow",             F16, Same,   64, BCol, CRow, 256,    64,    T,   Auto,      kSame64},
    {"sm90_f16_bm64_bcol_ccol",             F16, Same,   64, BCol, CCol, 256,    64,    T,   Auto,      kSame64,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_bf16_bm128_brow_crow",           BF16, Same, 128, BRow, CRow, 128,   256,    N,   Auto,      kSame128,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_bf16_bm128_brow_ccol",           BF16, Same, 128, BRow, CCol, 128,   256,    N,   Auto,      kSame128},
    {"sm90_bf16_bm128_bcol_crow",           BF16, Same, 128, BCol, CRow, 128,   256,    N,   Auto,      kSame128},
    {"sm90_bf16_bm128_bcol_ccol",           BF16, Same, 128, BCol, CCol, 128,   256,    N,   Auto,      kSame128,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_bf16_bm64_brow_crow",            BF16, Same,  64, BRow, CRow, 256,    64,    T,   Auto,      kSame64,
     Plain, 64, 1, 0, Coop, 0, Never},
    {"sm90_bf16_bm64_brow_ccol",            BF16, Same,  64, BRow, CCol, 256,    64,    T,   Auto,      kSame64},
    {"sm90_bf16_bm64_bcol_crow",            BF16, Same,  64, BCol, CRow, 256,    64,    T,   Auto,      kSame64},
    {"sm90_bf16_bm64_bcol_ccol",            BF16, Same,  64, BCol, CCol, 256,    64,    T,   Auto,      kSame64,
     Plain, 64, 1, 0, Coop, 0, Never},
    // ---- tuning candidates (SPARSEK_VARIANT only) ----
    {"sm90_f16_bm128_brow_crow_128x192",    F16, Same,  128, BRow, CRow, 128,   192,    N,   Tune,
     "H100 sweep 2026-11-22 (report/NOTES.md run 3): coop_128x192 441/551/633 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    {"sm90_f16_bm128_brow_crow_128x128",    F16, Same,  128, BRow, CRow, 128,   128,    N,   Tune,
     "H100 sweep 2026-11-22 (report/NOTES.md run 3): coop_128x128 454/509/552 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    {"sm90_f16_bm128_brow_crow_t256x128",   F16, Same,  128, BRow, CRow, 256,   128,    T,   Tune,
     "H100 sweep 2026-11-22 (report/NOTES.md run 3): coopT_256x128 396/496/573 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    {"sm90_f16_bm64_brow_crow_t128x64",     F16, Same,   64, BRow, CRow, 128,    64,    T,   Tune,
     "H100 sweep 2026-11-22 (report/NOTES.md run 3): coopT_128x64 345/364/357 TFLOPS at 1/16, 1/8, 1/4, "
     "below the default"},
    // ---- the fused linear-layer epilogue, in the layout of y = x*W^T (column-major B and C) ----
    {"sm90_f16_bm128_bcol_ccol_fused",      F16, Same,  128, BCol, CCol, 128,   256,    N,   Auto,      kFused, Fused},
    {"sm90_f16_bm64_bcol_ccol_fused",       F16, Same,   64, BCol, CCol, 256,    64,    T,   Auto,      kFused, Fused},
    {"sm90_bf16_bm128_bcol_ccol_fused",     BF16, Same, 128, BCol, CCol, 128,   256,    N,   Auto,      kFused, Fused},
    {"sm90_bf16_bm64_bcol_ccol_fused",      BF16, Same,  64, BCol, CCol, 256,    64,    T,   Auto,      kFused, Fused},
    // ---- any block: bm up to the tile's sparse extent, bk % 16 == 0; C's dtype
    //      (input or f32), layout, bias and activation at run time (direct_epilogue.hpp) ----
    // name                                 in    out    bm  B     C     tile_m tile_n T/N  automatic  chosen_by     epilogue tile_k
    {"sm90_f16_bm_le32_k32_brow",            F16,   OrF32,  32, BRow,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  32},
    {"sm90_f16_bm_le32_k16_brow",            F16,   OrF32,  32, BRow,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le64_k64_brow",            F16,   OrF32,  64, BRow,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_f16_bm_le64_k16_brow",            F16,   OrF32,  64, BRow,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le128_k64_brow",           F16,   OrF32, 128, BRow,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_f16_bm_le128_k16_brow",           F16,   OrF32, 128, BRow,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le256_k16_brow",           F16,   OrF32, 256, BRow,  CAny,  256,   128,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le32_k32_bcol",            F16,   OrF32,  32, BCol,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  32},
    {"sm90_f16_bm_le32_k16_bcol",            F16,   OrF32,  32, BCol,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le64_k64_bcol",            F16,   OrF32,  64, BCol,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_f16_bm_le64_k16_bcol",            F16,   OrF32,  64, BCol,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le128_k64_bcol",           F16,   OrF32, 128, BCol,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_f16_bm_le128_k16_bcol",           F16,   OrF32, 128, BCol,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_f16_bm_le256_k16_bcol",           F16,   OrF32, 256, BCol,  CAny,  256,   128,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le32_k32_brow",           BF16,  OrF32,  32, BRow,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  32},
    {"sm90_bf16_bm_le32_k16_brow",           BF16,  OrF32,  32, BRow,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le64_k64_brow",           BF16,  OrF32,  64, BRow,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_bf16_bm_le64_k16_brow",           BF16,  OrF32,  64, BRow,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le128_k64_brow",          BF16,  OrF32, 128, BRow,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_bf16_bm_le128_k16_brow",          BF16,  OrF32, 128, BRow,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le256_k16_brow",          BF16,  OrF32, 256, BRow,  CAny,  256,   128,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le32_k32_bcol",           BF16,  OrF32,  32, BCol,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  32},
    {"sm90_bf16_bm_le32_k16_bcol",           BF16,  OrF32,  32, BCol,  CAny,  256,    32,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le64_k64_bcol",           BF16,  OrF32,  64, BCol,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_bf16_bm_le64_k16_bcol",           BF16,  OrF32,  64, BCol,  CAny,  256,    64,   T,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le128_k64_bcol",          BF16,  OrF32, 128, BCol,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  64},
    {"sm90_bf16_bm_le128_k16_bcol",          BF16,  OrF32, 128, BCol,  CAny,  128,   256,   N,   Auto,      kAnyBlock,    Direct,  16},
    {"sm90_bf16_bm_le256_k16_bcol",          BF16,  OrF32, 256, BCol,  CAny,  256,   128,   N,   Auto,      kAnyBlock,    Direct,  16},
    // ---- op(A) = A^T: A's blocks through the transpose index, MN-major; bm = A's bk.
    //      First the A*B defaults' tiles with the TMA epilogue (the layouts of A^T*B and of
    //      D*A with row-major D and C), then any block up to 128 high on the any-block
    //      tiles; other blocks (and 16-high ones) run on WMMA ----
    {"sm90_f16_bm128_brow_crow_at",         F16,  Same,  128, BRow, CRow, 128,   256,    N,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm64_brow_crow_at",          F16,  Same,   64, BRow, CRow, 256,    64,    T,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm128_bcol_ccol_at",         F16,  Same,  128, BCol, CCol, 128,   256,    N,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm64_bcol_ccol_at",          F16,  Same,   64, BCol, CCol, 256,    64,    T,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm128_brow_crow_at",        BF16, Same,  128, BRow, CRow, 128,   256,    N,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm64_brow_crow_at",         BF16, Same,   64, BRow, CRow, 256,    64,    T,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm128_bcol_ccol_at",        BF16, Same,  128, BCol, CCol, 128,   256,    N,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm64_bcol_ccol_at",         BF16, Same,   64, BCol, CCol, 256,    64,    T,   Auto,      kTransposedTma,
     Plain, 64, 1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm_le128_k64_brow_at",         F16,   OrF32, 128, BRow,  CAny,  128,   256,   N,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm_le64_k64_brow_at",          F16,   OrF32,  64, BRow,  CAny,  256,    64,   T,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm_le128_k64_bcol_at",         F16,   OrF32, 128, BCol,  CAny,  128,   256,   N,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_f16_bm_le64_k64_bcol_at",          F16,   OrF32,  64, BCol,  CAny,  256,    64,   T,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm_le128_k64_brow_at",        BF16,  OrF32, 128, BRow,  CAny,  128,   256,   N,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm_le64_k64_brow_at",         BF16,  OrF32,  64, BRow,  CAny,  256,    64,   T,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm_le128_k64_bcol_at",        BF16,  OrF32, 128, BCol,  CAny,  128,   256,   N,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    {"sm90_bf16_bm_le64_k64_bcol_at",         BF16,  OrF32,  64, BCol,  CAny,  256,    64,   T,   Auto,      kTransposed,  Direct,  64,
     1, 0, Coop, 0, Where, AT},
    // ---- FP8 W8A8 with f16 C in either layout (Scaled: CUTLASS's TMA epilogue with the scales and
    //      the bias; beta = 0, no activation, blocks exactly 128 or 64 high, n a multiple of 8); the
    //      Direct rows below take every other W8A8 problem ----
    {"sm90_e4m3_bm128_k128_bcol_ccol",        E4M3, OutF16, 128, BCol, CCol,  128,   128,   N,   Auto,      kFp8Scaled,   Scaled, 128,
     1, 256, Coop, 0, Where},
    {"sm90_e4m3_bm128_k128_bcol_crow",        E4M3, OutF16, 128, BCol, CRow,  128,   128,   N,   Auto,      kFp8Scaled,   Scaled, 128,
     1, 256, Coop, 0, Where},
    {"sm90_e4m3_bm128_k128_bcol_ccol_128x256_c2", E4M3, OutF16, 128, BCol, CCol, 128,  256,   N,   Auto,      kFp8ScaledCluster, Scaled, 128,
     2, 0, Coop, 0, Never},
    {"sm90_e4m3_bm128_k128_bcol_crow_128x256_c2", E4M3, OutF16, 128, BCol, CRow, 128,  256,   N,   Auto,      kFp8ScaledCluster, Scaled, 128,
     2, 0, Coop, 0, Never},
    {"sm90_e4m3_bm128_k128_bcol_ccol_128x256", E4M3, OutF16, 128, BCol, CCol,  128,   256,   N,   Auto,      kFp8ScaledWide, Scaled, 128,
     1, 0, Coop, 0, Where},
    {"sm90_e4m3_bm128_k128_bcol_crow_128x256", E4M3, OutF16, 128, BCol, CRow,  128,   256,   N,   Auto,      kFp8ScaledWide, Scaled, 128,
     1, 0, Coop, 0, Where},
    {"sm90_e4m3_bm64_k64_bcol_ccol",          E4M3, OutF16,  64, BCol, CCol,  256,    64,   T,   Auto,      kFp8Scaled64, Scaled,  64,
     1, 0, Coop, 0, Where},
    {"sm90_e4m3_bm64_k64_bcol_crow",          E4M3, OutF16,  64, BCol, CRow,  256,    64,   T,   Auto,      kFp8Scaled64, Scaled,  64,
     1, 0, Coop, 0, Where},
    // ---- FP8 W8A8: K-major B (column-major), C f16/bf16/f32, A's scales per block or tensor,
    //      B's per tensor or column (direct_epilogue.hpp); bk a multiple of 32 ----
    {"sm90_e4m3_bm_le128_k128_bcol_128x256_c2", E4M3, Wide, 128, BCol,  CAny,  128,   256,   N,   Auto,      kFp8Cluster,  Direct, 128,
     2, 0, Coop, 0, Never},
    {"sm90_e4m3_bm_le128_k128_bcol",          E4M3,  Wide,  128, BCol,  CAny,  128,   128,   N,   Auto,      kFp8,         Direct, 128},
    {"sm90_e4m3_bm_le64_k64_bcol",            E4M3,  Wide,   64, BCol,  CAny,  256,    64,   T,   Auto,      kFp8,         Direct,  64},
    {"sm90_e5m2_bm_le128_k128_bcol",          E5M2,  Wide,  128, BCol,  CAny,  128,   128,   N,   Auto,      kFp8E5m2,     Direct, 128},
    {"sm90_e5m2_bm_le64_k64_bcol",            E5M2,  Wide,   64, BCol,  CAny,  256,    64,   T,   Auto,      kFp8E5m2,     Direct,  64},
    // ---- W8A16: e4m3 A (scales per block or tensor), f16 B column-major, C f16/bf16/f32 ----
    {"sm90_e4m3_f16_bm_le128_k128_bcol",      E4M3,  Wide,  128, BCol,  CAny,  128,   128,   N,   Auto,      kW8A16,       Direct, 128,
     1, 0, Coop, 0, Where, NT, false, F16},
    {"sm90_e4m3_f16_gated_bm_le128_k128_bcol_128x64", E4M3, Wide, 128, BCol, CAny, 128,   64,   N,   Auto,      kW8A16,       Direct, 128,
     1, 0, Coop, 0, Never, NT, Glu, F16},
    // ---- the gated (GLU) product (gated.hpp): h = act(alpha*G*B + bias) * (alpha*U*B + bias),
    //      C's dtype (input or f32) and layout at run time; 64-high blocks and lower first ----
    {"sm90_f16_gated_bm_le64_k64_bcol",       F16,   OrF32,  64, BCol,  CAny,  128,    64,   T,   Auto,      kGated64,     Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le64_k64_brow",       F16,   OrF32,  64, BRow,  CAny,  128,    64,   T,   Auto,      kGated64,     Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le64_k64_bcol",      BF16,  OrF32,  64, BCol,  CAny,  128,    64,   T,   Auto,      kGated64,     Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le64_k64_brow",      BF16,  OrF32,  64, BRow,  CAny,  128,    64,   T,   Auto,      kGated64,     Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k128_bcol_128x64", F16, OrF32, 128, BCol,  CAny,  128,    64,   N,   Auto,      kGatedDeep,   Direct, 128,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k64_bcol_128x64", F16, OrF32, 128, BCol,  CAny,  128,    64,   N,   Auto,      kGatedNarrow, Direct,  64,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k128_brow_128x64", F16, OrF32, 128, BRow,  CAny,  128,    64,   N,   Auto,      kGatedDeep,   Direct, 128,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k64_brow_128x64", F16, OrF32, 128, BRow,  CAny,  128,    64,   N,   Auto,      kGatedNarrow, Direct,  64,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le128_k128_bcol_128x64", BF16, OrF32, 128, BCol, CAny, 128,    64,   N,   Auto,      kGatedDeep,   Direct, 128,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le128_k64_bcol_128x64", BF16, OrF32, 128, BCol, CAny, 128,    64,   N,   Auto,      kGatedNarrow, Direct,  64,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le128_k128_brow_128x64", BF16, OrF32, 128, BRow, CAny, 128,    64,   N,   Auto,      kGatedDeep,   Direct, 128,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le128_k64_brow_128x64", BF16, OrF32, 128, BRow, CAny, 128,    64,   N,   Auto,      kGatedNarrow, Direct,  64,
     1, 192, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k64_bcol",      F16,   OrF32, 128, BCol,  CAny,  128,   128,   N,   Auto,      kGated128,    Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k64_brow",      F16,   OrF32, 128, BRow,  CAny,  128,   128,   N,   Auto,      kGated128,    Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le128_k64_bcol",     BF16,  OrF32, 128, BCol,  CAny,  128,   128,   N,   Auto,      kGated128,    Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_bf16_gated_bm_le128_k64_brow",     BF16,  OrF32, 128, BRow,  CAny,  128,   128,   N,   Auto,      kGated128,    Direct,  64,
     1, 0, Coop, 0, Never, NT, Glu},
    {"sm90_f16_gated_bm_le128_k128_bcol",      F16,   OrF32, 128, BCol,  CAny,  128,   128,   N,   Tune,      kGatedDeepWide, Direct, 128,
     1, 0, Coop, 0, Never, NT, Glu},
};
// clang-format on
}  // namespace table

using table::kSm90Variants;

inline constexpr int kSm90Rows = int(sizeof(kSm90Variants) / sizeof(kSm90Variants[0]));

// Auto leaves a gated product of blocks bm high with at least gated_min_n(bm) columns to the
// gated rows above (the product's Auto policy, spmm/operation.hpp), where one runs it; below,
// the Decode family keeps it. Measured on an H100 (2026-11-27, check_gated --time, f16,
// d = 0.5, us, Decode vs the gated row Auto takes; Qwen2.5-7B | Llama-3-8B | Phi-3-mini):
//   128x128 blocks, the 128x64 k128 row: n = 16 82.6 vs 79.4 | 55.9 vs 59.2 | 36.8 vs 32.9;
//     n = 20 86.1 vs 78.9 | 58.4 vs 59.2 | 40.8 vs 33.2; n = 24 88.4 vs 78.6 | 58.7 vs 60.0 |
//     40.5 vs 32.9; n = 32 88.7 vs 76.4 | 58.9 vs 57.7 | 41.0 vs 31.6. So Hopper from n = 17
//     (1-2 % slower on Llama-3-8B up to n = 24, 8-19 % faster on the others); Decode keeps its
//     decode range, n <= 16.
//   64x64 blocks, the transposed 128x64 row (Qwen2.5-7B | Llama-3-8B): n = 16 77.8 vs 124.3 |
//     62.8 vs 104.6; n = 64 94.4 vs 114.4 | 74.8 vs 91.9; n = 96 167.5 vs 102.1 | 145.4 vs
//     83.0. So Hopper from n = 65, past Decode's 64-column rows.
constexpr int64_t gated_min_n(int bm) { return bm > 64 ? 17 : 65; }

// Whether a Direct row's k-tiles of tile_k take blocks bk wide: a k-tile deeper than 16 may
// reach past the block (TMA zero-fills it and WGMMA multiplies the zeros, mainloop.hpp), by up
// to 1/8 of the last k-tile, 1/4 on the transposed (bm <= 64, L2-bound) rows, where the extra
// MMAs cost nothing. Measured (H100, f16 TFLOPS at density 1/16, 1/8, 1/4): 64x112 on k64
// 291/317/332 vs k16 239/264/274, 24x48 on k32 113/121/125 vs k16 100/105/110, 128x112 on k64
// 350/431/482 vs k16 370/424/478, but 128x48 on k64 300/377/429 vs k16 342/422/476.
constexpr bool k_tiles_fit(const Sm90Variant& v, int64_t bk) {
  const int64_t padded = (bk + v.tile_k - 1) / v.tile_k * v.tile_k;
  return (v.transposed ? 4 : 8) * (padded - bk) <= padded;
}

// A launch's tiles of row v on p: block-rows (pairs for a gated row) times dense tiles.
inline int64_t row_tiles(const detail::Problem& p, const Sm90Variant& v) {
  const int64_t dense_tile = v.transposed ? v.tile_m : v.tile_n;
  return (v.gated ? p.block_rows() / 2 : p.block_rows()) * ((p.n() + dense_tile - 1) / dense_tile);
}

// Whether row v is bound to one wave at p's n (its one_wave_from_n).
inline bool one_wave_at(const detail::Problem& p, const Sm90Variant& v) {
  return v.one_wave_from_n > 0 && p.n() >= v.one_wave_from_n;
}

// Columns of n that dense tiles `width` wide leave empty.
constexpr int64_t empty_columns(int64_t n, int64_t width) { return (n + width - 1) / width * width - n; }

// Whether Auto passes over row v for its one-wave bound (family.cu's auto_skips): bound at p's
// n, more tiles than SMs, and not a row whose tiles leave fewer columns empty than the
// less_waste_than-wide ones after it.
inline bool one_wave_skips(const detail::Problem& p, const Sm90Variant& v) {
  if (!one_wave_at(p, v) || row_tiles(p, v) <= p.device.sm_count) return false;
  const int64_t width = v.transposed ? v.tile_m : v.tile_n;
  return v.less_waste_than == 0 || empty_columns(p.n(), width) >= empty_columns(p.n(), v.less_waste_than);
}

// Whether a one-wave row (the narrow rows; the 128x128 rows on 128-deep k-tiles past n = 128)
// takes p under Auto: an automatic row of p's dtypes and B layout, bound to one wave at p's n,
// whose tile holds p's blocks, within its max_n, that Auto does not pass over for that bound
// (family.cu's fits and auto_skips, which this mirrors for the product's Auto policy,
// spmm/operation.hpp).
inline bool one_wave_row_takes(const detail::Problem& p) {
  for (const Sm90Variant& v : kSm90Variants)
    if (one_wave_at(p, v) && v.automatic && !p.gated && !p.a_transposed && p.input() == v.input && p.b.dtype == v.dense &&
        p.b.layout == v.b_layout && p.a.bm <= v.bm && k_tiles_fit(v, p.a.bk) && (v.max_n == 0 || p.n() <= v.max_n) &&
        !one_wave_skips(p, v))
      return true;
  return false;
}

constexpr bool same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The build features a row needs (core/features.hpp): bf16 rows need `bf16`, op(A) = A^T
// rows `transpose`, any-block rows other than the 64/128-high tile_k-64 ones (which serve
// f32 output and 64/128 blocks) `any-block` (the gated rows are not any-block rows: they
// serve the gated product, and the 128-high rows on k-tiles of 128 serve 128x128 blocks), tuning
// candidates `tuning`.
constexpr uint32_t needs(const Sm90Variant& v) {
  uint32_t n = 0;
  n |= detail::dtype_needs(v.input) | detail::dtype_needs(v.dense);
  if (v.a_transposed) n |= detail::kFeatureTranspose;
  if (v.epilogue == EpilogueKind::Direct && !v.a_transposed && !v.gated && !detail::is_fp8(v.input) &&
      !((v.bm == 64 || v.bm == 128) && v.tile_k == 64) && !(v.bm == 128 && v.tile_k == 128))
    n |= detail::kFeatureAnyBlock;
  if (!v.automatic) n |= detail::kFeatureTuning;
  return n;
}

// The row called `name`, or -1.
constexpr int sm90_row(const char* name) {
  for (int i = 0; i < kSm90Rows; ++i)
    if (same_name(kSm90Variants[i].name, name)) return i;
  return -1;
}

// The launch of row kRow: defined in kernel.hpp, explicitly instantiated for each row in a
// generated row unit (a row not instantiated is an undefined symbol at link time).
template <int kRow>
cudaError_t launch_row(const detail::Problem& p, cudaStream_t stream);

// ---- what the table promises (checked at compile time) ----
namespace table {
constexpr bool names_unique() {
  for (int i = 0; i < kSm90Rows; ++i)
    if (sm90_row(kSm90Variants[i].name) != i) return false;
  return true;
}
// The sparse tile extent: the GEMM tile side that holds one block-row.
constexpr int sparse_extent(const Sm90Variant& v) { return v.transposed ? v.tile_n : v.tile_m; }
constexpr bool well_formed(const Sm90Variant& v) {
  const bool direct = v.epilogue == EpilogueKind::Direct;
  // FP8 rows: Direct (C's dtype at run time), K-major B, op(A) = A.
  const bool fp8 = detail::is_fp8(v.input);
  // W8A16 rows: FP8 A converted to f16 (mainloop.hpp): natural 128-row tiles, no clusters.
  const bool w8a16 = v.dense != v.input;
  // FP8 rows with a TMA epilogue (Scaled) write f16 C: natural 128-row tiles of 128-high blocks
  // or transposed 64-column tiles of 64-high ones (the Direct rows' tiles); only they are Scaled.
  const bool fp8_tma = fp8 && v.output == OutF16 && v.epilogue == Scaled &&
                       (v.transposed ? v.tile_n == 64 && v.bm == 64 : v.tile_m == 128 && v.bm == 128) &&
                       v.dense == v.input && v.c_layout != CAny;
  const bool scaled = (v.epilogue == Scaled) == fp8_tma;
  const bool dtypes = (fp8 ? ((v.output == Wide && direct) || fp8_tma) && v.b_layout == BCol && !v.a_transposed
                           : (v.input == F16 || v.input == BF16) && (v.output == Same || (direct && v.output == OrF32))) &&
                      (!w8a16 || (fp8 && (v.dense == F16 || v.dense == BF16) && !v.transposed && v.tile_m == 128 &&
                                  v.cluster == 1 && v.tile_k % 16 == 0));
  const bool layouts = (v.c_layout == CAny) == direct;
  // TMA-epilogue rows: exactly one block height, bk 64 or 128 in k-tiles of 64. Direct rows:
  // any bm up to the sparse extent (WGMMA N: a multiple of 8 up to 256; M: 128 or 256).
  const bool block = direct ? (v.tile_k == 16 || v.tile_k == 32 || v.tile_k == 64 ||
                                (v.tile_k == 128 && (fp8 || v.gated || v.bm == 128))) &&
                                  (!fp8 || v.tile_k % 32 == 0) && v.bm == sparse_extent(v) &&
                                  v.bm % 8 == 0 && v.bm <= 256
                            : (v.bm == 64 || v.bm == 128) && v.tile_k == (fp8 ? v.bm : 64) && sparse_extent(v) == v.bm;
  const bool tile = v.tile_m >= 128 && v.tile_m <= 256 && v.tile_n <= 256 &&  // cooperative: M tile >= 128
                    (v.transposed ? v.tile_m : v.tile_n) % 64 == 0;
  // Clusters: two CTAs along the dense side, on the TMA-epilogue rows and the FP8 ones.
  const bool cluster = (v.cluster == 1 || (v.cluster == 2 && (!direct || fp8))) && v.max_n >= 0 && v.max_row_depth >= 0;
  // Ping-pong: a TMA epilogue, one warpgroup's accumulators (<= 128 fp32 registers), no clusters.
  const bool schedule = v.schedule == Schedule::Cooperative ||
                        (!direct && v.cluster == 1 && v.tile_m * v.tile_n <= 128 * 128);
  // Split tiles only in cooperative launches without clusters (kernel.hpp); an Only row is
  // automatic (it exists for Auto).
  const bool split = v.split == Split::Never ||
                     (v.cluster == 1 && v.schedule == Schedule::Cooperative && (v.split != Split::Only || v.automatic));
  // Gated rows (gated.hpp): 16-bit op(A) = A, Direct, cooperative, no clusters or split tiles,
  // both accumulators within 128 registers per consumer thread.
  const bool gated = !v.gated || ((!fp8 || w8a16) && !v.a_transposed && direct && v.schedule == Schedule::Cooperative &&
                                  v.cluster == 1 && v.split == Split::Never &&
                                  (w8a16 ? 3 : 2) * v.tile_m * v.tile_n <= 2 * 128 * 128);
  return dtypes && scaled && layouts && block && tile && cluster && schedule && split && gated && v.name != nullptr &&
         v.chosen_by != nullptr;
}
constexpr bool all_well_formed() {
  for (const Sm90Variant& v : kSm90Variants)
    if (!well_formed(v)) return false;
  return true;
}
// Exactly one automatic Plain row for every n per (dtype, bm, B layout, C layout) of the
// TMA-epilogue blocks (64 or 128 high, bk 64 or 128), so Auto finds the measured default
// for each; rows with a max_n come before it.
constexpr int automatic_plain_rows(DType t, int bm, Layout b, CLayout c) {
  int count = 0;
  for (const Sm90Variant& v : kSm90Variants)
    if (v.automatic && !v.a_transposed && !v.gated && v.epilogue == EpilogueKind::Plain && v.max_n == 0 &&
        v.schedule == Schedule::Cooperative && v.split != Split::Only && v.input == t && v.bm == bm && v.b_layout == b && v.c_layout == c)
      ++count;
  return count;
}
// Every TMA-epilogue Only row has a Never twin (same key and tile) after it, which takes the
// problems where the launch does not split. (A Direct Only row needs none: the any-block rows
// take every block, any_block_covered.)
constexpr bool split_twins() {
  for (int i = 0; i < kSm90Rows; ++i) {
    const Sm90Variant& v = kSm90Variants[i];
    if (v.split != Split::Only || v.epilogue == EpilogueKind::Direct) continue;
    bool twin = false;
    for (int j = i + 1; j < kSm90Rows; ++j) {
      const Sm90Variant& w = kSm90Variants[j];
      twin = twin || (w.split == Split::Never && w.automatic && !w.gated && w.a_transposed == v.a_transposed && w.input == v.input && w.output == v.output &&
                      w.bm == v.bm && w.b_layout == v.b_layout && w.c_layout == v.c_layout && w.tile_m == v.tile_m &&
                      w.tile_n == v.tile_n && w.tile_k == v.tile_k && w.transposed == v.transposed &&
                      w.epilogue == v.epilogue && w.cluster == 1 && w.max_n == 0 && w.max_row_depth == 0 &&
                      w.schedule == Schedule::Cooperative);
    }
    if (!twin) return false;
  }
  return true;
}
constexpr bool one_automatic_row_per_key() {
  for (DType t : kSm90InputTypes)
    for (int bm : {64, 128})
      for (Layout b : {BRow, BCol})
        for (CLayout c : {CRow, CCol})
          if (automatic_plain_rows(t, bm, b, c) != 1) return false;
  return true;
}
// Every block the family's supports() admits (bm <= 256, bk a multiple of 16) has an
// automatic any-block row for each input dtype and B layout.
constexpr bool any_block_covered() {
  for (DType t : kSm90InputTypes)
    for (Layout b : {BRow, BCol})
      for (int bm = 1; bm <= 256; ++bm) {
        bool found = false;
        for (const Sm90Variant& v : kSm90Variants)
          found = found || (v.automatic && !v.a_transposed && !v.gated && v.epilogue == EpilogueKind::Direct && v.input == t &&
                            v.b_layout == b &&
                            bm <= v.bm && v.tile_k == 16);
        if (!found) return false;
      }
  return true;
}
static_assert(names_unique(), "kSm90Variants: names must be unique");
static_assert(all_well_formed(), "kSm90Variants: a row has an unsupported dtype, block height or tile");
static_assert(one_automatic_row_per_key(), "kSm90Variants: need exactly one automatic row per dtype/bm/B/C key");
static_assert(any_block_covered(), "kSm90Variants: some bm <= 256 has no automatic any-block row");
static_assert(split_twins(), "kSm90Variants: an Only row needs a split-free twin after it");
}  // namespace table

}  // namespace sparsek::detail::spmm_sm90
