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
  if (r.ok()) r = check_scales("A", a.dtype, a.scale_kind, a.scales, ScaleKind::PerBlock);
  if (r.ok()) r = check_scales("B", b.dtype, b.scale_kind, b.scales, ScaleKind::PerColumn);
  if (!r.ok()) return r;
  // FP8 A: the bias has C's dtype (include/sparsek/sparsek.hpp).
  const bool fp8 = is_fp8(a.dtype);
  const DType bias_type = fp8 ? c.dtype : a.dtype;
  // op(A)'s rows and columns: A's, or A's swapped for A^T.
  const bool t = options.transpose_a;
  const int64_t op_rows = t ? a.k : a.m, op_cols = t ? a.m : a.k;
  const char* op = t ? "A^T" : "A";
  if (b.rows != op_cols)
    return make_result(Status::InvalidArgument, "B has %lld rows, %s has %lld columns", (long long)b.rows, op,
                       (long long)op_cols);
  // Gated: A's block-rows are (gate, up) pairs and C gets one row per pair row.
  if (options.gated) {
    if (t) return make_result(Status::InvalidArgument, "gated takes op(A) = A only");
    if (options.beta != 0.0f)
      return make_result(Status::InvalidArgument, "gated needs beta = 0 (C is the gated product alone)");
    if (a.m % (2 * int64_t(a.bm)) != 0)
      return make_result(Status::InvalidArgument,
                         "gated needs an even number of block-rows (gate and up pairs): m = %lld, bm = %d",
                         (long long)a.m, a.bm);
  }
  const int64_t c_rows = options.gated ? op_rows / 2 : op_rows;
  if (c.rows != c_rows)
    return make_result(Status::InvalidArgument, "C has %lld rows, %s%s has %lld", (long long)c.rows,
                       options.gated ? "gated " : "", op, (long long)c_rows);
  if (c.cols != b.cols)
    return make_result(Status::InvalidArgument, "C has %lld columns, B has %lld", (long long)c.cols, (long long)b.cols);
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
  if (fp8) {
    // W8A8 (B of A's FP8 type) or W8A16 (B f16/bf16: check_scales refused scales on it); C f16,
    // bf16 or f32.
    const bool w8a16 = is_half(b.dtype);
    if (b.dtype != a.dtype && !w8a16)
      return make_result(Status::NotSupported, "an %s A takes B of %s, f16 or bf16, not %s", dtype_name(a.dtype),
                         dtype_name(a.dtype), dtype_name(b.dtype));
    if (!is_half(c.dtype) && c.dtype != DType::F32)
      return make_result(Status::NotSupported, "C must be f16, bf16 or f32, not %s", dtype_name(c.dtype));
    if (t)
      return make_result(Status::NotSupported,
                         "op(A) = A^T with an FP8 A: FP8 tensor cores read K-major operands only (transpose A's "
                         "blocks when quantizing)");
  } else {
    if (!is_half(a.dtype) || b.dtype != a.dtype)
      return make_result(Status::NotSupported, "inputs must be f16 or bf16 and equal (A is %s, B is %s)",
                         dtype_name(a.dtype), dtype_name(b.dtype));
    if (c.dtype != a.dtype && c.dtype != DType::F32)
      return make_result(Status::NotSupported, "C must be %s or f32, not %s", dtype_name(a.dtype), dtype_name(c.dtype));
  }
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
