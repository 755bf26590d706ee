// Standalone timer of the Decode family at LLM layer shapes (not a library source, no
// checks of the values: tests/cpp/check_decode.cu and fp8_check do that).
//
// For each shape (m x k), block size, density, n and weight type (f16, or W8A16: e4m3 A with
// per-block scales and f16 B) it builds a random block pattern with the same number of
// blocks in every block-row (round(d * k/bk); `--pattern random`: each block kept with
// probability d, so block-rows differ in length as in a pruned layer), times
// Backend::Decode with A cycled over enough copies (at least 256 MB together, five times the
// H100's 50 MB L2) that every call reads its weights from HBM, and prints the time of one
// call (20+ calls captured in a CUDA graph: the kernels back to back, as a decode step
// replays them) and E_hbm = the bytes that must move (A's values, indices and scales, B, C) / time / the read ceiling measured in the
// same process (a read-only kernel over 1 GiB, the best of a few grid sizes).
//
// Build from the repository root against the kernel library (libsparsek_kernels.a from
// build.rs's OUT_DIR, or the objects of scripts/build-cpp-check.sh):
//   NVCC=third_party/py/nvidia/cu13/bin/nvcc
//   $NVCC -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -Iinclude \
//     tests/cpp/time_decode.cu <libsparsek_kernels.a> -cudart static -o time_decode
// Usage: ./time_decode [--shapes 4096x4096,14336x4096] [--blocks 128,64] [--densities 0.5,0.3]
//                      [--ns 1,16] [--types f16,w8] [--pattern even|random] [--copies N]
//                      [--settled 1|0]
// --settled 0: A not marked settled (BsrView::settled; by default it is, as weights are), so
// each call reads A only after the previous call has completed.
// --copies N: A cycled over N copies instead (1: A stays in L2 where it fits, the L2-resident
// ceiling of a product whose weights an earlier kernel brought into L2).
// SPARSEK_VARIANT, SPARSEK_DECODE_TM and SPARSEK_DECODE_SPLIT act as for any caller.
#include <cuda_runtime.h>
#include <sparsek/sparsek.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

#define CUDA_OK(expr)                                                                                   \
  do {                                                                                                  \
    cudaError_t e_ = (expr);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #expr, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                     \
    }                                                                                                   \
  } while (0)

// Fills `bytes` of device memory with finite values: f16 in (-1, 1) (elem 2) or e4m3 bytes
// that are never NaN (elem 1).
__global__ void fill_values(unsigned char* p, int64_t count, int elem, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    if (elem == 2) {
      // sign, exponent 1..14 (|x| < 1), mantissa: a finite f16
      const uint16_t v = static_cast<uint16_t>((h & 0x8000u) | ((1u + (h >> 16) % 14u) << 10) | (h & 0x3ffu));
      reinterpret_cast<uint16_t*>(p)[i] = v;
    } else {
      p[i] = static_cast<unsigned char>(h & 0xf7u);  // bit 3 clear: never 0x7f / 0xff (NaN)
    }
  }
}

// --settled: whether A is marked settled (written once, before the timed calls).
bool g_settled = true;

__global__ void read_probe(const uint4* p, int64_t n16, uint32_t* sink) {
  uint32_t x = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n16;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;  // keeps the loads
}

