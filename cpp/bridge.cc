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
  // op(A) = A^T: B is m x n and C k x n, and the families see A^T's view (problem.hpp).
  const bool t = x.transpose_a;
  const DenseView b{reinterpret_cast<void*>(x.b), t ? x.m : x.k, x.n, x.b_ld, x.b_layout, x.input};
  const DenseView c{reinterpret_cast<void*>(x.c), t ? x.k : x.m, x.n, x.c_ld, x.c_layout, x.output};
  TransposeIndexView ti;
  ti.col_ptr = reinterpret_cast<const int32_t*>(x.t_col_ptr);
  ti.row_idx = reinterpret_cast<const int32_t*>(x.t_row_idx);
  ti.block_id = reinterpret_cast<const int32_t*>(x.t_block_id);
  return detail::Problem::from_rust(t ? detail::Problem::transposed_view(a, ti) : a, b, c, x.alpha, x.beta, x.backend,
                                    reinterpret_cast<const void*>(x.bias), x.activation, device, t,
                                    t ? ti.block_id : nullptr);
}

// The SDDMM of the Rust entry (src/spmm.rs validated it; S comes from a DeviceBsr).
detail::SddmmProblem to_problem(const SddmmProblem& x, const detail::DeviceInfo& device) {
  BsrMutView s;
  s.m = x.m;
  s.n = x.n;
  s.bm = x.bm;
  s.bn = x.bn;
  s.nnzb = x.nnzb;
  s.row_ptr = reinterpret_cast<const int32_t*>(x.row_ptr);
  s.col_idx = reinterpret_cast<const int32_t*>(x.col_idx);
  s.values = reinterpret_cast<void*>(x.values);
  s.dtype = x.output;
  const DenseView a{reinterpret_cast<void*>(x.a), x.m, x.k, x.a_ld, x.a_layout, x.input};
  const DenseView b{reinterpret_cast<void*>(x.b), x.k, x.n, x.b_ld, x.b_layout, x.input};
  return detail::SddmmProblem::from_rust(a, b, s, x.alpha, x.beta, x.backend, device);
}

template <class P>
FfiStatus status(const Result& r, const detail::SelectionOf<P>& s) {
  const bool chosen = r.ok() && s.family != nullptr;
  return FfiStatus{r.status, rust::String(r.message), chosen ? s.family->backend : Backend::Auto,
                   rust::String(chosen ? s.family->info(s.row).name : "")};
}

// Selects a row for the problem and, when `run`, launches it on the problem's stream.
template <class X>
FfiStatus select_and_run(const X& x, bool run) {
  using P = decltype(to_problem(x, detail::DeviceInfo{}));
  detail::SelectionOf<P> s;
  detail::DeviceInfo device;
  Result r = detail::current_device(&device);
  if (!r.ok()) return status(r, s);
  const P p = to_problem(x, device);
  r = detail::select(p, &s);
  if (r.ok() && run) r = detail::launch(p, s, reinterpret_cast<cudaStream_t>(x.stream));
  return status(r, s);
}

}  // namespace

FfiStatus select(const SpmmProblem& problem) { return select_and_run(problem, false); }

FfiStatus spmm(const SpmmProblem& problem) { return select_and_run(problem, true); }

FfiStatus select_sddmm(const SddmmProblem& problem) { return select_and_run(problem, false); }

FfiStatus sddmm(const SddmmProblem& problem) { return select_and_run(problem, true); }

}  // namespace sparsek::ffi
