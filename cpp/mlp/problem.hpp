// The C++ gated MLP's validation. Its checked problem is two spmm Problems
// (cpp/spmm/problem.hpp): the gate and up product, then the down product.
#pragma once

#include <sparsek/mlp.hpp>
#include <sparsek/sparsek.hpp>

#include "core/validate.hpp"
#include "spmm/problem.hpp"

namespace sparsek::detail {

// sparse_mlp's validation (cpp/mlp/api.cu): x, h and y as views of their own, both products'
// views (failures named by their product), the outputs across the two, then the device
// (`devices`), into *first (gate and up) and *second (down).
Result validate_mlp(const MlpView& mlp, const DenseView& x, const DenseMutView& h, const DenseMutView& y,
                    const DeviceSource& devices, Problem* first, Problem* second);

}  // namespace sparsek::detail
