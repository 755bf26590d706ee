// The public C++ entry points (include/sparsek/sparsek.hpp): validate the views once into
// a checked Problem (cpp/problem.hpp), optionally check A's indices on the device, select
// a kernel row (cpp/registry.hpp) and launch it. Nothing is launched unless every check
// passes.
#include <mutex>
#include <climits>
#include <cstdio>
#include <cstring>

#include "core/dtype.hpp"
#include "core/index_check.hpp"
#include "overlap.hpp"
#include "problem.hpp"
#include "core/registry.hpp"

namespace sparsek {
namespace detail {

Result make_result(Status s, const char* fmt, ...) {
  Result r;
  r.status = s;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(r.message, sizeof(r.message), fmt, args);
  va_end(args);
  return r;
}

Result current_device(DeviceInfo* out) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return make_result(Status::CudaError, "querying the current device: %s", cudaGetErrorString(e));
  DeviceInfo info;
  info.id = dev;
  // Device attributes do not change while a process runs: ask once per device. The
  // cache is published under its mutex, so readers never see a half-written entry.
  constexpr int kMaxDevices = 64;
  static std::mutex lock;
  static bool cached[kMaxDevices] = {};
  static DeviceInfo cache[kMaxDevices];
  if (dev >= 0 && dev < kMaxDevices) {
    std::lock_guard<std::mutex> guard(lock);
    if (cached[dev]) {
      *out = cache[dev];
      return Result{};
    }
  }
  e = cudaDeviceGetAttribute(&info.cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&info.cc_minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&info.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess)
    return make_result(Status::CudaError, "querying device %d: %s", dev, cudaGetErrorString(e));
  if (dev >= 0 && dev < kMaxDevices) {
    std::lock_guard<std::mutex> guard(lock);
    cache[dev] = info;
    cached[dev] = true;
  }
  *out = info;
  return Result{};
}

namespace {


int64_t element_bytes(DType t) { return dtype_bytes(t); }
bool valid(DType t) { return KnownDTypes::contains(t); }
bool valid(Layout l) { return l == Layout::RowMajor || l == Layout::ColMajor; }
bool valid(Backend b) {
  return b == Backend::Auto || b == Backend::Wmma || b == Backend::Hopper || b == Backend::Decode;
}
bool valid(Activation a) {
  return a == Activation::None || a == Activation::Relu || a == Activation::GeluTanh || a == Activation::Silu;
}

// A dense view: non-negative dims, non-null data when non-empty, ld covering the
// contiguous extent, and its last element's offset (in bytes too) inside int64.
Result check_dense(const char* name, const DenseView& v) {
  if (!valid(v.layout)) return make_result(Status::InvalidArgument, "%s.layout = %d is not a Layout", name, int(v.layout));
  if (!valid(v.dtype)) return make_result(Status::InvalidArgument, "%s.dtype = %d is not a DType", name, int(v.dtype));
  if (v.rows < 0 || v.cols < 0 || v.ld < 0)
    return make_result(Status::InvalidArgument, "%s is %lldx%lld with ld %lld: negative", name, (long long)v.rows,
                       (long long)v.cols, (long long)v.ld);
  const bool row = v.layout == Layout::RowMajor;
  const int64_t extent = row ? v.cols : v.rows, outer = row ? v.rows : v.cols;
  if (v.ld < (extent > 0 ? extent : 1))
    return make_result(Status::InvalidArgument, "%s.ld = %lld is smaller than its contiguous extent %lld", name,
                       (long long)v.ld, (long long)(extent > 0 ? extent : 1));
  if (v.rows == 0 || v.cols == 0) return Result{};
  if (v.data == nullptr) return make_result(Status::InvalidArgument, "%s.data is null", name);
  int64_t span = 0, bytes = 0;
  if (__builtin_mul_overflow(outer - 1, v.ld, &span) || __builtin_add_overflow(span, extent, &span) ||
      __builtin_mul_overflow(span, element_bytes(v.dtype), &bytes))
    return make_result(Status::InvalidArgument, "%s: (%lld - 1) * ld %lld + %lld elements overflow int64", name,
                       (long long)outer, (long long)v.ld, (long long)extent);
  return Result{};
}

// The bytes of a dense view that passed check_dense (empty when it has no element).
ByteRange dense_bytes(const DenseView& v) {
  if (v.rows == 0 || v.cols == 0) return ByteRange{};
  const bool row = v.layout == Layout::RowMajor;
  const int64_t extent = row ? v.cols : v.rows, outer = row ? v.rows : v.cols;
  return elements(v.data, (outer - 1) * v.ld + extent, element_bytes(v.dtype));  // fits: check_dense
}

// A BSR view (`name`: "A", or "S" for the SDDMM's output, whose k is n and bk is bn).
Result check_bsr(const BsrView& a, const char* name = "A") {
  if (!valid(a.dtype)) return make_result(Status::InvalidArgument, "%s.dtype = %d is not a DType", name, int(a.dtype));
  if (a.bm <= 0 || a.bk <= 0) return make_result(Status::InvalidArgument, "block shape %dx%d is not positive", a.bm, a.bk);
  if (a.m < 0 || a.k < 0 || a.nnzb < 0)
    return make_result(Status::InvalidArgument, "%s is %lldx%lld with nnzb %lld: negative", name, (long long)a.m,
                       (long long)a.k, (long long)a.nnzb);
  if (a.m % a.bm != 0 || a.k % a.bk != 0)
    return make_result(Status::InvalidArgument, "%s is %lldx%lld, not a multiple of the %dx%d block", name, (long long)a.m,
                       (long long)a.k, a.bm, a.bk);
  const int64_t rows = a.m / a.bm, cols = a.k / a.bk;
  if (rows > INT32_MAX || cols > INT32_MAX)
    return make_result(Status::InvalidArgument, "%s has %lldx%lld blocks; block counts must fit int32", name, (long long)rows,
                       (long long)cols);
  const int64_t blocks = rows * cols;  // < 2^62: both factors fit int32
  if (a.nnzb > blocks || a.nnzb > INT32_MAX)
    return make_result(Status::InvalidArgument, "nnzb = %lld is out of range (%lld blocks, int32 indices)",
                       (long long)a.nnzb, (long long)blocks);
  int64_t values = 0;
  if (__builtin_mul_overflow(a.nnzb, int64_t(a.bm) * a.bk, &values) ||
      __builtin_mul_overflow(values, element_bytes(a.dtype), &values))
    return make_result(Status::InvalidArgument, "nnzb * bm * bk = %lld * %d * %d values overflow int64 bytes",
                       (long long)a.nnzb, a.bm, a.bk);
  if (a.row_ptr == nullptr) return make_result(Status::InvalidArgument, "%s.row_ptr is null", name);
  if (a.nnzb > 0 && (a.col_idx == nullptr || a.values == nullptr))
    return make_result(Status::InvalidArgument, "%s.col_idx or %s.values is null with nnzb = %lld", name, name,
                       (long long)a.nnzb);
  return Result{};
}

}  // namespace

Result finish(Result r) {
  if (r.ok()) return r;
  char body[sizeof(r.message)];
  std::memcpy(body, r.message, sizeof(body));
  std::snprintf(r.message, sizeof(r.message), "sparsek: %s", body);
  return r;
}

Result validate(const BsrView& a, const DenseView& b, const DenseView& c, const SpmmOptions& options, Problem* out) {
  if (!valid(options.backend))
    return make_result(Status::InvalidArgument, "backend = %d is not a Backend", int(options.backend));
  if (!valid(options.activation))
    return make_result(Status::InvalidArgument, "activation = %d is not an Activation", int(options.activation));
  if (reinterpret_cast<uintptr_t>(options.bias) % 16 != 0)
    return make_result(Status::InvalidArgument, "bias is not 16-byte aligned");
  Result r = check_bsr(a);
  if (r.ok()) r = check_dense("B", b);
  if (r.ok()) r = check_dense("C", c);
  if (!r.ok()) return r;
  // op(A)'s rows and columns: A's, or A's swapped for A^T.
  const bool t = options.transpose_a;
  const int64_t op_rows = t ? a.k : a.m, op_cols = t ? a.m : a.k;
  const char* op = t ? "A^T" : "A";
  if (b.rows != op_cols)
    return make_result(Status::InvalidArgument, "B has %lld rows, %s has %lld columns", (long long)b.rows, op,
                       (long long)op_cols);
  if (c.rows != op_rows)
    return make_result(Status::InvalidArgument, "C has %lld rows, %s has %lld", (long long)c.rows, op,
                       (long long)op_rows);
  if (c.cols != b.cols)
    return make_result(Status::InvalidArgument, "C has %lld columns, B has %lld", (long long)c.cols, (long long)b.cols);
  if (t) {
    const TransposeIndexView& ti = options.transpose_index;
    if (ti.col_ptr == nullptr) return make_result(Status::InvalidArgument, "transpose_index.col_ptr is null");
    if (a.nnzb > 0 && (ti.row_idx == nullptr || ti.block_id == nullptr))
      return make_result(Status::InvalidArgument, "transpose_index.row_idx or block_id is null with nnzb = %lld",
                         (long long)a.nnzb);
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
        elements(options.bias, c.rows, element_bytes(a.dtype)),
        t ? elements(ti.col_ptr, cols + 1, 4) : ByteRange{},
        t ? elements(ti.row_idx, a.nnzb, 4) : ByteRange{},
        t ? elements(ti.block_id, a.nnzb, 4) : ByteRange{},
    };
    const char* const names[] = {"A.values", "A.row_ptr", "A.col_idx", "B", "the bias",
                                 "transpose_index.col_ptr", "transpose_index.row_idx", "transpose_index.block_id"};
    r = check_disjoint("C", dense_bytes(c), inputs, names);
    if (!r.ok()) return r;
  }
  if ((a.dtype != DType::F16 && a.dtype != DType::BF16) || b.dtype != a.dtype)
    return make_result(Status::NotSupported, "inputs must be f16 or bf16 and equal (A is %s, B is %s)",
                       dtype_name(a.dtype), dtype_name(b.dtype));
  if (c.dtype != a.dtype && c.dtype != DType::F32)
    return make_result(Status::NotSupported, "C must be %s or f32, not %s", dtype_name(a.dtype), dtype_name(c.dtype));
  DeviceInfo device;
  r = current_device(&device);
  if (!r.ok()) return r;
  // A^T's view passes check_bsr too: its block counts and sizes are A's, swapped.
  *out = Problem(t ? Problem::transposed_view(a, options.transpose_index) : a, b, c, options.alpha, options.beta,
                 options.backend, options.bias, options.activation, device);
  out->a_transposed = t;
  out->a_block_id = t ? options.transpose_index.block_id : nullptr;
  return Result{};
}

