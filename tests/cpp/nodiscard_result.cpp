// A compile-fail check (scripts/check-cpp-api.sh): ignoring a sparsek::Result must be a
// warning. This file compiles as it is, and fails with -Werror=unused-result on the line
// below, naming the ignored value; the script asserts both.
#include <sparsek/sparsek.hpp>

void ignores_the_result(const sparsek::BsrView& a, const sparsek::DenseView& b, const sparsek::DenseMutView& c,
                        cudaStream_t stream) {
  sparsek::spmm(a, b, c, sparsek::SpmmOptions{}, stream);  // the ignored Result
}
