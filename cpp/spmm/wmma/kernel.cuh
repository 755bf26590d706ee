// The WMMA tensor-core kernel: C = act(alpha * A * B + bias + beta * C) with A in BSR form
// (the fused linear-layer epilogue: bias per row of C, optional), and the per-row launch
// that each row's generated unit instantiates (SPARSEK_WMMA_INSTANTIATE below).
//
// One CTA computes a TILE_M x TILE_N tile of C that lies inside one block-row of A (a
// slice of it when bm > TILE_M). It walks only the nonzero blocks of that block-row: for
// every (block j, k-step) pair it copies the TILE_M x K_STEP piece of A's block j and the
// K_STEP x TILE_N piece of B starting at row col_idx[j]*bk (+ k offset) into one slot of
// a multi-stage cp.async ring, then the warps multiply out of shared memory with
// nvcuda::wmma m16n16k16 (fp32 accumulators). The epilogue stages the fp32 tile through
// shared memory so that C is read (only when beta != 0) and written with coalesced 16-byte
// vectors for both row- and column-major C. The bias and the activation are runtime
// arguments (uniform per launch, so their branches do not diverge): they add no kernel
// instantiations.
//
// Every output element is produced by exactly one thread of one CTA, summing over k in a
// fixed order (block order, then k within a block), so results are bitwise reproducible
// and independent of the tile configuration. No atomics, no split-k.
//
// The rows (tile configurations) are in configs.hpp; the family (supports, fits, the
// dispatch over rows) in family.cu, which sees only launch.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>

#include "core/dtype.hpp"
#include <cstring>
#include <type_traits>

#include "core/activation.cuh"
#include "core/vec8.cuh"
#include "spmm/problem.hpp"
#include "spmm/wmma/configs.hpp"
#include "spmm/wmma/cp_async.cuh"
#include "spmm/wmma/launch.hpp"

namespace sparsek::detail {
namespace spmm_wmma {
namespace wmma = nvcuda::wmma;

// Everything derived from a table row, for both the kernel and the host side. The
// shared-memory layout comes from wmma_smem (launch.hpp), which family.cu's fits uses too.
template <int kCfg, int kKStep, bool kBCol>
struct Traits {
  static constexpr WmmaVariant cfg = kWmmaVariants[kCfg];
  static constexpr int kTileM = cfg.tile_m, kTileN = cfg.tile_n;
  static constexpr int kWarpsM = cfg.warps_m, kWarpsN = cfg.warps_n;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kMinCtas = cfg.min_ctas;
  static constexpr bool kUnrollK = cfg.min_ctas == 1;
  static constexpr int kWarpM = kTileM / kWarpsM, kWarpN = kTileN / kWarpsN;
  static constexpr int kFragsM = kWarpM / 16, kFragsN = kWarpN / 16;
  static constexpr int kStages = wmma_stages(cfg, kKStep);
  // The pipelined loop double-buffers fragments across the 16-deep slices of a k-step, so
  // it needs at least two slices per step; K_STEP 16 keeps the classic loop.
  static constexpr bool kPipelined = cfg.pipelined && kKStep >= 32;

  static constexpr WmmaSmem kSmem = wmma_smem(cfg, kKStep, kBCol);
  static constexpr int kLdA = kSmem.lda, kLdB = kSmem.ldb;  // A: [TILE_M][K_STEP]; B: [TILE_N][K] or [K][TILE_N]
  static constexpr int kAStage = kSmem.a_stage, kBStage = kSmem.b_stage;  // elements per stage
  static constexpr int kEpiPasses = kSmem.epi_passes, kEpiRows = kSmem.epi_rows;
  static constexpr int kLdCRow = kSmem.ldc_row, kLdCCol = kSmem.ldc_col;
  static constexpr int kSmemBytes = kSmem.bytes;

