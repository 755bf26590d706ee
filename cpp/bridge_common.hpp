// What every operation's half of the cxx bridge (cpp/<operation>/bridge.cc; the Rust side is
// src/device/sys.rs) shares: the descriptors' conversions into the C++ views, and the one
// select-or-launch path of an operation whose families the registry holds. Compiled by the
// host compiler, only in the Rust build.
#pragma once

#include <sparsek/sparsek.hpp>

#include "core/registry.hpp"
#include "core/result.hpp"
#include "core/validate.hpp"
#include "sparsek/src/device/sys.rs.h"

namespace sparsek::ffi {

inline DenseView to_dense(const DenseDesc& d) {
  return DenseView{reinterpret_cast<const void*>(d.data), d.rows,   d.cols, d.ld, d.layout, d.dtype,
                   reinterpret_cast<const float*>(d.scales), d.scale_kind};
}

// An output: the Rust side lent it mutably.
inline DenseMutView to_dense_mut(const DenseDesc& d) {
  return DenseMutView{reinterpret_cast<void*>(d.data), d.rows, d.cols, d.ld, d.layout, d.dtype};
}

inline BsrView to_bsr(const BsrDesc& d) {
  BsrView a;
  a.m = d.m;
  a.k = d.k;
  a.bm = d.bm;
  a.bk = d.bk;
  a.nnzb = d.nnzb;
  a.row_ptr = reinterpret_cast<const int32_t*>(d.row_ptr);
  a.col_idx = reinterpret_cast<const int32_t*>(d.col_idx);
  a.values = reinterpret_cast<const void*>(d.values);
  a.dtype = d.dtype;
  a.scales = reinterpret_cast<const float*>(d.scales);
  a.scale_kind = d.scale_kind;
  a.settled = d.settled;
  return a;
}

// The room a BsrDesc keeps for batched matrices: no family takes them yet.
inline const char* unsupported(const BsrDesc& d) {
  if (d.batch != 1 || d.batch_stride != 0) return "batched BSR matrices are not supported yet";
  return nullptr;
}

template <class P>
FfiStatus status(const Result& r, const detail::SelectionOf<P>& s) {
  const bool chosen = r.ok() && s.family != nullptr;
  return FfiStatus{r.status, rust::String(r.message), chosen ? s.family->backend : Backend::Auto,
                   rust::String(chosen ? s.family->info(s.row).name : "")};
}

// Selects a row for the problem `x` of the Rust entry and, with Mode::Launch, launches it on
// its stream. `why_unsupported`: null, or why no family takes x; `to_problem(device)`: x as
// the operation's checked problem on the current device; `before_launch(p, stream)`: what
// must pass after the selection and before a launch (a device index check), its Result.
template <class X, class ToProblem, class BeforeLaunch>
FfiStatus select_and_run(const X& x, const char* why_unsupported, ToProblem to_problem, BeforeLaunch before_launch) {
  using P = decltype(to_problem(detail::DeviceInfo{}));
  detail::SelectionOf<P> s;
  if (why_unsupported != nullptr) return status(detail::make_result(Status::NotSupported, "%s", why_unsupported), s);
  if (x.mode != Mode::Select && x.mode != Mode::Launch)
    return status(detail::make_result(Status::InvalidArgument, "unknown mode %d", int(x.mode)), s);
  // The Rust side binds the stream's context first; a stream of another device (a missed
  // bind) is refused here rather than launched into (core/validate.hpp, DeviceSource).
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(x.stream);
  const detail::DeviceSource devices =
      x.mode == Mode::Launch ? detail::DeviceSource::of_stream(stream) : detail::DeviceSource::current();
  detail::DeviceInfo device;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = devices.resolve(&device);
  if (!r.ok()) return status(detail::settle(r), s);
  const P p = to_problem(device);
  r = detail::select(p, &s);
  if (r.ok() && x.mode == Mode::Launch) r = before_launch(p, stream);
  if (r.ok() && x.mode == Mode::Launch) r = detail::launch(p, s, stream);
  return status(detail::settle(r), s);
}

template <class X, class ToProblem>
FfiStatus select_and_run(const X& x, const char* why_unsupported, ToProblem to_problem) {
  return select_and_run(x, why_unsupported, to_problem, [](const auto&, cudaStream_t) { return Result{}; });
}

}  // namespace sparsek::ffi
