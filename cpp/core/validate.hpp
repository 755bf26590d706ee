// The checks every operation's C++ entry shares (core/validate.cu): each view by value,
// with checked int64 arithmetic, before anything is queried or launched.
#pragma once

#include <sparsek/sparsek.hpp>

#include "core/overlap.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail {

// The result of an entry point (settled, core/validate.cu), its message given the one
// "sparsek: " prefix.
Result finish(Result r);

bool valid(DType t);  // a DType with a traits entry (core/dtype.hpp)
bool valid(Layout l);
bool valid(Backend b);
bool valid(Activation a);
bool valid(ScaleKind s);

// A dense view: non-negative dims, non-null data when non-empty, ld covering the
// contiguous extent, and its last element's offset (in bytes too) inside int64.
Result check_dense(const char* name, const DenseView& v);

// The bytes of a dense view that passed check_dense (empty when it has no element).
ByteRange dense_bytes(const DenseView& v);

// A BSR view (`name`: "A", or "S" for the SDDMM's output, whose k is n and bk is bn).
Result check_bsr(const BsrView& a, const char* name = "A");

// An operand's scales (include/sparsek/sparsek.hpp, ScaleKind): a ScaleKind value, none on a
// non-FP8 dtype, `scales` null exactly with None and else 16-byte aligned, and the kind one
// of None, PerTensor and `per_part` (PerBlock for A, PerColumn for B).
Result check_scales(const char* name, DType t, ScaleKind kind, const float* scales, ScaleKind per_part);

// How many f32 values scales of `kind` hold: 0, 1 or `parts` (nnzb or n).
int64_t scale_count(ScaleKind kind, int64_t parts);

}  // namespace sparsek::detail
