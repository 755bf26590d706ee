// The checks every operation's C++ entry shares: results and their one prefix, the device
// query and the stream's device, and the views (dense, BSR) validated by value with checked
// int64 arithmetic and their pointers' alignment.
#include <cuda.h>

#include <cstdarg>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/bsr_rules.hpp"
#include "core/dtype.hpp"
#include "core/validate.hpp"

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
  if (e != cudaSuccess) return with_cuda_error(e, make_result(Status::CudaError, "querying the current device: %s", cudaGetErrorString(e)));
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
    return with_cuda_error(e, make_result(Status::CudaError, "querying device %d: %s", dev, cudaGetErrorString(e)));
  if (dev >= 0 && dev < kMaxDevices) {
    std::lock_guard<std::mutex> guard(lock);
    cache[dev] = info;
    cached[dev] = true;
  }
  *out = info;
  return Result{};
}

Result check_stream_device(int stream_device, int current_device) {
  if (stream_device == current_device) return Result{};
  return make_result(Status::InvalidArgument,
                     "stream belongs to device %d, but the current device is %d (make the stream's device current, "
                     "cudaSetDevice, or pass a stream of the current device)",
                     stream_device, current_device);
}

DeviceSource DeviceSource::of_stream(cudaStream_t stream) {
  DeviceSource s;
  s.kind_ = Kind::Stream;
  s.stream_ = stream;
  return s;
}

DeviceSource DeviceSource::current() { return DeviceSource{}; }

DeviceSource DeviceSource::given(const DeviceInfo& device, int stream_device) {
  DeviceSource s;
  s.kind_ = Kind::Given;
  s.device_ = device;
  s.stream_device_ = stream_device;
  return s;
}

DeviceSource DeviceSource::deferred() {
  DeviceSource s;
  s.kind_ = Kind::Deferred;
  return s;
}

namespace {

// The driver's context queries, through the runtime's entry point (the library links the
// runtime only). cudaStreamGetDevice / cuStreamGetDevice are refused inside stream capture
// (and the refusal invalidates the capture); cuStreamGetCtx and cuCtxGetCurrent are not, so
// the stream is compared with the current context by its context.
struct ContextQueries {
  CUresult (*stream_ctx)(CUstream, CUcontext*) = nullptr;
  CUresult (*current)(CUcontext*) = nullptr;
  CUresult (*push)(CUcontext) = nullptr;
  CUresult (*device)(CUdevice*) = nullptr;
  CUresult (*pop)(CUcontext*) = nullptr;
  bool ok = false;
};

template <class F>
bool entry_point(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr)
    return false;
  *fn = reinterpret_cast<F>(p);
  return true;
}

const ContextQueries& context_queries() {
  static const ContextQueries q = [] {
    ContextQueries c;
    c.ok = entry_point("cuStreamGetCtx", &c.stream_ctx) && entry_point("cuCtxGetCurrent", &c.current) &&
           entry_point("cuCtxPushCurrent", &c.push) && entry_point("cuCtxGetDevice", &c.device) &&
           entry_point("cuCtxPopCurrent", &c.pop);
    return c;
  }();
  return q;
}

}  // namespace

Result check_stream_context(cudaStream_t stream, int current_device) {
  const ContextQueries& q = context_queries();
  if (!q.ok) return make_result(Status::CudaError, "the driver's context queries (cuStreamGetCtx) are not available");
  CUcontext stream_ctx = nullptr, current = nullptr;
  if (q.stream_ctx(reinterpret_cast<CUstream>(stream), &stream_ctx) != CUDA_SUCCESS || stream_ctx == nullptr)
    return make_result(Status::InvalidArgument, "the stream is not a live CUDA stream (cuStreamGetCtx failed)");
  if (q.current(&current) != CUDA_SUCCESS) return make_result(Status::CudaError, "no current CUDA context");
  if (stream_ctx == current) return Result{};
  // Another context: name its device (push and pop leave the caller's context current).
  CUdevice device = -1;
  CUcontext popped = nullptr;
  if (q.push(stream_ctx) == CUDA_SUCCESS) {
    if (q.device(&device) != CUDA_SUCCESS) device = -1;
    q.pop(&popped);
  }
  if (device >= 0 && device != current_device) return check_stream_device(int(device), current_device);
  return make_result(Status::InvalidArgument,
                     "the stream belongs to another CUDA context than the current one (of device %d): launches "
                     "run in the current context",
                     current_device);
}

Result DeviceSource::resolve(DeviceInfo* out) const {
  switch (kind_) {
    case Kind::Deferred:
      *out = DeviceInfo{};
      return Result{};
    case Kind::Given: {
      Result r = check_stream_device(stream_device_, device_.id);
      if (r.ok()) *out = device_;
      return r;
    }
    case Kind::Current:
      return current_device(out);
    case Kind::Stream:
      break;
  }
  DeviceInfo info;
  Result r = current_device(&info);
  if (!r.ok()) return r;
  // The default streams are the current device's by definition.
  if (stream_ != nullptr && stream_ != cudaStreamLegacy && stream_ != cudaStreamPerThread) {
    r = check_stream_context(stream_, info.id);
    if (!r.ok()) return r;
  }
  *out = info;
  return Result{};
}

int64_t element_bytes(DType t) { return dtype_bytes(t); }

