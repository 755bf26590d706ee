// A compile-fail check (scripts/check-cpp-api.sh): an output is a mutable view. This file
// compiles as it is (outputs as DenseMutView / HeadsMutView, an output view passed on as
// the next call's input); with -DPASS_INPUT_VIEW_AS_OUTPUT each call below gets a view of
// const data where it writes, and must not compile. The script asserts both.
#include <sparsek/attention.hpp>
#include <sparsek/dense_sparse.hpp>

#ifdef PASS_INPUT_VIEW_AS_OUTPUT
using CView = sparsek::DenseView;
using OView = sparsek::HeadsView;
#else
using CView = sparsek::DenseMutView;
using OView = sparsek::HeadsMutView;
#endif

sparsek::Result chained(const sparsek::BsrView& a, const sparsek::DenseView& b, const CView& c, const CView& d,
                        cudaStream_t stream) {
  if (sparsek::Result r = sparsek::spmm(a, b, c, sparsek::SpmmOptions{}, stream); !r.ok()) return r;
  return sparsek::dense_spmm(c, a, d, sparsek::SpmmOptions{}, stream);  // C, written above, read here
}

sparsek::Result attend(const sparsek::HeadsView& q, const sparsek::HeadsView& kv, const OView& o,
                       cudaStream_t stream) {
  return sparsek::attention(q, kv, kv, o, nullptr, nullptr, sparsek::AttentionOptions{}, stream);
}