  static_assert(kTileM % (16 * kWarpsM) == 0 && kTileN % (16 * kWarpsN) == 0, "warp tile must be whole fragments");
  static_assert(kKStep == 16 || kKStep == 32 || kKStep == 64, "K_STEP is 16, 32 or 64");
  static_assert(kKStep <= cfg.k_max, "K_STEP above the row's k_max");
  static_assert(kStages >= 2, "the ring needs two stages");
  // The 99 KiB rules (wide and narrow rows) are checked over the whole table in launch.hpp.
  static_assert(kSmemBytes <= kLargestOptin, "row exceeds sm_90's shared memory per block");
  static_assert((kEpiRows * kTileN / 8) % kThreads == 0, "epilogue chunks must divide evenly");
  // Column-major C: a chunk's 8 rows start at a multiple of 8 (row0 is a multiple of
  // kEpiRows), so its 8 bias values are one aligned 16-byte load.
  static_assert(kEpiRows % 8 == 0, "epilogue row chunks must start on 8-row boundaries");
};

// Everything the kernel needs, by value (no device-side allocation).
struct KernelArgs {
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const void* a_values;
  const int32_t* block_id;  // op(A) = A^T: block j of the listing is A's block block_id[j]; else null
  const void* b;
  void* c;
  int64_t ldb, ldc;
  int64_t n;
  int32_t bm, bk;
  int32_t slices;  // bm / TILE_M: CTAs along one block-row
  float alpha, beta;
  const void* bias;    // null, or m values of the input type (one per row of C), 16-byte aligned
  int32_t activation;  // an Activation value
  bool c_col_major;
  bool c_f32;  // C is f32 (else the input type)
};

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

// The fused epilogue's version of write_tile (used when there is a bias or an activation):
// C = act(alpha * acc + bias[row] + beta * C), in the CPU reference's order: v = alpha*acc;
// v += bias[row]; v += beta*C (beta != 0 only, else C is not read); v = act(v). Same chunks
// and threads as write_tile, but C's layout and type are runtime branches (uniform per
// launch) rather than template parameters, so a kernel carries one copy of the activation
// code instead of four; the loop is not unrolled for the same reason (the epilogue runs
// once per CTA). T is the input type (the bias's).
template <typename Tr, typename T>
__device__ __forceinline__ void write_tile_epi(const KernelArgs& args, const float* s_c, int64_t row0, int64_t n0) {
  constexpr int kChunks = Tr::kEpiRows * Tr::kTileN / 8;
  // Row-major: chunk = (row, 8 columns); column-major: chunk = (column, 8 rows).
  constexpr int kPerLineCol = Tr::kEpiRows / 8, kPerLineRow = Tr::kTileN / 8;
  const bool c_col = args.c_col_major, c_f32 = args.c_f32;
  const bool read_c = args.beta != 0.0f;
  const T* bias = static_cast<const T*>(args.bias);
  const int32_t act = args.activation;
#pragma unroll 1
  for (int q = threadIdx.x; q < kChunks; q += Tr::kThreads) {
    const int line = c_col ? q / kPerLineCol : q / kPerLineRow;          // tile column or row
    const int off = (c_col ? q % kPerLineCol : q % kPerLineRow) * 8;     // first row or column
    const int col = c_col ? line : off;  // tile column of the chunk's first element
    if (n0 + col >= args.n) continue;    // n % 8 == 0 for row-major C, so chunks are whole
    float v[8];
    const float4* s = reinterpret_cast<const float4*>(s_c + line * (c_col ? Tr::kLdCCol : Tr::kLdCRow) + off);
    const float4 x = s[0], y = s[1];
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    const int64_t at = c_col ? (n0 + line) * args.ldc + row0 + off : (row0 + line) * args.ldc + n0 + off;
    // The chunk's bias: column-major C, 8 rows = one 16-byte load (bias is 16-byte aligned
    // and row0 + off is a multiple of 8, see Traits); row-major C, one row = one value. A
    // null bias adds -0.0f, which leaves every float unchanged (x + -0 == x bitwise, -0 and
    // NaN included; fma(a, b, -0) rounds a*b once): no branch per element.
    float b[8];
    if (bias == nullptr) {
#pragma unroll
      for (int i = 0; i < 8; ++i) b[i] = -0.0f;
    } else if (c_col) {
      load8(bias + row0 + off, b);
    } else {
      const float r = to_float(bias[row0 + line]);
#pragma unroll
      for (int i = 0; i < 8; ++i) b[i] = r;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      v[i] = args.alpha * v[i];
      v[i] += b[i];
    }
    if (read_c) {
      float old[8];
      if (c_f32) load8(static_cast<const float*>(args.c) + at, old);
      else load8(static_cast<const T*>(args.c) + at, old);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] += args.beta * old[i];
    }
    activate8(v, act);
    if (c_f32) store8(static_cast<float*>(args.c) + at, v);
    else store8(static_cast<T*>(args.c) + at, v);
  }
}

// The kernel. Grid: x = block-row * slices + slice (fastest, so CTAs running at the same
// time share one TILE_N-wide slab of B in L2), y = n-tile. CTAs run in block-row order;
// putting long block-rows first would need a device-side sort of row lengths (an extra
// pass and buffer), which this launch-only interface does not do.
//
// kATrans (op(A) = A^T): the problem's A is A^T's view (cpp/spmm/problem.hpp), its block j is A's
// block block_id[j], stored bk x bm row-major. A k-step then copies K_STEP rows of TILE_M
// contiguous elements into a [K_STEP][TILE_M + 8] stage, and the A fragments load it
// column-major: the transpose costs nothing but the block_id lookup.
template <int kCfg, int kKStep, typename T, bool kBCol, bool kATrans>
__global__ void __launch_bounds__(Traits<kCfg, kKStep, kBCol>::kThreads, Traits<kCfg, kKStep, kBCol>::kMinCtas)
    bsr_wmma_kernel(const KernelArgs args) {
  using Tr = Traits<kCfg, kKStep, kBCol>;
  constexpr int kTileM = Tr::kTileM, kTileN = Tr::kTileN, kThreads = Tr::kThreads, kStages = Tr::kStages;
  constexpr int kLdB = Tr::kLdB;
  // The A stage's row stride: [TILE_M][K_STEP + 8], or [K_STEP][TILE_M + 8] transposed.
  constexpr int kLdA = kATrans ? kTileM + 8 : Tr::kLdA;
  static_assert(!kATrans || kKStep * kLdA <= Tr::kAStage, "transposed A stage exceeds the ring's (K_STEP <= TILE_M)");
  using ALayout = std::conditional_t<kATrans, wmma::col_major, wmma::row_major>;
  using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, ALayout>;
  // Element (row, kk) of an A stage.
  auto a_at = [](const T* stage, int row, int kk) { return kATrans ? stage + kk * kLdA + row : stage + row * kLdA + kk; };
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
  // A's rows as stored: TILE_M rows of K_STEP (row stride bk), or transposed K_STEP rows of
  // TILE_M (row stride bm).
  constexpr int kAPerRow = (kATrans ? kTileM : kKStep) / 8;  // chunks per stored A row
  constexpr int kAChunks = kTileM * kKStep / 8;
  constexpr int kARowsPerPass = kThreads / kAPerRow;
  const int a_r = tid / kAPerRow, a_k = (tid % kAPerRow) * 8;
  const int a_ld = kATrans ? args.bm : bk;  // row stride of a stored block (<= 256)
  const T* a_thread = kATrans ? a_vals + static_cast<int64_t>(a_r) * a_ld + slice_row + a_k
                              : a_vals + static_cast<int64_t>(slice_row + a_r) * bk + a_k;
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
    // A: rows slice_row.. of block j (row-major, row stride bk), columns kofs..+K_STEP; or
    // transposed, rows kofs..+K_STEP of the stored block (row stride bm), columns slice_row..
    T* a_dst = s_a + slot * Tr::kAStage + a_dst_off;
#pragma unroll
    for (int i = 0; i < (kAChunks + kThreads - 1) / kThreads; ++i) {
      if (kAChunks % kThreads == 0 || tid + i * kThreads < kAChunks)
        cp_async_16(a_dst + i * kARowsPerPass * kLdA, a_src + i * kARowsPerPass * a_ld, true);
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
  // The stored block of listed block j (A^T: through block_id, fetched a block ahead too).
  auto block_at = [&](int j) -> int64_t {
    if constexpr (kATrans) return j < j_end ? __ldg(args.block_id + j) : 0;
    else return j;
  };
  const T* a_block = a_thread + block_at(j_begin) * block_elems;
  int load_j = j_begin, load_k = 0, loads_left = total_steps, write_slot = 0;
  int col_cur = col_at(j_begin), col_next = col_at(j_begin + 1);
  int64_t block_next = kATrans ? block_at(j_begin + 1) : 0;
  auto issue_next = [&]() {
    if (loads_left > 0) {
      load_step(write_slot, a_block + (kATrans ? load_k * a_ld : load_k), col_cur, load_k);
      load_k += kKStep;
      if (load_k == bk) {
        load_k = 0, ++load_j;
        if constexpr (kATrans) {
          a_block = a_thread + block_next * block_elems;
          block_next = block_at(load_j + 1);
        } else {
          a_block += block_elems;
        }
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

      const T* a_stage = s_a + read_slot * Tr::kAStage;
      const T* b_tile = s_b + read_slot * Tr::kBStage + (kBCol ? warp_n * Tr::kWarpN * kLdB : warp_n * Tr::kWarpN);
      // One 16-deep k slice: hold all fragments of the operand with fewer of them and stream
      // the other one, which keeps the live fragment registers at min(FM, FN) + 1.
      auto k16 = [&](int kk) {
        auto b_ptr = [&](int jn) { return kBCol ? b_tile + jn * 16 * kLdB + kk : b_tile + kk * kLdB + jn * 16; };
        auto a_ptr = [&](int i) { return a_at(a_stage, warp_m * Tr::kWarpM + i * 16, kk); };
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
      const T* a_stage = s_a + slot * Tr::kAStage;
      const T* b_tile = s_b + slot * Tr::kBStage +
                        (kBCol ? warp_n * Tr::kWarpN * kLdB + kk : kk * kLdB + warp_n * Tr::kWarpN);
#pragma unroll
      for (int i = 0; i < Tr::kFragsM; ++i)
        wmma::load_matrix_sync(fa[buf][i], a_at(a_stage, warp_m * Tr::kWarpM + i * 16, kk), kLdA);
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
    if (args.bias != nullptr || args.activation != static_cast<int32_t>(Activation::None)) {
      write_tile_epi<Tr, T>(args, s_c, row0, n0);
    } else if (args.c_f32) {  // no fused epilogue: exactly alpha * acc (+ beta * C), as before it existed
      if (args.c_col_major) write_tile<Tr, float, true>(args, s_c, row0, n0);
      else write_tile<Tr, float, false>(args, s_c, row0, n0);
    } else {
      if (args.c_col_major) write_tile<Tr, T, true>(args, s_c, row0, n0);
      else write_tile<Tr, T, false>(args, s_c, row0, n0);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Host side: one row's launch.

inline KernelArgs make_args(const Problem& p, int tile_m) {
  KernelArgs args{};
  args.row_ptr = p.a.row_ptr;
  args.col_idx = p.a.col_idx;
  args.a_values = p.a.values;
  args.block_id = p.a_block_id;
  args.b = p.b.data;
  args.c = p.c.data;
  args.ldb = p.b.ld;
  args.ldc = p.c.ld;
  args.n = p.n();
  args.bm = p.a.bm;
  args.bk = p.a.bk;
  args.slices = p.a.bm / tile_m;
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.bias = p.bias;
  args.activation = static_cast<int32_t>(p.activation);
  args.c_col_major = p.c.layout == Layout::ColMajor;
  args.c_f32 = p.c.dtype == DType::F32;
  return args;
}

// Launches one kernel of row kRow. fits() (family.cu) has checked the grid limits and the
// shared memory against the device.
template <int kRow, int kKStep, typename T, bool kBCol, bool kATrans>
cudaError_t launch_kernel(const Problem& p, cudaStream_t stream) {
  using Tr = Traits<kRow, kKStep, kBCol>;
  const void* fn = reinterpret_cast<const void*>(&bsr_wmma_kernel<kRow, kKStep, T, kBCol, kATrans>);
  cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return e;
  if constexpr (Tr::cfg.pipelined) {
    // The pipelined rows are the ones tuned on sm_90 with this hint (the classic rows never
    // had it), and the large-shared-memory ones among them want min_ctas CTAs of up to
    // 227 KiB per SM: ask for the largest shared-memory carveout (the kernel reads global
    // memory only through cp.async.cg and a few __ldg, so the smaller L1 costs little). A
    // hint; failure is not an error.
    if (cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
        cudaSuccess)
      (void)cudaGetLastError();
  }
  KernelArgs args = make_args(p, Tr::kTileM);
  const dim3 grid(static_cast<unsigned>(p.m() / Tr::kTileM),
                  static_cast<unsigned>((p.n() + Tr::kTileN - 1) / Tr::kTileN));
  void* params[] = {&args};
  e = cudaLaunchKernel(fn, grid, dim3(Tr::kThreads), params, static_cast<size_t>(Tr::kSmemBytes), stream);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

// The kernel of the problem's input type (one of WmmaDTypes; supports() refused the rest).
template <int kRow, int kKStep, bool kATrans = false>
cudaError_t launch_typed(const Problem& p, bool b_col, cudaStream_t stream) {
  return dispatch<WmmaDTypes>(
      p.input(),
      [&](auto tr) {
        using T = DeviceType<decltype(tr)::kDType>;
        return b_col ? launch_kernel<kRow, kKStep, T, true, kATrans>(p, stream)
                     : launch_kernel<kRow, kKStep, T, false, kATrans>(p, stream);
      },
      [] { return cudaErrorNotSupported; });
}

template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream) {
  constexpr WmmaVariant v = kWmmaVariants[kRow];
  const bool b_col = p.b.layout == Layout::ColMajor;
  const int k_step = wmma_k_step(v, p.a.bk, p.input(), p.a_transposed);
  // op(A) = A^T: compiled into the automatic rows only (family.cu's fits refuses the rest),
  // with K_STEP 16 or 32 (their k_max is 32; K_STEP <= TILE_M, wmma_k_step).
  if constexpr (v.automatic && v.k_max <= 32) {
    if (p.a_transposed) {
      if constexpr (v.tile_m >= 32) {
        if (k_step == 32) return launch_typed<kRow, 32, true>(p, b_col, stream);
      }
      return launch_typed<kRow, 16, true>(p, b_col, stream);
    }
  } else if (p.a_transposed) {
    return cudaErrorInvalidValue;  // fits() refuses it
  }
  if constexpr (v.k_max >= 64) {
    if (k_step == 64)  // f16 only (wmma_k64_type)
      return b_col ? launch_kernel<kRow, 64, DeviceType<DType::F16>, true, false>(p, stream)
                   : launch_kernel<kRow, 64, DeviceType<DType::F16>, false, false>(p, stream);
  }
  if (k_step == 32) return launch_typed<kRow, 32>(p, b_col, stream);
  return launch_typed<kRow, 16>(p, b_col, stream);
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&bsr_wmma_kernel<kRow, 16, __half, false, false>);
}

}  // namespace spmm_wmma
}  // namespace sparsek::detail

// A generated row unit's line: compiles every kernel of the row NAME (each K_STEP it can
// use, both input types, both B layouts) and its entry points.
#define SPARSEK_WMMA_INSTANTIATE(NAME)                                                                   \
  namespace sparsek::detail::spmm_wmma {                                                                 \
  static_assert(wmma_row(NAME) >= 0, "no row named " NAME " in kWmmaVariants (cpp/spmm/wmma/configs.hpp)"); \
  template cudaError_t launch_row<wmma_row(NAME)>(const Problem&, cudaStream_t);                        \
  template const void* probe_kernel<wmma_row(NAME)>();                                                  \
  }