Result check_aligned(const char* name, const void* ptr, int64_t alignment) {
  if (alignment > 1 && reinterpret_cast<uintptr_t>(ptr) % uint64_t(alignment) != 0)
    return make_result(Status::InvalidArgument, "%s is not %lld-byte aligned", name, (long long)alignment);
  return Result{};
}

bool valid(DType t) { return KnownDTypes::contains(t); }
bool valid(Layout l) { return l == Layout::RowMajor || l == Layout::ColMajor; }
bool valid(Backend b) {
  return b == Backend::Auto || b == Backend::Wmma || b == Backend::Hopper || b == Backend::Decode;
}
bool valid(Activation a) {
  return a == Activation::None || a == Activation::Relu || a == Activation::GeluTanh || a == Activation::Silu;
}
bool valid(ScaleKind s) {
  return s == ScaleKind::None || s == ScaleKind::PerTensor || s == ScaleKind::PerBlock || s == ScaleKind::PerColumn;
}

Result check_scales(const char* name, ScaleKind kind, const float* scales) {
  if (!valid(kind)) return make_result(Status::InvalidArgument, "%s.scale_kind = %d is not a ScaleKind", name, int(kind));
  if (kind == ScaleKind::None) {
    if (scales != nullptr) return make_result(Status::InvalidArgument, "%s.scales is set with ScaleKind::None", name);
    return Result{};
  }
  if (scales == nullptr) return make_result(Status::InvalidArgument, "%s.scales is null", name);
  if (reinterpret_cast<uintptr_t>(scales) % 16 != 0)
    return make_result(Status::InvalidArgument, "%s.scales is not 16-byte aligned", name);
  return Result{};
}

int64_t scale_count(ScaleKind kind, int64_t parts) {
  return kind == ScaleKind::None ? 0 : kind == ScaleKind::PerTensor ? 1 : parts;
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
  if (reinterpret_cast<uintptr_t>(v.data) % uint64_t(element_bytes(v.dtype)) != 0)
    return make_result(Status::InvalidArgument, "%s.data is not %d-byte aligned (%s elements)", name,
                       int(element_bytes(v.dtype)), dtype_name(v.dtype));
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
Result check_bsr(const BsrView& a, const char* name) {
  if (!valid(a.dtype)) return make_result(Status::InvalidArgument, "%s.dtype = %d is not a DType", name, int(a.dtype));
  // Negative sizes first (C++'s alone: Rust's are unsigned), then the grid's table
  // (rules/bsr.toml, as Rust checks it when a matrix is built).
  if (a.bm < 0 || a.bk < 0) return make_result(Status::InvalidArgument, "block shape %dx%d is negative", a.bm, a.bk);
  if (a.m < 0 || a.k < 0 || a.nnzb < 0)
    return make_result(Status::InvalidArgument, "%s is %lldx%lld with nnzb %lld: negative", name, (long long)a.m,
                       (long long)a.k, (long long)a.nnzb);
  bsr_rules::Facts facts;
  facts.m = a.m, facts.k = a.k, facts.bm = a.bm, facts.bk = a.bk, facts.nnzb = a.nnzb;
  Result r = bsr_rules::block(facts);
  if (r.ok()) r = bsr_rules::grid(facts);
  if (r.ok()) r = bsr_rules::stored(facts);
  if (!r.ok()) return r;
  const int64_t rows = a.m / a.bm, cols = a.k / a.bk;
  const int64_t blocks = rows * cols;  // < 2^62: both factors fit int32
  if (a.nnzb > blocks)
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
  const uintptr_t int32_misaligned =
      (reinterpret_cast<uintptr_t>(a.row_ptr) | reinterpret_cast<uintptr_t>(a.col_idx)) % alignof(int32_t);
  if (int32_misaligned != 0)
    return make_result(Status::InvalidArgument, "%s.row_ptr or %s.col_idx is not 4-byte aligned", name, name);
  if (reinterpret_cast<uintptr_t>(a.values) % uint64_t(element_bytes(a.dtype)) != 0)
    return make_result(Status::InvalidArgument, "%s.values is not %d-byte aligned (%s elements)", name,
                       int(element_bytes(a.dtype)), dtype_name(a.dtype));
  return Result{};
}

Result pending_cuda_error() {
  const cudaError_t e = cudaPeekAtLastError();
  switch (e) {
    case cudaSuccess:
    // The runtime itself cannot start (no driver, no visible device, ...): every CUDA call
    // returns it, none can clear it, and it is nobody's leftover; the device query reports
    // it as a CudaError.
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return Result{};
    default:
      break;
  }
  return with_cuda_error(e, make_result(Status::PendingCudaError,
                                        "a CUDA error was pending before this call (%s: %s); nothing ran, and it "
                                        "is left pending for its owner",
                                        cudaGetErrorName(e), cudaGetErrorString(e)));
}

Result settle(Result r) {
  if (r.status == Status::CudaError) (void)cudaGetLastError();
  return r;
}

Result finish(Result r) {
  r = settle(r);
  if (r.ok()) return r;
  char body[sizeof(r.message)];
  std::memcpy(body, r.message, sizeof(body));
  std::snprintf(r.message, sizeof(r.message), "sparsek: %s", body);
  return r;
}

}  // namespace detail
}  // namespace sparsek
