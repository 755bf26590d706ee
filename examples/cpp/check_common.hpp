// The example checkers' shared scaffolding (host C++, header-only; each checker includes it
// as "check_common.hpp", next to it): CUDA_CHECK, the device line, a seeded random generator,
// f16/bf16 bits, and for the attention checkers their [batch, heads, seq, d] buffers (O's
// poison and sentinel), block masks, device int32 arrays, shuffled page pools, the output
// error against a double reference, the SPARSEK_VARIANT skip rule and the timing loop.
// Everything goes through the public headers only.
#pragma once

#include <sparsek/attention.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

// A failed CUDA runtime call ends the checker (exit status 2) with one FAIL line.
#define CUDA_CHECK(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("FAIL CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                            \
    }                                                                                          \
  } while (0)

namespace check_common {

// The checker's first line: the device it runs on (its properties returned).
inline cudaDeviceProp print_device() {
  int dev = 0;
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (cc %d.%d)\n", prop.name, prop.major, prop.minor);
  return prop;
}

// xorshift64: the same values for a seed on every machine.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  float sym() { return static_cast<float>(2 * uniform() - 1); }
};

// A float as the bits of an f16 or bf16 value (rounded to nearest), and back.
inline uint16_t to_bits(float v, sparsek::DType t) {
  uint16_t b;
  if (t == sparsek::DType::F16) {
    const __half h = __float2half(v);
    std::memcpy(&b, &h, 2);
  } else {
    const __nv_bfloat16 h = __float2bfloat16(v);
    std::memcpy(&b, &h, 2);
  }
  return b;
}
inline float from_bits(uint16_t b, sparsek::DType t) {
  if (t == sparsek::DType::F16) {
    __half h;
    std::memcpy(static_cast<void*>(&h), &b, 2);
    return __half2float(h);
  }
  __nv_bfloat16 h;
  std::memcpy(static_cast<void*>(&h), &b, 2);
  return __bfloat162float(h);
}

// The value O's elements outside the view hold: an attention that writes there changes it.
constexpr uint16_t kSentinel = 0x7777;