// The HBM read ceiling (GB/s): a read-only kernel over 1 GiB, the best of a few grids.
double read_ceiling() {
  const size_t bytes = size_t(1) << 30;
  void* buf = nullptr;
  uint32_t* sink = nullptr;
  CUDA_OK(cudaMalloc(&buf, bytes));
  CUDA_OK(cudaMemset(buf, 1, bytes));
  CUDA_OK(cudaMalloc(&sink, 4));
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  double best = 0;
  for (int per_sm : {4, 8, 16}) {
    read_probe<<<sms * per_sm, 512>>>(static_cast<const uint4*>(buf), bytes / 16, sink);
    CUDA_OK(cudaEventRecord(t0));
    for (int i = 0; i < 5; ++i) read_probe<<<sms * per_sm, 512>>>(static_cast<const uint4*>(buf), bytes / 16, sink);
    CUDA_OK(cudaEventRecord(t1));
    CUDA_OK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    best = std::max(best, 5.0 * bytes / (ms * 1e-3) * 1e-9);
  }
  CUDA_OK(cudaEventDestroy(t0));
  CUDA_OK(cudaEventDestroy(t1));
  CUDA_OK(cudaFree(buf));
  CUDA_OK(cudaFree(sink));
  return best;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

struct Timing {
  bool ok = false;
  double us = 0;
  std::string why;
};

// One case: returns the time of one call in a graph of back-to-back calls.
Timing time_case(int64_t m, int64_t k, int bs, double d, int n, bool w8, bool random_rows, int forced_copies,
                 std::mt19937_64& rng, double* bytes_out) {
  Timing t;
  const int64_t rows = m / bs, cols = k / bs;
  const int64_t per_row = std::max<int64_t>(0, std::min<int64_t>(cols, std::llround(d * cols)));
  std::vector<int32_t> row_ptr(rows + 1, 0), col_idx;
  std::vector<int32_t> all(cols);
  std::iota(all.begin(), all.end(), 0);
  std::uniform_real_distribution<double> keep(0.0, 1.0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> pick;
    if (random_rows) {
      for (int32_t c = 0; c < cols; ++c)
        if (keep(rng) < d) pick.push_back(c);
    } else {
      std::shuffle(all.begin(), all.end(), rng);
      pick.assign(all.begin(), all.begin() + per_row);
      std::sort(pick.begin(), pick.end());
    }
    col_idx.insert(col_idx.end(), pick.begin(), pick.end());
    row_ptr[r + 1] = static_cast<int32_t>(col_idx.size());
  }
  const int64_t nnzb = static_cast<int64_t>(col_idx.size());
  const int elem = w8 ? 1 : 2;
  const double a_bytes = static_cast<double>(nnzb) * bs * bs * elem;
  const int copies = forced_copies > 0
                         ? forced_copies
                         : std::min(400, std::max(2, static_cast<int>(std::ceil(256e6 / std::max(a_bytes, 1.0)))));
  int32_t *d_rp = nullptr, *d_ci = nullptr;
  float* d_scales = nullptr;
  CUDA_OK(cudaMalloc(&d_rp, row_ptr.size() * 4));
  CUDA_OK(cudaMalloc(&d_ci, std::max<size_t>(1, col_idx.size()) * 4));
  CUDA_OK(cudaMemcpy(d_rp, row_ptr.data(), row_ptr.size() * 4, cudaMemcpyHostToDevice));
  if (nnzb > 0) CUDA_OK(cudaMemcpy(d_ci, col_idx.data(), col_idx.size() * 4, cudaMemcpyHostToDevice));
  if (w8) {
    std::vector<float> sc(std::max<int64_t>(1, nnzb));
    for (auto& s : sc) s = 0.01f + 0.001f * static_cast<float>(rng() % 100);
    CUDA_OK(cudaMalloc(&d_scales, sc.size() * 4));
    CUDA_OK(cudaMemcpy(d_scales, sc.data(), sc.size() * 4, cudaMemcpyHostToDevice));
  }
  std::vector<void*> a_copies(copies, nullptr);
  for (int i = 0; i < copies; ++i) {
    const size_t sz = std::max<size_t>(16, static_cast<size_t>(a_bytes));
    CUDA_OK(cudaMalloc(&a_copies[i], sz));
    fill_values<<<1024, 256>>>(static_cast<unsigned char*>(a_copies[i]), static_cast<int64_t>(a_bytes) / elem, elem,
                                static_cast<uint32_t>(rng()));
  }
  void *d_b = nullptr, *d_c = nullptr;
  CUDA_OK(cudaMalloc(&d_b, k * n * 2));
  CUDA_OK(cudaMalloc(&d_c, m * n * 2));
  fill_values<<<256, 256>>>(static_cast<unsigned char*>(d_b), k * n, 2, 7u);
  CUDA_OK(cudaMemset(d_c, 0, m * n * 2));
  CUDA_OK(cudaDeviceSynchronize());

  sparsek::BsrView a;
  a.m = m, a.k = k, a.bm = bs, a.bk = bs, a.nnzb = nnzb, a.row_ptr = d_rp, a.col_idx = d_ci;
  a.dtype = w8 ? sparsek::DType::E4M3 : sparsek::DType::F16;
  if (w8) a.scales = d_scales, a.scale_kind = sparsek::ScaleKind::PerBlock;
  a.settled = g_settled;
  sparsek::DenseView b;  // B = x^T: x row-major n x k
  b.data = d_b, b.rows = k, b.cols = n, b.ld = k, b.layout = sparsek::Layout::ColMajor, b.dtype = sparsek::DType::F16;
  sparsek::DenseMutView c;  // C = y^T: y row-major n x m
  c.data = d_c, c.rows = m, c.cols = n, c.ld = m, c.layout = sparsek::Layout::ColMajor, c.dtype = sparsek::DType::F16;
  sparsek::SpmmOptions o;
  o.backend = sparsek::Backend::Decode;

  std::vector<sparsek::BsrView> as(copies, a);
  for (int i = 0; i < copies; ++i) as[i].values = a_copies[i];
  bool refused = false;
  for (int i = 0; i < copies && !refused; ++i) {
    const sparsek::Result r = sparsek::spmm(as[i], b, c, o, nullptr);
    if (!r.ok()) refused = true, t.why = r.message;
  }
  if (!refused) {
    CUDA_OK(cudaDeviceSynchronize());
    const int iters = std::max(20, copies);
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    bool ok = true;
    for (int i = 0; i < iters; ++i) ok = ok && sparsek::spmm(as[i % copies], b, c, o, s).ok();
    CUDA_OK(cudaStreamEndCapture(s, &graph));
    if (ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      cudaEvent_t t0, t1;
      CUDA_OK(cudaEventCreate(&t0));
      CUDA_OK(cudaEventCreate(&t1));
      double best = 1e30;
      for (int rep = 0; rep < 4; ++rep) {  // the first is a warm-up; the best of the other three
        CUDA_OK(cudaEventRecord(t0, s));
        CUDA_OK(cudaGraphLaunch(exec, s));
        CUDA_OK(cudaEventRecord(t1, s));
        CUDA_OK(cudaEventSynchronize(t1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
        if (rep > 0) best = std::min(best, 1e3 * ms / iters);
      }
      t.ok = true, t.us = best;
      CUDA_OK(cudaEventDestroy(t0));
      CUDA_OK(cudaEventDestroy(t1));
      CUDA_OK(cudaGraphExecDestroy(exec));
    } else {
      (void)cudaGetLastError();
      t.why = "graph capture failed";
    }
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(s));
  }
  for (void* p : a_copies) CUDA_OK(cudaFree(p));
  CUDA_OK(cudaFree(d_rp));
  CUDA_OK(cudaFree(d_ci));
  if (d_scales) CUDA_OK(cudaFree(d_scales));
  CUDA_OK(cudaFree(d_b));
  CUDA_OK(cudaFree(d_c));
  *bytes_out = a_bytes + nnzb * 4.0 + (rows + 1) * 4.0 + (w8 ? nnzb * 4.0 : 0.0) + k * n * 2.0 + m * n * 2.0;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes = "4096x4096,1024x4096,14336x4096,4096x14336,3584x3584,512x3584,18944x3584,3584x18944,5120x5120,"
                       "13824x5120,5120x13824";
  std::string blocks = "128,64", densities = "0.5,0.3", ns = "1,16", types = "f16,w8";
  bool random_rows = false;
  int copies = 0;  // 0: enough copies of A that every call reads HBM
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], val = argv[i + 1];
    if (key == "--shapes") shapes = val;
    else if (key == "--blocks") blocks = val;
    else if (key == "--densities") densities = val;
    else if (key == "--ns") ns = val;
    else if (key == "--types") types = val;
    else if (key == "--copies") copies = std::max(0, std::atoi(val.c_str()));
    else if (key == "--settled") g_settled = val != "0";
    else if (key == "--pattern") {
      if (val != "even" && val != "random") {
        std::fprintf(stderr, "--pattern %s: even or random\n", val.c_str());
        return 2;
      }
      random_rows = val == "random";
    } else {
      std::fprintf(stderr, "unknown argument %s\n", key.c_str());
      return 2;
    }
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  const double ceiling = read_ceiling();
  const char* variant = std::getenv("SPARSEK_VARIANT");
  const char* tm = std::getenv("SPARSEK_DECODE_TM");
  const char* sp = std::getenv("SPARSEK_DECODE_SPLIT");
  std::printf(
      "device %s, %d SMs; read ceiling %.1f GB/s; variant %s tm %s split %s; pattern %s; copies of A %s; A settled %d\n",
      prop.name, prop.multiProcessorCount, ceiling, variant ? variant : "auto", tm ? tm : "-", sp ? sp : "-",
      random_rows ? "random" : "even", copies > 0 ? std::to_string(copies).c_str() : "auto (HBM)", g_settled ? 1 : 0);
  std::mt19937_64 rng(20261127);
  for (const std::string& sh : split(shapes)) {
    const size_t x = sh.find('x');
    const int64_t m = std::atoll(sh.substr(0, x).c_str()), k = std::atoll(sh.substr(x + 1).c_str());
    for (const std::string& bsz : split(blocks))
      for (const std::string& ds : split(densities))
        for (const std::string& ts : split(types))
          for (const std::string& nstr : split(ns)) {
            const int bs = std::atoi(bsz.c_str()), n = std::atoi(nstr.c_str());
            const double d = std::atof(ds.c_str());
            const bool w8 = ts == "w8";
            double bytes = 0;
            const Timing t = time_case(m, k, bs, d, n, w8, random_rows, copies, rng, &bytes);
            if (!t.ok) {
              std::printf("TIME %6lldx%-6lld b%-3d d%.2f %-3s n%-3d refused: %s\n", (long long)m, (long long)k, bs, d,
                          ts.c_str(), n, t.why.c_str());
              continue;
            }
            const double gbs = bytes / t.us * 1e-3;
            std::printf("TIME %6lldx%-6lld b%-3d d%.2f %-3s n%-3d %8.2f us %7.1f GB/s E_hbm %.3f\n", (long long)m,
                        (long long)k, bs, d, ts.c_str(), n, t.us, gbs, gbs / ceiling);
            std::fflush(stdout);
          }
  }
  return 0;
}
