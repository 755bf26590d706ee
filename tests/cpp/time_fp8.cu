// Standalone timer and quick checker of the Hopper family's FP8 rows, W8A8 and (--w8a16)
// W8A16 (not a library source): it launches named rows directly (tests/cpp/time_fp8_rows.cu),
// so only those rows compile, and times them against the f16 sparse rows on the same block
// patterns and against dense e4m3 and f16 GEMMs of cuBLASLt in the same process (loaded at run
// time with dlopen: this machine's CUDA has no cuBLAS; TIME_FP8_CUBLASLT names the library,
// else libcublasLt.so.13 / .so.12 / .so from the loader's path).
//
//   time_fp8 [--shapes 4096x4096x4096,...] [--blocks 128,64] [--densities 0.125,0.25]
//            [--seeds 2] [--rows R1,R2] [--b-scale column|tensor]
//                              time every (shape m x n x k, block, density, seed)
//   time_fp8 --check           the FP8 rows against f64 on the dequantized operands (below)
//   time_fp8 --check-quick     the same at n = 7 and 129, 2 repeats each (for compute-sanitizer)
//   time_fp8 --profile         one launch of each 128-high FP8 row at the first of --shapes and
//                              --densities (8192^3, 1/4), for ncu
// --rows: the FP8 rows timed beside the 128x128 and 64-high ones (compiled into
// time_fp8_rows.cu; default: the 128x256 cluster row), each with its C's largest difference
// to theirs relative to their C's largest value (a check on every timed problem). The rows
// with a TMA epilogue (_ccol, _crow: f16 C of one layout) get C f16 in their layout, checked at
// n = 8, 336, 600 (the cluster rows at 512 and 1024, 100 repeats each).
// --b-scale tensor: B's scale one per tensor instead of one per column.
// --w8a16: the W8A16 rows instead (e4m3 A with per-block scales, f16 B without scales; 128x128
// blocks), timed against the fastest of three f16 rows on the same pattern (time_fp8_rows.cu's
// group 1) and checked (--check) with a third of A's blocks on scales of 150-300 (weights past
// the f16 maximum, were a kernel to scale them in f16) beside scales near 1/448.
//
// Patterns: seed 0, 2, ... the same number of blocks in every block-row (round(d * k/bk),
// distinct random columns); seed 1, 3, ... each block present with probability d. Values are
// random finite e4m3 bytes (f16 in (-1, 1) for the f16 rows), A's scales per block and B's
// per column. Each time is the best of 3 rounds of 10 launches back to back; TFLOPS count
// the nonzero blocks' FLOPs (2 n bm bk nnzb), E = the FP8 row's nonzero TFLOPS / dense e4m3
// cuBLASLt's (2 m n k over its time).
//
// --check: blocks 128x128 (the k128 rows) and 64x64 (the k64 row), block-rows of 0, 1, 2, 3,
// 4 and all 6 blocks (k-tile counts of both parities and the zero iteration); n = 1, 7, 64,
// 129, 333, 600; C f32, f16 and bf16 column-major with ld = m + 8, NaN-poisoned (every byte
// outside the m x n written must still be the poison); alpha 0.75 and a bias of C's dtype;
// against f64 with fp8_check's tolerances (f32 5e-4, f16 1e-3, bf16 8e-3 of max |C|); then
// 100 repeats of one case per row, bitwise identical. Exit status 0 only when all passed.
//
// Build from the repository root (sm_90a, the units' flags; the f16 object once):
//   NVCC=third_party/py/nvidia/cu13/bin/nvcc
//   F="$(grep -v "^#" cpp/nvcc_flags.txt | tr "\n" " ") -gencode=arch=compute_90a,code=sm_90a"
//   F="$F -Iinclude -Icpp -Ithird_party/py/cutlass_library/source/include"
//   $NVCC $F -DTIME_FP8_GROUP=0 -c tests/cpp/time_fp8_rows.cu -o fp8_rows.o
//   $NVCC $F -DTIME_FP8_GROUP=1 -c tests/cpp/time_fp8_rows.cu -o f16_rows.o
//   $NVCC $F -DTIME_FP8_GROUP=2 -c tests/cpp/time_fp8_rows.cu -o w8a16_rows.o
//   $NVCC $F -c tests/cpp/time_fp8.cu -o time_fp8.o
//   $NVCC $F -c cpp/core/validate.cu -o validate.o
//   $NVCC time_fp8.o fp8_rows.o f16_rows.o w8a16_rows.o validate.o -cudart static -lcuda -ldl -o time_fp8
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <library_types.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/result.hpp"
#include "spmm/problem.hpp"

bool time_fp8_group_fp8(const char* name, const sparsek::detail::Problem* p, cudaStream_t stream, cudaError_t* err);
bool time_fp8_group_f16(const char* name, const sparsek::detail::Problem* p, cudaStream_t stream, cudaError_t* err);
bool time_fp8_group_w8a16(const char* name, const sparsek::detail::Problem* p, cudaStream_t stream, cudaError_t* err);

