// sddmm's half of the cxx bridge (src/device/sys.rs, cpp/bridge_common.hpp).
#include "bridge_common.hpp"
#include "sparsek/cpp/sddmm/bridge.h"
#include "sddmm/problem.hpp"

namespace sparsek::ffi {
namespace {

// The SDDMM of the Rust entry (src/sddmm/check.rs validated it; S comes from a DeviceBsr).
detail::SddmmProblem to_problem(const SddmmProblem& x, const detail::DeviceInfo& device) {
  const BsrView v = to_bsr(x.s);
  BsrMutView s;
  s.m = v.m;
  s.n = v.k;
  s.bm = v.bm;
  s.bn = v.bk;
  s.nnzb = v.nnzb;
  s.row_ptr = v.row_ptr;
  s.col_idx = v.col_idx;
  s.values = const_cast<void*>(v.values);  // written by a launch: the Rust side lent it mutably
  s.dtype = v.dtype;
  return detail::SddmmProblem::from_rust(to_dense(x.a), to_dense(x.b), s, x.alpha, x.beta, x.backend, device);
}

}  // namespace

FfiStatus sddmm(const SddmmProblem& problem) {
  return select_and_run(problem, unsupported(problem.s),
                        [&problem](const detail::DeviceInfo& device) { return to_problem(problem, device); });
}

}  // namespace sparsek::ffi
