// The C++ entry of the products (include/sparsek/sparsek.hpp): validate the views once into
// a checked Problem (cpp/spmm/problem.hpp), optionally check A's indices on the device,
// select a kernel row (the registry, core/registry.hpp) and launch it. Nothing is launched
// unless every check passes. The registry's select and launch for the product are defined
// here (SPARSEK_DEFINE_OPERATION), so every caller of them links this object.
#include <climits>
#include <cstdio>

#include "core/dtype.hpp"
#include "core/select.hpp"
#include "core/validate.hpp"
#include "spmm/index_check.hpp"
#include "spmm/operation.hpp"
#include "spmm/problem.hpp"
#include "spmm/rules.hpp"

namespace sparsek {
namespace detail {
namespace {

int64_t element_bytes(DType t) { return dtype_bytes(t); }

}  // namespace

Result validate(const BsrView& a, const DenseView& b, const DenseMutView& c, const SpmmOptions& options,
                const DeviceSource& devices, Problem* out) {
  if (!valid(options.backend))
    return make_result(Status::InvalidArgument, "backend = %d is not a Backend", int(options.backend));
  if (!valid(options.activation))
    return make_result(Status::InvalidArgument, "activation = %d is not an Activation", int(options.activation));
  if (reinterpret_cast<uintptr_t>(options.bias) % 16 != 0)
    return make_result(Status::InvalidArgument, "bias is not 16-byte aligned");
  Result r = check_bsr(a);
  if (r.ok()) r = check_dense("B", b);
  if (r.ok()) r = check_dense("C", c);
  if (r.ok()) r = check_scales("A", a.scale_kind, a.scales);
  if (r.ok()) r = check_scales("B", b.scale_kind, b.scales);
  if (!r.ok()) return r;
  // The table's rules (rules/spmm.toml, as the Rust entry checks them): shapes, the gated
  // epilogue and the scales' kinds here, the element types after the overlaps below.
  const bool t = options.transpose_a;
  spmm_rules::Facts facts;
  facts.m = a.m, facts.k = a.k, facts.bm = a.bm;
  facts.transpose = t, facts.gated = options.gated, facts.beta_zero = options.beta == 0.0f;
  facts.b_rows = b.rows, facts.b_cols = b.cols, facts.c_rows = c.rows, facts.c_cols = c.cols;
  facts.a = a.dtype, facts.b = b.dtype, facts.c = c.dtype;
  facts.a_scaled = true;  // a C++ view's scales are its scale_kind (None: 1)
  facts.a_scales = a.scale_kind, facts.b_scales = b.scale_kind;
  facts.device = true;
  facts.backend = options.backend;
  r = spmm_rules::shapes(facts);
  if (!r.ok()) return r;
  // FP8 A: the bias has C's dtype (include/sparsek/sparsek.hpp).
  const DType bias_type = is_fp8(a.dtype) ? c.dtype : a.dtype;
  const int64_t op_rows = t ? a.k : a.m;
  if (t) {
    const TransposeIndexView& ti = options.transpose_index;
    if (ti.col_ptr == nullptr) return make_result(Status::InvalidArgument, "transpose_index.col_ptr is null");
    if (a.nnzb > 0 && (ti.row_idx == nullptr || ti.block_id == nullptr))
      return make_result(Status::InvalidArgument, "transpose_index.row_idx or block_id is null with nnzb = %lld",
                         (long long)a.nnzb);
    r = check_aligned("transpose_index.col_ptr", ti.col_ptr, alignof(int32_t));
    if (r.ok()) r = check_aligned("transpose_index.row_idx", ti.row_idx, alignof(int32_t));
    if (r.ok()) r = check_aligned("transpose_index.block_id", ti.block_id, alignof(int32_t));
    if (!r.ok()) return r;
  }
  // C is written: it may not overlap an input (C itself cannot overlap: ld covers its
  // contiguous extent, check_dense). Every count below fits int64 bytes (check_bsr).
  {
    const TransposeIndexView& ti = options.transpose_index;
    const int64_t rows = a.m / a.bm, cols = a.k / a.bk;
    const ByteRange inputs[] = {
        elements(a.values, a.nnzb * a.bm * a.bk, element_bytes(a.dtype)),
        elements(a.row_ptr, rows + 1, 4),
        elements(a.col_idx, a.nnzb, 4),
        dense_bytes(b),
        elements(options.bias, op_rows, element_bytes(bias_type)),
        elements(a.scales, scale_count(a.scale_kind, a.nnzb), 4),
        elements(b.scales, scale_count(b.scale_kind, b.cols), 4),
        t ? elements(ti.col_ptr, cols + 1, 4) : ByteRange{},
        t ? elements(ti.row_idx, a.nnzb, 4) : ByteRange{},
        t ? elements(ti.block_id, a.nnzb, 4) : ByteRange{},
    };
    const char* const names[] = {"A.values", "A.row_ptr", "A.col_idx", "B", "the bias", "A.scales", "B.scales",
                                 "transpose_index.col_ptr", "transpose_index.row_idx", "transpose_index.block_id"};
    r = check_disjoint("C", dense_bytes(c), inputs, names);
    if (!r.ok()) return r;
  }
  r = spmm_rules::types(facts);
  if (!r.ok()) return r;
  DeviceInfo device;
  r = devices.resolve(&device);
  if (!r.ok()) return r;
  // A^T's view passes check_bsr too: its block counts and sizes are A's, swapped.
  *out = Problem(t ? Problem::transposed_view(a, options.transpose_index) : a, b, c, options.alpha, options.beta,
                 options.backend, options.bias, options.activation, device);
  out->a_transposed = t;
  out->a_block_id = t ? options.transpose_index.block_id : nullptr;
  out->gated = options.gated;
  return Result{};
}

SPARSEK_DEFINE_OPERATION(Problem)

}  // namespace detail

Result can_implement(const BsrView& a, const DenseView& b, const DenseMutView& c, const SpmmOptions& options,
                     Backend* chosen) {
  if (chosen != nullptr) *chosen = Backend::Auto;
  detail::Problem p;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate(a, b, c, options, detail::DeviceSource::current(), &p);
  detail::Selection s;
  if (r.ok()) r = detail::select(p, &s);
  if (r.ok() && chosen != nullptr) *chosen = s.family->backend;
  return detail::finish(r);
}

Result spmm(const BsrView& a, const DenseView& b, const DenseMutView& c, const SpmmOptions& options,
            cudaStream_t stream) {
  detail::Problem p;
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate(a, b, c, options, detail::DeviceSource::of_stream(stream), &p);
  detail::Selection s;
  if (r.ok()) r = detail::select(p, &s);
  if (r.ok() && options.check_indices) r = detail::check_indices(p, stream);
  if (r.ok()) r = detail::launch(p, s, stream);
  return detail::finish(r);
}

}  // namespace sparsek
