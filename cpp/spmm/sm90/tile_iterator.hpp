// sparsek SM90: the sparse tile iterator (used by mainloop.hpp and scheduler.hpp).
//
// A BSR block-row `br` owns the blocks row_ptr[br] .. row_ptr[br+1]-1 (indices into
// col_idx and into the batched values tensor). Each block is kpb = ceil(bk / TileK)
// k-iterations ("k-subtiles"); when TileK does not divide bk, the last one reaches past
// the block and TMA zero-fills it (both operands are seen per block, see mainloop.hpp).
// For k-iteration (block j, subtile s):
//
//   sparse operand tile : values tensor (bm, bk, nnzb) at (m_sub = 0, k = s, l = j)
//   dense  operand tile : dense tensor (mn, bk, K/bk)  at (dense tile, k = s, l = col_idx[j])
//
// op(A) = A^T (cpp/spmm/problem.hpp): row_ptr/col_idx are A's transpose index (col_ptr, row_idx)
// and the j-th listed block is A's block block_id[j]: with kPermuted, sparse_block() returns
// that, fetched in the same 32-entry chunks as col_idx (without, the identity: the A*B
// kernels carry nothing of it).
//
// FP8 (mainloop.hpp): with `scales` (one f32 per stored block), scale() is the current
// block's, fetched in the same chunks (0 past the row's end).
//
// The iterator is used by the mainloop producer warp (all 32 lanes step it together:
// col_idx is fetched 32 entries at a time, one coalesced load per lane, and the next
// chunk is prefetched a chunk ahead so the producer never waits on a dependent global
// load per block) and, through k_tile_count(), by the tile scheduler.
//
// dense_tile_start() places a dense tile on the dense operand (the mainloop's loads and the
// Direct epilogue's stores, direct_epilogue.hpp, agree through it).
#pragma once

#include <cstdint>
#include <cute/config.hpp>

namespace sparsek::detail::spmm_sm90 {

template <bool kPermuted = false>
struct SparseTileIterator {
  // Total k-iterations of block-row `br`. An empty block-row still gets ONE iteration, a
  // "zero" iteration whose TMA coordinates are out of bounds for both operands (TMA fills
  // the tiles with zeros), so the consumers' accumulators are zeroed by WGMMA itself and
  // the epilogue writes beta*C. (Zeroing them with ordinary instructions in an extra code
  // path makes ptxas serialize every WGMMA of the kernel: warning C7515.)
  CUTE_HOST_DEVICE static int32_t k_tile_count(const int32_t* row_ptr, int32_t br, int32_t kpb) {
    int32_t n = (row_ptr[br + 1] - row_ptr[br]) * kpb;
    return n > 0 ? n : 1;
  }

#if defined(__CUDACC__)
  // Must be constructed and stepped by all 32 lanes of one warp (uses __shfl_sync).
  // `start`: the first k-iteration (a split of the block-row, scheduler.hpp), 0 for the whole
  // row; `zero`: the split has no k-iteration of its own and runs one zero iteration.
  CUTE_DEVICE SparseTileIterator(const int32_t* row_ptr, const int32_t* col_idx, const int32_t* block_id,
                                 int32_t br, int32_t kpb, int lane, int32_t start = 0, bool zero = false,
                                 const float* scales = nullptr)
      : col_idx_(col_idx), block_id_(block_id), scales_(scales), kpb_(kpb), lane_(lane) {
    begin_ = row_ptr[br];
    end_ = row_ptr[br + 1];
    zero_ = zero || end_ == begin_;
    block_ = begin_ + start / kpb;
    sub_ = start % kpb;
    chunk_base_ = block_;
    chunk_col_ = load(col_idx_, chunk_base_);
    next_col_ = load(col_idx_, chunk_base_ + 32);
    if constexpr (kPermuted) {
      chunk_id_ = load(block_id_, chunk_base_);
      next_id_ = load(block_id_, chunk_base_ + 32);
    }
    if (scales_ != nullptr) {
      chunk_scale_ = load(scales_, chunk_base_);
      next_scale_ = load(scales_, chunk_base_ + 32);
    }
  }

