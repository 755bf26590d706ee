// The public C++ entry points (include/sparsek/sparsek.hpp): validate the views, pick a
// kernel family, launch. Nothing is launched unless every check passes.
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "problem.hpp"

namespace sparsek {
namespace {

Result make(Status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Result make(Status s, const char* fmt, ...) {
  Result r;
  r.status = s;
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(r.message, sizeof(r.message), fmt, args);
  va_end(args);
  return r;
}

bool is16(DType t) { return t == DType::F16 || t == DType::BF16; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
  }
  return "?";
}

// Checks that hold for every backend. A dense view needs ld >= its contiguous extent.
Result check_common(const BsrView& a, const DenseView& b, const DenseView& c) {
  if (a.bm <= 0 || a.bk <= 0) return make(Status::InvalidArgument, "block shape %dx%d is not positive", a.bm, a.bk);
  if (a.m < 0 || a.k < 0 || a.m % a.bm != 0 || a.k % a.bk != 0)
    return make(Status::InvalidArgument, "A is %lldx%lld, not a multiple of the %dx%d block",
                (long long)a.m, (long long)a.k, a.bm, a.bk);
  if (a.nnzb < 0 || a.nnzb > (a.m / a.bm) * (a.k / a.bk))
    return make(Status::InvalidArgument, "nnzb %lld is out of range", (long long)a.nnzb);
  if (a.row_ptr == nullptr) return make(Status::InvalidArgument, "A.row_ptr is null");
  if (a.nnzb > 0 && (a.col_idx == nullptr || a.values == nullptr))
    return make(Status::InvalidArgument, "A.col_idx or A.values is null with nnzb = %lld", (long long)a.nnzb);
  if (b.rows != a.k) return make(Status::InvalidArgument, "B has %lld rows, A has k = %lld", (long long)b.rows, (long long)a.k);
  if (c.rows != a.m) return make(Status::InvalidArgument, "C has %lld rows, A has m = %lld", (long long)c.rows, (long long)a.m);
  if (c.cols != b.cols) return make(Status::InvalidArgument, "C has %lld columns, B has %lld", (long long)c.cols, (long long)b.cols);
  const DenseView* views[2] = {&b, &c};
  const char* names[2] = {"B", "C"};
  for (int i = 0; i < 2; ++i) {
    const DenseView& v = *views[i];
    if (v.rows > 0 && v.cols > 0 && v.data == nullptr) return make(Status::InvalidArgument, "%s.data is null", names[i]);
    int64_t extent = v.layout == Layout::RowMajor ? v.cols : v.rows;
    if (v.ld < (extent > 0 ? extent : 1))
      return make(Status::InvalidArgument, "%s.ld = %lld is smaller than its contiguous extent %lld", names[i],
                  (long long)v.ld, (long long)extent);
  }
  if (!is16(a.dtype) || b.dtype != a.dtype)
    return make(Status::NotSupported, "inputs must be f16 or bf16 and equal (A is %s, B is %s)", dtype_name(a.dtype),
                dtype_name(b.dtype));
  if (c.dtype != a.dtype && c.dtype != DType::F32)
    return make(Status::NotSupported, "C must be %s or f32, not %s", dtype_name(a.dtype), dtype_name(c.dtype));
  return Result{};
}

Result current_cc(int* major, int* minor) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess) return make(Status::CudaError, "querying the device: %s", cudaGetErrorString(e));
  return Result{};
}

}  // namespace

Result can_implement(const BsrView& a, const DenseView& b, const DenseView& c, const SpmmOptions& options,
                     Backend* chosen) {
  Result r = check_common(a, b, c);
  if (!r.ok()) return r;
  int major = 0, minor = 0;
  r = current_cc(&major, &minor);
  if (!r.ok()) return r;
  detail::Problem p{a, b, c, options.alpha, options.beta};
  const char* why_cutlass = detail::cutlass_unsupported_reason(p, major, minor);
  const char* why_wmma = detail::wmma_unsupported_reason(p, major, minor);
  Backend pick = Backend::Auto;
  switch (options.backend) {
    case Backend::Cutlass:
      if (why_cutlass) return make(Status::NotSupported, "cutlass backend: %s", why_cutlass);
      pick = Backend::Cutlass;
      break;
    case Backend::Wmma:
      if (why_wmma) return make(Status::NotSupported, "wmma backend: %s", why_wmma);
      pick = Backend::Wmma;
      break;
    case Backend::Auto:
      // The Hopper path is the faster one wherever it applies.
      if (!why_cutlass) pick = Backend::Cutlass;
      else if (!why_wmma) pick = Backend::Wmma;
      else return make(Status::NotSupported, "no backend takes this problem (cutlass: %s; wmma: %s)", why_cutlass, why_wmma);
      break;
    default:
      return make(Status::InvalidArgument, "unknown backend %d", (int)options.backend);
  }
  if (chosen) *chosen = pick;
  return Result{};
}

Result spmm(const BsrView& a, const DenseView& b, const DenseView& c, const SpmmOptions& options,
            cudaStream_t stream) {
  Backend pick = Backend::Auto;
  Result r = can_implement(a, b, c, options, &pick);
  if (!r.ok()) return r;
  if (a.m == 0 || c.cols == 0) return r;  // nothing to compute or write
  detail::Problem p{a, b, c, options.alpha, options.beta};
  cudaError_t e = pick == Backend::Cutlass ? detail::cutlass_launch(p, stream) : detail::wmma_launch(p, stream);
  if (e != cudaSuccess)
    return make(Status::CudaError, "%s launch failed: %s", pick == Backend::Cutlass ? "cutlass" : "wmma",
                cudaGetErrorString(e));
  return r;
}

}  // namespace sparsek
