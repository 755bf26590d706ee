// sparsek attention SM90: where one sequence (batch entry b) lies in Q/O and in K/V, as
// FlashAttention-3's SeqlenInfo: the padded batch (every sequence seq_q queries at row 0 of
// its own batch entry), or packed along seq by cumulative lengths (varlen: the views have
// batch 1 and sequence b is rows cu_seqlens[b] .. cu_seqlens[b+1] - 1; SequenceLayout in
// include/sparsek/attention.hpp). Q and K are independent: either, both or neither packed.
//
// The arrays are device data read per CTA (no host read: a launch is capturable in a CUDA
// graph). Unchecked arrays (check_indices off) are trusted for the results but never make
// an access leave the views: each sequence's rows are clamped into [0, total).
#pragma once

#include <cstdint>

#include <cute/config.hpp>

namespace sparsek::detail::attention_sm90 {

// One operand side (Q and O, or K and V) of one sequence.
struct SequenceRows {
  int32_t batch;  // the view's batch entry holding the sequence (0 when packed)
  int32_t start;  // its first row along the view's seq
  int32_t len;    // its rows
};

// Sequence b of a view of `seq` rows per batch entry: packed by `cu_seqlens` (non-null:
// `seq` is the packed total) or padded (entry b, all `seq` rows).
CUTE_DEVICE SequenceRows sequence_rows(const int32_t* cu_seqlens, int32_t b, int32_t seq) {
  if (cu_seqlens == nullptr) return SequenceRows{b, 0, seq};
  const int32_t lo = __ldg(cu_seqlens + b), hi = __ldg(cu_seqlens + b + 1);
  const int32_t start = lo < 0 ? 0 : lo > seq ? seq : lo;
  const int32_t end = hi < start ? start : hi > seq ? seq : hi;
  return SequenceRows{0, start, end - start};
}

}  // namespace sparsek::detail::attention_sm90
