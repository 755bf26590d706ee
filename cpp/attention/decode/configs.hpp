// The split-KV decode attention family's table of variants (kAttentionDecodeFamily,
// family.cu): one row per compiled kernel. The kernel and its design: kernel.cuh. Adding a
// row touches this table and a test case (tests/gpu_attention_decode.rs,
// examples/cpp/attention_decode_check.cpp): the build's units generator compiles every row
// whose features are built, in generated units of SPARSEK_ATTENTION_DECODE_INSTANTIATE lines
// (kernel.cuh).
//
// The family takes decode shapes only: at most kDecodeRows = 16 query rows per (batch, KV
// head), i.e. seq_q * group <= 16 (family.cu's supports); every other problem is left to the
// Hopper family, which Auto tries next.
//
// Columns:
//   name        unique across families; SPARSEK_VARIANT=<name> forces the row.
//   input       Q, K, V and O element type (F16 or BF16).
//   head_dim    64 or 128.
//   warps       warps per CTA; each warp streams its own share of the CTA's key tiles.
//   stages      each warp's ring depth in key tiles of kDecodeKeys keys (stages - 1 tiles of
//               K and V in flight while one is computed).
//   automatic   Auto may pick it; chosen_by: the measurement (or reason) that chose the row.
//
// The rows are exact (a row fits only its dtype and head_dim), one automatic row per (dtype,
// head_dim), so their order does not matter; the f16 rows come first so that row 0 is built
// in every build with the feature `attention` (family.cu asks row 0's kernel whether the
// build has an image for the device).
#pragma once

#include <cuda_runtime_api.h>

#include "attention/problem.hpp"
#include "core/dtype.hpp"
#include "core/features.hpp"

namespace sparsek::detail::attention_decode {

struct AttentionDecodeVariant {
  const char* name;
  DType input;
  int head_dim;
  int warps;
  int stages;
  bool automatic;
  const char* chosen_by;
};

// The query tile: the m16 of mma.sync m16n8k16. A CTA's rows are the seq_q queries of each of
// the group's query heads (row r = g * seq_q + i for query head kv_head * group + g, query i),
// padded with zero rows to 16.
constexpr int kDecodeRows = 16;
// Keys per tile: one warp step (two n8 tiles of S = Q K^T, one k16 step of O += P V).
constexpr int kDecodeKeys = 16;
// Most CTAs one (batch, KV head) is split into (split.hpp).
constexpr int kDecodeMaxSplits = 256;
// The most splits merged inside one thread-block cluster (kernel.cuh's cluster_merge): the
// largest portable cluster size.
constexpr int kMaxClusterSplits = 8;

namespace table {
constexpr DType F16 = DType::F16;
constexpr DType BF16 = DType::BF16;
// Little's law on an H100 (3.35 TB/s, ~1 us under load, 132 SMs) asks ~25 KiB in flight per
// SM. d128: a tile is 8 KiB of K and V, 4 warps x 3 stages = 96 KiB of shared memory (two
// CTAs per SM: 8 warps, 128 KiB in flight); d64: 4 KiB tiles, 4 stages, 64 KiB (three CTAs).
constexpr const char* kDesign =
    "design default, not yet measured: 4 warps, 2-3 key tiles in flight per warp (kernel.cuh, Little's law)";

// clang-format off
inline constexpr AttentionDecodeVariant kAttentionDecodeVariants[] = {
    // name                    input head_dim warps stages automatic chosen_by
    {"attn_decode_f16_d128",   F16,  128,     4,    3,     true,     kDesign},
    {"attn_decode_f16_d64",    F16,   64,     4,    4,     true,     kDesign},
    {"attn_decode_bf16_d128",  BF16, 128,     4,    3,     true,     kDesign},
    {"attn_decode_bf16_d64",   BF16,  64,     4,    4,     true,     kDesign},
};
// clang-format on
}  // namespace table

using table::kAttentionDecodeVariants;

inline constexpr int kAttentionDecodeRows =
    int(sizeof(kAttentionDecodeVariants) / sizeof(kAttentionDecodeVariants[0]));

constexpr bool attention_decode_same(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The build features a row needs (core/features.hpp).
constexpr uint32_t needs(const AttentionDecodeVariant& v) {
  return detail::dtype_needs(v.input) | (v.automatic ? 0u : uint32_t(detail::kFeatureTuning));
}

// The row called `name`, or -1.
constexpr int attention_decode_row(const char* name) {
  for (int i = 0; i < kAttentionDecodeRows; ++i)
    if (attention_decode_same(kAttentionDecodeVariants[i].name, name)) return i;
  return -1;
}

// Shared memory of a row's main kernel: each warp's ring (stages x a tile of K and one of V,
// kDecodeKeys rows of head_dim 16-bit elements each), reused after the loop for the warps'
// partial results (kernel.cuh: warps x 16 rows x (head_dim + 4) floats, then their row
// maxima and sums).
constexpr int decode_ring_bytes(const AttentionDecodeVariant& v) {
  return v.warps * v.stages * 2 * kDecodeKeys * v.head_dim * 2;
}
// The warps' merge buffers (O, max, sum), then a cluster merge's partial O of the CTA.
constexpr int decode_merge_bytes(const AttentionDecodeVariant& v) {
  return v.warps * kDecodeRows * (v.head_dim + 4) * 4 + 2 * v.warps * kDecodeRows * 4 + kDecodeRows * v.head_dim * 4;
}
constexpr int decode_smem_bytes(const AttentionDecodeVariant& v) {
  return decode_ring_bytes(v) > decode_merge_bytes(v) ? decode_ring_bytes(v) : decode_merge_bytes(v);
}

// The launch of row kRow (kernel.cuh), explicitly instantiated in a generated row unit;
// probe_kernel<kRow>: its main kernel, for the family's image check.
template <int kRow>
cudaError_t launch_row(const AttentionProblem& p, cudaStream_t stream);
template <int kRow>
const void* probe_kernel();

namespace table {
// 227 KiB: the largest per-block opt-in shared memory of cc >= 8.0 (sm_90).
constexpr int kLargestOptin = 227 * 1024;
constexpr bool well_formed(const AttentionDecodeVariant& v) {
  // warps <= kMaxClusterSplits: the kernel's merge weights hold the warps' and the splits'.
  return (v.input == F16 || v.input == BF16) && (v.head_dim == 64 || v.head_dim == 128) && v.warps >= 1 &&
         v.warps <= kMaxClusterSplits && v.stages >= 2 && decode_smem_bytes(v) <= kLargestOptin &&
         v.name != nullptr && v.chosen_by != nullptr;
}
constexpr bool table_ok() {
  for (int i = 0; i < kAttentionDecodeRows; ++i) {
    if (!well_formed(kAttentionDecodeVariants[i]) || attention_decode_row(kAttentionDecodeVariants[i].name) != i)
      return false;
    for (int j = 0; j < i; ++j)
      if (kAttentionDecodeVariants[i].input == kAttentionDecodeVariants[j].input &&
          kAttentionDecodeVariants[i].head_dim == kAttentionDecodeVariants[j].head_dim &&
          kAttentionDecodeVariants[i].automatic && kAttentionDecodeVariants[j].automatic)
        return false;
  }
  return kAttentionDecodeVariants[0].input == F16 && kAttentionDecodeVariants[0].automatic;
}
static_assert(table_ok(),
              "kAttentionDecodeVariants: a row is malformed, a name repeats, two automatic rows share (input, "
              "head_dim), or row 0 is not an automatic f16 row");
}  // namespace table

}  // namespace sparsek::detail::attention_decode
