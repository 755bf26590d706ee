// Internal seam between the dispatcher (cpp/api.cu) and the kernel families
// (cpp/wmma/, cpp/cutlass/). Not installed; users see include/sparsek/sparsek.hpp.
#pragma once

#include <sparsek/sparsek.hpp>

namespace sparsek::detail {

// One validated problem: shapes agree (a.m == c.rows, a.k == b.rows, b.cols == c.cols),
// pointers are non-null, dtypes are a supported combination. Kernel families check only
// what is specific to them (block shapes, alignment, architecture).
struct Problem {
  BsrView a;
  DenseView b;
  DenseView c;
  float alpha;
  float beta;
  int64_t n() const { return c.cols; }
  int64_t block_rows() const { return a.m / a.bm; }
};

// Each family answers "why not" (nullptr when it can run the problem on a device of
// compute capability cc_major.cc_minor) and enqueues the work, returning the first CUDA
// error (launch errors included, via cudaGetLastError).
const char* wmma_unsupported_reason(const Problem& p, int cc_major, int cc_minor);
cudaError_t wmma_launch(const Problem& p, cudaStream_t stream);

const char* cutlass_unsupported_reason(const Problem& p, int cc_major, int cc_minor);
cudaError_t cutlass_launch(const Problem& p, cudaStream_t stream);

}  // namespace sparsek::detail