namespace {

using sparsek::Activation;
using sparsek::Backend;
using sparsek::DType;
using sparsek::Layout;
using sparsek::ScaleKind;

#define CUDA_OK(expr)                                                                                          \
  do {                                                                                                         \
    cudaError_t e_ = (expr);                                                                                   \
    if (e_ != cudaSuccess) {                                                                                   \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #expr, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                            \
    }                                                                                                          \
  } while (0)

const char* kFp8Row128 = "sm90_e4m3_bm_le128_k128_bcol";
const char* kFp8Row64 = "sm90_e4m3_bm_le64_k64_bcol";
const char* kF16Row128 = "sm90_f16_bm128_bcol_ccol";
const char* kF16Row64 = "sm90_f16_bm64_bcol_ccol";
const char* kF16RowDeep = "sm90_f16_bm_le128_k128_bcol_128x128";
const char* kF16RowNarrow = "sm90_f16_bm_le128_k128_bcol_128x64";
const char* kW8Row128 = "sm90_e4m3_f16_bm_le128_k128_bcol";
const char* kW8RowNarrow = "sm90_e4m3_f16_bm_le128_k128_bcol_128x64";
// --w8a16: the W8A16 rows on f16 B.
bool w8a16 = false;

// More FP8 rows timed (and checked) beside the 128x128 and 64-high ones: the cluster
// row by default, or --rows; each on the blocks of its bm (a name with "le64" takes 64-high
// blocks, any other 128-high). Cluster rows (names with "_c2") take n in whole cluster groups
// (family.cu): timed where n % 512 == 0, checked at n = 512 and 1024.
const char* kFp8Row128Cluster = "sm90_e4m3_bm_le128_k128_bcol_128x256_c2";
std::vector<std::string> extra_rows;
// --b-scale tensor: B's scale one per tensor (the epilogue folds it into alpha) instead of
// one per column.
bool b_scale_per_tensor = false;
int row_block(const std::string& row) {
  return row.find("le64") != std::string::npos || row.find("bm64") != std::string::npos ? 64 : 128;
}
bool cluster_row(const std::string& row) { return row.find("_c2") != std::string::npos; }
// The FP8 rows with a TMA epilogue (f16 column-major C only).
bool f16_only(const std::string& row) {
  return row.find("_ccol") != std::string::npos || row.find("_crow") != std::string::npos;
}
bool c_row_major(const std::string& row) { return row.find("_crow") != std::string::npos; }
constexpr int64_t kClusterN = 512;  // the cluster rows' n granule: 2 CTAs x 256 columns

bool compiled_in(const char* row) {
  return time_fp8_group_fp8(row, nullptr, nullptr, nullptr) || time_fp8_group_f16(row, nullptr, nullptr, nullptr) ||
         time_fp8_group_w8a16(row, nullptr, nullptr, nullptr);
}

cudaError_t launch(const char* row, const sparsek::detail::Problem& p, cudaStream_t stream) {
  cudaError_t e = cudaSuccess;
  if (time_fp8_group_fp8(row, &p, stream, &e) || time_fp8_group_f16(row, &p, stream, &e) ||
      time_fp8_group_w8a16(row, &p, stream, &e))
    return e;
  std::fprintf(stderr, "no row %s compiled in\n", row);
  std::exit(2);
}

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { CUDA_OK(cudaMalloc(&p, bytes == 0 ? 16 : bytes)); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
};
template <class T>
void upload(Dev& d, const std::vector<T>& h) {
  CUDA_OK(cudaMemcpy(d.p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

// Random finite values: f16 in (-1, 1) (elem 2) or e4m3 bytes that are never NaN (elem 1).
__global__ void fill_values(unsigned char* p, int64_t count, int elem, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    if (elem == 2) {
      const uint16_t v = static_cast<uint16_t>((h & 0x8000u) | ((1u + (h >> 16) % 14u) << 10) | (h & 0x3ffu));
      reinterpret_cast<uint16_t*>(p)[i] = v;
    } else {
      p[i] = static_cast<unsigned char>(h & 0xf7u);  // bit 3 clear: never 0x7f / 0xff (NaN)
    }
  }
}
void fill(void* p, int64_t count, int elem, uint32_t seed) {
  fill_values<<<1024, 256>>>(static_cast<unsigned char*>(p), count, elem, seed);
  CUDA_OK(cudaGetLastError());
}

sparsek::detail::DeviceInfo device_info() {
  sparsek::detail::DeviceInfo d;
  CUDA_OK(cudaGetDevice(&d.id));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, d.id));
  d.cc_major = prop.major, d.cc_minor = prop.minor, d.sm_count = prop.multiProcessorCount;
  d.smem_optin = int(prop.sharedMemPerBlockOptin);
  return d;
}

// A block pattern: row_ptr, col_idx (sorted) of mb block-rows over kb block-columns.
struct Pattern {
  std::vector<int32_t> row_ptr, col_idx;
};
Pattern draw_pattern(int64_t mb, int64_t kb, double density, uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 17);
  Pattern p;
  p.row_ptr.push_back(0);
  std::vector<int32_t> cols(static_cast<size_t>(kb));
  const int64_t per_row = std::max<int64_t>(1, std::llround(density * double(kb)));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int64_t r = 0; r < mb; ++r) {
    std::vector<int32_t> row;
    if (seed % 2 == 0) {
      for (int64_t c = 0; c < kb; ++c) cols[size_t(c)] = int32_t(c);
      std::shuffle(cols.begin(), cols.end(), rng);
      row.assign(cols.begin(), cols.begin() + per_row);
    } else {
      for (int64_t c = 0; c < kb; ++c)
        if (u(rng) < density) row.push_back(int32_t(c));
    }
    std::sort(row.begin(), row.end());
    p.col_idx.insert(p.col_idx.end(), row.begin(), row.end());
    p.row_ptr.push_back(int32_t(p.col_idx.size()));
  }
  return p;
}

