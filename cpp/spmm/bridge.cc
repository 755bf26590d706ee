// spmm's half of the cxx bridge (src/device/sys.rs, cpp/bridge_common.hpp).
#include "bridge_common.hpp"
#include "sparsek/cpp/spmm/bridge.h"
#include "spmm/problem.hpp"

namespace sparsek::ffi {
namespace {

// Rust validated the problem (src/spmm/check.rs, and DeviceBsr holds only validated
// arrays), so this is the Rust entry's Problem: no check is repeated here
// (cpp/spmm/problem.hpp).
detail::Problem to_problem(const SpmmProblem& x, const detail::DeviceInfo& device) {
  const BsrView a = to_bsr(x.a);
  // op(A) = A^T: B is m x n and C k x n, and the families see A^T's view (problem.hpp).
  const bool t = x.transpose_a;
  TransposeIndexView ti;
  ti.col_ptr = reinterpret_cast<const int32_t*>(x.t_col_ptr);
  ti.row_idx = reinterpret_cast<const int32_t*>(x.t_row_idx);
  ti.block_id = reinterpret_cast<const int32_t*>(x.t_block_id);
  return detail::Problem::from_rust(t ? detail::Problem::transposed_view(a, ti) : a, to_dense(x.b), to_dense_mut(x.c),
                                    x.alpha, x.beta, x.backend, reinterpret_cast<const void*>(x.bias), x.activation,
                                    device, t, t ? ti.block_id : nullptr, x.gated);
}

}  // namespace

FfiStatus spmm(const SpmmProblem& problem) {
  return select_and_run(problem, unsupported(problem.a),
                        [&problem](const detail::DeviceInfo& device) { return to_problem(problem, device); });
}

}  // namespace sparsek::ffi
