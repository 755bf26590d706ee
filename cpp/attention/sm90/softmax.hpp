// sparsek attention SM90: what the consumer warpgroups do to a score tile S in registers:
// views of WGMMA accumulator fragments, the element mask, and the online softmax.
//
// An SM90 accumulator fragment has layout ((2, 2, V), MMA_M, MMA_N): per thread, 2 rows
// (lane/4 and lane/4 + 8 of the warp's 16) times 2*V columns of each 8-column group. The
// four lanes of a quad share rows, so row reductions are the thread's own values then two
// shuffles.
#pragma once

#include <cmath>
#include <cstdint>

#include "cute/tensor.hpp"

namespace sparsek::detail::attention_sm90 {

// (rows, cols) view of an accumulator layout ((2, 2, V), MMA_M, MMA_N).
template <class L>
CUTE_HOST_DEVICE constexpr auto acc_rowcol(L const& l) {
  using namespace cute;
  static_assert(decltype(rank(l))::value == 3 && decltype(rank<0>(l))::value == 3, "an SM90 accumulator layout");
  auto v = get<0>(l);
  return make_layout(make_layout(get<1>(v), get<1>(l)), make_layout(get<0>(v), get<2>(v), get<2>(l)));
}

// The S accumulator ((2, 2, V), MMA_M, MMA_N) read as the register A operand of P*V, whose
// fragment is ((2, 2, 2), MMA_M, K/16): for 16-bit types an accumulator's 8-column group
// pair (v = 2*kk, 2*kk + 1) holds exactly what the A fragment of k-block kk wants, so P
// stays where the softmax left it (converted to 16 bits), no shuffle.
template <class L>
CUTE_HOST_DEVICE constexpr auto acc_as_a_operand(L const& l) {
  using namespace cute;
  auto v = get<0>(l);
  auto pairs = logical_divide(get<2>(v), Int<2>{});  // (2, V/2)
  return make_layout(make_layout(get<0>(v), get<1>(v), get<0>(pairs)), get<1>(l),
                     coalesce(make_layout(get<2>(l), get<1>(pairs))));
}

// S(i) = -inf where key j = k0 + col is not kept: j >= seq_k, or causal and j past the
// diagonal of its query, diag0 + row (diag0: the block's first query + the causal offset,
// AttentionProblem::causal_offset). `coord` is the identity tensor partitioned like S.
template <class TS, class TC>
CUTE_DEVICE void mask_scores(TS& s, TC const& coord, int32_t diag0, int32_t k0, int32_t seq_k, bool causal) {
  CUTE_UNROLL
  for (int i = 0; i < cute::size(s); ++i) {
    const int32_t diag = diag0 + int32_t(cute::get<0>(coord(i)));
    const int32_t key = k0 + int32_t(cute::get<1>(coord(i)));
    if (key >= seq_k || (causal && key > diag)) s(i) = -INFINITY;
  }
}

template <int kRows>
struct OnlineSoftmax {
  // Running max of each row's scores times scale*log2(e) (-inf before any kept key), and
  // this thread's share of each row's sum of exp2(score*scale*log2e - max) (the quad adds
  // the shares once, in finish(): the rescaling is linear, so partial sums keep).
  float row_max[kRows];
  float row_sum[kRows];
  float scale_log2;

  CUTE_DEVICE explicit OnlineSoftmax(float scale) : scale_log2(scale * 1.44269504088896340736f) {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  CUTE_DEVICE static float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  }
  CUTE_DEVICE static float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
  }

  // Turns the scores of one key block (rowcol view, masked) into P = exp2(s*scale_log2 -
  // max) in place and returns, per row, the factor the output accumulated so far must be
  // multiplied by (the old max over the new one).
  template <class TS>
  CUTE_DEVICE void step(TS& s, float (&o_scale)[kRows]) {
    static_assert(decltype(cute::size<0>(s))::value == kRows, "rows per thread");
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = -INFINITY;
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) mx = fmaxf(mx, s(r, c));
      mx = quad_max(mx);
      const float old_max = row_max[r];
      const float new_max = fmaxf(old_max, mx * scale_log2);
      row_max[r] = new_max;
      // A row with nothing kept yet stays -inf: subtract 0 so exp2(-inf - (-inf)) never
      // makes a NaN.
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      o_scale[r] = exp2f(old_max - base);
      float sum = row_sum[r] * o_scale[r];
      CUTE_UNROLL
      for (int c = 0; c < cute::size<1>(s); ++c) {
        const float p = exp2f(fmaf(s(r, c), scale_log2, -base));
        s(r, c) = p;
        sum += p;
      }
      row_sum[r] = sum;
    }
  }

  // Per row: the factor 1/sum for O (0 for a row that kept nothing, so its O is 0) and the
  // natural-log LSE (-inf for such a row).
  CUTE_DEVICE void finish(float (&inv_sum)[kRows], float (&lse)[kRows]) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const bool kept = sum > 0.0f;
      inv_sum[r] = kept ? 1.0f / sum : 0.0f;
      lse[r] = kept ? row_max[r] * 0.69314718055994530942f + logf(sum) : -INFINITY;
    }
  }
};

// Multiplies each row of an accumulator (rowcol view) by its factor.
template <class TO, int kRows>
CUTE_DEVICE void scale_rows(TO& o, const float (&factor)[kRows]) {
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    CUTE_UNROLL
    for (int c = 0; c < cute::size<1>(o); ++c) o(r, c) *= factor[r];
  }
}

}  // namespace sparsek::detail::attention_sm90
