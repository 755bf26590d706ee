// The C++ entry of the SDDMM (include/sparsek/sddmm.hpp): validate the views once into a
// checked SddmmProblem (cpp/sddmm/problem.hpp), optionally check S's indices on the device,
// select a kernel row (the registry, core/registry.hpp) and launch it. The registry's select
// and launch for the SDDMM are defined here (SPARSEK_DEFINE_OPERATION), so every caller of
// them links this object.
#include <climits>
#include <cstdio>

#include <sparsek/sddmm.hpp>

#include "core/dtype.hpp"
#include "core/index_check.hpp"
#include "core/select.hpp"
#include "core/validate.hpp"
#include "sddmm/operation.hpp"
#include "sddmm/problem.hpp"
#include "sddmm/rules.hpp"

namespace sparsek {
namespace detail {
namespace {

int64_t element_bytes(DType t) { return dtype_bytes(t); }

}  // namespace

Result validate(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
                const DeviceSource& devices, SddmmProblem* out) {
  if (!valid(options.backend))
    return make_result(Status::InvalidArgument, "backend = %d is not a Backend", int(options.backend));
  // S's checks are a BsrView's, n and bn in the place of k and bk.
  BsrView pattern;
  pattern.m = s.m, pattern.k = s.n, pattern.bm = s.bm, pattern.bk = s.bn, pattern.nnzb = s.nnzb;
  pattern.row_ptr = s.row_ptr, pattern.col_idx = s.col_idx, pattern.values = s.values, pattern.dtype = s.dtype;
  Result r = check_bsr(pattern, "S");
  if (r.ok()) r = check_dense("A", a);
  if (r.ok()) r = check_dense("B", b);
  // A and B's scale fields by value (whether the SDDMM takes any is the table's rule).
  if (r.ok()) r = check_scales("A", a.scale_kind, a.scales);
  if (r.ok()) r = check_scales("B", b.scale_kind, b.scales);
  if (!r.ok()) return r;
  // The table's rules (rules/sddmm.toml, as the Rust entry checks them): the shapes and no
  // scales here, the element types after the overlap check below.
  sddmm_rules::Facts facts;
  facts.m = s.m, facts.n = s.n;
  facts.a_rows = a.rows, facts.a_cols = a.cols, facts.b_rows = b.rows, facts.b_cols = b.cols;
  facts.a = a.dtype, facts.b = b.dtype, facts.c = s.dtype;
  facts.a_scales = a.scale_kind, facts.b_scales = b.scale_kind;
  facts.device = true;
  facts.backend = options.backend;
  r = sddmm_rules::shapes(facts);
  if (!r.ok()) return r;
  // S's values are written: they may not overlap A, B or S's own index arrays (every count
  // fits int64 bytes, check_bsr).
  {
    const ByteRange inputs[] = {dense_bytes(a), dense_bytes(b), elements(s.row_ptr, s.m / s.bm + 1, 4),
                                elements(s.col_idx, s.nnzb, 4)};
    const char* const names[] = {"A", "B", "S.row_ptr", "S.col_idx"};
    r = check_disjoint("S.values", elements(s.values, s.nnzb * s.bm * s.bn, element_bytes(s.dtype)), inputs, names);
    if (!r.ok()) return r;
  }
  r = sddmm_rules::types(facts);
  if (!r.ok()) return r;
  DeviceInfo device;
  r = devices.resolve(&device);
  if (!r.ok()) return r;
  *out = SddmmProblem(a, b, s, options.alpha, options.beta, options.backend, device);
  return Result{};
}

SPARSEK_DEFINE_OPERATION(SddmmProblem)

}  // namespace detail

Result can_implement(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
                     Backend* chosen) {
  if (chosen != nullptr) *chosen = Backend::Auto;
  detail::SddmmProblem p;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate(a, b, s, options, detail::DeviceSource::current(), &p);
  detail::SddmmSelection sel;
  if (r.ok()) r = detail::select(p, &sel);
  if (r.ok() && chosen != nullptr) *chosen = sel.family->backend;
  return detail::finish(r);
}

Result sddmm(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
             cudaStream_t stream) {
  detail::SddmmProblem p;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate(a, b, s, options, detail::DeviceSource::of_stream(stream), &p);
  detail::SddmmSelection sel;
  if (r.ok()) r = detail::select(p, &sel);
  if (r.ok() && options.check_indices) r = detail::check_pattern(p.s.row_ptr, p.s.col_idx, p.block_rows(),
                                                                  p.block_cols(), p.s.nnzb, stream, "S");
  if (r.ok()) r = detail::launch(p, sel, stream);
  return detail::finish(r);
}

}  // namespace sparsek
