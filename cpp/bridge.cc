#include "sparsek/cpp/bridge.h"

#include <sparsek/sparsek.hpp>

#include "problem.hpp"
#include "registry.hpp"
#include "sparsek/src/gpu/sys.rs.h"

namespace sparsek::ffi {
namespace {

// Rust validated the problem (src/spmm.rs, and DeviceBsr holds only validated arrays), so
// this is the Rust entry's Problem: no check is repeated here (cpp/problem.hpp).
detail::Problem to_problem(const SpmmProblem& x, const detail::DeviceInfo& device) {
  BsrView a;
  a.m = x.m;
  a.k = x.k;
  a.bm = x.bm;
  a.bk = x.bk;
  a.nnzb = x.nnzb;
  a.row_ptr = reinterpret_cast<const int32_t*>(x.row_ptr);
  a.col_idx = reinterpret_cast<const int32_t*>(x.col_idx);
  a.values = reinterpret_cast<const void*>(x.values);
  a.dtype = x.input;
  const DenseView b{reinterpret_cast<void*>(x.b), x.k, x.n, x.b_ld, x.b_layout, x.input};
  const DenseView c{reinterpret_cast<void*>(x.c), x.m, x.n, x.c_ld, x.c_layout, x.output};
  return detail::Problem::from_rust(a, b, c, x.alpha, x.beta, x.backend, reinterpret_cast<const void*>(x.bias),
                                    x.activation, device);
}

FfiStatus status(const Result& r, const detail::Selection& s) {
  const bool chosen = r.ok() && s.family != nullptr;
  return FfiStatus{r.status, rust::String(r.message), chosen ? s.family->backend : Backend::Auto,
                   rust::String(chosen ? s.family->info(s.row).name : "")};
}

// Selects a row for the problem and, when `run`, launches it on the problem's stream.
FfiStatus select_and_run(const SpmmProblem& x, bool run) {
  detail::Selection s;
  detail::DeviceInfo device;
  Result r = detail::current_device(&device);
  if (!r.ok()) return status(r, s);
  const detail::Problem p = to_problem(x, device);
  r = detail::select(p, &s);
  if (r.ok() && run) r = detail::launch(p, s, reinterpret_cast<cudaStream_t>(x.stream));
  return status(r, s);
}

}  // namespace

FfiStatus select(const SpmmProblem& problem) { return select_and_run(problem, false); }

FfiStatus spmm(const SpmmProblem& problem) { return select_and_run(problem, true); }

}  // namespace sparsek::ffi
