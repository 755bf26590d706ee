// The Hopper SDDMM family's table of variants (kSddmmSm90Family, family.cu): one row per
// compiled kernel. Adding a row touches this table and a test case: the build's units
// generator compiles every row whose features are built, in generated units of
// SPARSEK_SDDMM_SM90_INSTANTIATE lines (kernel.hpp).
//
// A row runs every stored block of S as one tile of a GEMM whose tile is the block: a CTA
// computes S_j = alpha * A[r*bm.., :] * B[:, c*bn..] + beta * S_j over the whole k for one
// stored block j (block-row r, block-column c = col_idx[j]), so each element of S is
// written by one CTA summing k in a fixed order (no split-k: deterministic). See kernel.hpp.
//
// Columns:
//   name        unique across families; SPARSEK_VARIANT=<name> forces the row
//               (cpp/core/registry.hpp). sddmm_sm90_<input>_b<block>_a<row|col>_b<row|col>,
//               _sf32 when S is f32.
//   input       A and B element type (F16 or BF16).
//   s_f32       S is f32 (else the input type).
//   block       bm = bn = the GEMM tile's M and N (tile K is 64).
//   a_layout, b_layout   the layouts of A (m x k) and B (k x n) the row is compiled for:
//               (RowMajor, ColMajor) = both K-major, attention scores Q * K^T;
//               (ColMajor, RowMajor) = both MN-major, a linear layer's dW = dY^T * X.
//   schedule    Cooperative (CUTLASS's cooperative kernel: two consumer warpgroups split
//               each 128-high tile) or PingPong (CUTLASS's ping-pong kernel: each consumer
//               warpgroup owns a 64-high tile, one's epilogue under the other's MMAs). The
//               cooperative kernel needs a tile at least 128 high, so 64 x 64 blocks run
//               ping-pong.
//   automatic   Auto / Backend::Hopper may pick it (the first automatic row that fits wins).
//   chosen_by   the measurement that chose the row.
//
// The rows are exact: a row fits only its block, dtypes and layouts (family.cu), so their
// order does not matter to selection. Design, not measured: no H100 run has timed them yet.
#pragma once

#include <cuda_runtime_api.h>

#include "sddmm/problem.hpp"
#include "core/dtype.hpp"
#include "core/features.hpp"

