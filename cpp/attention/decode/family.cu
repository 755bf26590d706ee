// The split-KV decode attention family (kAttentionDecodeFamily, attention/operation.hpp; the
// registry: core/registry.hpp), sm_80+: what it supports, when a row of its table
// (configs.hpp) fits, and the dispatch to the row's launch (the row units, generated from the
// table by the units generator; the kernel is kernel.cuh). It checks what the kernels need
// beyond the AttentionProblem's invariants (cpp/attention/problem.hpp).
//
// It takes decode shapes only (at most 16 query rows per (batch, KV head): seq_q * group
// <= 16) and refuses every other problem, so Auto, which tries it first, leaves those to the
// Hopper family. This file compiles no kernel.
#include <climits>
#include <cstdint>

#include "attention/decode/configs.hpp"
#include "attention/decode/split.hpp"
#include "attention/operation.hpp"
#include "core/family_util.hpp"
#include "core/launch_table.hpp"

namespace sparsek::detail {
namespace attention_decode {
namespace {

VariantInfo info(int row) {
  const AttentionDecodeVariant& v = kAttentionDecodeVariants[row];
  VariantInfo i{v.name, v.automatic, v.chosen_by};
  i.needs = needs(v);
  return i;
}

// The kernel's static shared memory beside the row's dynamic ring (kernel.cuh: the merge's
// weights and sums), with room to spare.
constexpr int kStaticSmemBytes = 1024;

const char* fits(const AttentionProblem& p, int row) {
  const AttentionDecodeVariant& v = kAttentionDecodeVariants[row];
  if (p.input() != v.input) return detail::row_takes(v.input);
  if (p.head_dim() != v.head_dim) return v.head_dim == 64 ? "the row is for head_dim 64" : "the row is for head_dim 128";
  if (decode_smem_bytes(v) + kStaticSmemBytes > p.device.smem_optin)
    return "its shared memory exceeds the device's per-block opt-in limit";
  return nullptr;
}

const char* missing_image(const AttentionProblem& p) {
  static ImageCache cache;
  return detail::missing_image(p.device.id, probe_kernel<0>(), cache);
}

// K and V are copied in 16-byte pieces: 16-byte aligned data, strides multiples of 8
// elements (a dimension of extent 1 is never stepped).
bool rows_aligned16(const HeadsView& t) {
  const auto stride_ok = [](int64_t s, int64_t extent) { return extent == 1 || s % 8 == 0; };
  return aligned16(t.data) && stride_ok(t.stride_s, t.seq) && stride_ok(t.stride_h, t.heads) &&
         stride_ok(t.stride_b, t.batch);
}

const char* supports(const AttentionProblem& p) {
  if (p.device.cc_major < 8) return "needs compute capability >= 8.0 (mma.sync, ldmatrix, cp.async)";
  if (const char* why = missing_image(p)) return why;
  if (p.empty_output()) return nullptr;  // nothing is launched (core/select.hpp)
  // Decode shapes only: the group's query rows fill one m16 tile (packed queries: those of the
  // longest sequence, max_seqlen_q).
  const int64_t rows = decode_rows_per_head(p);
  if (rows > kDecodeRows || (rows > 0 && p.group() > kDecodeRows / rows))
    return "not a decode shape: seq_q (max_seqlen_q when packed) * (heads / heads_kv) must be at most 16 query rows "
           "per KV head";
  if (p.head_dim() != 64 && p.head_dim() != 128) return "head_dim must be 64 or 128";
  if (p.has_mask) {
    // One query block: every row of a CTA reads one pattern row.
    if (p.mask.q_blocks != 1) return "a mask of several query blocks (seq_q > block_q) is not a decode mask";
    // A CTA serves a whole group: its heads must keep the same key blocks.
    if (p.mask.patterns > 1 && p.group() > 1 && p.mask.heads != p.heads_kv())
      return "per-query-head patterns under grouped-query heads: the group's heads would keep different key "
             "blocks (give one pattern per KV head, or one for all)";
  }
  // Key and tile indices are int32 (a tile's key0 + 16 and key_end + 15 included).
  if (p.seq_k() > INT32_MAX - 256 || p.max_seqlen_k() > INT32_MAX - 256)
    return "seq_k (max_seqlen_k with keys per sequence) must be below 2^31 - 256";
  if (p.seq_q() > INT32_MAX) return "seq_q must fit int32";
  if (p.heads() > INT32_MAX || p.batch() > INT32_MAX || decode_sequences(p) > INT32_MAX - 1)
    return "batch and heads must fit int32";
  // One CTA per (batch, KV head, split): at most kDecodeMaxSplits splits.
  if (decode_sequences(p) * p.heads_kv() > INT32_MAX / kDecodeMaxSplits)
    return "batch * heads_kv must be below 2^23 (one CTA per (batch, KV head, split))";
  if (p.has_mask && p.mask.k_blocks * decode_tiles_per_block(p) > INT32_MAX)
    return "the mask's key blocks, in tiles of 16 keys, must fit int32";
  if (p.seq_k() > 0 && (!rows_aligned16(p.k) || !rows_aligned16(p.v)))
    return "K and V must be 16-byte aligned with strides that are multiples of 8 elements";
  return nullptr;
}

using LaunchFn = cudaError_t (*)(const AttentionProblem&, cudaStream_t);
// The rows for the launch table (core/launch_table.hpp): each built row's launch_row.
struct Rows {
  template <int kRow>
  static constexpr LaunchFn launch() {
    return &launch_row<kRow>;
  }
  template <int kRow>
  static constexpr uint32_t row_needs() {
    return needs(kAttentionDecodeVariants[kRow]);
  }
};
constexpr auto kLaunch = detail::launch_table<LaunchFn, Rows, kAttentionDecodeRows>();

cudaError_t launch(const AttentionProblem& p, int row, cudaStream_t stream) { return kLaunch[row](p, stream); }

}  // namespace
}  // namespace attention_decode

extern const AttentionFamily kAttentionDecodeFamily = {
    Backend::Decode,
    "decode",
    attention_decode::kAttentionDecodeRows,
    /*epilogue=*/false,
    &attention_decode::info,
    &attention_decode::supports,
    &attention_decode::fits,
    &attention_decode::launch,
};

}  // namespace sparsek::detail