// ---- cuBLASLt, loaded at run time (dense_fp8.rs's layouts: C row-major (m x n) = A
// (m x k, row-major) * B (k x n, column-major), computed as C^T = B^T A in column-major) ----
struct Lt {
  using Handle = void*;
  using Status = int;
  struct HeuristicResult {
    uint64_t algo[8];
    size_t workspace_size;
    Status state;
    float waves;
    int reserved[4];
  };
  Status (*create)(Handle*) = nullptr;
  Status (*desc_create)(Handle*, int compute, cudaDataType scale) = nullptr;
  Status (*desc_set)(Handle, int attr, const void*, size_t) = nullptr;
  Status (*layout_create)(Handle*, cudaDataType, uint64_t rows, uint64_t cols, int64_t ld) = nullptr;
  Status (*pref_create)(Handle*) = nullptr;
  Status (*pref_set)(Handle, int attr, const void*, size_t) = nullptr;
  Status (*heuristic)(Handle, Handle, Handle, Handle, Handle, Handle, Handle, int, HeuristicResult*, int*) = nullptr;
  Status (*matmul)(Handle, Handle, const void*, const void*, Handle, const void*, Handle, const void*, const void*,
                   Handle, void*, Handle, const void*, void*, size_t, cudaStream_t) = nullptr;
  Handle handle = nullptr;
  bool ok = false;

  Lt() {
    const char* env = std::getenv("TIME_FP8_CUBLASLT");
    void* lib = nullptr;
    for (const char* name : {env, "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"})
      if (name != nullptr && (lib = dlopen(name, RTLD_NOW)) != nullptr) break;
    if (lib == nullptr) {
      std::printf("cuBLASLt not found (set TIME_FP8_CUBLASLT): no dense figures\n");
      return;
    }
    bool all = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      all = all && fn != nullptr;
    };
    sym(create, "cublasLtCreate");
    sym(desc_create, "cublasLtMatmulDescCreate");
    sym(desc_set, "cublasLtMatmulDescSetAttribute");
    sym(layout_create, "cublasLtMatrixLayoutCreate");
    sym(pref_create, "cublasLtMatmulPreferenceCreate");
    sym(pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(matmul, "cublasLtMatmul");
    ok = all && create(&handle) == 0;
    if (!ok) std::printf("cuBLASLt: missing symbols or no handle: no dense figures\n");
  }

  // Time of one dense m x n x k product with A and B of `in` and C f16 (us), or -1.
  double time_us(int64_t m, int64_t n, int64_t k, cudaDataType in) {
    if (!ok) return -1;
    constexpr int kCompute32F = 68, kTransA = 3, kFastAccum = 25, kPrefMaxWorkspace = 1;
    constexpr size_t kWorkspace = size_t(32) << 20;
    Handle desc = nullptr, la = nullptr, lb = nullptr, lc = nullptr, pref = nullptr;
    if (desc_create(&desc, kCompute32F, CUDA_R_32F) != 0) return -1;
    const int op_t = 1;  // CUBLAS_OP_T
    const int8_t fast = 0;
    desc_set(desc, kTransA, &op_t, sizeof op_t);
    if (in == CUDA_R_8F_E4M3) desc_set(desc, kFastAccum, &fast, 1);
    layout_create(&la, in, uint64_t(k), uint64_t(n), k);
    layout_create(&lb, in, uint64_t(k), uint64_t(m), k);
    layout_create(&lc, CUDA_R_16F, uint64_t(n), uint64_t(m), n);
    pref_create(&pref);
    const uint64_t ws = kWorkspace;
    pref_set(pref, kPrefMaxWorkspace, &ws, sizeof ws);
    HeuristicResult h{};
    int found = 0;
    if (heuristic(handle, desc, la, lb, lc, lc, pref, 1, &h, &found) != 0 || found < 1) return -1;
    const int64_t elem = in == CUDA_R_8F_E4M3 ? 1 : 2;
    Dev a(static_cast<size_t>(m * k * elem)), b(static_cast<size_t>(k * n * elem)), c(static_cast<size_t>(m * n * 2)), w(kWorkspace);
    fill(a.p, m * k, int(elem), 1);
    fill(b.p, k * n, int(elem), 2);
    const float alpha = 1.0f, beta = 0.0f;
    auto run = [&] {
      return matmul(handle, desc, &alpha, b.p, la, a.p, lb, &beta, c.p, lc, c.p, lc, h.algo, w.p, kWorkspace, nullptr);
    };
    if (run() != 0) return -1;
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      CUDA_OK(cudaEventRecord(e0));
      for (int i = 0; i < 10; ++i) run();
      CUDA_OK(cudaEventRecord(e1));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, 100.0 * ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return best;
  }
};