  // True for the single zero iteration of an empty block-row or split (see k_tile_count).
  CUTE_DEVICE bool empty() const { return zero_; }

  // L coordinate of the sparse operand's (bm, bk, nnzb) tensor: the stored block's index
  // (A^T: block_id of the listed block). Warp-collective.
  CUTE_DEVICE int32_t sparse_block() const {
    if constexpr (kPermuted) return __shfl_sync(0xffffffffu, chunk_id_, block_ - chunk_base_);
    else return block_;
  }
  // The current block's scale (with `scales`; 0 past the row's end). Warp-collective.
  CUTE_DEVICE float scale() const { return __shfl_sync(0xffffffffu, chunk_scale_, block_ - chunk_base_); }
  // k-subtile inside the block: the k-tile coordinate of both operands' tiled tensors.
  CUTE_DEVICE int32_t ktile() const { return sub_; }
  // L coordinate of the dense operand's (mn, bk, K/bk) tensor: the block column. Warp-collective.
  CUTE_DEVICE int32_t dense_block() const {
    return __shfl_sync(0xffffffffu, chunk_col_, block_ - chunk_base_);
  }

  CUTE_DEVICE void operator++() {
    if (++sub_ == kpb_) {
      sub_ = 0;
      ++block_;
      if (block_ - chunk_base_ == 32) {
        chunk_base_ += 32;
        chunk_col_ = next_col_;
        next_col_ = load(col_idx_, chunk_base_ + 32);
        if constexpr (kPermuted) {
          chunk_id_ = next_id_;
          next_id_ = load(block_id_, chunk_base_ + 32);
        }
        if (scales_ != nullptr) {
          chunk_scale_ = next_scale_;
          next_scale_ = load(scales_, chunk_base_ + 32);
        }
      }
    }
  }

 private:
  template <class T>
  CUTE_DEVICE T load(const T* array, int32_t base) const {
    int32_t j = base + lane_;
    return j < end_ ? __ldg(array + j) : T(0);
  }

  const int32_t* col_idx_;
  const int32_t* block_id_;
  const float* scales_;
  int32_t kpb_;
  int32_t lane_;
  int32_t begin_, end_;
  bool zero_;
  int32_t block_, sub_;
  int32_t chunk_base_;
  int32_t chunk_col_;   // col_idx[chunk_base_ + lane]
  int32_t next_col_;    // col_idx[chunk_base_ + 32 + lane] (prefetched)
  int32_t chunk_id_ = 0, next_id_ = 0;  // the same of block_id (A^T only)
  float chunk_scale_ = 0.0f, next_scale_ = 0.0f;  // the same of scales (FP8 with per-block scales)
#endif
};

// The first dense row (C^T = B^T A^T: column of C) of dense tile `tile`, `tile_dense` wide,
// over a dense extent `extent` (n). tile * tile_dense, except for a last tile that would
// reach past the extent while a whole tile fits: that one is pulled back to extent -
// tile_dense, wholly inside the dense operand, overlapping the tile before it, whose rows
// the epilogue leaves to that tile (it writes rows from tile * tile_dense on). Why: the TMA
// is slow on a box that reaches past the tensor, even by a few rows (on an H100 the gated
// 64x64 row at n = 160 took 1.6x its time at n = 256, and a box 4 rows past the end still
// cost a third more), and the dense box is loaded again for every block of the block-row.
// The start need not be a multiple of 8: a K-major dense operand (column-major B) takes any
// row start, and an MN-major one has n a multiple of 8 (16-byte rows, the family's
// supports()), so the start is one too; the Direct epilogue stores such a tile's vectors
// along the dense side element by element.
CUTE_HOST_DEVICE constexpr int64_t dense_tile_start(int64_t tile, int64_t extent, int64_t tile_dense) {
  const int64_t start = tile * tile_dense;
  if (start + tile_dense <= extent || extent < tile_dense) return start;
  return extent - tile_dense;
}

}  // namespace sparsek::detail::spmm_sm90