namespace sparsek::detail::sddmm_sm90 {

enum class SddmmSchedule { Cooperative, PingPong };

struct SddmmSm90Variant {
  const char* name;
  DType input;
  bool s_f32;
  int block;
  Layout a_layout, b_layout;
  SddmmSchedule schedule;
  bool automatic;
  const char* chosen_by;
};

namespace table {
constexpr DType F16 = DType::F16;
constexpr DType BF16 = DType::BF16;
constexpr Layout Row = Layout::RowMajor;
constexpr Layout Col = Layout::ColMajor;
constexpr bool SIn = false, SF32 = true;
constexpr SddmmSchedule Coop = SddmmSchedule::Cooperative;
constexpr SddmmSchedule PP = SddmmSchedule::PingPong;
constexpr const char* k128 =
    "design, not measured: one 128x128x64 cooperative tile per 128x128 block (CUTLASS's defaults for the shape)";
constexpr const char* k64 =
    "design, not measured: one 64x64x64 ping-pong tile per 64x64 block (the cooperative kernel needs 128-high tiles)";

// clang-format off
inline constexpr SddmmSm90Variant kSddmmSm90Variants[] = {
    // name                                    in    S     block A    B    schedule automatic chosen_by
    // ---- attention scores, Q * K^T: A row-major, B column-major (both K-major) ----
    {"sddmm_sm90_f16_b128_arow_bcol",          F16,  SIn,  128,  Row, Col, Coop,    true,     k128},
    {"sddmm_sm90_f16_b64_arow_bcol",           F16,  SIn,   64,  Row, Col, PP,      true,     k64},
    {"sddmm_sm90_bf16_b128_arow_bcol",         BF16, SIn,  128,  Row, Col, Coop,    true,     k128},
    {"sddmm_sm90_bf16_b64_arow_bcol",          BF16, SIn,   64,  Row, Col, PP,      true,     k64},
    // ---- the linear layer's dW = dY^T * X: A column-major, B row-major (both MN-major) ----
    {"sddmm_sm90_f16_b128_acol_brow",          F16,  SIn,  128,  Col, Row, Coop,    true,     k128},
    {"sddmm_sm90_f16_b64_acol_brow",           F16,  SIn,   64,  Col, Row, PP,      true,     k64},
    {"sddmm_sm90_bf16_b128_acol_brow",         BF16, SIn,  128,  Col, Row, Coop,    true,     k128},
    {"sddmm_sm90_bf16_b64_acol_brow",          BF16, SIn,   64,  Col, Row, PP,      true,     k64},
    // ---- the same with an f32 S (an fp32 gradient) ----
    {"sddmm_sm90_f16_b128_acol_brow_sf32",     F16,  SF32, 128,  Col, Row, Coop,    true,     k128},
    {"sddmm_sm90_f16_b64_acol_brow_sf32",      F16,  SF32,  64,  Col, Row, PP,      true,     k64},
    {"sddmm_sm90_bf16_b128_acol_brow_sf32",    BF16, SF32, 128,  Col, Row, Coop,    true,     k128},
    {"sddmm_sm90_bf16_b64_acol_brow_sf32",     BF16, SF32,  64,  Col, Row, PP,      true,     k64},
};
// clang-format on
}  // namespace table

using table::kSddmmSm90Variants;

inline constexpr int kSddmmSm90Rows = int(sizeof(kSddmmSm90Variants) / sizeof(kSddmmSm90Variants[0]));

constexpr bool sddmm_sm90_same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The build features a row needs (core/features.hpp).
constexpr uint32_t needs(const SddmmSm90Variant& v) {
  return detail::dtype_needs(v.input) |
         (v.automatic ? 0u : uint32_t(detail::kFeatureTuning));
}

// The row called `name`, or -1.
constexpr int sddmm_sm90_row(const char* name) {
  for (int i = 0; i < kSddmmSm90Rows; ++i)
    if (sddmm_sm90_same(kSddmmSm90Variants[i].name, name)) return i;
  return -1;
}

// The launch of row kRow (kernel.hpp), explicitly instantiated in a generated row unit (a
// row not instantiated is an undefined symbol at link time); probe_kernel<kRow>: its GEMM
// kernel, for the family's image check.
template <int kRow>
cudaError_t launch_row(const SddmmProblem& p, cudaStream_t stream);
template <int kRow>
const void* probe_kernel();

// ---- what the table promises (checked at compile time) ----
namespace table {
constexpr bool names_unique() {
  for (int i = 0; i < kSddmmSm90Rows; ++i)
    if (sddmm_sm90_row(kSddmmSm90Variants[i].name) != i) return false;
  return true;
}
constexpr bool well_formed(const SddmmSm90Variant& v) {
  const bool dtype = v.input == F16 || v.input == BF16;
  // Cooperative: two warpgroups of 64 rows; ping-pong: one warpgroup's 64 x block tile.
  const bool tile = (v.block == 128 && v.schedule == Coop) || (v.block == 64 && v.schedule == PP);
  return dtype && tile && v.name != nullptr && v.chosen_by != nullptr;
}
constexpr bool all_well_formed() {
  for (const SddmmSm90Variant& v : kSddmmSm90Variants)
    if (!well_formed(v)) return false;
  return true;
}
// At most one row per key (the rows are exact, so a second would never be picked).
constexpr bool keys_unique() {
  for (int i = 0; i < kSddmmSm90Rows; ++i)
    for (int j = i + 1; j < kSddmmSm90Rows; ++j) {
      const SddmmSm90Variant &a = kSddmmSm90Variants[i], &b = kSddmmSm90Variants[j];
      if (a.input == b.input && a.s_f32 == b.s_f32 && a.block == b.block && a.a_layout == b.a_layout &&
          a.b_layout == b.b_layout)
        return false;
    }
  return true;
}
static_assert(names_unique(), "kSddmmSm90Variants: names must be unique");
static_assert(all_well_formed(), "kSddmmSm90Variants: a row has an unsupported dtype, block or schedule");
static_assert(keys_unique(), "kSddmmSm90Variants: two rows for one (dtype, S dtype, block, layouts) key");
}  // namespace table

}  // namespace sparsek::detail::sddmm_sm90
