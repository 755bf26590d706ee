// sparsek from C++: a random BSR matrix on the host, C = A*B on the GPU, checked against
// a host loop; then a malformed call and a corrupted index array (caught by the opt-in
// device check, SpmmOptions::check_indices), which must return an error and launch nothing.
//
//   cmake -S . -B build -DCMAKE_CUDA_COMPILER=third_party/py/nvidia/cu13/bin/nvcc
//   cmake --build build --target sparsek_quickstart && build/sparsek_quickstart
#include <sparsek/sparsek.hpp>

#include <cuda_fp16.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CHECK_CUDA(call)                                                                       \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

const char* backend_name(sparsek::Backend b) {
  switch (b) {
    case sparsek::Backend::Auto: return "auto";
    case sparsek::Backend::Wmma: return "wmma";
    case sparsek::Backend::Hopper: return "hopper";
    case sparsek::Backend::Decode: return "decode";
  }
  return "?";
}

template <typename T>
T* to_device(const std::vector<T>& host) {
  T* dev = nullptr;
  CHECK_CUDA(cudaMalloc(reinterpret_cast<void**>(&dev), host.size() * sizeof(T) + 16));
  CHECK_CUDA(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return dev;
}

int main() {
  const int64_t m = 1024, k = 2048, n = 512;
  const int32_t bm = 64, bk = 64;
  const int64_t block_rows = m / bm, block_cols = k / bk;
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  std::bernoulli_distribution keep(0.2);

  // BSR on the host: row_ptr, col_idx (sorted), values (row-major blocks in col_idx order).
  std::vector<int32_t> row_ptr{0}, col_idx;
  std::vector<__half> values;
  for (int64_t r = 0; r < block_rows; ++r) {
    for (int64_t c = 0; c < block_cols; ++c) {
      if (r % 7 == 3 || !keep(rng)) continue;  // some block-rows stay empty
      col_idx.push_back(static_cast<int32_t>(c));
      for (int i = 0; i < bm * bk; ++i) values.push_back(__float2half(value(rng)));
    }
    row_ptr.push_back(static_cast<int32_t>(col_idx.size()));
  }
  std::vector<__half> b(k * n);
  for (auto& v : b) v = __float2half(value(rng));

  sparsek::BsrView a;
  a.m = m;
  a.k = k;
  a.bm = bm;
  a.bk = bk;
  a.nnzb = static_cast<int64_t>(col_idx.size());
  a.row_ptr = to_device(row_ptr);
  a.col_idx = to_device(col_idx);
  a.values = to_device(values);
  a.dtype = sparsek::DType::F16;
  sparsek::DenseView bv{to_device(b), k, n, n, sparsek::Layout::RowMajor, sparsek::DType::F16};
  std::vector<float> c(m * n, NAN);  // beta = 0: C is write-only, NaN poison shows misses
  sparsek::DenseMutView cv{to_device(c), m, n, n, sparsek::Layout::RowMajor, sparsek::DType::F32};

  sparsek::SpmmOptions options;  // alpha = 1, beta = 0, Backend::Auto
  sparsek::Backend chosen = sparsek::Backend::Auto;
  sparsek::Result r = sparsek::can_implement(a, bv, cv, options, &chosen);
  if (!r.ok()) {
    std::printf("FAIL can_implement: %s\n", r.message);
    return 1;
  }
  r = sparsek::spmm(a, bv, cv, options, /*stream=*/nullptr);
  if (!r.ok()) {
    std::printf("FAIL spmm: %s\n", r.message);
    return 1;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(c.data(), cv.data, c.size() * sizeof(float), cudaMemcpyDeviceToHost));

  // Host loop in double over the stored blocks.
  double num = 0, den = 0;
  int64_t unwritten = 0;
  std::vector<double> ref(n);
  for (int64_t br = 0; br < block_rows; ++br) {
    for (int i = 0; i < bm; ++i) {
      std::fill(ref.begin(), ref.end(), 0.0);
      for (int32_t j = row_ptr[br]; j < row_ptr[br + 1]; ++j) {
        const __half* blk = &values[static_cast<size_t>(j) * bm * bk];
        for (int kk = 0; kk < bk; ++kk) {
          double av = __half2float(blk[i * bk + kk]);
          const __half* brow = &b[(static_cast<int64_t>(col_idx[j]) * bk + kk) * n];
          for (int64_t col = 0; col < n; ++col) ref[col] += av * __half2float(brow[col]);
        }
      }
      for (int64_t col = 0; col < n; ++col) {
        double got = c[(br * bm + i) * n + col];
        if (!std::isfinite(got)) ++unwritten;
        num += (got - ref[col]) * (got - ref[col]);
        den += ref[col] * ref[col];
      }
    }
  }
  double rel = std::sqrt(num / den);
  std::printf("sparsek C++ quickstart: %lldx%lldx%lld, %lld blocks of %dx%d, backend %s: rel err %.2e, %lld unwritten\n",
              (long long)m, (long long)n, (long long)k, (long long)a.nnzb, bm, bk,
              backend_name(chosen), rel, (long long)unwritten);
  bool ok = rel < 1e-3 && unwritten == 0;

  // A malformed BSR (m not a multiple of bm): an error with a message, nothing launched.
  std::vector<float> sentinel(m * n, 7.f);
  CHECK_CUDA(cudaMemcpy(cv.data, sentinel.data(), sentinel.size() * sizeof(float), cudaMemcpyHostToDevice));
  sparsek::BsrView bad = a;
  bad.bm = 48;
  r = sparsek::spmm(bad, bv, cv, options, nullptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(c.data(), cv.data, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
  bool untouched = true;
  for (float v : c) untouched &= (v == 7.f);
  std::printf("malformed BSR: status %d, message \"%s\", C %s\n", static_cast<int>(r.status), r.message,
              untouched ? "untouched" : "WRITTEN");
  // Every message of the C++ API starts with "sparsek: ".
  ok = ok && r.status == sparsek::Status::InvalidArgument && std::strncmp(r.message, "sparsek: ", 9) == 0 && untouched;

  // Indices from an untrusted source: with options.check_indices, spmm checks row_ptr and
  // col_idx on the device first (and synchronizes); a column past k/bk is refused.
  if (a.nnzb > 0) {
    std::vector<int32_t> corrupt = col_idx;
    corrupt.back() = static_cast<int32_t>(block_cols);  // one past the last block column
    int32_t* d_corrupt = to_device(corrupt);
    sparsek::BsrView untrusted = a;
    untrusted.col_idx = d_corrupt;
    sparsek::SpmmOptions checked = options;
    checked.check_indices = true;
    r = sparsek::spmm(untrusted, bv, cv, checked, nullptr);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(c.data(), cv.data, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
    untouched = true;
    for (float v : c) untouched &= (v == 7.f);
    std::printf("corrupted col_idx with check_indices: status %d, message \"%s\", C %s\n",
                static_cast<int>(r.status), r.message, untouched ? "untouched" : "WRITTEN");
    ok = ok && r.status == sparsek::Status::InvalidArgument && untouched;
    CHECK_CUDA(cudaFree(d_corrupt));
  }

  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