Result validate(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
                SddmmProblem* out) {
  if (!valid(options.backend))
    return make_result(Status::InvalidArgument, "backend = %d is not a Backend", int(options.backend));
  // S's checks are a BsrView's, n and bn in the place of k and bk.
  BsrView pattern;
  pattern.m = s.m, pattern.k = s.n, pattern.bm = s.bm, pattern.bk = s.bn, pattern.nnzb = s.nnzb;
  pattern.row_ptr = s.row_ptr, pattern.col_idx = s.col_idx, pattern.values = s.values, pattern.dtype = s.dtype;
  Result r = check_bsr(pattern, "S");
  if (r.ok()) r = check_dense("A", a);
  if (r.ok()) r = check_dense("B", b);
  if (!r.ok()) return r;
  if (a.rows != s.m)
    return make_result(Status::InvalidArgument, "A has %lld rows, S has m = %lld", (long long)a.rows, (long long)s.m);
  if (b.cols != s.n)
    return make_result(Status::InvalidArgument, "B has %lld columns, S has n = %lld", (long long)b.cols,
                       (long long)s.n);
  if (b.rows != a.cols)
    return make_result(Status::InvalidArgument, "B has %lld rows, A has %lld columns", (long long)b.rows,
                       (long long)a.cols);
  // S's values are written: they may not overlap A, B or S's own index arrays (every count
  // fits int64 bytes, check_bsr).
  {
    const ByteRange inputs[] = {dense_bytes(a), dense_bytes(b), elements(s.row_ptr, s.m / s.bm + 1, 4),
                                elements(s.col_idx, s.nnzb, 4)};
    const char* const names[] = {"A", "B", "S.row_ptr", "S.col_idx"};
    r = check_disjoint("S.values", elements(s.values, s.nnzb * s.bm * s.bn, element_bytes(s.dtype)), inputs, names);
    if (!r.ok()) return r;
  }
  if ((a.dtype != DType::F16 && a.dtype != DType::BF16) || b.dtype != a.dtype)
    return make_result(Status::NotSupported, "inputs must be f16 or bf16 and equal (A is %s, B is %s)",
                       dtype_name(a.dtype), dtype_name(b.dtype));
  if (s.dtype != a.dtype && s.dtype != DType::F32)
    return make_result(Status::NotSupported, "S must be %s or f32, not %s", dtype_name(a.dtype), dtype_name(s.dtype));
  DeviceInfo device;
  r = current_device(&device);
  if (!r.ok()) return r;
  *out = SddmmProblem(a, b, s, options.alpha, options.beta, options.backend, device);
  return Result{};
}

}  // namespace detail

