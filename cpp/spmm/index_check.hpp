// SpmmOptions::check_indices: the device-side check of A's index arrays (core/index_check.hpp)
// for a checked spmm Problem.
#pragma once

#include "core/index_check.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail {

// A's row_ptr and col_idx; for op(A) = A^T the transpose index instead: col_ptr (as row_ptr),
// row_idx (as col_idx) and block_id, by block-column of A.
inline Result check_indices(const Problem& p, cudaStream_t stream) {
  return check_bsr_indices(p.a.row_ptr, p.a.col_idx, p.a_block_id, p.block_rows(), p.block_cols(), p.a.nnzb, stream,
                           p.a_transposed ? "A's transpose index fails" : "A's indices fail",
                           p.a_transposed ? "block-column" : "block-row");
}

}  // namespace sparsek::detail
