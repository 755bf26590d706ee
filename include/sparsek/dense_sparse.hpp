// sparsek: dense x sparse, C = alpha * D * op(A) + beta * C, with A in BSR form (weights
// stored in x out, or the backward dX = dY * W of a pruned layer y = x * W^T).
//
// It is the transposed product on transposed views of the same buffers, nothing copied:
// C^T = alpha * op(A)^T * D^T + beta * C^T, where a row-major D (p x m) is a column-major
// D^T (m x p) with the same ld, and so on. So it runs on sparsek::spmm's kernels, validation
// and errors; header only.
//
// op(A) = A (options.transpose_a == false) runs as A^T * D^T and needs A's transpose index
// in options.transpose_index (see TransposeIndexView; sparsek::rust::transpose_index builds
// it); op(A) = A^T runs as A * D^T and needs none.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek {

namespace detail {
template <class View>
View transposed_view(const View& v) {
  View t = v;
  t.rows = v.cols;
  t.cols = v.rows;
  t.layout = v.layout == Layout::RowMajor   ? Layout::ColMajor
             : v.layout == Layout::ColMajor ? Layout::RowMajor
                                            : v.layout;
  return t;
}
}  // namespace detail

// The same matrix seen transposed: rows and columns swapped, the layout flipped, the same
// data and ld. A layout that is not a Layout value stays as it is (spmm refuses it).
inline DenseView transposed(const DenseView& v) { return detail::transposed_view(v); }
inline DenseMutView transposed(const DenseMutView& v) { return detail::transposed_view(v); }

// C = alpha * D * op(A) + beta * C: D is p x rows(op(A)), C p x cols(op(A)). A bias, if
// any, has one value per column of C. Validated by sparsek::spmm (messages name the
// transposed operands: B is D^T, C is C^T).
inline Result dense_spmm(const DenseView& d, const BsrView& a, const DenseMutView& c, const SpmmOptions& options,
                         cudaStream_t stream) {
  SpmmOptions flipped = options;
  flipped.transpose_a = !options.transpose_a;
  return spmm(a, transposed(d), transposed(c), flipped, stream);
}

// Whether dense_spmm would run, and with which backend (as sparsek::can_implement).
inline Result can_implement_dense_spmm(const DenseView& d, const BsrView& a, const DenseMutView& c,
                                       const SpmmOptions& options, Backend* chosen = nullptr) {
  SpmmOptions flipped = options;
  flipped.transpose_a = !options.transpose_a;
  return can_implement(a, transposed(d), transposed(c), flipped, chosen);
}

}  // namespace sparsek