Result can_implement(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
                     Backend* chosen) {
  detail::SddmmProblem p;
  Result r = detail::validate(a, b, s, options, &p);
  detail::SddmmSelection sel;
  if (r.ok()) r = detail::select(p, &sel);
  if (r.ok() && chosen != nullptr) *chosen = sel.family->backend;
  return detail::finish(r);
}

Result sddmm(const DenseView& a, const DenseView& b, const BsrMutView& s, const SddmmOptions& options,
             cudaStream_t stream) {
  detail::SddmmProblem p;
  Result r = detail::validate(a, b, s, options, &p);
  detail::SddmmSelection sel;
  if (r.ok()) r = detail::select(p, &sel);
  if (r.ok() && options.check_indices) r = detail::check_pattern(p.s.row_ptr, p.s.col_idx, p.block_rows(),
                                                                  p.block_cols(), p.s.nnzb, stream, "S");
  if (r.ok()) r = detail::launch(p, sel, stream);
  return detail::finish(r);
}

Result can_implement(const BsrView& a, const DenseView& b, const DenseView& c, const SpmmOptions& options,
                     Backend* chosen) {
  detail::Problem p;
  Result r = detail::validate(a, b, c, options, &p);
  detail::Selection s;
  if (r.ok()) r = detail::select(p, &s);
  if (r.ok() && chosen != nullptr) *chosen = s.family->backend;
  return detail::finish(r);
}

Result spmm(const BsrView& a, const DenseView& b, const DenseView& c, const SpmmOptions& options,
            cudaStream_t stream) {
  detail::Problem p;
  Result r = detail::validate(a, b, c, options, &p);
  detail::Selection s;
  if (r.ok()) r = detail::select(p, &s);
  if (r.ok() && options.check_indices) r = detail::check_indices(p, stream);
  if (r.ok()) r = detail::launch(p, s, stream);
  return detail::finish(r);
}

}  // namespace sparsek
