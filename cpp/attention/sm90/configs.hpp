// The Hopper attention family's table of variants (kAttentionSm90Family, family.cu): one
// row per compiled kernel. Adding a row touches this table and a test case: the build's
// units generator compiles every row whose features are built, in generated units of
// SPARSEK_ATTENTION_SM90_INSTANTIATE lines (kernel.hpp).
//
// Columns:
//   name        unique across families; SPARSEK_VARIANT=<name> forces the row.
//   input       Q, K, V and O element type (F16 or BF16).
//   head_dim    64 or 128.
//   stages      K and V pipeline stages (each stage one 128-key block of K and of V).
//   turns       the consumer warpgroups take turns issuing WGMMAs (mainloop.hpp, the _turns
//               rows: tuning candidates); the automatic rows issue as soon as their data is
//               ready.
//   automatic   Auto may pick it; chosen_by: the measurement that chose the row.
//
// Every row: a CTA owns one 128-row query block of one (batch, head); a producer warp loads Q
// once and then K and V of each kept 128-key block (TMA), two consumer warpgroups each own
// 64 query rows (S = Q K^T and O += P V on WGMMA, online softmax in registers). The rows
// are exact (a row fits only its dtype and head_dim), one automatic row per (dtype, head_dim),
// so their order does not matter.
#pragma once

#include <cuda_runtime_api.h>

#include "attention/problem.hpp"
#include "core/dtype.hpp"
#include "core/features.hpp"

namespace sparsek::detail::attention_sm90 {

struct AttentionSm90Variant {
  const char* name;
  DType input;
  int head_dim;
  int stages;
  bool turns;
  bool automatic;
  const char* chosen_by;
};

// The tile: 128 query rows x 128 keys, the only block shape of the rows' masks.
constexpr int kBlockM = 128;
constexpr int kBlockN = 128;

// The grid (kernel.hpp): one CTA per (query block, head, sequence). The sequences are the
// layout's batch with packed queries (cu_seqlens_q; Q's batch is 1), else Q's batch; the
// query blocks are the longest sequence's (max_seqlen_q when packed, else seq_q).
inline int64_t grid_sequences(const AttentionProblem& p) { return p.varlen_q() ? p.layout.batch : p.batch(); }
inline int64_t grid_q_blocks(const AttentionProblem& p) {
  return ((p.varlen_q() ? p.layout.max_seqlen_q : p.seq_q()) + kBlockM - 1) / kBlockM;
}

namespace table {
constexpr DType F16 = DType::F16;
constexpr DType BF16 = DType::BF16;
constexpr const char* kTurnsMeasured =
    "session 15 run 2 (report/NOTES.md), bf16 d128 at seq 8192: without turns causal 619 TFLOPS vs 586 with, "
    "top-k 596 vs 598, dense 605 vs 607; d64 causal 411 vs 410";
constexpr const char* kLikeBf16 = "as its bf16 row (session 15 run 2; f16 d128 causal 551 TFLOPS with turns)";

// clang-format off
inline constexpr AttentionSm90Variant kAttentionSm90Variants[] = {
    // name                       input head_dim stages turns  automatic chosen_by
    {"attn_sm90_bf16_d128",       BF16, 128,     2,     false, true,     kTurnsMeasured},
    {"attn_sm90_f16_d128",        F16,  128,     2,     false, true,     kLikeBf16},
    {"attn_sm90_bf16_d64",        BF16,  64,     3,     false, true,     kTurnsMeasured},
    {"attn_sm90_f16_d64",         F16,   64,     3,     false, true,     kLikeBf16},
    {"attn_sm90_bf16_d128_turns", BF16, 128,     2,     true,  false,    kTurnsMeasured},
    {"attn_sm90_bf16_d64_turns",  BF16,  64,     3,     true,  false,    kTurnsMeasured},
};
// clang-format on
}  // namespace table

using table::kAttentionSm90Variants;

inline constexpr int kAttentionSm90Rows = int(sizeof(kAttentionSm90Variants) / sizeof(kAttentionSm90Variants[0]));

constexpr bool attention_sm90_same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The build features a row needs (core/features.hpp).
constexpr uint32_t needs(const AttentionSm90Variant& v) {
  return detail::dtype_needs(v.input) |
         (v.automatic ? 0u : uint32_t(detail::kFeatureTuning));
}

// The row called `name`, or -1.
constexpr int attention_sm90_row(const char* name) {
  for (int i = 0; i < kAttentionSm90Rows; ++i)
    if (attention_sm90_same(kAttentionSm90Variants[i].name, name)) return i;
  return -1;
}

// The launch of row kRow (kernel.hpp), explicitly instantiated in a generated row unit;
// probe_kernel<kRow>: its kernel, for the family's image check.
template <int kRow>
cudaError_t launch_row(const AttentionProblem& p, cudaStream_t stream);
template <int kRow>
const void* probe_kernel();

namespace table {
constexpr bool well_formed(const AttentionSm90Variant& v) {
  return (v.input == F16 || v.input == BF16) && (v.head_dim == 64 || v.head_dim == 128) && v.stages >= 2 &&
         v.name != nullptr && v.chosen_by != nullptr;
}
constexpr bool table_ok() {
  for (int i = 0; i < kAttentionSm90Rows; ++i) {
    if (!well_formed(kAttentionSm90Variants[i]) || attention_sm90_row(kAttentionSm90Variants[i].name) != i)
      return false;
    for (int j = 0; j < i; ++j)
      if (kAttentionSm90Variants[i].input == kAttentionSm90Variants[j].input &&
          kAttentionSm90Variants[i].head_dim == kAttentionSm90Variants[j].head_dim &&
          kAttentionSm90Variants[i].automatic && kAttentionSm90Variants[j].automatic)
        return false;
  }
  return true;
}
static_assert(table_ok(),
              "kAttentionSm90Variants: a row is malformed, a name repeats, or two automatic rows share (input, head_dim)");
}  // namespace table

}  // namespace sparsek::detail::attention_sm90
