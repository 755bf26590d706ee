// sparsek: row scaling of a block-sparse matrix on NVIDIA GPUs.
//
//   C = diag(s) * A
//
// A is block-sparse (BSR, m x k in bm x bk blocks), f16 or bf16, without scales; s holds m
// f32 values; C has A's pattern (A's row_ptr and col_idx describe it) and A's dtype, and
// only its values are written: nnzb * bm * bk elements at `c_values`, in A's block order,
// each block row-major. Each value is float(a) * s[row] rounded once to A's dtype. Every
// pointer is a device pointer.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek {

// Enqueues C = diag(s) * A on `stream`. Validates everything first (once); on any error
// nothing is launched and C is untouched. `c_values` must overlap neither A's arrays nor s
// (InvalidArgument); A's indices are trusted.
Result rowscale(const BsrView& a, const float* s, void* c_values, cudaStream_t stream);

}  // namespace sparsek
