// sparsek attention SM90: the key blocks one query block visits, in ascending order.
//
//   no mask            0 .. the sequence's last key block
//   block mask         the listed blocks of the query block's row (col_idx, ascending)
//   causal             either of the above, cut after the last block with a key on or before
//                      the diagonal of the block's last query (col_idx is sorted: a binary
//                      search finds the cut); nothing when no key is (bottom-right, a
//                      query block wholly before the first key)
//   per sequence       every range ends at the sequence's last key block (a mask counted
//                      from the longest sequence may list blocks past a shorter one's keys:
//                      the same search drops them)
//
// Listed blocks are walked by the sparse tile iterator (sm90/tile_iterator.hpp) over the
// mask's stacked BSR pattern, one k-iteration per 128-key block: col_idx read 32 entries at a
// time by the warp, the next chunk prefetched. Every warp that needs the block numbers (the
// producer warp, each consumer warp) steps its own copy, all 32 lanes together.
#pragma once

#include <cstdint>

#include <cute/config.hpp>

#include "spmm/sm90/tile_iterator.hpp"

namespace sparsek::detail::attention_sm90 {

// The visited range: positions [begin, end) of col_idx (listed) or block numbers (not).
struct KeyBlockRange {
  int32_t begin = 0, end = 0;
  bool listed = false;
  CUTE_HOST_DEVICE int32_t count() const { return end - begin; }
};

// The range of pattern row `row` (row_ptr index) up to key block `last`: the last block with
// a key some query of the block keeps (the sequence's last key block, or before it the block
// of the diagonal of the query block's last query when causal), -1 when there is none.
// `k_blocks`: the mask's key blocks per row (listed blocks are below it); a listed row is cut
// by a binary search only when `last` is below its last block.
CUTE_DEVICE KeyBlockRange key_block_range(const int32_t* row_ptr, const int32_t* col_idx, bool has_mask, int64_t row,
                                          int32_t k_blocks, int32_t last) {
  KeyBlockRange r;
  if (!has_mask) {
    r.end = last + 1;
    return r;
  }
  r.listed = true;
  if (last < 0) return r;  // no key kept: an empty range, row_ptr unread
  r.begin = __ldg(row_ptr + row);
  r.end = __ldg(row_ptr + row + 1);
  if (last < k_blocks - 1) {  // first position whose block is past `last`
    int32_t lo = r.begin, hi = r.end;
    while (lo < hi) {
      const int32_t mid = lo + (hi - lo) / 2;
      if (__ldg(col_idx + mid) <= last) lo = mid + 1;
      else hi = mid;
    }
    r.end = lo;
  }
  return r;
}

// Steps through a KeyBlockRange. Warp-collective: constructed and stepped by all 32 lanes.
class KeyBlockIterator {
 public:
  CUTE_DEVICE KeyBlockIterator(const KeyBlockRange& r, const int32_t* col_idx, int lane)
      : listed_(r.listed), next_(r.begin), it_(make(r, col_idx, lane)) {}

  // The current key block number.
  CUTE_DEVICE int32_t block() const { return listed_ ? it_.dense_block() : next_; }

  CUTE_DEVICE void operator++() {
    if (listed_) ++it_;
    else ++next_;
  }

 private:
  using Listed = spmm_sm90::SparseTileIterator<false>;
  // The iterator reads a block-row's bounds from row_ptr[0], row_ptr[1]: give it the
  // (possibly causal-cut) range; one k-iteration per block (kpb = 1). Unused without a mask
  // (an empty range: it reads nothing).
  CUTE_DEVICE static Listed make(const KeyBlockRange& r, const int32_t* col_idx, int lane) {
    const int32_t bounds[2] = {r.begin, r.listed ? r.end : r.begin};
    return Listed(bounds, col_idx, nullptr, 0, 1, lane);
  }

  bool listed_;
  int32_t next_;
  Listed it_;
};

}  // namespace sparsek::detail::attention_sm90
