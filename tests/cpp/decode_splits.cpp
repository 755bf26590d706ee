// The split-KV decode attention's split rule (cpp/attention/decode/split.hpp) on the host:
// its bounds on every input of a sweep, its fixed points, and its answers for the shapes the
// worked decoder and the serving benches run. No GPU needed: the rule reads only host-side
// numbers, which is what keeps a launch capturable and its results bitwise identical.
//
//   sparsek_test_decode_splits   (one line per failed check, then "N passed, N failed")
#include <cstdio>
#include <cstdlib>

#include "attention/decode/split.hpp"

namespace {

using sparsek::detail::attention_decode::decode_splits;
using sparsek::detail::attention_decode::kDecodeMaxSplits;

int passed = 0, failed = 0;

void check(bool ok, const char* what, long long pairs, long long tiles, long long resident, int warps, int got) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::printf("FAIL %s: pairs %lld tiles %lld resident %lld warps %d -> %d\n", what, pairs, tiles, resident, warps, got);
}

}  // namespace

int main() {
  if (std::getenv("SPARSEK_ATTENTION_DECODE_SPLITS") != nullptr) {
    std::printf("SKIPPED: SPARSEK_ATTENTION_DECODE_SPLITS is set (it forces the rule)\n");
    return 77;
  }
  // Bounds on a sweep: 1 <= S <= kDecodeMaxSplits, S <= max(1, tiles / warps), S <= max(1, 4 x
  // resident / pairs); S = 1 once the pairs alone fill 0.8 of the resident CTAs; the same
  // answer when asked twice.
  const long long pairs_list[] = {0, 1, 2, 3, 4, 8, 16, 32, 64, 100, 211, 212, 264, 1000, 1 << 20};
  const long long tiles_list[] = {0, 1, 3, 4, 7, 8, 9, 72, 512, 2048, 1 << 16, 1LL << 27};
  const long long resident_list[] = {0, 1, 132, 264, 396, 1056};
  const int warps_list[] = {1, 4, 8};
  for (long long pairs : pairs_list)
    for (long long tiles : tiles_list)
      for (long long resident : resident_list)
        for (int warps : warps_list) {
          const int s = decode_splits(pairs, tiles, resident, warps);
          const long long r = resident < 1 ? 1 : resident;
          const long long per_warp = tiles / warps, workspace = pairs > 0 ? 4 * r / pairs : 0;
          check(s >= 1 && s <= kDecodeMaxSplits, "1 <= S <= kDecodeMaxSplits", pairs, tiles, resident, warps, s);
          check(s == 1 || s <= per_warp, "at least one key tile per warp", pairs, tiles, resident, warps, s);
          check(s == 1 || s <= workspace, "a bounded workspace (4 x resident / pairs)", pairs, tiles, resident, warps, s);
          check(pairs <= 0 || tiles <= 0 || pairs * 5 < r * 4 || s == 1, "pairs filling the device run unsplit", pairs,
                tiles, resident, warps, s);
          check(decode_splits(pairs, tiles, resident, warps) == s, "the same answer twice", pairs, tiles, resident,
                warps, s);
        }
  // The batch-1 decode benches' shapes on an H100 (132 SMs x 2 CTAs of the d 128
  // rows, 4 warps): batch 1 over 4 KV heads and 8192 keys fills about a wave; the decoder's
  // sparse window (1152 keys) about one tile per warp; 32 sequences x 8 KV heads do not split.
  struct Case {
    long long pairs, tiles, resident;
    int warps, expect;
  };
  const Case cases[] = {
      {4, 512, 264, 4, 60},   // smallest S with 4S / 264 >= 0.9 x the best wave fill
      {4, 72, 264, 4, 17},    // at most 72 / 4 = 18; the smallest S within 0.9 of its fill
      {8, 2048, 264, 4, 30},  // 8S / 264 >= 0.9
      {256, 512, 264, 4, 1},  // 256 >= 0.8 x 264
      {1, 1, 264, 4, 1},      // one tile: nothing to split
  };
  for (const Case& c : cases) {
    const int s = decode_splits(c.pairs, c.tiles, c.resident, c.warps);
    check(s == c.expect, "a measured shape's split", c.pairs, c.tiles, c.resident, c.warps, s);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
