// The WMMA tensor-core kernel family: C = alpha * A * B + beta * C with A in BSR form.
//
// One CTA computes a TILE_M x TILE_N tile of C that lies inside one block-row of A (a
// slice of it when bm > TILE_M). It walks only the nonzero blocks of that block-row: for
// every (block j, k-step) pair it copies the TILE_M x K_STEP piece of A's block j and the
// K_STEP x TILE_N piece of B starting at row col_idx[j]*bk (+ k offset) into one slot of
// a multi-stage cp.async ring, then the warps multiply out of shared memory with
// nvcuda::wmma m16n16k16 (fp32 accumulators). The epilogue stages the fp32 tile through
// shared memory so that C is read (only when beta != 0) and written with coalesced 16-byte
// vectors for both row- and column-major C.
//
// Every output element is produced by exactly one thread of one CTA, summing over k in a
// fixed order (block order, then k within a block), so results are bitwise reproducible
// and independent of the tile configuration. No atomics, no split-k.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "problem.hpp"
#include "wmma/cp_async.cuh"

namespace sparsek::detail {
namespace wmma_impl {
namespace wmma = nvcuda::wmma;

// ---------------------------------------------------------------------------------------
// Tile configurations: the one table. default_config() below chooses one of rows 0-7 from
// (bm, m, n), upgraded to a measured row of 8.. where the device has the shared memory
// (kLargeSmemRow), and k_step_for() K_STEP from bk. Rows 0-7 keep their shared memory <= 99 KiB
// (the per-block opt-in limit of sm_86/sm_89, which run the sm_80 image), so no default
// row is refused for its size on any cc >= 8.0. Rows 8.. are tuning candidates, reached
// only through the SPARSEK_WMMA_CONFIG environment variable (config_override() below);
// they may use up to 227 KiB (sm_90) and are skipped where the device has less.
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
//  * Each class has a "narrow" row (TILE_N 128, same or smaller warp tile, more CTAs per
//    SM) used when the wide row would give fewer than kMinCtasForWide CTAs: small
//    problems need more, smaller CTAs to fill ~132 SMs.
//  * Stages: 3-4 for K_STEP 32 (2-3 k-steps in flight hide L2 latency), 5-6 for K_STEP
//    16 (about the same bytes in flight).
//  * K_STEP is 32 when bk % 32 == 0, else 16 (bk = 16, 48, 80, ...): a k-step never
//    straddles two blocks, since the next block's B rows are elsewhere. Candidate rows
//    with k_max 64 use 64 when bk % 64 == 0 (f16 only): half the barriers per flop.
//  * pipelined rows double-buffer the fragments in registers and move the per-step
//    wait + barrier before the last 16-deep slice (see the kernel), so the barrier and
//    the ldmatrix latency at a step boundary overlap tensor-core work.
//  * min_ctas feeds __launch_bounds__ and so caps registers at 64K / (threads * min_ctas);
//    rows with min_ctas 1 get the fully unrolled k loop (more registers, more overlap of
//    fragment loads with mma), the others keep it rolled to stay spill-free.
// The result does not depend on the row chosen: every output element sums its products
// in the same order (block order, then k), so any row gives bitwise-identical output.
struct TileConfig {
  const char* name;            // for the SPARSEK_WMMA_CONFIG override and its log line
  int tile_m, tile_n;          // CTA tile of C
  int warps_m, warps_n;        // warp grid; warp tile = tile_m/warps_m x tile_n/warps_n
  int k_max;                   // largest K_STEP the row may use (32 or 64)
  int stages_k64, stages_k32, stages_k16;  // cp.async ring depth per K_STEP
  int min_ctas;                // __launch_bounds__ minimum CTAs per SM (caps registers)
  bool pipelined;              // software-pipelined main loop (see the kernel); else classic
};

constexpr TileConfig kTiles[] = {
    // name            tm   tn wm wn kmax s64 s32 s16 ctas pipe   used for
    {"w128x256",      128, 256, 2, 4, 32, 0, 3, 5, 1, false},  // 0: bm % 128 == 0, wide
    {"w128x128",      128, 128, 2, 4, 32, 0, 4, 6, 2, false},  // 1: bm % 128 == 0, narrow
    {"w64x256",        64, 256, 2, 4, 32, 0, 3, 6, 2, false},  // 2: bm % 64 == 0, wide
    {"w64x128",        64, 128, 2, 2, 32, 0, 4, 6, 3, false},  // 3: bm % 64 == 0, narrow
    {"w32x256",        32, 256, 1, 8, 32, 0, 4, 6, 2, false},  // 4: bm % 32 == 0, wide
    {"w32x128",        32, 128, 1, 4, 32, 0, 4, 6, 4, false},  // 5: bm % 32 == 0, narrow
    {"w16x256",        16, 256, 1, 8, 32, 0, 4, 6, 2, false},  // 6: bm % 16 == 0, wide
    {"w16x128",        16, 128, 1, 4, 32, 0, 4, 6, 4, false},  // 7: bm % 16 == 0, narrow
    // ---- tuning candidates: only through SPARSEK_WMMA_CONFIG (see config_override) ----
    // Rows 8.. need more than 99 KiB of shared memory per CTA (or per SM at min_ctas) and
    // so run only where the device allows it (sm_90: 227 KiB per block, 228 KiB per SM).
    {"p128x256",      128, 256, 2, 4, 32, 0, 3, 5, 1, true},   // 8: row 0 with the pipelined loop only
    {"h128x256k64",   128, 256, 2, 4, 64, 4, 6, 8, 1, true},   // 9: K_STEP 64, 204 KiB
    {"h128x256k32s5", 128, 256, 2, 4, 32, 0, 5, 8, 1, true},   // 10: K_STEP 32, 5 stages, 133 KiB
    {"h128x128x4w",   128, 128, 2, 2, 64, 3, 5, 8, 2, true},   // 11: 4 warps of 64x64, 2 CTAs/SM, 105 KiB
    {"h128x256k64s3", 128, 256, 2, 4, 64, 3, 5, 8, 1, true},   // 12: as 9 with 3 stages (153 KiB)
    {"h64x256k64",     64, 256, 2, 4, 64, 4, 6, 8, 1, true},   // 13: bm 64, K_STEP 64, 168 KiB
    {"h64x256s6",      64, 256, 2, 4, 32, 0, 6, 8, 1, true},   // 14: bm 64, K_STEP 32, 6 stages (129 KiB)
    {"h64x256x4w",     64, 256, 1, 4, 32, 0, 5, 8, 2, true},   // 15: bm 64, 4 warps of 64x64, 2 CTAs/SM
    {"h32x256s5",      32, 256, 1, 8, 32, 0, 5, 8, 2, true},   // 16: bm 32, 5 stages, 2 CTAs/SM
    {"h32x256x4w",     32, 256, 1, 4, 32, 0, 5, 8, 2, true},   // 17: bm 32, 4 warps of 32x64, 2 CTAs/SM
};
constexpr int kNumTiles = sizeof(kTiles) / sizeof(kTiles[0]);
constexpr int kNumDefaultTiles = 8;  // rows default_config() chooses by itself
// Below this many CTAs the wide row leaves SMs idle: about two waves of an H100's 132 SMs.
constexpr int64_t kMinCtasForWide = 264;

constexpr int cmax(int a, int b) { return a > b ? a : b; }

// Everything derived from a table row, for both the kernel and the host side.
template <int kCfg, int kKStep, bool kBCol>
struct Traits {
  static constexpr TileConfig cfg = kTiles[kCfg];
  static constexpr int kTileM = cfg.tile_m, kTileN = cfg.tile_n;
  static constexpr int kWarpsM = cfg.warps_m, kWarpsN = cfg.warps_n;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kMinCtas = cfg.min_ctas;
  static constexpr bool kUnrollK = cfg.min_ctas == 1;
  static constexpr int kWarpM = kTileM / kWarpsM, kWarpN = kTileN / kWarpsN;
  static constexpr int kFragsM = kWarpM / 16, kFragsN = kWarpN / 16;
  static constexpr int kStages = kKStep == 64 ? cfg.stages_k64 : kKStep == 32 ? cfg.stages_k32 : cfg.stages_k16;
  // The pipelined loop double-buffers fragments across the 16-deep slices of a k-step, so
  // it needs at least two slices per step; K_STEP 16 keeps the classic loop.
  static constexpr bool kPipelined = cfg.pipelined && kKStep >= 32;

