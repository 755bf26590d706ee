// The C++ entry of the row scaling (include/sparsek/rowscale.hpp): validate the views once into
// a checked RowscaleProblem (cpp/rowscale/problem.hpp), then the registry's select and launch
// (core/registry.hpp), defined for the operation here (SPARSEK_DEFINE_OPERATION), so every
// caller of them links this object.
#include <cstdint>

#include <sparsek/rowscale.hpp>

#include "core/dtype.hpp"
#include "core/select.hpp"
#include "core/validate.hpp"
#include "rowscale/operation.hpp"
#include "rowscale/problem.hpp"

namespace sparsek {
namespace detail {

// Malformed views (InvalidArgument) first, then what no kernel takes (NotSupported), then the
// device.
Result validate_rowscale(const BsrView& a, const float* s, void* c_values, const DeviceSource& devices,
                         RowscaleProblem* out) {
  Result r = check_bsr(a, "A");
  if (r.ok()) r = check_scales("A", a.dtype, a.scale_kind, a.scales, ScaleKind::None);
  if (r.ok()) r = check_aligned("s", s, 4);
  if (r.ok()) r = check_aligned("c_values", c_values, dtype_bytes(a.dtype));
  if (!r.ok()) return r;
  if (a.m > 0 && s == nullptr) return make_result(Status::InvalidArgument, "s is null with m = %lld", (long long)a.m);
  if (a.nnzb > 0 && c_values == nullptr)
    return make_result(Status::InvalidArgument, "c_values is null with nnzb = %lld", (long long)a.nnzb);
  // check_bsr proved nnzb * bm * bk elements of A's dtype fit int64 bytes; s's m floats may
  // not, and elements() then takes them as reaching the end of memory (an overlap, not a
  // wrap).
  const int64_t count = a.nnzb * int64_t(a.bm) * a.bk;
  const int64_t bytes = dtype_bytes(a.dtype);
  {
    const ByteRange inputs[] = {elements(a.values, count, bytes), elements(a.row_ptr, a.m / a.bm + 1, 4),
                                elements(a.col_idx, a.nnzb, 4), elements(s, a.m, 4)};
    const char* const names[] = {"A.values", "A.row_ptr", "A.col_idx", "s"};
    r = check_disjoint("c_values", elements(c_values, count, bytes), inputs, names);
    if (!r.ok()) return r;
  }
  if (!is_half(a.dtype))
    return make_result(Status::NotSupported, "rowscale reads f16 or bf16, not %s", dtype_name(a.dtype));
  DeviceInfo device;
  r = devices.resolve(&device);
  if (!r.ok()) return r;
  *out = RowscaleProblem(a, s, c_values, device);
  return Result{};
}

SPARSEK_DEFINE_OPERATION(RowscaleProblem)

}  // namespace detail

Result rowscale(const BsrView& a, const float* s, void* c_values, cudaStream_t stream) {
  detail::RowscaleProblem p;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate_rowscale(a, s, c_values, detail::DeviceSource::of_stream(stream), &p);
  if (r.ok()) r = detail::select_and_launch(p, stream);
  return detail::finish(r);
}

}  // namespace sparsek