// A host [batch, heads, seq, d] tensor of 16-bit values with its strides, and its device copy.
struct Heads {
  int64_t batch, heads, seq, d, sb, sh, ss;
  sparsek::DType t;
  std::vector<uint16_t> host;
  void* dev = nullptr;
  Heads(int64_t b, int64_t h, int64_t s, int64_t d_, sparsek::DType t_, bool bshd)
      : batch(b), heads(h), seq(s), d(d_), t(t_) {
    if (bshd) {  // [batch, seq, heads, d], rows padded by 8 elements (a gap between heads' rows)
      sh = d + 8;
      ss = heads * sh;
      sb = seq * ss;
    } else {
      ss = d;
      sh = seq * d;
      sb = heads * sh;
    }
    host.assign(size_t(std::max<int64_t>(batch * sb, 1)), 0);
  }
  size_t at(int64_t b, int64_t h, int64_t s, int64_t x) const { return size_t(b * sb + h * sh + s * ss + x); }
  float get(int64_t b, int64_t h, int64_t s, int64_t x) const { return from_bits(host[at(b, h, s, x)], t); }
  // Every element of the view uniform in [-1, 1), in (b, h, s, x) order from rng.
  void fill_random(Rng& rng) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < seq; ++s)
          for (int64_t x = 0; x < d; ++x) host[at(b, h, s, x)] = to_bits(rng.sym(), t);
  }
  void upload() {
    if (dev == nullptr) CUDA_CHECK(cudaMalloc(&dev, host.size() * 2));
    CUDA_CHECK(cudaMemcpy(dev, host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  }
  void download() { CUDA_CHECK(cudaMemcpy(host.data(), dev, host.size() * 2, cudaMemcpyDeviceToHost)); }
  // The tensor to write (O), and to read (Q, K, V).
  sparsek::HeadsMutView out() const { return sparsek::HeadsMutView{dev, batch, heads, seq, d, sb, sh, ss, t}; }
  sparsek::HeadsView view() const { return out(); }
  ~Heads() {
    if (dev != nullptr) cudaFree(dev);
  }
  Heads(const Heads&) = delete;
  Heads& operator=(const Heads&) = delete;
};

// O poisoned on the host (upload it after): NaN in the view's first `rows` rows (every
// element there must be written), the sentinel everywhere else (never written).
inline void poison(Heads& o, int64_t rows) {
  std::fill(o.host.begin(), o.host.end(), kSentinel);
  for (int64_t b = 0; b < o.batch; ++b)
    for (int64_t h = 0; h < o.heads; ++h)
      for (int64_t s = 0; s < rows; ++s)
        for (int64_t x = 0; x < o.d; ++x) o.host[o.at(b, h, s, x)] = to_bits(NAN, o.t);
}

// Whether every element of O's host copy still holds the sentinel.
inline bool all_sentinel(const Heads& o) {
  return std::all_of(o.host.begin(), o.host.end(), [](uint16_t x) { return x == kSentinel; });
}

// The elements of a [batch, seq, heads, d] O's gaps (columns d .. sh of each row) that lost
// the sentinel.
inline int64_t gap_writes(const Heads& o) {
  int64_t n = 0;
  for (int64_t b = 0; b < o.batch; ++b)
    for (int64_t s = 0; s < o.seq; ++s)
      for (int64_t h = 0; h < o.heads; ++h)
        for (int64_t x = o.d; x < o.sh; ++x) n += o.host[o.at(b, h, s, x)] != kSentinel;
  return n;
}

// A device copy of int32 values (at least one element allocated), freed with it.
struct DeviceInts {
  int32_t* p = nullptr;
  explicit DeviceInts(const std::vector<int32_t>& v) {
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * 4));
    if (!v.empty()) CUDA_CHECK(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  }
  ~DeviceInts() { cudaFree(p); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
};

// A host block mask: stacked BSR (see BlockMaskView).
struct Mask {
  int32_t block_q = 128, block_k = 128;
  int64_t q_blocks = 0, k_blocks = 0, patterns = 1;
  int64_t batch = 0, heads = 0;  // what per-head patterns were made for (patterns > 1)
  std::vector<int32_t> row_ptr{0}, col_idx;
  bool listed(int64_t p, int64_t i, int64_t j) const {
    const int64_t r = p * q_blocks + i;
    return std::binary_search(col_idx.begin() + row_ptr[size_t(r)], col_idx.begin() + row_ptr[size_t(r + 1)],
                              int32_t(j));
  }
  // The pattern of query head h of batch b among heads_q query heads (the header's rule).
  int64_t pattern_of(int64_t b, int64_t h, int64_t heads_q) const {
    return patterns == 1 ? 0 : b * heads + h / (heads_q / heads);
  }
  // Appends patterns * q_blocks random rows of k_blocks blocks: each row empty with
  // probability 1/6, full with 1/6, else each block kept with `density`.
  void add_random_rows(Rng& rng, double density) {
    for (int64_t r = 0; r < patterns * q_blocks; ++r) {
      const double u = rng.uniform();
      for (int64_t j = 0; j < k_blocks; ++j) {
        const bool keep = u < 1.0 / 6 ? false : u < 2.0 / 6 ? true : rng.uniform() < density;
        if (keep) col_idx.push_back(int32_t(j));
      }
      row_ptr.push_back(int32_t(col_idx.size()));
    }
  }
};

// A mask's device copy and its view.
struct DeviceMask {
  DeviceInts row_ptr, col_idx;
  sparsek::BlockMaskView view{};
  explicit DeviceMask(const Mask& m) : row_ptr(m.row_ptr), col_idx(m.col_idx) {
    view.block_q = m.block_q;
    view.block_k = m.block_k;
    view.q_blocks = m.q_blocks;
    view.k_blocks = m.k_blocks;
    view.patterns = m.patterns;
    view.batch = m.batch;
    view.heads = m.heads;
    view.nnzb = int64_t(m.col_idx.size());
    view.row_ptr = row_ptr.p;
    view.col_idx = col_idx.p;
  }
};

// Paged K/V on the host: sequence b's key j is row j % page of page table[b * max_pages +
// j / page] of a pool of num_pages pages; page 0: not paged (K and V's batch entry b).
struct PageTable {
  int64_t page = 0, max_pages = 0, num_pages = 0;
  std::vector<int32_t> table;
  // K and V's batch entry and row of sequence b's key j.
  std::pair<int64_t, int64_t> key(int64_t b, int64_t j) const {
    if (page == 0) return {b, j};
    return {table[size_t(b * max_pages + j / page)], j % page};
  }
};

// Pages of `page` keys for sequences of lens[b] keys (at most max_len): max_pages =
// ceil(max_len / page) + 1 entries per sequence (-1 past its pages), over a pool of every
// sequence's pages and two spare, in an order shuffled by rng.
inline PageTable shuffled_pages(const std::vector<int32_t>& lens, int64_t max_len, int64_t page, Rng& rng) {
  PageTable t;
  t.page = page;
  t.max_pages = (max_len + page - 1) / page + 1;
  int64_t used = 0;
  for (int32_t n : lens) used += (n + page - 1) / page;
  t.num_pages = used + 2;
  std::vector<int32_t> order(size_t(t.num_pages));
  for (int64_t i = 0; i < t.num_pages; ++i) order[size_t(i)] = int32_t(i);
  for (int64_t i = t.num_pages - 1; i > 0; --i)
    std::swap(order[size_t(i)], order[size_t(rng.next() % uint64_t(i + 1))]);
  t.table.assign(lens.size() * size_t(t.max_pages), -1);
  int64_t next = 0;
  for (size_t b = 0; b < lens.size(); ++b)
    for (int64_t p = 0; p < (lens[b] + page - 1) / page; ++p)
      t.table[b * size_t(t.max_pages) + size_t(p)] = order[size_t(next++)];
  return t;
}

// O and LSE against a double reference, row by row. A row that keeps no key (reference LSE
// -inf) must have LSE -inf and O exactly 0; a NaN in O is bad anywhere (an infinity too with
// infinite_is_bad). rel: the relative L2 error of O.
struct OutputError {
  bool infinite_is_bad = false;
  double num = 0, den = 0, lse_err = 0;
  int64_t bad = 0, empty_rows = 0;
  // One row's LSE; returns whether the row keeps no key.
  bool lse(float got, double want) {
    const bool empty = want == -INFINITY;
    empty_rows += empty;
    if (empty) {
      if (!(got == -INFINITY)) ++bad;
    } else {
      lse_err = std::max(lse_err, std::fabs(double(got) - want));
    }
    return empty;
  }
  // One element of O in a row that keeps no key (empty) or some.
  void value(float got, double want, bool empty) {
    if ((infinite_is_bad ? !std::isfinite(got) : std::isnan(got)) || (empty && got != 0.0f)) ++bad;
    num += (got - want) * (got - want);
    den += want * want;
  }
  double rel() const { return den > 0 ? std::sqrt(num / den) : std::sqrt(num); }
  static double tolerance(sparsek::DType t) { return t == sparsek::DType::F16 ? 2e-3 : 1e-2; }
  // Nothing bad, O within the type's tolerance and the LSE within 1e-3.
  bool ok(sparsek::DType t) const { return bad == 0 && rel() <= tolerance(t) && lse_err <= 1e-3; }
};

// SPARSEK_VARIANT forces one row, which takes only its dtype and head_dim: a case it refuses
// with NotSupported is skipped, not failed.
inline bool forced_variant() { return std::getenv("SPARSEK_VARIANT") != nullptr; }
inline bool skipped(const sparsek::Result& r) {
  return forced_variant() && r.status == sparsek::Status::NotSupported;
}

// The median over 5 repeats of `iters` calls of body, in ms per call (CUDA events around
// each repeat on the default stream).
template <class Body>
double median_ms(int iters, const Body& body) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> times;
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaEventRecord(e0));
    for (int it = 0; it < iters; ++it) body();
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms / float(iters));
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(times.begin(), times.end());
  return double(times[2]);
}

}  // namespace check_common
