// sparsek SM90: when a launch splits its tiles (scheduler.hpp, "Split tiles"). Host only and
// free of CUTLASS: the launch (kernel.hpp) and the row choice (family.cu) both use it.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "spmm/problem.hpp"

namespace sparsek::detail::spmm_sm90 {

// Split tiles (scheduler.hpp): at most kMaxSplit pieces per tile, each with about
// kMinSplitK k-iterations or more on average, and only while the tiles are fewer than half
// the SMs. Measured on an H100, 2026-11-23 (f16, spmm_check, µs at S = 1, 2, 4, 8):
// full 128x128 block-rows of 128 k-iterations, 32 tiles: 80.0, 52.6, 42.1, 99.9; 64
// k-iterations, 8 tiles: 42.7, 32.6, 29.4, 34.5; 32 k-iterations, 32 tiles: 25.1, 24.7,
// 26.0, 67.1 (no gain, no loss at 16 per piece); more pieces than SMs lose badly.
constexpr int kMaxSplit = 16;
constexpr int64_t kMinSplitK = 16;

// SPARSEK_SM90_SPLIT=<S>, read once: every launch splits its tiles in S pieces (1: never);
// for measurements and tests. Unset or invalid: choose_split's rule.
inline int split_override() {
  static const int forced = [] {
    const char* v = std::getenv("SPARSEK_SM90_SPLIT");
    if (v == nullptr) return 0;
    char* end = nullptr;
    const long s = std::strtol(v, &end, 10);
    return (end == v || *end != '\0' || s < 1 || s > 64) ? 0 : int(s);
  }();
  return forced;
}

// Pieces per tile for a launch of `tiles` tiles whose blocks are kpb k-iterations each.
inline int choose_split(const detail::Problem& p, int64_t tiles, int32_t kpb) {
  if (tiles <= 0 || p.a.nnzb == 0) return 1;
  if (const int forced = split_override()) return forced;
  const int64_t sms = p.device.sm_count;
  if (tiles * 2 > sms) return 1;
  const int64_t avg_k = p.a.nnzb * kpb / p.block_rows();
  int64_t s = sms / tiles;
  s = s < avg_k / kMinSplitK ? s : avg_k / kMinSplitK;
  s = s < kMaxSplit ? s : kMaxSplit;
  return s < 2 ? 1 : int(s);
}

// Streamed gated launches (gated.hpp "Streamed launches"): every SM takes an equal share of
// the tiles' k-iterations, one hand-over per CTA. Taken where the tiles leave a part-empty
// last round (tiles not a multiple of the SMs, at most kMaxStreamRounds rounds), each pair
// has one dense tile (its weights then cross HBM once), and each CTA gets at least
// kMinStreamK k-iterations on average. Measured on an H100: see configs.hpp (kGatedStream).
constexpr int64_t kMaxStreamRounds = 4;
constexpr int64_t kMinStreamK = 8;

// SPARSEK_SM90_GATED_STREAM=0 or 1, read once: gated launches never stream, or stream
// wherever they can (one dense tile per pair); for measurements and tests. Unset or another
// value: choose_gated_stream's rule.
inline int gated_stream_override() {
  static const int forced = [] {
    const char* v = std::getenv("SPARSEK_SM90_GATED_STREAM");
    if (v == nullptr) return -1;
    if (v[0] == '0' && v[1] == '\0') return 0;
    if (v[0] == '1' && v[1] == '\0') return 1;
    return -1;
  }();
  return forced;
}

// Whether a gated launch of `tiles` tiles (pairs * dense_tiles) whose blocks are kpb
// k-iterations each streams.
inline bool choose_gated_stream(const detail::Problem& p, int64_t tiles, int64_t dense_tiles, int32_t kpb) {
  if (tiles <= 0 || dense_tiles != 1 || p.a.nnzb == 0) return false;
  if (const int forced = gated_stream_override(); forced >= 0) return forced == 1;
  const int64_t sms = p.device.sm_count;
  if (sms <= 0 || tiles % sms == 0 || tiles > kMaxStreamRounds * sms) return false;
  return p.a.nnzb / sms * kpb >= kMinStreamK;
}

}  // namespace sparsek::detail::spmm_sm90
