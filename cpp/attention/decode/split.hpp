// The split-KV decode attention family: how many CTAs share one (batch, KV head)'s keys, as a
// rule of the problem's shape and the device (no host plan per call: the rule reads only
// host-side dims, so a launch is capturable in a CUDA graph). Host only; the launch
// (kernel.cuh) uses it.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "attention/decode/configs.hpp"
#include "attention/problem.hpp"

namespace sparsek::detail::attention_decode {

// The sequences: the layout's batch with packed queries (cu_seqlens_q; Q's batch is 1), else
// Q's batch.
inline int64_t decode_sequences(const AttentionProblem& p) { return p.varlen_q() ? p.layout.batch : p.batch(); }

// A CTA's query rows per query head: the longest sequence's queries (max_seqlen_q with packed
// queries, else seq_q).
inline int64_t decode_rows_per_head(const AttentionProblem& p) {
  return p.varlen_q() ? p.layout.max_seqlen_q : p.seq_q();
}

// The keys some query of the longest sequence may keep: [0, key_end). All of them, or with
// causal masking those up to the last query's diagonal: min(seq_k, seq_q - 1 + offset + 1)
// (top-left: min(seq_q, seq_k); bottom-right, offset seq_k - seq_q: seq_k). The kernel
// computes each sequence's own (kernel.cuh's decode_sequence); this one sizes the splits.
inline int64_t decode_key_end(const AttentionProblem& p) {
  const int64_t seq_k = p.max_seqlen_k();  // per-sequence keys (packed, counted or paged): the longest
  if (!p.causal || p.causal_alignment == CausalAlignment::BottomRight) return seq_k;
  const int64_t seq_q = decode_rows_per_head(p);
  return seq_q < seq_k ? seq_q : seq_k;
}

// Key tiles per block of the mask: a mask block of block_k keys is ceil(block_k / 16) tiles,
// the last one cut at the block's end.
inline int64_t decode_tiles_per_block(const AttentionProblem& p) {
  return p.has_mask ? (int64_t(p.mask.block_k) + kDecodeKeys - 1) / kDecodeKeys : 1;
}

// The key tiles of one (batch, KV head) as the host sees them: every tile below key_end, or
// with a mask the mean kept blocks of a pattern (nnzb / patterns; the counts themselves are
// device data) times tiles_per_block, at most the tiles of the blocks below key_end.
inline int64_t decode_tiles_estimate(const AttentionProblem& p) {
  const int64_t key_end = decode_key_end(p);
  if (!p.has_mask) return (key_end + kDecodeKeys - 1) / kDecodeKeys;
  const int64_t patterns = p.mask.patterns > 0 ? p.mask.patterns : 1;
  const int64_t mean = (p.mask.nnzb + patterns - 1) / patterns;
  const int64_t reachable = (key_end + p.mask.block_k - 1) / p.mask.block_k;
  return (mean < reachable ? mean : reachable) * decode_tiles_per_block(p);
}

// SPARSEK_ATTENTION_DECODE_SPLITS=<S> (1..kDecodeMaxSplits), read once: every launch splits
// each (batch, KV head) in S CTAs (at most one per key tile); for measurements and tests (the
// combine kernel runs whenever S > 1). Unset or invalid: the rule below.
inline int decode_split_override() {
  static const int forced = [] {
    const char* v = std::getenv("SPARSEK_ATTENTION_DECODE_SPLITS");
    if (v == nullptr) return 0;
    char* end = nullptr;
    const long s = std::strtol(v, &end, 10);
    return (end == v || *end != '\0' || s < 1 || s > kDecodeMaxSplits) ? 0 : int(s);
  }();
  return forced;
}

// CTAs per (batch, KV head) for `pairs` (batch, KV head) pairs of `tiles` key tiles each,
// `resident` CTAs of the row resident on the device at once (SMs x CTAs per SM), `warps` per
// CTA. The decode is memory-bound: it wants every resident CTA streaming and no second wave
// that leaves most SMs idle, and each CTA enough tiles to amortise its Q load and its merge.
//   - pairs >= 0.8 x resident: 1 (the pairs already fill the device; no partial results);
//   - else the candidates are S = 1 .. min(kDecodeMaxSplits, tiles / warps: at least one
//     tile per warp, 4 x resident / pairs: a bounded workspace), each scored by its wave
//     efficiency w / ceil(w), w = pairs x S / resident; the smallest S within 0.9 of the best
//     score wins (FlashAttention's num_splits_heuristic, with 0.9 for its 0.85).
// The result depends only on these numbers, so a problem on one device and build always runs
// with one S and its results are bitwise identical run to run.
inline int decode_splits(int64_t pairs, int64_t tiles, int64_t resident, int warps) {
  if (pairs <= 0 || tiles <= 0) return 1;
  if (const int forced = decode_split_override()) return int(forced < tiles ? forced : tiles);
  if (resident < 1) resident = 1;
  if (pairs * 5 >= resident * 4) return 1;
  // One tile per warp, not two: a split's CTA is latency-bound, so with a few hundred keys
  // per (batch, KV head) more CTAs in flight beat fuller ones.
  int64_t most = tiles / int64_t(warps);
  if (most > kDecodeMaxSplits) most = kDecodeMaxSplits;
  if (most > 4 * resident / pairs) most = 4 * resident / pairs;
  if (most <= 1) return 1;
  const auto score = [&](int64_t s) {
    const double waves = double(pairs * s) / double(resident);
    const double whole = double(int64_t(waves) + (waves > double(int64_t(waves)) ? 1 : 0));
    return waves / whole;
  };
  double best = 0.0;
  for (int64_t s = 1; s <= most; ++s) best = score(s) > best ? score(s) : best;
  for (int64_t s = 1; s <= most; ++s)
    if (score(s) >= 0.9 * best) return int(s);
  return 1;
}

}  // namespace sparsek::detail::attention_decode
