// The opt-in device-side check of a BSR's index arrays (SpmmOptions::check_indices), for
// C++ callers whose row_ptr / col_idx come from an untrusted source.
#pragma once

#include "spmm/problem.hpp"

namespace sparsek::detail {

// Checks on `stream`, then waits for it: row_ptr[0] == 0, row_ptr non-decreasing,
// row_ptr[block_rows] == nnzb, every col_idx in [0, block_cols), strictly increasing
// within its block-row. Reads only row_ptr[0 .. block_rows] and col_idx[0 .. nnzb), and
// col_idx entries only through row_ptr values already checked to lie in [0, nnzb].
// InvalidArgument names the first bad block-row; CudaError if the check itself failed.
Result check_indices(const Problem& p, cudaStream_t stream);

// The same check of any BSR pattern (S of an SDDMM); `name` ("S") names it in messages.
Result check_pattern(const int32_t* row_ptr, const int32_t* col_idx, int64_t block_rows, int64_t block_cols,
                     int64_t nnzb, cudaStream_t stream, const char* name);

}  // namespace sparsek::detail