  // Shared-memory rows are padded by 16 bytes. With a row stride of 16 (mod 128) bytes the
  // eight 16-byte row segments one ldmatrix phase reads land in distinct banks, and every
  // 16-row fragment still starts 32-byte aligned as wmma requires.
  static constexpr int kPad = 8;
  static constexpr int kLdA = kKStep + kPad;                          // A: [TILE_M][K_STEP]
  static constexpr int kLdB = kBCol ? kKStep + kPad : kTileN + kPad;  // B: [TILE_N][K] or [K][TILE_N]
  static constexpr int kAStage = kTileM * kLdA;                       // elements per stage
  static constexpr int kBStage = kBCol ? kTileN * kLdB : kKStep * kLdB;
  static constexpr int kPipeBytes = kStages * (kAStage + kBStage) * 2;

  // Epilogue: the fp32 tile is staged row-major [rows][TILE_N+4] or column-major
  // [TILE_N][rows+4] (4 floats of padding keep rows 16-byte aligned and shift banks). When
  // the whole tile does not fit in the ring's memory it goes in kWarpsM passes, one warp
  // row (kEpiRows rows of C) at a time.
  static constexpr int kWholeEpiBytes = cmax(kTileM * (kTileN + 4), kTileN * (kTileM + 4)) * 4;
  static constexpr int kEpiPasses = kWholeEpiBytes <= kPipeBytes ? 1 : kWarpsM;
  static constexpr int kEpiRows = kTileM / kEpiPasses;
  static constexpr int kLdCRow = kTileN + 4, kLdCCol = kEpiRows + 4;
  static constexpr int kEpiBytes = cmax(kEpiRows * kLdCRow, kTileN * kLdCCol) * 4;
  static constexpr int kSmemBytes = cmax(kPipeBytes, kEpiBytes);

