// What the host side (family.cu) sees of the WMMA kernel without compiling it: the K_STEP
// rule, the shared-memory layout of a row as constexpr functions of its table numbers
// (the kernel's Traits use the same functions, so the two cannot disagree), and the
// declarations of the per-row entry points that each row's generated unit instantiates
// (kernel.cuh defines them).
#pragma once

#include <cuda_runtime_api.h>

#include "spmm/problem.hpp"
#include "spmm/wmma/configs.hpp"

namespace sparsek::detail::spmm_wmma {

// K_STEP for a row: the largest of {64 (if the row allows it), 32, 16} dividing bk, so a
// k-step never straddles two blocks (the next block's B rows are elsewhere). K_STEP 64 is
// f16 only: nvcc lowers the bf16 wmma fragment loads to generic 32-bit loads + MOVM (not
// ldmatrix, unlike f16), which costs enough registers to spill the 64x64 warp tiles.
// a_trans (op(A) = A^T): the A stage holds K_STEP rows of TILE_M (+ padding) instead of
// TILE_M rows of K_STEP, which fits in the same stage size when K_STEP <= TILE_M.
// K_STEP 64 exists for f16 only (the k64 kernels' fragments): named, so no other type takes it.
constexpr bool wmma_k64_type(DType t) { return t == DType::F16; }

constexpr int wmma_k_step(const WmmaVariant& v, int bk, DType input, bool a_trans = false) {
  if (v.k_max >= 64 && wmma_k64_type(input) && bk % 64 == 0 && (!a_trans || v.tile_m >= 64)) return 64;
  return bk % 32 == 0 && (!a_trans || v.tile_m >= 32) ? 32 : 16;
}

constexpr int wmma_stages(const WmmaVariant& v, int k_step) {
  return k_step == 64 ? v.stages_k64 : k_step == 32 ? v.stages_k32 : v.stages_k16;
}

constexpr int wmma_cmax(int a, int b) { return a > b ? a : b; }

// A row's shared-memory layout for one K_STEP and B layout (elements are 2 bytes).
struct WmmaSmem {
  int lda, ldb;            // padded row strides of the A and B stages
  int a_stage, b_stage;    // elements per ring stage
  int pipe_bytes;          // the cp.async ring
  int epi_passes;          // epilogue passes (1, or warps_m when the fp32 tile does not fit the ring)
  int epi_rows;            // rows of C per epilogue pass
  int ldc_row, ldc_col;    // fp32 staging strides for row- and column-major C
  int bytes;               // dynamic shared memory per CTA: max(ring, epilogue)
};

constexpr WmmaSmem wmma_smem(const WmmaVariant& v, int k_step, bool b_col) {
  WmmaSmem s{};
  // Shared-memory rows are padded by 16 bytes. With a row stride of 16 (mod 128) bytes the
  // eight 16-byte row segments one ldmatrix phase reads land in distinct banks, and every
  // 16-row fragment still starts 32-byte aligned as wmma requires.
  constexpr int kPad = 8;
  s.lda = k_step + kPad;                          // A: [TILE_M][K_STEP]
  s.ldb = b_col ? k_step + kPad : v.tile_n + kPad;  // B: [TILE_N][K] or [K][TILE_N]
  s.a_stage = v.tile_m * s.lda;
  s.b_stage = b_col ? v.tile_n * s.ldb : k_step * s.ldb;
  s.pipe_bytes = wmma_stages(v, k_step) * (s.a_stage + s.b_stage) * 2;
  // Epilogue: the fp32 tile is staged row-major [rows][TILE_N+4] or column-major
  // [TILE_N][rows+4] (4 floats of padding keep rows 16-byte aligned and shift banks). When
  // the whole tile does not fit in the ring's memory it goes in warps_m passes, one warp
  // row (epi_rows rows of C) at a time.
  const int whole_epi = wmma_cmax(v.tile_m * (v.tile_n + 4), v.tile_n * (v.tile_m + 4)) * 4;
  s.epi_passes = whole_epi <= s.pipe_bytes ? 1 : v.warps_m;
  s.epi_rows = v.tile_m / s.epi_passes;
  s.ldc_row = v.tile_n + 4;
  s.ldc_col = s.epi_rows + 4;
  const int epi_bytes = wmma_cmax(s.epi_rows * s.ldc_row, v.tile_n * s.ldc_col) * 4;
  s.bytes = wmma_cmax(s.pipe_bytes, epi_bytes);
  return s;
}

// The shared memory row `v` takes for a problem with this bk, dtype, B layout and op(A).
constexpr int wmma_smem_bytes(const WmmaVariant& v, int bk, DType input, bool b_col, bool a_trans) {
  return wmma_smem(v, wmma_k_step(v, bk, input, a_trans), b_col).bytes;
}

// ---- Compile-time rules on the table's shared memory ----
// 99 KiB: the per-block opt-in limit of sm_86/sm_89 (which run the sm_80 image), the
// smallest of cc >= 8.0. 227 KiB: sm_90's, the largest.
inline constexpr int kSmallestOptin = 99 * 1024, kLargestOptin = 227 * 1024;

// The most shared memory row `v` takes over every K_STEP it can run and both B layouts.
constexpr int wmma_max_smem(const WmmaVariant& v) {
  int most = 0;
  for (int k_step = 16; k_step <= v.k_max; k_step *= 2)
    for (int b_col = 0; b_col < 2; ++b_col) most = wmma_cmax(most, wmma_smem(v, k_step, b_col != 0).bytes);
  return most;
}

// Automatic rows go from the largest TILE_M down, so a problem gets bm's largest TILE_M
// divisor that has a fitting row.
constexpr bool wmma_classes_descend() {
  int last = 1 << 30;
  for (int i = 0; i < kWmmaRows; ++i) {
    if (!kWmmaVariants[i].automatic) continue;
    if (kWmmaVariants[i].tile_m > last) return false;
    last = kWmmaVariants[i].tile_m;
  }
  return true;
}

// Every automatic row above 99 KiB is an upgrade: the next automatic row that could run
// wherever it could (TILE_M dividing its TILE_M) has the same tile and grid condition and
// stays within 99 KiB, so where the upgrade does not fit the device, the problem runs
// exactly as it would without the upgrade.
constexpr bool wmma_upgrades_fall_back() {
  for (int i = 0; i < kWmmaRows; ++i) {
    const WmmaVariant& v = kWmmaVariants[i];
    if (!v.automatic || wmma_max_smem(v) <= kSmallestOptin) continue;
    int next = i + 1;
    while (next < kWmmaRows && !(kWmmaVariants[next].automatic && v.tile_m % kWmmaVariants[next].tile_m == 0)) ++next;
    if (next == kWmmaRows) return false;
    const WmmaVariant& w = kWmmaVariants[next];
    if (w.tile_m != v.tile_m || w.tile_n != v.tile_n || w.min_grid_ctas != v.min_grid_ctas ||
        wmma_max_smem(w) > kSmallestOptin)
      return false;
  }
  return true;
}

// Every automatic TILE_M has a row that always fits (no grid condition, within 99 KiB),
// and TILE_M 16 is among them: every bm % 16 == 0 has a row on every cc >= 8.0 device
// (grid limits aside).
constexpr bool wmma_classes_end_in_fallback() {
  bool has16 = false;
  for (int i = 0; i < kWmmaRows; ++i) {
    const WmmaVariant& v = kWmmaVariants[i];
    if (!v.automatic) continue;
    has16 = has16 || v.tile_m == 16;
    bool covered = false;
    for (int j = i; j < kWmmaRows; ++j) {
      const WmmaVariant& w = kWmmaVariants[j];
      covered = covered || (w.automatic && w.tile_m == v.tile_m && w.min_grid_ctas == 0 &&
                            wmma_max_smem(w) <= kSmallestOptin);
    }
    if (!covered) return false;
  }
  return has16;
}

constexpr bool wmma_rows_within_sm90() {
  for (int i = 0; i < kWmmaRows; ++i)
    if (wmma_max_smem(kWmmaVariants[i]) > kLargestOptin) return false;
  return true;
}

static_assert(wmma_classes_descend(), "automatic rows must go from the largest TILE_M down");
static_assert(wmma_upgrades_fall_back(), "an automatic row above 99 KiB must be followed by a wide row of its tile");
static_assert(wmma_classes_end_in_fallback(), "every automatic TILE_M (and 16) needs a row that always fits");
static_assert(wmma_rows_within_sm90(), "a row exceeds sm_90's 227 KiB of shared memory per block");

// ---- Per-row entry points (kernel.cuh; instantiated by each row's generated unit) ----

// Enqueues row kRow for p: picks K_STEP, dtype and B layout, sets the shared-memory
// attributes, launches, and returns the first CUDA error (launch errors included).
template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream);

// One kernel of row kRow (K_STEP 16, f16, row-major B: every row has it), for asking the
// runtime whether this build carries an image for the current device.
template <int kRow>
const void* probe_kernel();

}  // namespace sparsek::detail::spmm_wmma