// Best of 3 rounds of 10 launches of `row` on p (us per launch), or -1 on a launch error.
double time_row(const char* row, const sparsek::detail::Problem& p) {
  if (launch(row, p, nullptr) != cudaSuccess) return -1;
  CUDA_OK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    CUDA_OK(cudaEventRecord(e0));
    for (int i = 0; i < 10; ++i) (void)launch(row, p, nullptr);
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    best = std::min(best, 100.0 * ms);
  }
  CUDA_OK(cudaGetLastError());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

struct Shape {
  int64_t m, n, k;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// One timed case: the FP8 row and the f16 row on one pattern.
struct Timed {
  double fp8_us, f16_us, nz_flops;
  std::vector<double> extra_us;  // --rows, -1 where the row takes other blocks
  // --rows: max |C - C of the 128x128 or 64-high row| / max |that C| over the timed problem
  // (the same products in another tile or kernel: a check on shapes and patterns that --check
  // does not draw, e.g. block-rows longer than two rings of stages).
  std::vector<double> extra_diff;
};
Timed time_case(const Shape& s, int blk, double density, uint64_t seed, const sparsek::detail::DeviceInfo& dev,
                bool profile) {
  const int64_t mb = s.m / blk, kb = s.k / blk;
  const Pattern pat = draw_pattern(mb, kb, density, seed);
  const int64_t nnzb = int64_t(pat.col_idx.size());
  const int64_t vals = nnzb * blk * blk;
  Dev row_ptr(pat.row_ptr.size() * 4), col_idx(pat.col_idx.size() * 4);
  upload(row_ptr, pat.row_ptr);
  upload(col_idx, pat.col_idx);
  Dev a8(static_cast<size_t>(vals)), a16(static_cast<size_t>(vals * 2)), b8(static_cast<size_t>(s.k * s.n)), b16(static_cast<size_t>(s.k * s.n * 2)),
      c(static_cast<size_t>(s.m * s.n * 2)), sa(static_cast<size_t>(nnzb * 4)), sb(static_cast<size_t>(s.n * 4));
  fill(a8.p, vals, 1, uint32_t(seed * 4 + 1));
  fill(a16.p, vals, 2, uint32_t(seed * 4 + 2));
  fill(b8.p, s.k * s.n, 1, uint32_t(seed * 4 + 3));
  fill(b16.p, s.k * s.n, 2, uint32_t(seed * 4 + 4));
  std::vector<float> scales_a(static_cast<size_t>(nnzb)), scales_b(static_cast<size_t>(s.n));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (float& x : scales_a) x = u(rng) / 448.0f;
  for (float& x : scales_b) x = u(rng) / 448.0f;
  upload(sa, scales_a);
  upload(sb, scales_b);

  sparsek::BsrView a;
  a.m = s.m, a.k = s.k, a.bm = blk, a.bk = blk, a.nnzb = nnzb;
  a.row_ptr = static_cast<const int32_t*>(row_ptr.p), a.col_idx = static_cast<const int32_t*>(col_idx.p);
  a.values = a8.p, a.dtype = DType::E4M3, a.scales = static_cast<const float*>(sa.p);
  a.scale_kind = ScaleKind::PerBlock;
  sparsek::DenseView b{b8.p, s.k, s.n, s.k, Layout::ColMajor, DType::E4M3, static_cast<const float*>(sb.p),
                       b_scale_per_tensor ? ScaleKind::PerTensor : ScaleKind::PerColumn};
  if (w8a16) b = sparsek::DenseView{b16.p, s.k, s.n, s.k, Layout::ColMajor, DType::F16};
  sparsek::DenseMutView cv{c.p, s.m, s.n, s.m, Layout::ColMajor, DType::F16};
  const auto p8 = sparsek::detail::Problem::from_rust(a, b, cv, 1.0f, 0.0f, Backend::Hopper, nullptr,
                                                      Activation::None, dev, false, nullptr, false);
  // The rows for row-major C (f16_only and _crow) write C(i, j) at i * n + j.
  sparsek::DenseMutView cv_row{c.p, s.m, s.n, s.n, Layout::RowMajor, DType::F16};
  const auto p8_row = sparsek::detail::Problem::from_rust(a, b, cv_row, 1.0f, 0.0f, Backend::Hopper, nullptr,
                                                          Activation::None, dev, false, nullptr, false);
  auto problem_of = [&](const std::string& r) -> const sparsek::detail::Problem& {
    return c_row_major(r) ? p8_row : p8;
  };
  const char* row8 = w8a16 ? kW8Row128 : blk == 128 ? kFp8Row128 : kFp8Row64;
  if (profile) {  // the 128x128 row, then the --rows of these blocks
    CUDA_OK(launch(row8, p8, nullptr));
    for (const std::string& r : extra_rows)
      if (row_block(r) == blk) CUDA_OK(launch(r.c_str(), problem_of(r), nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    return Timed{0, 0, 0};
  }
  sparsek::BsrView ah = a;
  ah.values = a16.p, ah.dtype = DType::F16, ah.scales = nullptr, ah.scale_kind = ScaleKind::None;
  sparsek::DenseView bh{b16.p, s.k, s.n, s.k, Layout::ColMajor, DType::F16};
  const auto p16 = sparsek::detail::Problem::from_rust(ah, bh, cv, 1.0f, 0.0f, Backend::Hopper, nullptr,
                                                       Activation::None, dev, false, nullptr, false);
  Timed t;
  t.fp8_us = time_row(row8, p8);
  const size_t c_count = static_cast<size_t>(s.m * s.n);
  auto c_values = [&] {
    std::vector<__half> h(c_count);
    CUDA_OK(cudaMemcpy(h.data(), c.p, c_count * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(c_count);
    for (size_t i = 0; i < c_count; ++i) f[i] = __half2float(h[i]);
    return f;
  };
  const std::vector<float> c_base = c_values();
  float base_max = 0.0f;
  for (float x : c_base) base_max = std::max(base_max, std::fabs(x));
  for (const std::string& r : extra_rows) {
    const bool runs = row_block(r) == blk && (!cluster_row(r) || s.n % kClusterN == 0);
    t.extra_us.push_back(runs ? time_row(r.c_str(), problem_of(r)) : -1.0);
    double diff = -1.0;
    if (runs) {
      std::vector<float> c_row = c_values();
      if (c_row_major(r)) {  // back to column-major order, as c_base
        std::vector<float> col(c_count);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) col[size_t(j * s.m + i)] = c_row[size_t(i * s.n + j)];
        c_row = std::move(col);
      }
      diff = 0.0;
      for (size_t i = 0; i < c_count; ++i)
        diff = std::max(diff, std::isfinite(c_row[i]) ? double(std::fabs(c_row[i] - c_base[i])) : INFINITY);
      diff /= std::max(double(base_max), 1e-30);
    }
    t.extra_diff.push_back(diff);
  }
  t.f16_us = time_row(blk == 128 ? kF16Row128 : kF16Row64, p16);
  if (w8a16)  // the fastest f16 row on 128x128 blocks
    for (const char* r : {kF16RowDeep, kF16RowNarrow}) t.f16_us = std::min(t.f16_us, time_row(r, p16));
  t.nz_flops = 2.0 * double(s.n) * double(nnzb) * blk * blk;
  return t;
}

// ---- --check ----

float from_e4m3(uint8_t b) {
  __nv_fp8_e4m3 v;
  v.__x = b;
  return float(v);
}
uint8_t to_e4m3(float x) { return __nv_fp8_e4m3(x).__x; }
size_t out_bytes(DType t) { return t == DType::F32 ? 4 : 2; }
void store_out(float x, uint8_t* dst, DType t) {
  if (t == DType::F32) std::memcpy(dst, &x, 4);
  if (t == DType::F16) {
    const __half h = __float2half(x);
    std::memcpy(dst, &h, 2);
  }
  if (t == DType::BF16) {
    const __nv_bfloat16 h = __float2bfloat16(x);
    std::memcpy(dst, &h, 2);
  }
}
double load_out(const uint8_t* src, DType t) {
  if (t == DType::F32) {
    float x;
    std::memcpy(&x, src, 4);
    return x;
  }
  if (t == DType::F16) {
    __half h;
    std::memcpy(&h, src, 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  std::memcpy(&h, src, 2);
  return __bfloat162float(h);
}
const char* dtype_name(DType t) { return t == DType::F32 ? "f32" : t == DType::F16 ? "f16" : "bf16"; }

int check_failures = 0, check_passes = 0;

// One --check case; `repeats` > 1: also that many launches, each bitwise equal to the first.
void check_case(const char* row, int blk, int64_t n, DType out, int repeats, const sparsek::detail::DeviceInfo& dev,
                uint64_t seed) {
  const int counts[] = {0, 1, 2, 3, 4, 6};
  const int64_t mb = 6, kb = 6, m = mb * blk, k = kb * blk;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), su(0.25f, 2.0f);
  Pattern pat;
  pat.row_ptr.push_back(0);
  for (int64_t r = 0; r < mb; ++r) {
    std::vector<int32_t> cols(static_cast<size_t>(kb));
    for (int64_t c = 0; c < kb; ++c) cols[size_t(c)] = int32_t(c);
    std::shuffle(cols.begin(), cols.end(), rng);
    cols.resize(size_t(counts[(r + seed) % mb]));
    std::sort(cols.begin(), cols.end());
    pat.col_idx.insert(pat.col_idx.end(), cols.begin(), cols.end());
    pat.row_ptr.push_back(int32_t(pat.col_idx.size()));
  }
  const int64_t nnzb = int64_t(pat.col_idx.size());
  std::vector<uint8_t> aq(static_cast<size_t>(nnzb * blk * blk)), bq(static_cast<size_t>(k * n));
  std::vector<float> sa(static_cast<size_t>(nnzb)), sb(static_cast<size_t>(n));
  for (auto& x : aq) x = to_e4m3(u(rng) * 448.0f);
  for (auto& x : bq) x = to_e4m3(u(rng) * 448.0f);
  for (auto& x : sa) x = su(rng) / 448.0f;
  for (auto& x : sb) x = su(rng) / 448.0f;
  // W8A16: B f16 in (-1, 1) without scales; every third block on a scale of 150-300 (scaled
  // weights past the f16 maximum), its stored values about 1/scale.
  std::vector<__half> bh(w8a16 ? static_cast<size_t>(k * n) : 0);
  for (auto& x : bh) x = __float2half(u(rng));
  if (w8a16)
    for (int64_t j = 2; j < nnzb; j += 3) {
      sa[size_t(j)] = 150.0f * (1.0f + 0.5f * (u(rng) + 1.0f));
      for (int64_t e = 0; e < int64_t(blk) * blk; ++e) aq[size_t(j * blk * blk + e)] = to_e4m3(u(rng) / sa[size_t(j)]);
    }
  auto b_at = [&](int64_t row, int64_t col) {  // B(row, col) dequantized (column-major, ld k)
    return w8a16 ? double(__half2float(bh[size_t(col * k + row)]))
                 : double(from_e4m3(bq[size_t(col * k + row)])) * double(sb[size_t(col)]);
  };
  const size_t ob = out_bytes(out);
  std::vector<uint8_t> bias(size_t(m) * ob);
  for (int64_t i = 0; i < m; ++i) store_out(u(rng), &bias[size_t(i) * ob], out);
  const float alpha = 0.75f;
  // f64 reference on the dequantized operands.
  std::vector<double> ref(size_t(m * n), 0.0);
  for (int64_t r = 0; r < mb; ++r)
    for (int32_t j = pat.row_ptr[size_t(r)]; j < pat.row_ptr[size_t(r) + 1]; ++j) {
      const int64_t col = pat.col_idx[size_t(j)];
      const uint8_t* blockv = &aq[size_t(j) * blk * blk];
      for (int64_t i = 0; i < blk; ++i)
        for (int64_t c = 0; c < n; ++c) {
          double acc = 0;
          for (int64_t kk = 0; kk < blk; ++kk)
            acc += double(from_e4m3(blockv[i * blk + kk])) * b_at(col * blk + kk, c);
          ref[size_t(c * m + r * blk + i)] += acc * double(sa[size_t(j)]);
        }
    }
  double ref_max = 0;
  for (int64_t c = 0; c < n; ++c)
    for (int64_t i = 0; i < m; ++i) {
      double& v = ref[size_t(c * m + i)];
      v = double(alpha) * v + load_out(&bias[size_t(i) * ob], out);
      ref_max = std::max(ref_max, std::fabs(v));
    }

  // C column-major with ld = m + 8, or (the _crow rows) row-major with ld a multiple of 8
  // past n: (i, c) at `major` * ldc + `minor`, and each major line's tail must keep the poison.
  const bool c_rows = c_row_major(row);
  const int64_t majors = c_rows ? m : n, minors = c_rows ? n : m;
  const int64_t ldc = (minors + 7) / 8 * 8 + 8;
  const size_t c_bytes = size_t(ldc * majors) * ob;
  Dev drp(pat.row_ptr.size() * 4), dci(std::max<size_t>(1, pat.col_idx.size()) * 4), da(aq.size()), db(bq.size()),
      dsa(sa.size() * 4), dsb(sb.size() * 4), dbias(bias.size()), dc(c_bytes);
  upload(drp, pat.row_ptr);
  if (!pat.col_idx.empty()) upload(dci, pat.col_idx);
  upload(da, aq);
  upload(db, bq);
  Dev dbh(bh.size() * 2);
  if (w8a16) upload(dbh, bh);
  upload(dsa, sa);
  upload(dsb, sb);
  upload(dbias, bias);
  CUDA_OK(cudaMemset(dc.p, 0xff, c_bytes));  // NaN in f32, f16 and bf16
  sparsek::BsrView a;
  a.m = m, a.k = k, a.bm = blk, a.bk = blk, a.nnzb = nnzb;
  a.row_ptr = static_cast<const int32_t*>(drp.p), a.col_idx = static_cast<const int32_t*>(dci.p);
  a.values = da.p, a.dtype = DType::E4M3, a.scales = static_cast<const float*>(dsa.p);
  a.scale_kind = ScaleKind::PerBlock;
  sparsek::DenseView b{db.p, k, n, k, Layout::ColMajor, DType::E4M3, static_cast<const float*>(dsb.p),
                       ScaleKind::PerColumn};
  if (w8a16) b = sparsek::DenseView{dbh.p, k, n, k, Layout::ColMajor, DType::F16};
  sparsek::DenseMutView cv{dc.p, m, n, ldc, c_rows ? Layout::RowMajor : Layout::ColMajor, out};
  const auto p = sparsek::detail::Problem::from_rust(a, b, cv, alpha, 0.0f, Backend::Hopper, dbias.p,
                                                     Activation::None, dev, false, nullptr, false);
  CUDA_OK(launch(row, p, nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> got(c_bytes);
  CUDA_OK(cudaMemcpy(got.data(), dc.p, c_bytes, cudaMemcpyDeviceToHost));
  double err = 0;
  int64_t bad = 0, outside = 0;
  for (int64_t major = 0; major < majors; ++major)
    for (int64_t minor = 0; minor < ldc; ++minor) {
      const uint8_t* at = &got[size_t(major * ldc + minor) * ob];
      if (minor >= minors) {
        for (size_t q = 0; q < ob; ++q) outside += at[q] != 0xff;
        continue;
      }
      const double v = load_out(at, out);
      if (!std::isfinite(v)) {
        ++bad;
        continue;
      }
      const int64_t i = c_rows ? major : minor, c = c_rows ? minor : major;
      err = std::max(err, std::fabs(v - ref[size_t(c * m + i)]));
    }
  // A hash of C's bytes: equal in two builds' logs iff they wrote the same bits.
  uint64_t hash = 1469598103934665603ull;
  for (uint8_t byte : got) hash = (hash ^ byte) * 1099511628211ull;
  const double rel = err / std::max(ref_max, 1e-30);
  const double tol = out == DType::BF16 ? 8e-3 : out == DType::F16 ? 1e-3 : 5e-4;
  bool ok = bad == 0 && outside == 0 && rel < tol;
  int diffs = 0;
  for (int rep = 1; rep < repeats; ++rep) {
    CUDA_OK(cudaMemset(dc.p, 0xff, c_bytes));
    CUDA_OK(launch(row, p, nullptr));
    std::vector<uint8_t> again(c_bytes);
    CUDA_OK(cudaMemcpy(again.data(), dc.p, c_bytes, cudaMemcpyDeviceToHost));
    diffs += again != got;
  }
  ok = ok && diffs == 0;
  std::printf("%s check %s n=%lld C %s: rel err %.2e (tol %.0e), %lld not finite, %lld bytes outside C changed, "
              "hash %016llx%s\n",
              ok ? "PASS" : "FAIL", row, static_cast<long long>(n), dtype_name(out), rel, tol,
              static_cast<long long>(bad), static_cast<long long>(outside), static_cast<unsigned long long>(hash),
              repeats > 1 ? (diffs == 0 ? ", repeats bitwise identical" : ", REPEATS DIFFER") : "");
  (ok ? check_passes : check_failures)++;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {{4096, 4096, 4096}, {6144, 6144, 6144}, {8192, 8192, 8192}, {4096, 8192, 14336}};
  std::vector<int> blocks = {128, 64};
  std::vector<double> densities = {0.125, 0.25};
  bool shapes_given = false, densities_given = false, rows_given = false;
  int seeds = 2;
  bool check = false, quick = false, profile = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string val = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--check") {
      check = true;
    } else if (arg == "--check-quick") {
      check = quick = true;
    } else if (arg == "--profile") {
      profile = true;
    } else if (arg == "--shapes") {
      shapes.clear(), shapes_given = true;
      for (const auto& s : split_list(val)) {
        Shape sh{};
        if (std::sscanf(s.c_str(), "%lldx%lldx%lld", reinterpret_cast<long long*>(&sh.m),
                        reinterpret_cast<long long*>(&sh.n), reinterpret_cast<long long*>(&sh.k)) != 3) {
          std::fprintf(stderr, "bad shape %s (m x n x k)\n", s.c_str());
          return 2;
        }
        shapes.push_back(sh);
      }
      ++i;
    } else if (arg == "--blocks") {
      blocks.clear();
      for (const auto& s : split_list(val)) blocks.push_back(std::atoi(s.c_str()));
      ++i;
    } else if (arg == "--densities") {
      densities.clear(), densities_given = true;
      for (const auto& s : split_list(val)) densities.push_back(std::atof(s.c_str()));
      ++i;
    } else if (arg == "--rows") {
      extra_rows = split_list(val), rows_given = true;
      for (const std::string& r : extra_rows)
        if (!compiled_in(r.c_str())) {
          std::fprintf(stderr, "no row %s compiled in\n", r.c_str());
          return 2;
        }
      ++i;
    } else if (arg == "--b-scale") {
      if (val != "tensor" && val != "column") {
        std::fprintf(stderr, "--b-scale %s: column or tensor\n", val.c_str());
        return 2;
      }
      b_scale_per_tensor = val == "tensor";
      ++i;
    } else if (arg == "--w8a16") {
      w8a16 = true;
    } else if (arg == "--seeds") {
      seeds = std::atoi(val.c_str());
      ++i;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (w8a16) {
    blocks = {128};
    if (!rows_given) extra_rows = {kW8RowNarrow};
  } else if (!rows_given && compiled_in(kFp8Row128Cluster)) {
    extra_rows = {kFp8Row128Cluster};
  }
  const sparsek::detail::DeviceInfo dev = device_info();
  if (profile) {
    // The first of --shapes and --densities (8192^3 and 1/4 by default).
    time_case(shapes_given ? shapes[0] : Shape{8192, 8192, 8192}, 128, densities_given ? densities[0] : 0.25, 0, dev, true);
    std::printf("profile launch done\n");
    return 0;
  }
  if (check) {
    uint64_t seed = 1;
    for (const char* row : {kFp8Row128, kFp8Row64}) {
      if (w8a16) row = row == kFp8Row128 ? kW8Row128 : kW8RowNarrow;
      if (!compiled_in(row)) continue;
      const int blk = row == kFp8Row64 ? 64 : 128;
      for (int64_t n : {1, 7, 64, 129, 333, 600})
        for (DType out : {DType::F32, DType::F16, DType::BF16}) {
          if (quick && (n != 7 && n != 129)) continue;
          check_case(row, blk, n, out, (n == 333 && out == DType::F32) ? 100 : quick ? 2 : 1, dev, seed++);
        }
    }
    for (const std::string& r : extra_rows) {
      const int blk = row_block(r);
      // (The f16-only rows' TMA epilogue takes n a multiple of 8, family.cu.)
      const std::vector<int64_t> ns = cluster_row(r) ? std::vector<int64_t>{kClusterN, 2 * kClusterN}
                                      : f16_only(r)  ? std::vector<int64_t>{8, 336, 600}
                                                     : std::vector<int64_t>{7, 333, 600};
      for (int64_t n : ns)
        for (DType out : {DType::F32, DType::F16, DType::BF16}) {
          if ((quick || f16_only(r)) && out != DType::F16) continue;
          check_case(r.c_str(), blk, n, out, (n >= 512 && (out == DType::F32 || f16_only(r))) ? 100 : quick ? 2 : 1,
                     dev, seed++);
        }
    }
    std::printf("check: %d passed, %d failed\n", check_passes, check_failures);
    return check_failures == 0 ? 0 : 1;
  }
  Lt lt;
  std::printf("shape m x n x k | block | density | seed | FP8 us | FP8 TFLOPS | f16 us | f16 TFLOPS | FP8/f16 | "
              "dense e4m3 TFLOPS | E | dense f16 TFLOPS | each of --rows: us, TFLOPS, ÷ f16 time, E, diff to the "
              "first FP8 row's C\n");
  for (const Shape& s : shapes) {
    const double dense8_us = lt.time_us(s.m, s.n, s.k, CUDA_R_8F_E4M3);
    const double dense16_us = lt.time_us(s.m, s.n, s.k, CUDA_R_16F);
    const double dense_flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
    const double d8 = dense8_us > 0 ? dense_flops / dense8_us * 1e-6 : -1;
    const double d16 = dense16_us > 0 ? dense_flops / dense16_us * 1e-6 : -1;
    for (int blk : blocks)
      for (double d : densities)
        for (int seed = 0; seed < seeds; ++seed) {
          const Timed t = time_case(s, blk, d, uint64_t(seed), dev, false);
          const double f8 = t.nz_flops / t.fp8_us * 1e-6, f16 = t.nz_flops / t.f16_us * 1e-6;
          std::printf("%lldx%lldx%lld | %d | %.3f | %d | %.1f | %.0f | %.1f | %.0f | %.2fx | %.0f | %.2f | %.0f",
                      static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k), blk, d,
                      seed, t.fp8_us, f8, t.f16_us, f16, t.f16_us / t.fp8_us, d8, d8 > 0 ? f8 / d8 : -1.0, d16);
          for (size_t r = 0; r < t.extra_us.size(); ++r) {
            if (t.extra_us[r] <= 0) continue;
            const double fr = t.nz_flops / t.extra_us[r] * 1e-6;
            std::printf(" | %s %.1f us %.0f TFLOPS %.2fx f16 E %.2f diff %.1e", extra_rows[r].c_str(), t.extra_us[r],
                        fr, t.f16_us / t.extra_us[r], d8 > 0 ? fr / d8 : -1.0, t.extra_diff[r]);
          }
          std::printf("\n");
          std::fflush(stdout);
        }
  }
  return 0;
}
