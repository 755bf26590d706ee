// The C++ entry of the gated MLP (include/sparsek/mlp.hpp): both products validated and
// selected first, then launched in order on one stream. Composes the products' own checked
// problems (cpp/spmm/problem.hpp); no kernel of its own.
#include <cstdio>
#include <cstring>

#include <sparsek/mlp.hpp>

#include "core/dtype.hpp"
#include "core/index_check.hpp"
#include "core/registry.hpp"
#include "core/validate.hpp"
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


}  // namespace

Result sparse_mlp(const MlpView& mlp, const DenseView& x, const DenseMutView& h, const DenseMutView& y,
                  cudaStream_t stream) {
  SpmmOptions first;
  first.gated = true;
  first.activation = mlp.activation;
  first.backend = mlp.backend;
  first.check_indices = mlp.check_indices;
  SpmmOptions second;
  second.backend = mlp.backend;
  second.check_indices = mlp.check_indices;
  constexpr const char* kFirst = "the gate and up product";
  constexpr const char* kSecond = "the down product";

  // Every view of both products first, then the device (queried once).
  detail::Problem p1, p2;
  detail::Selection s1, s2;
  const detail::DeviceInfo unqueried;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = naming(detail::validate(mlp.gate_up, x, h, first, &p1, &unqueried), kFirst);
  if (r.ok()) r = naming(detail::validate(mlp.down, DenseView(h), y, second, &p2, &unqueried), kSecond);
  // Across the two: h (written first) may not overlap the down weight, which the second
  // product reads after it; nor y the gate and up weight or x (the overlap of an output with
  // its own product's inputs is that product's check above). Counts passed check_bsr.
  if (r.ok()) {
    const BsrView& d = mlp.down;
    const detail::ByteRange inputs[] = {
        detail::elements(d.values, d.nnzb * d.bm * d.bk, detail::dtype_bytes(d.dtype)),
        detail::elements(d.row_ptr, d.m / d.bm + 1, 4),
        detail::elements(d.col_idx, d.nnzb, 4),
        detail::elements(d.scales, detail::scale_count(d.scale_kind, d.nnzb), 4),
    };
    const char* const names[] = {"down.values", "down.row_ptr", "down.col_idx", "down.scales"};
    r = detail::check_disjoint("h", detail::dense_bytes(DenseView(h)), inputs, names);
  }
  if (r.ok()) {
    const BsrView& g = mlp.gate_up;
    const detail::ByteRange inputs[] = {
        detail::dense_bytes(x),
        detail::elements(g.values, g.nnzb * g.bm * g.bk, detail::dtype_bytes(g.dtype)),
        detail::elements(g.row_ptr, g.m / g.bm + 1, 4),
        detail::elements(g.col_idx, g.nnzb, 4),
        detail::elements(g.scales, detail::scale_count(g.scale_kind, g.nnzb), 4),
    };
    const char* const names[] = {"x", "gate_up.values", "gate_up.row_ptr", "gate_up.col_idx", "gate_up.scales"};
    r = detail::check_disjoint("y", detail::dense_bytes(DenseView(y)), inputs, names);
  }
  if (r.ok()) r = detail::current_device(&p1.device);
  p2.device = p1.device;
  if (r.ok()) r = naming(detail::select(p1, &s1), kFirst);
  if (r.ok()) r = naming(detail::select(p2, &s2), kSecond);
  if (r.ok() && mlp.check_indices) r = naming(detail::check_indices(p1, stream), kFirst);
  if (r.ok() && mlp.check_indices) r = naming(detail::check_indices(p2, stream), kSecond);
  if (r.ok()) r = naming(detail::launch(p1, s1, stream), kFirst);
  if (r.ok()) r = naming(detail::launch(p2, s2, stream), kSecond);
  return detail::finish(r);
}

}  // namespace sparsek
