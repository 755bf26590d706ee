// The Decode family's plan rules on the host (cpp/spmm/decode/launch.hpp): decode_plan over
// every row of the table, every block shape and every cap on the rows per CTA; the preference
// between two grids (decode_prefers) and the pick among a row's plans (decode_pick), on
// properties and on grids the measurements met. No GPU needed: the rules read host numbers.
//
//   sparsek_test_decode_plans   (one line per failed check, then "N passed, N failed")
#include <cstdio>

#include "spmm/decode/launch.hpp"

namespace {

using namespace sparsek::detail::spmm_decode;

int passed = 0, failed = 0;

void check(bool ok, const char* what, const char* row = "", int bm = 0, int bk = 0, int cap = 0) {
  if (ok) {
    ++passed;
    return;
  }
  ++failed;
  std::printf("FAIL %s: row %s bm %d bk %d cap %d\n", what, row, bm, bk, cap);
}

}  // namespace

int main() {
  // Every plan: TM a multiple of 16 dividing bm, at most tm_max and at most the cap; the
  // largest such divisor (so a cap below TM's next divisor gives the same plan); slices = bm /
  // TM; KC divides bk; the parts of a stage within the slot and the lanes of a warp.
  for (int i = 0; i < kDecodeRows; ++i) {
    const DecodeVariant& v = kDecodeVariants[i];
    check(v.tm_min == 0 || (v.tm_min % 16 == 0 && v.tm_min <= v.tm_max), "tm_min in range", v.name);
    for (int bm = 16; bm <= 256; bm += 16)
      for (int bk = 16; bk <= 256; bk += 16)
        for (int cap = 16; cap <= v.tm_max; cap += 16) {
          const DecodePlan p = decode_plan(v, bm, bk, cap);
          check(p.tm % 16 == 0 && bm % p.tm == 0 && p.tm <= v.tm_max && p.tm <= cap, "TM divides bm, <= cap", v.name, bm, bk, cap);
          bool largest = true;
          for (int t = p.tm + 16; t <= cap && t <= v.tm_max; t += 16) largest = largest && bm % t != 0;
          check(largest, "TM the largest divisor under the cap", v.name, bm, bk, cap);
          check(p.slices * p.tm == bm, "slices x TM = bm", v.name, bm, bk, cap);
          check(bk % p.kc == 0 && p.kpb * p.kc == bk, "KC divides bk", v.name, bm, bk, cap);
          const int part = p.tm * decode_a_row_bytes(v, p.kc) + v.n_max * decode_row_bytes(p.kc);
          check(p.nb >= 1 && p.nb <= kDecodeMaxParts && p.nb * part <= decode_slot_bytes(v), "a stage's parts fit", v.name, bm, bk, cap);
        }
  }

  // decode_prefers: a grid that cannot run is never preferred and anything runnable beats it;
  // more than 5 % more bytes in flight wins whatever the split; within 5 %, only a smaller
  // split wins; never both ways.
  const DecodeFill none{-1.0, 0};
  const double scores[] = {0.0, 1.0, 1.04, 1.05, 1.06, 1.2, 2.0};
  const int splits[] = {1, 2, 4, 8};
  check(!decode_prefers(none, DecodeFill{1.0, 1}), "a negative score is never preferred");
  check(decode_prefers(DecodeFill{0.0, 8}, none), "anything runnable beats a negative score");
  for (double sa : scores)
    for (double sb : scores)
      for (int ka : splits)
        for (int kb : splits) {
          const DecodeFill a{sa, ka}, b{sb, kb};
          const bool ab = decode_prefers(a, b), ba = decode_prefers(b, a);
          check(!(ab && ba), "not preferred both ways");
          if (sa * 0.95 > sb) check(ab, "more than 5 % more in flight wins");
          if (sa >= 0.95 * sb && sb >= 0.95 * sa) check(ab == (ka < kb), "within 5 %: the smaller split wins");
          if (sa < 0.95 * sb) check(!ab, "less than 95 % never wins");
        }

  // decode_pick on grids the measurements met: 4096 x 14336,
  // 128x128 blocks, decode_n8_wide's plans at TM 128 (S 4, half the CTAs), 64 and 32 (S 8 and
  // 2, 256 CTAs, the same bytes): TM 32; a plan of 3 % more bytes at a larger split loses to
  // the smaller split; a tie on both keeps the larger TM; one candidate is kept.
  {
    const DecodeFill f[] = {{6.3e6, 4}, {12.6e6, 8}, {12.6e6, 2}};
    check(decode_pick(f, 3) == 2, "4096x14336: the smaller split at the same bytes");
    const DecodeFill g[] = {{12.6e6, 2}, {13.0e6, 4}};
    check(decode_pick(g, 2) == 0, "3 % more bytes at a larger split loses");
    const DecodeFill h[] = {{12.6e6, 2}, {12.6e6, 2}, {12.0e6, 2}};
    check(decode_pick(h, 3) == 0, "a tie keeps the larger TM");
    const DecodeFill k[] = {{9.4e6, 2}, {14.2e6, 2}};
    check(decode_pick(k, 2) == 1, "more than 5 % more bytes wins");
    check(decode_pick(f, 1) == 0 && decode_pick(f, 0) == 0, "one or no candidate: the first");
  }

  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
