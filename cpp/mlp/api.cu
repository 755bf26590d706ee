// The C++ entry of the gated MLP (include/sparsek/mlp.hpp): both products validated and
// selected first, then launched in order on one stream. Composes the products' own checked
// problems (cpp/spmm/problem.hpp); no kernel of its own.
#include <cstdio>
#include <cstring>

#include <sparsek/mlp.hpp>

#include "core/dtype.hpp"
#include "core/validate.hpp"
#include "mlp/problem.hpp"
#include "spmm/index_check.hpp"
#include "spmm/operation.hpp"
#include "spmm/problem.hpp"

namespace sparsek {
namespace {

// `r` with "<what>: " in front of its message (no prefix yet: finish adds "sparsek: ").
Result naming(Result r, const char* what) {
  if (r.ok()) return r;
  char body[sizeof(r.message)];
  std::memcpy(body, r.message, sizeof(body));
  std::snprintf(r.message, sizeof(r.message), "%s: %s", what, body);
  return r;
}

constexpr const char* kFirst = "the gate and up product";
constexpr const char* kSecond = "the down product";

}  // namespace

namespace detail {

Result validate_mlp(const MlpView& mlp, const DenseView& x, const DenseMutView& h, const DenseMutView& y,
                    const DeviceSource& devices, Problem* p1, Problem* p2) {
  SpmmOptions first;
  first.gated = true;
  first.activation = mlp.activation;
  first.backend = mlp.backend;
  first.check_indices = mlp.check_indices;
  first.bias = mlp.gate_up_bias;
  SpmmOptions second;
  second.backend = mlp.backend;
  second.check_indices = mlp.check_indices;
  second.bias = mlp.down_bias;

  // x, h and y by their own names first (each is also an operand of a product below), then
  // every view of both products, then the device (queried once).
  Result r = check_dense("x", x);
  if (r.ok()) r = check_dense("h", DenseView(h));
  if (r.ok()) r = check_dense("y", DenseView(y));
  if (r.ok()) r = naming(validate(mlp.gate_up, x, h, first, DeviceSource::deferred(), p1), kFirst);
  if (r.ok()) r = naming(validate(mlp.down, DenseView(h), y, second, DeviceSource::deferred(), p2), kSecond);
  // Across the two: h (written first) may not overlap the down weight or its bias, which the
  // second product reads after it; nor y the gate and up weight, its bias or x (the overlap of an output with
  // its own product's inputs is that product's check above). Counts passed check_bsr.
  if (r.ok()) {
    const BsrView& d = mlp.down;
    const ByteRange inputs[] = {
        elements(d.values, d.nnzb * d.bm * d.bk, dtype_bytes(d.dtype)),
        elements(d.row_ptr, d.m / d.bm + 1, 4),
        elements(d.col_idx, d.nnzb, 4),
        elements(d.scales, scale_count(d.scale_kind, d.nnzb), 4),
        elements(mlp.down_bias, d.m, dtype_bytes(is_fp8(d.dtype) ? y.dtype : d.dtype)),
    };
    const char* const names[] = {"down.values", "down.row_ptr", "down.col_idx", "down.scales", "down_bias"};
    r = check_disjoint("h", dense_bytes(DenseView(h)), inputs, names);
  }
  if (r.ok()) {
    const BsrView& g = mlp.gate_up;
    const ByteRange inputs[] = {
        dense_bytes(x),
        elements(g.values, g.nnzb * g.bm * g.bk, dtype_bytes(g.dtype)),
        elements(g.row_ptr, g.m / g.bm + 1, 4),
        elements(g.col_idx, g.nnzb, 4),
        elements(g.scales, scale_count(g.scale_kind, g.nnzb), 4),
        elements(mlp.gate_up_bias, g.m, dtype_bytes(is_fp8(g.dtype) ? h.dtype : g.dtype)),
    };
    const char* const names[] = {"x", "gate_up.values", "gate_up.row_ptr", "gate_up.col_idx", "gate_up.scales",
                                 "gate_up_bias"};
    r = check_disjoint("y", dense_bytes(DenseView(y)), inputs, names);
  }
  if (r.ok()) r = devices.resolve(&p1->device);
  if (r.ok()) p2->device = p1->device;
  return r;
}

}  // namespace detail

Result sparse_mlp(const MlpView& mlp, const DenseView& x, const DenseMutView& h, const DenseMutView& y,
                  cudaStream_t stream) {
  detail::Problem p1, p2;
  detail::Selection s1, s2;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate_mlp(mlp, x, h, y, detail::DeviceSource::of_stream(stream), &p1, &p2);
  if (r.ok()) r = naming(detail::select(p1, &s1), kFirst);
  if (r.ok()) r = naming(detail::select(p2, &s2), kSecond);
  if (r.ok() && mlp.check_indices) r = naming(detail::check_indices(p1, stream), kFirst);
  if (r.ok() && mlp.check_indices) r = naming(detail::check_indices(p2, stream), kSecond);
  if (r.ok()) r = naming(detail::launch(p1, s1, stream), kFirst);
  if (r.ok()) r = naming(detail::launch(p2, s2, stream), kSecond);
  return detail::finish(r);
}

}  // namespace sparsek
