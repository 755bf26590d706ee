// The CMake consumers' program (ci/consumer-package: find_package(sparsek) on an installed
// prefix; ci/consumer-subdir: add_subdirectory(sparsek)): links sparsek::kernels and runs a
// tiny spmm. Exit codes (.ci/run checks them):
//   0   the spmm ran and every value of C is right;
//   77  no usable GPU (no device, or no driver): the CUDA message is printed on stderr
//       (the code the repo's GPU tests use for a skip, ctest's SKIP_RETURN_CODE);
//   1   anything else (a sparsek error, with its "sparsek: " message, or a wrong C).
#include <sparsek/sparsek.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kNoGpu = 77;

// Copies `host` to a new device buffer (*dev): cudaSuccess, or the first CUDA error.
template <typename T>
cudaError_t upload(const std::vector<T>& host, T** dev) {
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(dev), host.size() * sizeof(T) + 16);
  if (e == cudaSuccess) e = cudaMemcpy(*dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return e;
}

int cuda_failed(const char* what, cudaError_t e) {
  std::fprintf(stderr, "consumer: %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    std::fprintf(stderr, "consumer: SKIPPED: no usable GPU (exit %d)\n", kNoGpu);
    return kNoGpu;
  }
  return 1;
}

}  // namespace

int main() {
  // A (128 x 128, 64 x 64 blocks): block-row 0 holds block-columns 0 and 1, block-row 1
  // holds block-column 1; every value 1. B (128 x 64) all ones. So C = A*B is 128 in the
  // rows of block-row 0 and 64 in those of block-row 1, exactly, in fp32.
  const int64_t m = 128, k = 128, n = 64;
  const int32_t bm = 64, bk = 64;
  const uint16_t one = 0x3C00;  // 1.0 in fp16
  std::vector<int32_t> row_ptr{0, 2, 3}, col_idx{0, 1, 1};
  std::vector<uint16_t> values(col_idx.size() * bm * bk, one), b(k * n, one);

  // A call sparsek must refuse before touching the device (null pointers): runs without a GPU.
  sparsek::BsrView a;
  a.m = m;
  a.k = k;
  a.bm = bm;
  a.bk = bk;
  a.nnzb = static_cast<int64_t>(col_idx.size());
  a.dtype = sparsek::DType::F16;
  sparsek::DenseView bv{nullptr, k, n, n, sparsek::Layout::RowMajor, sparsek::DType::F16};
  sparsek::DenseMutView cv{nullptr, m, n, n, sparsek::Layout::RowMajor, sparsek::DType::F32};
  sparsek::SpmmOptions options;  // alpha = 1, beta = 0 (C write-only), Backend::Auto
  sparsek::Result r = sparsek::can_implement(a, bv, cv, options);
  if (r.ok() || std::strncmp(r.message, "sparsek: ", 9) != 0) {
    std::fprintf(stderr, "consumer: null pointers not refused (status %d, \"%s\")\n", static_cast<int>(r.status),
                 r.message);
    return 1;
  }
  std::fprintf(stderr, "consumer: a malformed call, refused (status %d): %s\n", static_cast<int>(r.status), r.message);

  // The same problem on the device.
  int32_t *d_row_ptr = nullptr, *d_col_idx = nullptr;
  uint16_t *d_values = nullptr, *d_b = nullptr;
  cudaError_t e = upload(row_ptr, &d_row_ptr);  // the first CUDA call: fails without a GPU
  if (e != cudaSuccess) return cuda_failed("cudaMalloc/cudaMemcpy", e);
  if ((e = upload(col_idx, &d_col_idx)) != cudaSuccess || (e = upload(values, &d_values)) != cudaSuccess ||
      (e = upload(b, &d_b)) != cudaSuccess) {
    return cuda_failed("cudaMalloc/cudaMemcpy", e);
  }
  std::vector<float> c(m * n);
  float* d_c = nullptr;
  if ((e = cudaMalloc(reinterpret_cast<void**>(&d_c), c.size() * sizeof(float))) != cudaSuccess ||
      (e = cudaMemset(d_c, 0xFF, c.size() * sizeof(float))) != cudaSuccess) {  // NaN: shows unwritten C
    return cuda_failed("cudaMalloc/cudaMemset", e);
  }
  a.row_ptr = d_row_ptr;
  a.col_idx = d_col_idx;
  a.values = d_values;
  bv.data = d_b;
  cv.data = d_c;

  sparsek::Backend chosen = sparsek::Backend::Auto;
  r = sparsek::can_implement(a, bv, cv, options, &chosen);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.message);
    return 1;
  }
  r = sparsek::spmm(a, bv, cv, options, /*stream=*/nullptr);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.message);
    return 1;
  }
  if ((e = cudaDeviceSynchronize()) != cudaSuccess ||
      (e = cudaMemcpy(c.data(), d_c, c.size() * sizeof(float), cudaMemcpyDeviceToHost)) != cudaSuccess) {
    return cuda_failed("spmm", e);
  }
  int64_t wrong = 0;
  for (int64_t i = 0; i < m; ++i) {
    const float want = i < bm ? 2.0f * bk : 1.0f * bk;
    for (int64_t j = 0; j < n; ++j) wrong += c[i * n + j] != want;
  }
  cudaFree(d_row_ptr);
  cudaFree(d_col_idx);
  cudaFree(d_values);
  cudaFree(d_b);
  cudaFree(d_c);
  std::printf("consumer: spmm %lldx%lldx%lld on backend %d: %lld wrong values: %s\n", (long long)m, (long long)n,
              (long long)k, static_cast<int>(chosen), (long long)wrong, wrong == 0 ? "PASS" : "FAIL");
  return wrong == 0 ? 0 : 1;
}