  static_assert(kTileM % (16 * kWarpsM) == 0 && kTileN % (16 * kWarpsN) == 0, "warp tile must be whole fragments");
  static_assert(kKStep == 16 || kKStep == 32 || kKStep == 64, "K_STEP is 16, 32 or 64");
  static_assert(kKStep <= cfg.k_max, "K_STEP above the row's k_max");
  static_assert(kStages >= 2, "the ring needs two stages");
  // Default rows must fit the 99 KiB opt-in limit of sm_86/sm_89 (which run the sm_80
  // image); candidate rows only the 227 KiB of sm_90 (the host skips rows that do not fit).
  static_assert(kSmemBytes <= (kCfg < kNumDefaultTiles ? 99 : 227) * 1024, "row exceeds its shared-memory budget");
  static_assert((kEpiRows * kTileN / 8) % kThreads == 0, "epilogue chunks must divide evenly");
};

// Everything the kernel needs, by value (no device-side allocation).
struct KernelArgs {
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const void* a_values;
  const void* b;
  void* c;
  int64_t ldb, ldc;
  int64_t n;
  int32_t bm, bk;
  int32_t slices;  // bm / TILE_M: CTAs along one block-row
  float alpha, beta;
  bool c_col_major;
  bool c_f32;  // C is f32 (else the input type)
};

// ---- 8-element conversions between fp32 registers and 16 bytes (or 32 for f32) of C ----
__device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
template <typename T2>
__device__ __forceinline__ T2 from_float2(float a, float b);
template <>
__device__ __forceinline__ __half2 from_float2<__half2>(float a, float b) {
  return __floats2half2_rn(a, b);
}
template <>
__device__ __forceinline__ __nv_bfloat162 from_float2<__nv_bfloat162>(float a, float b) {
  return __floats2bfloat162_rn(a, b);
}

template <typename T>
struct Pair;
template <>
struct Pair<__half> {
  using type = __half2;
};
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

// Loads 8 consecutive elements of C (16-byte aligned) as fp32.
template <typename OutT>
__device__ __forceinline__ void load8(const OutT* p, float v[8]) {
  if constexpr (std::is_same_v<OutT, float>) {
    const float4 x = reinterpret_cast<const float4*>(p)[0];
    const float4 y = reinterpret_cast<const float4*>(p)[1];
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
  } else {
    using T2 = typename Pair<OutT>::type;
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      T2 h;
      static_assert(sizeof(T2) == 4, "pair of 16-bit values");
      memcpy(&h, &w[i], 4);
      const float2 f = to_float2(h);
      v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
  }
}

// Stores 8 fp32 values as 8 consecutive elements of C (16-byte aligned), rounding to nearest.
template <typename OutT>
__device__ __forceinline__ void store8(OutT* p, const float v[8]) {
  if constexpr (std::is_same_v<OutT, float>) {
    reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    using T2 = typename Pair<OutT>::type;
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const T2 h = from_float2<T2>(v[2 * i], v[2 * i + 1]);
      memcpy(&w[i], &h, 4);
    }
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Writes the staged fp32 tile (kEpiRows x TILE_N in shared memory, laid out like C and
// starting at row row0 of C) to global C:
// C = alpha * acc + beta * C, reading C only when beta != 0. Each thread moves chunks of
// 8 elements along C's contiguous dimension; consecutive threads take consecutive chunks,
// so a warp's stores are contiguous runs. Only columns >= n need predication: TILE_M
// divides bm, so every row of the tile exists.
template <typename Tr, typename OutT, bool kCCol>
__device__ __forceinline__ void write_tile(const KernelArgs& args, const float* s_c, int64_t row0, int64_t n0) {
  OutT* c = static_cast<OutT*>(args.c);
  constexpr int kChunks = Tr::kEpiRows * Tr::kTileN / 8;
  // Row-major: chunk = (row, 8 columns); column-major: chunk = (column, 8 rows).
  constexpr int kPerLine = kCCol ? Tr::kEpiRows / 8 : Tr::kTileN / 8;
  constexpr int kLdS = kCCol ? Tr::kLdCCol : Tr::kLdCRow;
  const bool read_c = args.beta != 0.0f;
#pragma unroll 2
  for (int q = threadIdx.x; q < kChunks; q += Tr::kThreads) {
    const int line = q / kPerLine;         // tile row (row-major) or tile column (col-major)
    const int off = (q % kPerLine) * 8;    // first column (row-major) or row (col-major)
    const int col = kCCol ? line : off;    // tile column of the chunk's first element
    if (n0 + col >= args.n) continue;      // n % 8 == 0 for row-major C, so chunks are whole
    float v[8];
    const float4* s = reinterpret_cast<const float4*>(s_c + line * kLdS + off);
    const float4 x = s[0], y = s[1];
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    OutT* dst = kCCol ? c + (n0 + line) * args.ldc + row0 + off : c + (row0 + line) * args.ldc + n0 + off;
    if (read_c) {
      float old[8];
      load8(dst, old);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = args.alpha * v[i] + args.beta * old[i];
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = args.alpha * v[i];
    }
    store8(dst, v);
  }
}

// The kernel. Grid: x = block-row * slices + slice (fastest, so CTAs running at the same
// time share one TILE_N-wide slab of B in L2), y = n-tile. CTAs run in block-row order;
// putting long block-rows first would need a device-side sort of row lengths (an extra
// pass and buffer), which this launch-only interface does not do.
template <int kCfg, int kKStep, typename T, bool kBCol>
__global__ void __launch_bounds__(Traits<kCfg, kKStep, kBCol>::kThreads, Traits<kCfg, kKStep, kBCol>::kMinCtas)
    bsr_wmma_kernel(const KernelArgs args) {
  using Tr = Traits<kCfg, kKStep, kBCol>;
  constexpr int kTileM = Tr::kTileM, kTileN = Tr::kTileN, kThreads = Tr::kThreads, kStages = Tr::kStages;
  constexpr int kLdA = Tr::kLdA, kLdB = Tr::kLdB;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
  using BLayout = std::conditional_t<kBCol, wmma::col_major, wmma::row_major>;
  using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, BLayout>;
  using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

  extern __shared__ __align__(128) unsigned char smem[];
  T* s_a = reinterpret_cast<T*>(smem);
  T* s_b = s_a + kStages * Tr::kAStage;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int warp_m = warp / Tr::kWarpsN, warp_n = warp % Tr::kWarpsN;

  const int64_t block_row = blockIdx.x / args.slices;
  const int slice_row = (blockIdx.x % args.slices) * kTileM;  // first row of the slice in the block
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * kTileN;
  const int bk = args.bk;

  const int j_begin = __ldg(args.row_ptr + block_row);
  const int j_end = __ldg(args.row_ptr + block_row + 1);
  const int k_steps_per_block = bk / kKStep;
  const int total_steps = (j_end - j_begin) * k_steps_per_block;

  const T* a_vals = static_cast<const T*>(args.a_values);
  const T* b = static_cast<const T*>(args.b);
  const int64_t block_elems = static_cast<int64_t>(args.bm) * bk;

  // Per-thread parts of the copy addresses, computed once. Chunk i of a thread (16 bytes)
  // is chunk tid + i*kThreads of the tile; since a row (or column) holds a whole number of
  // chunks that divides kThreads, chunk i is the thread's first chunk moved by i rows (or
  // columns), so one base pointer and a fixed stride cover all of them.
  constexpr int kAPerRow = kKStep / 8;  // chunks per A row
  constexpr int kAChunks = kTileM * kAPerRow;
  constexpr int kARowsPerPass = kThreads / kAPerRow;
  const int a_r = tid / kAPerRow, a_k = (tid % kAPerRow) * 8;
  const T* a_thread = a_vals + static_cast<int64_t>(slice_row + a_r) * bk + a_k;
  const int a_dst_off = a_r * kLdA + a_k;

  // Row-major B: a chunk is 8 columns of one k row; column-major: 8 k of one column.
  constexpr int kBPerLine = kBCol ? kKStep / 8 : kTileN / 8;
  constexpr int kBChunks = kBCol ? kTileN * kBPerLine : kKStep * kBPerLine;
  constexpr int kBLinesPerPass = kThreads / kBPerLine;
  static_assert(kThreads % kBPerLine == 0 && kBChunks % kThreads == 0, "B chunks must divide evenly");
  static_assert(kThreads % kAPerRow == 0, "A chunks must tile the threads");
  const int b_line = tid / kBPerLine, b_off = (tid % kBPerLine) * 8;
  const int64_t ldb = args.ldb;
  // Columns of this CTA's tile that exist (TILE_N unless this is the last n-tile).
  const int64_t cols_left = args.n - n0;
  // Row-major B: a chunk is in or out for the whole CTA life (n % 8 == 0 makes chunks whole);
  // an out chunk reads nothing but still gets a valid address, column 0 of its row.
  const bool b_row_ok = kBCol || b_off < cols_left;
  const T* b_thread = kBCol ? b + (n0 + b_line) * ldb + b_off : b + b_line * ldb + (b_row_ok ? n0 + b_off : 0);
  const int b_dst_off = b_line * kLdB + b_off;

  // Issues the copies of one k-step (block j, k offset kofs) into ring slot `slot`.
  // a_src: this thread's first A chunk of the step (block j, column kofs); col: col_idx[j].
  auto load_step = [&](int slot, const T* a_src, int col, int kofs) {
    // A: rows slice_row.. of block j (row-major, row stride bk), columns kofs..+K_STEP.
    T* a_dst = s_a + slot * Tr::kAStage + a_dst_off;
#pragma unroll
    for (int i = 0; i < (kAChunks + kThreads - 1) / kThreads; ++i) {
      if (kAChunks % kThreads == 0 || tid + i * kThreads < kAChunks)
        cp_async_16(a_dst + i * kARowsPerPass * kLdA, a_src + i * kARowsPerPass * bk, true);
    }
    // B: k rows col_idx[j]*bk + kofs ..+K_STEP, columns n0 ..+TILE_N (zeros past n).
    const int64_t k_row = static_cast<int64_t>(col) * bk + kofs;
    T* b_dst = s_b + slot * Tr::kBStage + b_dst_off;
#pragma unroll
    for (int i = 0; i < kBChunks / kThreads; ++i) {
      if constexpr (!kBCol) {
        cp_async_16(b_dst + i * kBLinesPerPass * kLdB, b_thread + (k_row + i * kBLinesPerPass) * ldb, b_row_ok);
      } else {
        const bool ok = b_line + i * kBLinesPerPass < cols_left;
        const T* src = b_thread + i * kBLinesPerPass * ldb + k_row;
        cp_async_16(b_dst + i * kBLinesPerPass * kLdB, ok ? src : b, ok);
      }
    }
  };

  FragC acc[Tr::kFragsM][Tr::kFragsN];
#pragma unroll
  for (int i = 0; i < Tr::kFragsM; ++i)
#pragma unroll
    for (int jn = 0; jn < Tr::kFragsN; ++jn) wmma::fill_fragment(acc[i][jn], 0.0f);

  // The next k-step to load: block load_j, k offset load_k, and this thread's A chunk of
  // block load_j (kept as a pointer so no 64-bit multiply is needed per step). The block
  // column of the next block is fetched one block ahead, so the copies of a step never
  // wait on a dependent global load of col_idx.
  auto col_at = [&](int j) { return j < j_end ? __ldg(args.col_idx + j) : 0; };
  const T* a_block = a_thread + j_begin * block_elems;
  int load_j = j_begin, load_k = 0, loads_left = total_steps, write_slot = 0;
  int col_cur = col_at(j_begin), col_next = col_at(j_begin + 1);
  auto issue_next = [&]() {
    if (loads_left > 0) {
      load_step(write_slot, a_block + load_k, col_cur, load_k);
      load_k += kKStep;
      if (load_k == bk) {
        load_k = 0, ++load_j, a_block += block_elems;
        col_cur = col_next, col_next = col_at(load_j + 1);
      }
      --loads_left;
    }
    write_slot = write_slot + 1 == kStages ? 0 : write_slot + 1;
    cp_async_commit();  // an empty group when past the end keeps the wait count uniform
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue_next();

  if constexpr (!Tr::kPipelined) {
    // Classic loop: wait, barrier, issue the next copies, then all slices of the step.
    int read_slot = 0;
    for (int step = 0; step < total_steps; ++step) {
      // Step `step` has landed once at most kStages-2 later groups are pending. The barrier
      // also tells every warp that all warps are done with the slot computed last
      // iteration, which is the one the next load overwrites.
      cp_async_wait<kStages - 2>();
      __syncthreads();
      issue_next();

      const T* a_tile = s_a + read_slot * Tr::kAStage + warp_m * Tr::kWarpM * kLdA;
      const T* b_tile = s_b + read_slot * Tr::kBStage + (kBCol ? warp_n * Tr::kWarpN * kLdB : warp_n * Tr::kWarpN);
      // One 16-deep k slice: hold all fragments of the operand with fewer of them and stream
      // the other one, which keeps the live fragment registers at min(FM, FN) + 1.
      auto k16 = [&](int kk) {
        auto b_ptr = [&](int jn) { return kBCol ? b_tile + jn * 16 * kLdB + kk : b_tile + kk * kLdB + jn * 16; };
        auto a_ptr = [&](int i) { return a_tile + i * 16 * kLdA + kk; };
        if constexpr (Tr::kFragsN <= Tr::kFragsM) {
          FragB fb[Tr::kFragsN];
  #pragma unroll
          for (int jn = 0; jn < Tr::kFragsN; ++jn) wmma::load_matrix_sync(fb[jn], b_ptr(jn), kLdB);
  #pragma unroll
          for (int i = 0; i < Tr::kFragsM; ++i) {
            FragA fa;
            wmma::load_matrix_sync(fa, a_ptr(i), kLdA);
  #pragma unroll
            for (int jn = 0; jn < Tr::kFragsN; ++jn) wmma::mma_sync(acc[i][jn], fa, fb[jn], acc[i][jn]);
          }
        } else {
          FragA fa[Tr::kFragsM];
  #pragma unroll
          for (int i = 0; i < Tr::kFragsM; ++i) wmma::load_matrix_sync(fa[i], a_ptr(i), kLdA);
  #pragma unroll
          for (int jn = 0; jn < Tr::kFragsN; ++jn) {
            FragB fb;
            wmma::load_matrix_sync(fb, b_ptr(jn), kLdB);
  #pragma unroll
            for (int i = 0; i < Tr::kFragsM; ++i) wmma::mma_sync(acc[i][jn], fa[i], fb, acc[i][jn]);
          }
        }
      };
      // Unrolled, the compiler fetches the next slice's fragments during this slice's mma
      // (more registers); rolled, the 2-CTA/SM rows stay within 128 registers.
      if constexpr (Tr::kUnrollK) {
  #pragma unroll
        for (int kk = 0; kk < kKStep; kk += 16) k16(kk);
      } else {
  #pragma unroll 1
        for (int kk = 0; kk < kKStep; kk += 16) k16(kk);
      }
      read_slot = read_slot + 1 == kStages ? 0 : read_slot + 1;
    }
  } else {
    // Software-pipelined loop (the order of CUTLASS's sm80 multistage main loop).
    // Fragments are double-buffered in registers: slice kk+1's fragments are loaded while
    // slice kk's mma run. The wait + barrier for the next step sits just before the last
    // slice's mma, so the next step's first fragments load while those mma are in flight;
    // one barrier per step still guards the ring:
    //  * at the barrier of step s every warp has its last slice of slot s % S in registers,
    //    so the copies issued at the start of step s+1 (into slot (s+1)+S-1 = s mod S) may
    //    overwrite it;
    //  * groups committed by then: S-1 (prologue) + s+1 (one per step, at its start), so
    //    wait<S-2> means step s+1 has landed.
    // Products are summed in the same k order as the classic loop (bitwise-identical C).
    constexpr int kSlices = kKStep / 16;
    static_assert(kSlices % 2 == 0, "fragment buffers alternate within a step");
    FragA fa[2][Tr::kFragsM];
    FragB fb[2][Tr::kFragsN];
    auto load_frags = [&](int buf, int slot, int kk) {
      const T* a_tile = s_a + slot * Tr::kAStage + warp_m * Tr::kWarpM * kLdA + kk;
      const T* b_tile = s_b + slot * Tr::kBStage +
                        (kBCol ? warp_n * Tr::kWarpN * kLdB + kk : kk * kLdB + warp_n * Tr::kWarpN);
#pragma unroll
      for (int i = 0; i < Tr::kFragsM; ++i) wmma::load_matrix_sync(fa[buf][i], a_tile + i * 16 * kLdA, kLdA);
#pragma unroll
      for (int jn = 0; jn < Tr::kFragsN; ++jn)
        wmma::load_matrix_sync(fb[buf][jn], kBCol ? b_tile + jn * 16 * kLdB : b_tile + jn * 16, kLdB);
    };

    cp_async_wait<kStages - 2>();
    __syncthreads();
    int read_slot = 0;
    if (total_steps > 0) load_frags(0, 0, 0);
    for (int step = 0; step < total_steps; ++step) {
#pragma unroll
      for (int kk = 0; kk < kSlices; ++kk) {
        // The copies go first so that their address registers are dead before the next
        // slice's fragments become live (keeps the 64x64-warp-tile rows spill-free).
        if (kk == 0) issue_next();
        if (kk == kSlices - 1) {
          cp_async_wait<kStages - 2>();
          __syncthreads();
          read_slot = read_slot + 1 == kStages ? 0 : read_slot + 1;
          if (step + 1 < total_steps) load_frags(0, read_slot, 0);
        } else {
          load_frags((kk + 1) & 1, read_slot, (kk + 1) * 16);
        }
#pragma unroll
        for (int i = 0; i < Tr::kFragsM; ++i)
#pragma unroll
          for (int jn = 0; jn < Tr::kFragsN; ++jn)
            wmma::mma_sync(acc[i][jn], fa[kk & 1][i], fb[kk & 1][jn], acc[i][jn]);
      }
    }
  }

  // Epilogue. Drain the (empty) trailing groups and let every warp finish reading the
  // ring before it is overwritten by the fp32 tile.
  cp_async_wait<0>();
  __syncthreads();
  float* s_c = reinterpret_cast<float*>(smem);
  const int wc = warp_n * Tr::kWarpN;
  constexpr int kWarpRowsPerPass = Tr::kWarpsM / Tr::kEpiPasses;
#pragma unroll 1
  for (int pass = 0; pass < Tr::kEpiPasses; ++pass) {
    if (pass > 0) __syncthreads();  // the previous pass's tile has been written out
    if (warp_m / kWarpRowsPerPass == pass) {
      const int wr = warp_m * Tr::kWarpM - pass * Tr::kEpiRows;  // row within this pass
#pragma unroll
      for (int i = 0; i < Tr::kFragsM; ++i)
#pragma unroll
        for (int jn = 0; jn < Tr::kFragsN; ++jn) {
          if (args.c_col_major)
            wmma::store_matrix_sync(s_c + (wc + jn * 16) * Tr::kLdCCol + wr + i * 16, acc[i][jn], Tr::kLdCCol,
                                    wmma::mem_col_major);
          else
            wmma::store_matrix_sync(s_c + (wr + i * 16) * Tr::kLdCRow + wc + jn * 16, acc[i][jn], Tr::kLdCRow,
                                    wmma::mem_row_major);
        }
    }
    __syncthreads();

    const int64_t row0 = block_row * args.bm + slice_row + pass * Tr::kEpiRows;
    if (args.c_f32) {
      if (args.c_col_major) write_tile<Tr, float, true>(args, s_c, row0, n0);
      else write_tile<Tr, float, false>(args, s_c, row0, n0);
    } else {
      if (args.c_col_major) write_tile<Tr, T, true>(args, s_c, row0, n0);
      else write_tile<Tr, T, false>(args, s_c, row0, n0);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Host side.

// K_STEP for a row: the largest of {64 (if the row allows it), 32, 16} dividing bk, so a
// k-step never straddles two blocks (the next block's B rows are elsewhere). K_STEP 64 is
// f16 only: nvcc lowers the bf16 wmma fragment loads to generic 32-bit loads + MOVM (not
// ldmatrix, unlike f16), which costs enough registers to spill the 64x64 warp tiles.
int k_step_for(int cfg, int bk, bool bf16) {
  if (kTiles[cfg].k_max >= 64 && !bf16 && bk % 64 == 0) return 64;
  return bk % 32 == 0 ? 32 : 16;
}

// The kernel of one (config, K_STEP, dtype, B layout) and its launch geometry.
struct KernelInfo {
  const void* fn;
  int threads;
  int smem_bytes;
  int tile_m, tile_n;
  int cfg, k_step, stages;
};

template <int kCfg, int kKStep, typename T, bool kBCol>
KernelInfo info_for() {
  using Tr = Traits<kCfg, kKStep, kBCol>;
  const void* fn = reinterpret_cast<const void*>(&bsr_wmma_kernel<kCfg, kKStep, T, kBCol>);
  return {fn, Tr::kThreads, Tr::kSmemBytes, Tr::kTileM, Tr::kTileN, kCfg, kKStep, Tr::kStages};
}

template <int kCfg, int kKStep>
KernelInfo info_for_ks(bool bf16, bool b_col) {
  if (bf16) return b_col ? info_for<kCfg, kKStep, __nv_bfloat16, true>() : info_for<kCfg, kKStep, __nv_bfloat16, false>();
  return b_col ? info_for<kCfg, kKStep, __half, true>() : info_for<kCfg, kKStep, __half, false>();
}

template <int kCfg>
KernelInfo info_for_cfg(int k_step, bool bf16, bool b_col) {
  if constexpr (kTiles[kCfg].k_max >= 64) {
    if (k_step == 64)  // f16 only (k_step_for)
      return b_col ? info_for<kCfg, 64, __half, true>() : info_for<kCfg, 64, __half, false>();
  }
  if (k_step == 32) return info_for_ks<kCfg, 32>(bf16, b_col);
  return info_for_ks<kCfg, 16>(bf16, b_col);
}

template <size_t... I>
KernelInfo info_for_any(int cfg, int k_step, bool bf16, bool b_col, std::index_sequence<I...>) {
  KernelInfo ki{};
  (void)((cfg == static_cast<int>(I) ? (ki = info_for_cfg<static_cast<int>(I)>(k_step, bf16, b_col), true) : false) ||
         ...);
  return ki;
}

KernelInfo info_for_row(int cfg, const Problem& p) {
  const bool bf16 = p.a.dtype == DType::BF16;
  return info_for_any(cfg, k_step_for(cfg, p.a.bk, bf16), bf16, p.b.layout == Layout::ColMajor,
                      std::make_index_sequence<kNumTiles>{});
}

int device_smem_optin();

// Wide rows' measured replacements where the device has the shared memory for them
// (sm_90: 227 KiB). Chosen by scripts/tuning-sweep.sh on an H100 (2026-11-22, M=N=K=8192,
// f16, density 1/8, row-major B/C; TFLOPS on nonzero work):
//   bm 128: row 0  w128x256 252.8 | 8: 321.5 | 9: 336.7 | 10 h128x256k32s5: 343.5 | 11: 303.8 | 12: 337.5
//   bm  64: row 2  w64x256  235.2 | 13: 221.6 | 14: 218.3 | 15 h64x256x4w: 256.8
//   bm  32: row 4  w32x256  141.0 | 16: 146.1 | 17 h32x256x4w: 146.3
// Every row gives bitwise-identical results, so this changes speed only.
constexpr int kLargeSmemRow[] = {10, -1, 15, -1, 17, -1, -1, -1};

// Picks the default row (see the table's comment): the wide or narrow row of bm's class,
// upgraded to its measured large-shared-memory row where the device allows it.
int default_config(const Problem& p) {
  const int bm = p.a.bm;
  const int wide = bm % 128 == 0 ? 0 : bm % 64 == 0 ? 2 : bm % 32 == 0 ? 4 : 6;  // narrow is wide + 1
  const int64_t ctas = (p.a.m / kTiles[wide].tile_m) * ((p.n() + kTiles[wide].tile_n - 1) / kTiles[wide].tile_n);
  if (ctas < kMinCtasForWide) return wide + 1;
  const int big = kLargeSmemRow[wide];
  if (big >= 0 && info_for_row(big, p).smem_bytes <= device_smem_optin()) return big;
  return wide;
}

// Tuning knob: SPARSEK_WMMA_CONFIG=<row index or row name> (kTiles above) forces that row
// for every wmma launch of the process, so one build can sweep all candidate rows, e.g.
//   for c in 0 8 9 10 11 12; do SPARSEK_WMMA_CONFIG=$c dist/spmm_check --m 8192 --n 8192 \
//     --k 8192 --bm 128 --bk 128 --density 0.125 --dtype f16 --out f16 --backend wmma --iters 20; done
// Read once (first wmma call). The row is used only where it can run: its TILE_M must
// divide bm and its shared memory must fit the device's per-block opt-in limit; otherwise
// the default row is used. Either way one line on stderr (once) says what was chosen.
// Unset, empty or unrecognised: the default choice. Results are bitwise identical for
// every row, so the knob changes only speed.
int config_override() {
  static const int forced = [] {
    const char* v = std::getenv("SPARSEK_WMMA_CONFIG");
    if (v == nullptr || *v == '\0') return -1;
    char* end = nullptr;
    const long idx = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && idx >= 0 && idx < kNumTiles) return static_cast<int>(idx);
    for (int i = 0; i < kNumTiles; ++i)
      if (std::strcmp(v, kTiles[i].name) == 0) return i;
    std::fprintf(stderr, "sparsek: SPARSEK_WMMA_CONFIG=%s is not a wmma table row (0..%d or a name); ignored\n", v,
                 kNumTiles - 1);
    return -1;
  }();
  return forced;
}

// The current device's per-block shared-memory opt-in limit, cached per device (it is
// asked on every launch).
int device_smem_optin() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 99 * 1024;  // what every wide/narrow row 0-7 fits
  }
  if (dev >= 0 && dev < kMaxDevices && cache[dev].load(std::memory_order_relaxed) > 0)
    return cache[dev].load(std::memory_order_relaxed);
  if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 99 * 1024;
  }
  if (dev >= 0 && dev < kMaxDevices) cache[dev].store(bytes, std::memory_order_relaxed);
  return bytes;
}

KernelInfo kernel_info(const Problem& p) {
  const int forced = config_override();
  if (forced >= 0) {
    static std::atomic<bool> logged{false};
    const KernelInfo ki = info_for_row(forced, p);
    const bool fits_m = p.a.bm % kTiles[forced].tile_m == 0;
    const int optin = fits_m ? device_smem_optin() : 0;
    if (fits_m && ki.smem_bytes <= optin) {
      if (!logged.exchange(true))
        std::fprintf(stderr, "sparsek: SPARSEK_WMMA_CONFIG -> row %d (%s), k_step %d, %d stages, %d threads, %d B smem\n",
                     forced, kTiles[forced].name, ki.k_step, ki.stages, ki.threads, ki.smem_bytes);
      return ki;
    }
    const KernelInfo def = info_for_row(default_config(p), p);
    if (!logged.exchange(true))
      std::fprintf(stderr, "sparsek: SPARSEK_WMMA_CONFIG row %d (%s) cannot run here (%s); default row %d (%s) used\n",
                   forced, kTiles[forced].name, fits_m ? "shared memory above the device limit" : "TILE_M does not divide bm",
                   def.cfg, kTiles[def.cfg].name);
    return def;
  }
  return info_for_row(default_config(p), p);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace wmma_impl

const char* wmma_unsupported_reason(const Problem& p, int cc_major, int cc_minor) {
  using namespace wmma_impl;
  (void)cc_minor;
  if (cc_major < 8) return "needs compute capability >= 8.0 (cp.async, bf16 tensor cores)";
  const bool in16 = p.a.dtype == DType::F16 || p.a.dtype == DType::BF16;
  if (!in16 || p.b.dtype != p.a.dtype) return "inputs must both be f16 or both be bf16";
  if (p.c.dtype != p.a.dtype && p.c.dtype != DType::F32) return "C must be the input type or f32";
  const int bm = p.a.bm, bk = p.a.bk;
  if (bm < 16 || bm > 256 || bm % 16 != 0) return "bm must be a multiple of 16 in [16, 256]";
  if (bk < 16 || bk > 256 || bk % 16 != 0) return "bk must be a multiple of 16 in [16, 256]";
  if (p.a.m % bm != 0 || p.a.k % bk != 0) return "m and k must be multiples of bm and bk";
  // 16-byte vector accesses: base pointers and every row/column start must be aligned.
  if (!aligned16(p.a.values) || !aligned16(p.b.data) || !aligned16(p.c.data))
    return "A.values, B.data and C.data must be 16-byte aligned";
  if (p.b.ld % 8 != 0) return "B.ld must be a multiple of 8 elements (16 bytes)";
  const int64_t c_vec = p.c.dtype == DType::F32 ? 4 : 8;  // elements per 16 bytes
  if (p.c.ld % c_vec != 0) return "C.ld must be a multiple of 16 bytes";
  const bool b_row = p.b.layout == Layout::RowMajor, c_row = p.c.layout == Layout::RowMajor;
  if ((b_row || c_row) && p.n() % 8 != 0)
    return "n must be a multiple of 8 when B or C is row-major (16-byte row vectors)";
  // The leading dimensions must cover the contiguous extent (also checked by the caller).
  if (p.b.ld < (b_row ? p.n() : p.a.k) || p.c.ld < (c_row ? p.n() : p.a.m))
    return "a leading dimension is smaller than its matrix's contiguous extent";
  // Launch geometry and 32-bit step counters.
  if (p.a.k / 16 > INT_MAX) return "k is too large (k/16 must fit in int32)";
  if (p.a.nnzb > INT_MAX) return "nnzb must fit in int32";
  const KernelInfo ki = kernel_info(p);
  if ((p.n() + ki.tile_n - 1) / ki.tile_n > 65535) return "n is too large for the grid (n-tiles > 65535)";
  if (p.a.m / ki.tile_m > INT_MAX) return "m is too large for the grid";
  // A build may not carry an image for this GPU (e.g. only sm_80 + sm_90a on a cc 10.x
  // part); ask the runtime rather than guess. This queries the current device.
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, ki.fn) != cudaSuccess) {
    (void)cudaGetLastError();  // the failed query must not surface as a later launch error
    return "this build has no wmma kernel image for the current GPU architecture";
  }
  return nullptr;
}

cudaError_t wmma_launch(const Problem& p, cudaStream_t stream) {
  using namespace wmma_impl;
  const KernelInfo ki = kernel_info(p);
  const int64_t n = p.n();
  if (p.a.m == 0 || n == 0) return cudaSuccess;  // nothing to write
  cudaError_t e = cudaFuncSetAttribute(ki.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, ki.smem_bytes);
  if (e != cudaSuccess) return e;
  if (ki.cfg >= kNumDefaultTiles) {
    // Candidate rows want min_ctas CTAs of up to 227 KiB per SM: ask for the largest
    // shared-memory carveout (the kernel reads global memory only through cp.async.cg and
    // a few __ldg, so the smaller L1 costs little). A hint; failure is not an error.
    if (cudaFuncSetAttribute(ki.fn, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
        cudaSuccess)
      (void)cudaGetLastError();
  }

  KernelArgs args{};
  args.row_ptr = p.a.row_ptr;
  args.col_idx = p.a.col_idx;
  args.a_values = p.a.values;
  args.b = p.b.data;
  args.c = p.c.data;
  args.ldb = p.b.ld;
  args.ldc = p.c.ld;
  args.n = n;
  args.bm = p.a.bm;
  args.bk = p.a.bk;
  args.slices = p.a.bm / ki.tile_m;
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.c_col_major = p.c.layout == Layout::ColMajor;
  args.c_f32 = p.c.dtype == DType::F32;

  const dim3 grid(static_cast<unsigned>(p.a.m / ki.tile_m), static_cast<unsigned>((n + ki.tile_n - 1) / ki.tile_n));
  void* params[] = {&args};
  e = cudaLaunchKernel(ki.fn, grid, dim3(ki.threads), params, static_cast<size_t>(ki.smem_bytes), stream);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace sparsek::detail
