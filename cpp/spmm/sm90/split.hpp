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

// Pieces per tile for a launch of `tiles` tiles whose blocks are kpb k-iterations of tile_k
// each. kMinSplitK counts iterations of at most 64 deep (the rule's measurement): a 128-deep
// k-tile counts as two, so a piece keeps the same bytes of A whatever the row's tile_k.
inline int choose_split(const detail::Problem& p, int64_t tiles, int32_t kpb, int32_t tile_k) {
  if (tiles <= 0 || p.a.nnzb == 0) return 1;
  if (const int forced = split_override()) return forced;
  const int64_t sms = p.device.sm_count;
  if (tiles * 2 > sms) return 1;
  const int64_t per_iteration = tile_k > 64 ? tile_k / 64 : 1;
  const int64_t avg_k = p.a.nnzb * kpb * per_iteration / p.block_rows();
  int64_t s = sms / tiles;
  s = s < avg_k / kMinSplitK ? s : avg_k / kMinSplitK;
  s = s < kMaxSplit ? s : kMaxSplit;
  return s < 2 ? 1 : int(s);
}

}  // namespace sparsek::detail::spmm_sm90
