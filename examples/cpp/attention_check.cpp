// attention_check: checks sparsek::attention and the top-k gating (include/sparsek/attention.hpp)
// through the public C++ headers only.
//
//   attention_check        built-in cases against a double-precision host reference: block
//                          masks with empty and full rows, causal (top-left and bottom-right),
//                          both, top-k masks from the device gating, no mask; f16/bf16;
//                          head_dim 64/128; sequences not a multiple of 128, seq_q != seq_k;
//                          packed and [batch, seq, heads, d] strided views; one pattern, one
//                          per query head or one per KV head; grouped-query heads (K and V
//                          with fewer heads than Q, MQA). O is poisoned with NaN
//                          (every element of the view must be written) and the gaps of a
//                          strided O hold a sentinel (never written). Then 100 repeats bitwise
//                          identical, the gating against the host top-k (pooled and given
//                          scores with ties, +-0 and NaN), and refusals (O untouched).
//                          Then packed sequences (varlen: cu_seqlens_q / cu_seqlens_k) of
//                          lengths 0 .. 3000 against a per-sequence reference, O poisoned and
//                          64 rows past its view at a sentinel, and offsets that disagree with
//                          the packed size refused with check_indices. Then per-sequence key
//                          counts and paged K/V (shuffled pools of 128- and 256-key pages,
//                          masks over logical key blocks), and their refusals: a page
//                          outside the pool and a count above max_seqlen_k (check_indices),
//                          pages the Hopper family cannot take (NotSupported).
//                          One PASS/FAIL line each, then "N passed, N failed".
//   attention_check --quick
//                          the first six cases, two gating cases and every third varlen
//                          case only (for the sanitizers: compute-sanitizer --tool
//                          memcheck|racecheck).
//                          With SPARSEK_VARIANT=<row>, cases the row does not take are SKIP.
//   attention_check --time MASK DTYPE BATCH HEADS SEQ HEAD_DIM ITERS MASK_JSON
//                   [--heads-kv N] [--repeat-kv G] [--seq-k N] [--align top_left|bottom_right]
//                          MASK: dense, causal, topk16, topk16_causal (16 key blocks per
//                          query block, from the device gating on the random Q and K).
//                          --heads-kv: K and V's heads (grouped-query attention; default
//                          HEADS); --repeat-kv G: K and V's values drawn for heads-kv / G
//                          heads, each repeated G times (--heads-kv HEADS --repeat-kv HEADS/N
//                          is --heads-kv N's case with K and V repeated per query head: the
//                          same values and the same top-k mask, without GQA);
//                          --seq-k: the keys' length (default SEQ); --align: the causal
//                          diagonal (default top_left).
//                          Times ITERS launches (CUDA events, median of 5 repeats) and prints
//                          one JSON line (the case, kept pairs, ms, TFLOPS on kept pairs:
//                          4 * pairs * head_dim FLOPs); writes the case and its mask to
//                          MASK_JSON for report/peers/attention_torch.py (dims, kept pairs,
//                          stacked BSR).
// Exit status 0 only when everything passed.
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
#include <string>
#include <utility>
#include <vector>

#include "check_common.hpp"

namespace {

using namespace check_common;
using sparsek::BlockMaskView;
using sparsek::DType;
using sparsek::HeadsView;

// `patterns` patterns of qb x kb blocks of random rows (Mask::add_random_rows).
Mask random_mask(Rng& rng, int64_t patterns, int64_t qb, int64_t kb, double density) {
  Mask m;
  m.q_blocks = qb;
  m.k_blocks = kb;
  m.patterns = patterns;
  m.add_random_rows(rng, density);
  return m;
}

Mask download_mask(const BlockMaskView& v) {
  Mask m;
  m.q_blocks = v.q_blocks;
  m.k_blocks = v.k_blocks;
  m.patterns = v.patterns;
  m.batch = v.batch;
  m.heads = v.heads;
  m.row_ptr.resize(size_t(v.patterns * v.q_blocks + 1));
  m.col_idx.resize(size_t(v.nnzb));
  CUDA_CHECK(cudaMemcpy(m.row_ptr.data(), v.row_ptr, m.row_ptr.size() * 4, cudaMemcpyDeviceToHost));
  if (v.nnzb > 0) CUDA_CHECK(cudaMemcpy(m.col_idx.data(), v.col_idx, m.col_idx.size() * 4, cudaMemcpyDeviceToHost));
  return m;
}

// ---- the host top-k (the header's contract, bit for bit) ----
std::vector<float> pooled(const Heads& x, int64_t b, int64_t h, int64_t block) {
  const int64_t blocks = (x.seq + block - 1) / block;
  std::vector<float> out(size_t(blocks * x.d));
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t n = std::min(block, x.seq - i * block);
    for (int64_t c = 0; c < x.d; ++c) {
      float total = 0.0f;  // 16-row groups, as the header documents
      for (int64_t g = 0; g < n; g += 16) {
        float part = 0.0f;
        for (int64_t r = g; r < std::min<int64_t>(g + 16, n); ++r) part += x.get(b, h, i * block + r, c);
        total += part;
      }
      out[size_t(i * x.d + c)] = total / float(n);
    }
  }
  return out;
}
// NaN as -inf, then IEEE 754's total order (+0 above -0), ties by the lower block.
bool ranks_above(float sa, int32_t a, float sb, int32_t b) {
  auto key = [](float x) {
    int32_t bits;
    const float v = std::isnan(x) ? -INFINITY : x;
    std::memcpy(&bits, &v, 4);
    return bits ^ int32_t(uint32_t(bits >> 31) >> 1);
  };
  return key(sa) != key(sb) ? key(sa) > key(sb) : a < b;
}
// scores: [patterns, qb, kb]; `offset` the causal diagonal's (seq_k - seq_q bottom-right, else 0).
Mask host_topk(const std::vector<float>& scores, int64_t patterns, int64_t qb, int64_t kb,
               const sparsek::TopkGatingOptions& o, int64_t offset) {
  Mask m;
  m.q_blocks = qb;
  m.k_blocks = kb;
  m.patterns = patterns;
  for (int64_t p = 0; p < patterns; ++p)
    for (int64_t i = 0; i < qb; ++i) {
      int64_t cand = kb;
      if (o.causal) {  // key block j is a candidate when j*block_k <= (i+1)*block_q - 1 + offset
        cand = 0;
        while (cand < kb && cand * o.block_k <= (i + 1) * o.block_q - 1 + offset) ++cand;
      }
      std::vector<int32_t> order(static_cast<size_t>(cand));
      for (int64_t j = 0; j < cand; ++j) order[size_t(j)] = int32_t(j);
      const float* s = &scores[size_t((p * qb + i) * kb)];
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return ranks_above(s[a], a, s[b], b); });
      order.resize(size_t(std::min<int64_t>(o.top_k, cand)));
      std::sort(order.begin(), order.end());
      m.col_idx.insert(m.col_idx.end(), order.begin(), order.end());
      m.row_ptr.push_back(int32_t(m.col_idx.size()));
    }
  return m;
}
// Query head h against KV head h / (Q's heads / K's heads).
std::vector<float> host_pooled_scores(const Heads& q, const Heads& k, int64_t bq, int64_t bk) {
  const int64_t qb = (q.seq + bq - 1) / bq, kb = (k.seq + bk - 1) / bk;
  const int64_t group = q.heads / std::max<int64_t>(k.heads, 1);
  std::vector<float> s;
  for (int64_t b = 0; b < q.batch; ++b)
    for (int64_t h = 0; h < q.heads; ++h) {
      const std::vector<float> pq = pooled(q, b, h, bq), pk = pooled(k, b, h / group, bk);
      for (int64_t i = 0; i < qb; ++i)
        for (int64_t j = 0; j < kb; ++j) {
          float acc = 0.0f;
          for (int64_t c = 0; c < q.d; ++c) acc = std::fma(pq[size_t(i * q.d + c)], pk[size_t(j * q.d + c)], acc);
          s.push_back(acc);
        }
    }
  return s;
}

// ---- the attention reference (double) ----
struct Reference {
  std::vector<double> o;    // [b, h, s, d] packed
  std::vector<double> lse;  // [b, h, s]
};
// Query head h reads KV head h / (Q's heads / K's heads) and the mask's pattern b * mask.heads +
// h / (Q's heads / mask.heads); causal keeps key j <= i + offset (offset seq_k - seq_q
// bottom-right, else 0).
Reference reference(const Heads& q, const Heads& k, const Heads& v, const Mask* mask, bool causal, bool bottom_right,
                    double scale) {
  Reference r;
  r.o.assign(size_t(q.batch * q.heads * q.seq * q.d), 0.0);
  r.lse.assign(size_t(q.batch * q.heads * q.seq), -INFINITY);
  std::vector<double> s(size_t(k.seq));
  const int64_t group = q.heads / std::max<int64_t>(k.heads, 1);
  const int64_t offset = bottom_right ? k.seq - q.seq : 0;
  for (int64_t b = 0; b < q.batch; ++b)
    for (int64_t h = 0; h < q.heads; ++h) {
      const int64_t hk = h / group;
      const int64_t p =
          mask == nullptr || mask->patterns == 1 ? 0 : b * mask->heads + h / (q.heads / mask->heads);
      for (int64_t i = 0; i < q.seq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < k.seq; ++j) {
          const bool kept = (mask == nullptr || mask->listed(p, i / 128, j / 128)) && (!causal || j <= i + offset);
          if (!kept) {
            s[size_t(j)] = -INFINITY;
            continue;
          }
          double dot = 0;
          for (int64_t c = 0; c < q.d; ++c) dot += double(q.get(b, h, i, c)) * double(k.get(b, hk, j, c));
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        if (mx == -INFINITY) continue;
        double sum = 0;
        const size_t row = size_t(((b * q.heads + h) * q.seq + i) * q.d);
        for (int64_t j = 0; j < k.seq; ++j) {
          if (s[size_t(j)] == -INFINITY) continue;
          const double e = std::exp(s[size_t(j)] - mx);
          sum += e;
          for (int64_t c = 0; c < q.d; ++c) r.o[row + size_t(c)] += e * double(v.get(b, hk, j, c));
        }
        for (int64_t c = 0; c < q.d; ++c) r.o[row + size_t(c)] /= sum;
        r.lse[size_t((b * q.heads + h) * q.seq + i)] = mx + std::log(sum);
      }
    }
  return r;
}

enum class MaskKind { None, Random, TopK };

struct Case {
  int64_t batch, heads, seq_q, seq_k, d;
  DType t;
  MaskKind mask;
  bool causal;
  bool per_head;
  bool bshd;
  float scale;  // 0: default
  double density;
  int64_t heads_kv = 0;       // K and V's heads (grouped-query attention); 0: as Q's
  bool bottom_right = false;  // the causal alignment
  bool per_kv = false;        // per_head: one pattern per KV head (else per query head)
  sparsek::Backend backend = sparsek::Backend::Auto;  // Hopper: keep decode shapes off the decode family
};

const char* name(DType t) { return t == DType::F16 ? "f16" : "bf16"; }

// Runs one case: the poisoned O, the launch, then every element against the reference.
bool run(const Case& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t heads_kv = c.heads_kv > 0 ? c.heads_kv : c.heads;
  Heads q(c.batch, c.heads, c.seq_q, c.d, c.t, c.bshd), k(c.batch, heads_kv, c.seq_k, c.d, c.t, c.bshd),
      v(c.batch, heads_kv, c.seq_k, c.d, c.t, c.bshd), o(c.batch, c.heads, c.seq_q, c.d, c.t, c.bshd);
  q.fill_random(rng);
  k.fill_random(rng);
  v.fill_random(rng);
  poison(o, o.seq);
  q.upload();
  k.upload();
  v.upload();
  o.upload();
  const int64_t qb = (c.seq_q + 127) / 128, kb = (c.seq_k + 127) / 128;
  Mask mask;
  sparsek::BlockMaskView view{};
  int32_t *g_row = nullptr, *g_col = nullptr;
  DeviceMask* dm = nullptr;
  if (c.mask == MaskKind::Random) {
    const int64_t mask_heads = c.per_kv ? heads_kv : c.heads;
    mask = random_mask(rng, c.per_head ? c.batch * mask_heads : 1, qb, kb, c.density);
    mask.batch = c.batch;
    mask.heads = mask_heads;
    dm = new DeviceMask(mask);
    view = dm->view;
  } else if (c.mask == MaskKind::TopK) {
    sparsek::TopkGatingOptions go;
    go.top_k = int32_t(c.density);
    go.causal = c.causal;
    go.causal_alignment = c.bottom_right ? sparsek::CausalAlignment::BottomRight : sparsek::CausalAlignment::TopLeft;
    int64_t nnzb = 0;
    sparsek::Result r = sparsek::block_topk_nnzb(c.batch, c.heads, c.seq_q, c.seq_k, go, &nnzb);
    if (!r.ok()) {
      std::printf("FAIL block_topk_nnzb: %s\n", r.message);
      return false;
    }
    CUDA_CHECK(cudaMalloc(&g_row, size_t(c.batch * c.heads * qb + 1) * 4));
    CUDA_CHECK(cudaMalloc(&g_col, size_t(std::max<int64_t>(nnzb, 1)) * 4));
    r = sparsek::block_topk(q.view(), k.view(), go, g_row, g_col, &view, nullptr);
    if (!r.ok()) {
      std::printf("FAIL block_topk: %s\n", r.message);
      return false;
    }
    mask = download_mask(view);
  }
  std::vector<float> lse(size_t(c.batch * c.heads * c.seq_q), NAN);
  float* d_lse = nullptr;
  CUDA_CHECK(cudaMalloc(&d_lse, std::max<size_t>(lse.size(), 1) * 4));
  CUDA_CHECK(cudaMemcpy(d_lse, lse.data(), lse.size() * 4, cudaMemcpyHostToDevice));
  sparsek::AttentionOptions opt;
  opt.scale = c.scale;
  opt.causal = c.causal;
  opt.causal_alignment = c.bottom_right ? sparsek::CausalAlignment::BottomRight : sparsek::CausalAlignment::TopLeft;
  opt.backend = c.backend;
  opt.check_indices = c.mask == MaskKind::Random;
  const sparsek::BlockMaskView* mp = c.mask == MaskKind::None ? nullptr : &view;
  sparsek::Result r = sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, mp, opt, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  char label[240];
  std::snprintf(label, sizeof(label), "b%lld h%lld/%lld sq%lld sk%lld d%lld %s mask=%s%s%s%s scale=%g%s",
                (long long)c.batch, (long long)c.heads, (long long)heads_kv, (long long)c.seq_q, (long long)c.seq_k,
                (long long)c.d, name(c.t),
                c.mask == MaskKind::None ? "none" : c.mask == MaskKind::Random ? "random" : "topk",
                c.causal ? (c.bottom_right ? "+causal(bottom-right)" : "+causal") : "",
                c.per_head ? (c.per_kv ? " per-kv-head" : " per-head") : "", c.bshd ? " bshd" : "", double(c.scale),
                c.backend == sparsek::Backend::Hopper ? " hopper" : "");
  if (!r.ok()) {
    // A row forced with SPARSEK_VARIANT takes only its dtype and head_dim: the rest is skipped.
    const bool forced = skipped(r);
    std::printf("%s %s: %s\n", forced ? "SKIP" : "FAIL", label, r.message);
    cudaFree(d_lse);
    cudaFree(g_row);
    cudaFree(g_col);
    delete dm;
    return forced;
  }
  o.download();
  CUDA_CHECK(cudaMemcpy(lse.data(), d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
  const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(c.d));
  const Reference ref =
      reference(q, k, v, c.mask == MaskKind::None ? nullptr : &mask, c.causal, c.bottom_right, scale);
  OutputError err;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.seq_q; ++i) {
        const size_t li = size_t((b * c.heads + h) * c.seq_q + i);
        const bool empty = err.lse(lse[li], ref.lse[li]);
        for (int64_t x = 0; x < c.d; ++x) err.value(o.get(b, h, i, x), ref.o[li * size_t(c.d) + size_t(x)], empty);
      }
  // The gaps of a strided O keep the sentinel.
  const int64_t touched_gap = c.bshd ? gap_writes(o) : 0;
  const bool ok = err.ok(c.t) && touched_gap == 0;
  std::printf("%s %s: rel %.2e (tol %.0e), lse max abs err %.2e, empty rows %lld, bad %lld, gap writes %lld\n",
              ok ? "PASS" : "FAIL", label, err.rel(), OutputError::tolerance(c.t), err.lse_err,
              (long long)err.empty_rows, (long long)err.bad, (long long)touched_gap);
  cudaFree(d_lse);
  cudaFree(g_row);
  cudaFree(g_col);
  delete dm;
  return ok;
}

// 100 launches of one case (top-k mask, causal, per head): O and LSE bitwise identical.
bool determinism() {
  Rng rng(99);
  const int64_t B = 2, H = 3, S = 1000, D = 128;
  Heads q(B, H, S, D, DType::BF16, false), k(B, H, S, D, DType::BF16, false), v(B, H, S, D, DType::BF16, false),
      o(B, H, S, D, DType::BF16, false);
  q.fill_random(rng);
  k.fill_random(rng);
  v.fill_random(rng);
  q.upload();
  k.upload();
  v.upload();
  o.upload();
  Mask mask = random_mask(rng, B * H, 8, 8, 0.5);
  mask.batch = B;
  mask.heads = H;
  DeviceMask dm(mask);
  float* d_lse = nullptr;
  CUDA_CHECK(cudaMalloc(&d_lse, size_t(B * H * S) * 4));
  sparsek::AttentionOptions opt;
  opt.causal = true;
  std::vector<uint16_t> first;
  std::vector<float> first_lse(size_t(B * H * S)), lse(size_t(B * H * S));
  int differ = 0;
  for (int rep = 0; rep < 100; ++rep) {
    CUDA_CHECK(cudaMemset(o.dev, 0xff, o.host.size() * 2));
    const sparsek::Result r = sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, &dm.view, opt, nullptr);
    if (!r.ok()) {
      std::printf("FAIL determinism: %s\n", r.message);
      cudaFree(d_lse);
      return false;
    }
    o.download();
    CUDA_CHECK(cudaMemcpy(lse.data(), d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
    if (rep == 0) {
      first = o.host;
      first_lse = lse;
    } else if (o.host != first || std::memcmp(lse.data(), first_lse.data(), lse.size() * 4) != 0) {
      ++differ;
    }
  }
  cudaFree(d_lse);
  std::printf("%s determinism: 100 runs, %d differ from the first (bitwise, O and LSE)\n", differ ? "FAIL" : "PASS",
              differ);
  return differ == 0;
}

// Device gating against the host top-k: pooled from Q and K (K with HK heads, dividing H), and
// from given scores; causal top-left or bottom-right.
bool gating_case(int64_t B, int64_t H, int64_t HK, int64_t sq, int64_t sk, int64_t d, DType t, int top_k, bool causal,
                 bool bottom_right, bool given, uint64_t seed) {
  Rng rng(seed);
  sparsek::TopkGatingOptions go;
  go.top_k = top_k;
  go.causal = causal;
  go.causal_alignment = bottom_right ? sparsek::CausalAlignment::BottomRight : sparsek::CausalAlignment::TopLeft;
  const int64_t offset = causal && bottom_right ? sk - sq : 0;
  const int64_t qb = (sq + 127) / 128, kb = (sk + 127) / 128;
  Heads q(B, H, sq, d, t, false), k(B, HK, sk, d, t, true);
  q.fill_random(rng);
  k.fill_random(rng);
  q.upload();
  k.upload();
  std::vector<float> scores;
  float* d_scores = nullptr;
  if (given) {  // coarse values: many ties, +-0 and some NaN
    scores.resize(size_t(B * H * qb * kb));
    for (float& s : scores) {
      const double u = rng.uniform();
      s = u < 0.05 ? NAN : u < 0.08 ? -INFINITY : u < 0.1 ? -0.0f : u < 0.15 ? 0.0f : float(int(rng.uniform() * 5) - 2);
    }
    CUDA_CHECK(cudaMalloc(&d_scores, std::max<size_t>(scores.size(), 1) * 4));
    CUDA_CHECK(cudaMemcpy(d_scores, scores.data(), scores.size() * 4, cudaMemcpyHostToDevice));
  } else {
    scores = host_pooled_scores(q, k, 128, 128);
  }
  const Mask want = host_topk(scores, B * H, qb, kb, go, offset);
  int64_t nnzb = -1;
  sparsek::Result r = sparsek::block_topk_nnzb(B, H, sq, sk, go, &nnzb);
  int32_t *row = nullptr, *col = nullptr;
  CUDA_CHECK(cudaMalloc(&row, size_t(B * H * qb + 1) * 4));
  CUDA_CHECK(cudaMalloc(&col, size_t(std::max<int64_t>(nnzb, 1)) * 4));
  BlockMaskView view{};
  if (r.ok())
    r = given ? sparsek::block_topk_scores(d_scores, B, H, sq, sk, go, row, col, &view, nullptr)
              : sparsek::block_topk(q.view(), k.view(), go, row, col, &view, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  // The view records the (batch, heads) its per-head patterns were made for.
  bool ok = r.ok() && nnzb == int64_t(want.col_idx.size()) && view.batch == B && view.heads == H;
  if (ok) {
    const Mask got = download_mask(view);
    ok = got.row_ptr == want.row_ptr && got.col_idx == want.col_idx;
  }
  std::printf("%s gating %s b%lld h%lld/%lld sq%lld sk%lld d%lld %s top_k %d%s: %lld blocks%s%s\n",
              ok ? "PASS" : "FAIL", given ? "scores" : "pooled", (long long)B, (long long)H, (long long)HK, (long long)sq,
              (long long)sk, (long long)d, name(t), top_k,
              causal ? (bottom_right ? " causal(bottom-right)" : " causal") : "", (long long)want.col_idx.size(),
              r.ok() ? "" : ": ", r.ok() ? "" : r.message);
  cudaFree(row);
  cudaFree(col);
  cudaFree(d_scores);
  return ok;
}

// Bad input: typed error, nothing launched, O untouched. Counts into passed / failed.
void refusals(int& passed, int& failed) {
  Rng rng(5);
  Heads q(1, 2, 256, 128, DType::BF16, false), k(1, 2, 256, 128, DType::BF16, false),
      v(1, 2, 256, 128, DType::BF16, false), o(1, 2, 256, 128, DType::BF16, false);
  q.fill_random(rng);
  k.fill_random(rng);
  v.fill_random(rng);
  std::fill(o.host.begin(), o.host.end(), kSentinel);
  q.upload();
  k.upload();
  v.upload();
  o.upload();
  sparsek::AttentionOptions opt;
  auto expect = [&](const char* what, sparsek::Status want, HeadsView qv, HeadsView kv, HeadsView vv, sparsek::HeadsMutView ov,
                    const BlockMaskView* m, sparsek::AttentionOptions op) {
    const sparsek::Result r = sparsek::attention(qv, kv, vv, ov, nullptr, m, op, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    o.download();
    const bool untouched = all_sentinel(o);
    const bool ok = r.status == want && untouched && std::strncmp(r.message, "sparsek: ", 9) == 0;
    std::printf("%s refusal %s: %s\n", ok ? "PASS" : "FAIL", what, r.message);
    (ok ? passed : failed)++;
  };
  HeadsView bad = k.view();
  bad.seq = 255;  // V still 256
  expect("K and V lengths differ", sparsek::Status::InvalidArgument, q.view(), bad, v.view(), o.out(), nullptr, opt);
  sparsek::HeadsMutView bad_o = o.out();
  bad_o.dtype = DType::F16;
  expect("O of another dtype", sparsek::Status::NotSupported, q.view(), k.view(), v.view(), bad_o, nullptr, opt);
  bad = q.view();
  bad.data = nullptr;
  expect("null Q", sparsek::Status::InvalidArgument, bad, k.view(), v.view(), o.out(), nullptr, opt);
  Mask m = random_mask(rng, 1, 2, 2, 0.5);
  DeviceMask dm(m);
  BlockMaskView mv = dm.view;
  mv.q_blocks = 3;
  expect("mask of the wrong size", sparsek::Status::InvalidArgument, q.view(), k.view(), v.view(), o.out(), &mv, opt);
  mv = dm.view;
  mv.block_q = mv.block_k = 64;
  mv.q_blocks = mv.k_blocks = 4;
  expect("64x64 mask blocks", sparsek::Status::NotSupported, q.view(), k.view(), v.view(), o.out(), &mv, opt);
  mv.patterns = 3;
  expect("patterns neither 1 nor batch*heads", sparsek::Status::InvalidArgument, q.view(), k.view(), v.view(),
         o.out(), &mv, opt);
  // A col_idx out of range, caught by check_indices.
  Mask broken = m;
  broken.col_idx.assign(broken.col_idx.size(), 7);
  if (!broken.col_idx.empty()) {
    DeviceMask db(broken);
    sparsek::AttentionOptions chk;
    chk.check_indices = true;
    expect("col_idx out of range (check_indices)", sparsek::Status::InvalidArgument, q.view(), k.view(), v.view(),
           o.out(), &db.view, chk);
  }
  sparsek::AttentionOptions neg;
  neg.scale = -1.0f;
  expect("negative scale", sparsek::Status::InvalidArgument, q.view(), k.view(), v.view(), o.out(), nullptr, neg);
  sparsek::AttentionOptions wmma;
  wmma.backend = sparsek::Backend::Wmma;
  expect("the Wmma backend", sparsek::Status::NotSupported, q.view(), k.view(), v.view(), o.out(), nullptr, wmma);
  bad = q.view();
  bad.head_dim = 96;
  HeadsView k96 = k.view(), v96 = v.view();
  sparsek::HeadsMutView o96 = o.out();
  k96.head_dim = v96.head_dim = o96.head_dim = 96;
  expect("head_dim 96", sparsek::Status::NotSupported, bad, k96, v96, o96, nullptr, opt);
  bad = q.view();
  bad.stride_s = 132;  // not a multiple of 8 elements: TMA cannot read it
  bad.stride_h = 256 * 132;
  expect("Q rows not 16-byte strided", sparsek::Status::NotSupported, bad, k.view(), v.view(), o.out(), nullptr, opt);
  // Grouped-query heads: K and V with 3 heads do not divide Q's 2; a per-head mask made for
  // heads that are neither Q's nor K's; a causal alignment out of the enum.
  HeadsView k3 = k.view(), v3 = v.view();
  k3.heads = v3.heads = 3;
  k3.seq = v3.seq = 64;
  expect("K and V with 3 heads, Q 2", sparsek::Status::InvalidArgument, q.view(), k3, v3, o.out(), nullptr, opt);
  Mask per = random_mask(rng, 4, 2, 2, 0.5);
  per.batch = 1, per.heads = 4;
  DeviceMask dper(per);
  expect("a mask made for 4 heads (Q 2, K 2)", sparsek::Status::InvalidArgument, q.view(), k.view(), v.view(),
         o.out(), &dper.view, opt);
  sparsek::AttentionOptions align;
  align.causal = true;
  align.causal_alignment = static_cast<sparsek::CausalAlignment>(2);
  expect("causal_alignment = 2", sparsek::Status::InvalidArgument, q.view(), k.view(), v.view(), o.out(), nullptr,
         align);
}

// ---- packed sequences (varlen: SequenceLayout's cu_seqlens_q / cu_seqlens_k) ----
// A case: each sequence's queries and keys; Q and O packed [1, heads, total_q, d] (else padded
// [batch, heads, pad_q, d]), K and V likewise. O's buffer holds 64 rows past its view, kept at a
// sentinel like the gaps of a fused view: nothing outside the sequences' rows is written.
struct VarlenCase {
  std::vector<int64_t> len_q, len_k;
  bool packed_q = true, packed_k = true;
  int64_t pad_q = 0, pad_k = 0;  // the padded side's seq
  int64_t heads = 2, heads_kv = 2, d = 128;
  DType t = DType::BF16;
  MaskKind mask = MaskKind::None;  // None or Random
  bool per_head = false, per_kv = false;
  bool causal = false, bottom_right = false;
  bool bshd = false;
  sparsek::Backend backend = sparsek::Backend::Hopper;
  int repeats = 1;  // > 1: O and LSE bitwise identical over the repeats
};

std::vector<int32_t> offsets(const std::vector<int64_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int64_t n : lens) cu.push_back(int32_t(cu.back() + n));
  return cu;
}

bool varlen_case(const VarlenCase& c, uint64_t seed) {
  Rng rng(seed);
  const int64_t batch = int64_t(c.len_q.size());
  const std::vector<int32_t> cu_q = offsets(c.len_q), cu_k = offsets(c.len_k);
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  const int64_t max_q = c.packed_q ? *std::max_element(c.len_q.begin(), c.len_q.end()) : c.pad_q;
  const int64_t max_k = c.packed_k ? *std::max_element(c.len_k.begin(), c.len_k.end()) : c.pad_k;
  // Sequence b's rows: (view batch, first row, rows).
  const auto q_rows = [&](int64_t b, int64_t* vb, int64_t* start, int64_t* n) {
    *vb = c.packed_q ? 0 : b, *start = c.packed_q ? cu_q[size_t(b)] : 0, *n = c.packed_q ? c.len_q[size_t(b)] : c.pad_q;
  };
  const auto k_rows = [&](int64_t b, int64_t* vb, int64_t* start, int64_t* n) {
    *vb = c.packed_k ? 0 : b, *start = c.packed_k ? cu_k[size_t(b)] : 0, *n = c.packed_k ? c.len_k[size_t(b)] : c.pad_k;
  };
  const int64_t qvb = c.packed_q ? 1 : batch, qseq = c.packed_q ? total_q : c.pad_q;
  const int64_t kvb = c.packed_k ? 1 : batch, kseq = c.packed_k ? total_k : c.pad_k;
  Heads q(qvb, c.heads, qseq, c.d, c.t, c.bshd), k(kvb, c.heads_kv, kseq, c.d, c.t, c.bshd),
      v(kvb, c.heads_kv, kseq, c.d, c.t, c.bshd), o(qvb, c.heads, qseq + 64, c.d, c.t, c.bshd);
  q.fill_random(rng);
  k.fill_random(rng);
  v.fill_random(rng);
  poison(o, qseq);
  q.upload();
  k.upload();
  v.upload();
  o.upload();
  sparsek::HeadsMutView ov = o.out();
  ov.seq = qseq;  // the 64 rows past it are the buffer's, not the view's
  Mask mask;
  DeviceMask* dm = nullptr;
  const int64_t mask_heads = c.per_kv ? c.heads_kv : c.heads;
  if (c.mask == MaskKind::Random) {
    mask = random_mask(rng, c.per_head ? batch * mask_heads : 1, (max_q + 127) / 128, (max_k + 127) / 128, 0.5);
    mask.batch = batch;
    mask.heads = mask_heads;
    dm = new DeviceMask(mask);
  }
  const DeviceInts d_cu_q(cu_q), d_cu_k(cu_k);
  sparsek::AttentionOptions opt;
  opt.causal = c.causal;
  opt.causal_alignment = c.bottom_right ? sparsek::CausalAlignment::BottomRight : sparsek::CausalAlignment::TopLeft;
  opt.backend = c.backend;
  opt.check_indices = true;
  opt.layout.batch = batch;
  if (c.packed_q) opt.layout.cu_seqlens_q = d_cu_q.p, opt.layout.max_seqlen_q = max_q;
  if (c.packed_k) opt.layout.cu_seqlens_k = d_cu_k.p, opt.layout.max_seqlen_k = max_k;
  // LSE: [heads, total_q] packed, else [batch, heads, pad_q].
  const size_t lse_len = size_t(c.packed_q ? c.heads * total_q : batch * c.heads * c.pad_q);
  std::vector<float> lse(lse_len, NAN), first_lse;
  float* d_lse = nullptr;
  CUDA_CHECK(cudaMalloc(&d_lse, std::max<size_t>(lse_len, 1) * 4));
  const auto lse_at = [&](int64_t b, int64_t h, int64_t i) {
    return c.packed_q ? size_t(h * total_q + cu_q[size_t(b)] + i) : size_t((b * c.heads + h) * c.pad_q + i);
  };
  std::vector<uint16_t> first_o;
  int differ = 0;
  sparsek::Result r;
  for (int rep = 0; rep < c.repeats; ++rep) {
    if (rep > 0) CUDA_CHECK(cudaMemset(o.dev, 0xff, o.host.size() * 2));  // NaN in both types
    CUDA_CHECK(cudaMemcpy(d_lse, lse.data(), lse_len * 4, cudaMemcpyHostToDevice));
    r = sparsek::attention(q.view(), k.view(), v.view(), ov, d_lse, dm != nullptr ? &dm->view : nullptr, opt, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (!r.ok()) break;
    if (c.repeats > 1) {
      std::vector<float> got(lse_len);
      std::vector<uint16_t> saved = o.host;
      o.download();
      CUDA_CHECK(cudaMemcpy(got.data(), d_lse, lse_len * 4, cudaMemcpyDeviceToHost));
      if (rep == 0) {
        first_o = o.host, first_lse = got;
      } else {
        // Rows outside the view were reset to 0xffff with the rest: compare the view's rows.
        for (int64_t b = 0; b < o.batch; ++b)
          for (int64_t h = 0; h < o.heads; ++h)
            for (int64_t s = 0; s < qseq; ++s)
              for (int64_t x = 0; x < o.d; ++x)
                if (o.host[o.at(b, h, s, x)] != first_o[o.at(b, h, s, x)]) {
                  ++differ;
                  goto compared;
                }
        if (std::memcmp(got.data(), first_lse.data(), lse_len * 4) != 0) ++differ;
      compared:;
      }
      o.host = saved;
    }
  }
  char label[300];
  std::snprintf(label, sizeof(label), "varlen b%lld%s%s h%lld/%lld max %lld/%lld d%lld %s mask=%s%s%s%s %s", (long long)batch,
                c.packed_q ? " Q packed" : " Q padded", c.packed_k ? " K packed" : " K padded", (long long)c.heads,
                (long long)c.heads_kv, (long long)max_q, (long long)max_k, (long long)c.d, name(c.t),
                c.mask == MaskKind::None ? "none" : "random",
                c.causal ? (c.bottom_right ? "+causal(bottom-right)" : "+causal") : "",
                c.per_head ? (c.per_kv ? " per-kv-head" : " per-head") : "", c.bshd ? " fused" : "",
                c.backend == sparsek::Backend::Hopper ? "hopper" : "auto");
  if (!r.ok()) {
    const bool forced = skipped(r);
    std::printf("%s %s: %s\n", forced ? "SKIP" : "FAIL", label, r.message);
    cudaFree(d_lse);
    delete dm;
    return forced;
  }
  // The first run's outputs (the one compared with the reference).
  if (c.repeats > 1) {
    o.host = first_o;
    lse = first_lse;
  } else {
    o.download();
    CUDA_CHECK(cudaMemcpy(lse.data(), d_lse, lse_len * 4, cudaMemcpyDeviceToHost));
  }
  const double scale = 1.0 / std::sqrt(double(c.d));
  const int64_t group = c.heads / c.heads_kv;
  OutputError err;
  int64_t outside = 0;
  std::vector<double> s, acc(size_t(c.d));
  for (int64_t b = 0; b < batch; ++b) {
    int64_t qb_, q0, nq, kb_, k0, nk;
    q_rows(b, &qb_, &q0, &nq);
    k_rows(b, &kb_, &k0, &nk);
    const int64_t offset = c.bottom_right ? nk - nq : 0;
    s.assign(size_t(nk), -INFINITY);
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t hk = h / group;
      const int64_t p = c.mask == MaskKind::None || !c.per_head ? 0 : b * mask_heads + h / (c.heads / mask_heads);
      for (int64_t i = 0; i < nq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) {
          const bool kept = (c.mask == MaskKind::None || mask.listed(p, i / 128, j / 128)) && (!c.causal || j <= i + offset);
          s[size_t(j)] = -INFINITY;
          if (!kept) continue;
          double dot = 0;
          for (int64_t x = 0; x < c.d; ++x) dot += double(q.get(qb_, h, q0 + i, x)) * double(k.get(kb_, hk, k0 + j, x));
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        if (mx != -INFINITY)
          for (int64_t j = 0; j < nk; ++j) {
            if (s[size_t(j)] == -INFINITY) continue;
            const double e = std::exp(s[size_t(j)] - mx);
            sum += e;
            for (int64_t x = 0; x < c.d; ++x) acc[size_t(x)] += e * double(v.get(kb_, hk, k0 + j, x));
          }
        const bool empty = err.lse(lse[lse_at(b, h, i)], mx == -INFINITY ? -INFINITY : mx + std::log(sum));
        for (int64_t x = 0; x < c.d; ++x)
          err.value(o.get(qb_, h, q0 + i, x), empty ? 0.0 : acc[size_t(x)] / sum, empty);
      }
    }
  }
  // Nothing outside the sequences' rows: the rows past the view, the gaps of a fused O, and
  // (padded queries) nothing else to check; packed, every row of the view is some sequence's.
  for (int64_t b = 0; b < o.batch; ++b)
    for (int64_t h = 0; h < o.heads; ++h)
      for (int64_t s_ = 0; s_ < o.seq; ++s_)
        for (int64_t x = 0; x < (c.bshd ? o.sh : o.d); ++x) {
          const bool in_view = s_ < qseq && x < o.d;
          if (!in_view) outside += o.host[o.at(b, h, s_, x)] != kSentinel;
        }
  const bool ok = err.ok(c.t) && outside == 0 && differ == 0;
  std::printf("%s %s: rel %.2e (tol %.0e), lse max abs err %.2e, empty rows %lld, bad %lld, writes outside %lld%s\n",
              ok ? "PASS" : "FAIL", label, err.rel(), OutputError::tolerance(c.t), err.lse_err,
              (long long)err.empty_rows, (long long)err.bad, (long long)outside,
              c.repeats > 1 ? (differ ? ", repeats differ" : ", repeats bitwise equal") : "");
  cudaFree(d_lse);
  delete dm;
  return ok;
}

// Packed offsets that disagree with the packed size or max_seqlen, caught by check_indices:
// typed errors, O untouched.
void varlen_refusals(int& passed, int& failed) {
  Rng rng(11);
  const std::vector<int64_t> lens = {100, 0, 300};
  const int64_t total = 400;
  Heads q(1, 2, total, 128, DType::BF16, false), k(1, 2, total, 128, DType::BF16, false),
      v(1, 2, total, 128, DType::BF16, false), o(1, 2, total, 128, DType::BF16, false);
  q.fill_random(rng);
  k.fill_random(rng);
  v.fill_random(rng);
  std::fill(o.host.begin(), o.host.end(), kSentinel);
  q.upload();
  k.upload();
  v.upload();
  o.upload();
  const std::vector<int32_t> good = offsets(lens);
  auto expect = [&](const char* what, const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k,
                    int64_t max_q, bool check) {
    const DeviceInts dq(cu_q), dk(cu_k);
    sparsek::AttentionOptions opt;
    opt.check_indices = check;
    opt.layout.batch = 3;
    opt.layout.cu_seqlens_q = dq.p, opt.layout.max_seqlen_q = max_q;
    opt.layout.cu_seqlens_k = dk.p, opt.layout.max_seqlen_k = 300;
    const sparsek::Result r = sparsek::attention(q.view(), k.view(), v.view(), o.out(), nullptr, nullptr, opt, nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    o.download();
    const bool untouched = all_sentinel(o);
    const bool ok = r.status == sparsek::Status::InvalidArgument && untouched && std::strstr(r.message, "cu_seqlens");
    std::printf("%s refusal %s: %s\n", ok ? "PASS" : "FAIL", what, r.message);
    (ok ? passed : failed)++;
  };
  expect("cu_seqlens_q ending at 399, Q's total 400", {0, 100, 100, 399}, good, 300, true);
  expect("cu_seqlens_k ending at 401, K's total 400", good, {0, 100, 100, 401}, 300, true);
  expect("cu_seqlens_q decreasing", {0, 100, 90, 400}, good, 310, true);
  expect("cu_seqlens_q starting at 4", {4, 100, 100, 400}, good, 300, true);
  expect("a sequence of 300 queries, max_seqlen_q 299", good, good, 299, true);
}

// ---- serving layouts: per-sequence key counts (seqlens_k) and paged K/V (page_table) ----
// A case: each sequence's keys (lens); K and V a shuffled pool of pages of `page` keys
// (page 0: padded to the longest + 3 keys, seqlens_k alone); Q and O [batch, heads, seq_q, d].
struct PagedCase {
  std::vector<int64_t> lens;
  int64_t seq_q = 1, page = 128, slack = 0;
  int64_t heads = 4, heads_kv = 2, d = 128;
  DType t = DType::BF16;
  MaskKind mask = MaskKind::None;  // None or Random
  bool per_head = false, per_kv = false;
  bool causal = false, bottom_right = false;
  sparsek::Backend backend = sparsek::Backend::Hopper;
  int repeats = 1;  // > 1: O and LSE bitwise identical over the repeats
};

// A case's layout on the host: the counts, and paged, its shuffled pool (shuffled_pages).
struct PagedLayout {
  std::vector<int32_t> lens;
  int64_t max_len = 0;
  PageTable pages;
};

PagedLayout paged_layout(const PagedCase& c, Rng& rng) {
  PagedLayout l;
  for (int64_t n : c.lens) l.lens.push_back(int32_t(n)), l.max_len = std::max(l.max_len, n);
  l.max_len += c.slack;
  if (c.page > 0) l.pages = shuffled_pages(l.lens, l.max_len, c.page, rng);
  return l;
}

// The device operands of a paged case, its options and one launch into O and LSE.
struct PagedProblem {
  const PagedCase& c;
  PagedLayout l;
  int64_t batch;
  Heads q, k, v, o;
  Mask mask;
  DeviceMask* dm = nullptr;
  DeviceInts d_lens, d_table;
  float* d_lse = nullptr;
  PagedProblem(const PagedCase& c_, Rng& rng)
      : c(c_),
        l(paged_layout(c_, rng)),
        batch(int64_t(c_.lens.size())),
        q(batch, c.heads, c.seq_q, c.d, c.t, false),
        k(c.page > 0 ? l.pages.num_pages : batch, c.heads_kv, c.page > 0 ? c.page : l.max_len + 3, c.d, c.t, false),
        v(c.page > 0 ? l.pages.num_pages : batch, c.heads_kv, c.page > 0 ? c.page : l.max_len + 3, c.d, c.t, false),
        o(batch, c.heads, c.seq_q, c.d, c.t, false),
        d_lens(l.lens),
        d_table(l.pages.table) {
    q.fill_random(rng);
    k.fill_random(rng);
    v.fill_random(rng);
    q.upload();
    k.upload();
    v.upload();
    o.upload();  // O's device buffer (each run resets it)
    if (c.mask == MaskKind::Random) {
      const int64_t mask_heads = c.per_kv ? c.heads_kv : c.heads;
      mask = random_mask(rng, c.per_head ? batch * mask_heads : 1, (c.seq_q + 127) / 128, (l.max_len + 127) / 128, 0.5);
      mask.batch = batch;
      mask.heads = mask_heads;
      dm = new DeviceMask(mask);
    }
    CUDA_CHECK(cudaMalloc(&d_lse, size_t(std::max<int64_t>(batch * c.heads * c.seq_q, 1)) * 4));
  }
  ~PagedProblem() {
    delete dm;
    cudaFree(d_lse);
  }
  PagedProblem(const PagedProblem&) = delete;
  PagedProblem& operator=(const PagedProblem&) = delete;
  sparsek::AttentionOptions options() const {
    sparsek::AttentionOptions opt;
    opt.causal = c.causal;
    opt.causal_alignment = c.bottom_right ? sparsek::CausalAlignment::BottomRight : sparsek::CausalAlignment::TopLeft;
    opt.backend = c.backend;
    opt.check_indices = true;
    opt.layout.batch = batch;
    opt.layout.seqlens_k = d_lens.p;
    opt.layout.max_seqlen_k = l.max_len;
    if (c.page > 0) opt.layout.page_table = d_table.p, opt.layout.max_pages = l.pages.max_pages;
    return opt;
  }
  sparsek::Result launch(const sparsek::AttentionOptions& opt) {
    return sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, dm != nullptr ? &dm->view : nullptr, opt,
                              nullptr);
  }
};

bool paged_case(const PagedCase& c, uint64_t seed) {
  Rng rng(seed);
  PagedProblem pb(c, rng);
  const int64_t batch = pb.batch;
  const size_t lse_len = size_t(batch * c.heads * c.seq_q);
  std::vector<float> lse(lse_len, NAN), first_lse;
  std::vector<uint16_t> first_o;
  int differ = 0;
  sparsek::Result r;
  for (int rep = 0; rep < c.repeats; ++rep) {
    CUDA_CHECK(cudaMemset(pb.o.dev, 0xff, pb.o.host.size() * 2));  // NaN in both types
    CUDA_CHECK(cudaMemcpy(pb.d_lse, lse.data(), lse_len * 4, cudaMemcpyHostToDevice));
    r = pb.launch(pb.options());
    CUDA_CHECK(cudaDeviceSynchronize());
    if (!r.ok()) break;
    pb.o.download();
    std::vector<float> got(lse_len);
    CUDA_CHECK(cudaMemcpy(got.data(), pb.d_lse, lse_len * 4, cudaMemcpyDeviceToHost));
    if (rep == 0) {
      first_o = pb.o.host, first_lse = got;
    } else if (pb.o.host != first_o || std::memcmp(got.data(), first_lse.data(), lse_len * 4) != 0) {
      ++differ;
    }
  }
  char label[300];
  std::snprintf(label, sizeof(label), "%s b%lld h%lld/%lld sq%lld max_seqlen_k %lld d%lld %s mask=%s%s%s %s",
                c.page > 0 ? "paged" : "counted", (long long)batch, (long long)c.heads, (long long)c.heads_kv,
                (long long)c.seq_q, (long long)pb.l.max_len, (long long)c.d, name(c.t),
                c.mask == MaskKind::None ? "none" : "random",
                c.causal ? (c.bottom_right ? "+causal(bottom-right)" : "+causal") : "",
                c.per_head ? (c.per_kv ? " per-kv-head" : " per-head") : "",
                c.backend == sparsek::Backend::Hopper ? "hopper" : "auto");
  if (c.page > 0) std::snprintf(label + std::strlen(label), sizeof(label) - std::strlen(label), " page %lld", (long long)c.page);
  if (!r.ok()) {
    const bool forced = skipped(r);
    std::printf("%s %s: %s\n", forced ? "SKIP" : "FAIL", label, r.message);
    return forced;
  }
  pb.o.host = first_o;
  lse = first_lse;
  const double scale = 1.0 / std::sqrt(double(c.d));
  const int64_t group = c.heads / c.heads_kv;
  const int64_t mask_heads = c.per_kv ? c.heads_kv : c.heads;
  OutputError err;
  std::vector<double> s, acc(size_t(c.d));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t nk = c.lens[size_t(b)];
    const int64_t offset = c.bottom_right ? nk - c.seq_q : 0;
    s.assign(size_t(nk), -INFINITY);
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t hk = h / group;
      const int64_t p = c.mask == MaskKind::None || !c.per_head ? 0 : b * mask_heads + h / (c.heads / mask_heads);
      for (int64_t i = 0; i < c.seq_q; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < nk; ++j) {
          const bool kept = (c.mask == MaskKind::None || pb.mask.listed(p, i / 128, j / 128)) && (!c.causal || j <= i + offset);
          s[size_t(j)] = -INFINITY;
          if (!kept) continue;
          const auto [kb, kj] = pb.l.pages.key(b, j);
          double dot = 0;
          for (int64_t x = 0; x < c.d; ++x) dot += double(pb.q.get(b, h, i, x)) * double(pb.k.get(kb, hk, kj, x));
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        double sum = 0;
        if (mx != -INFINITY)
          for (int64_t j = 0; j < nk; ++j) {
            if (s[size_t(j)] == -INFINITY) continue;
            const double e = std::exp(s[size_t(j)] - mx);
            sum += e;
            const auto [vb, vj] = pb.l.pages.key(b, j);
            for (int64_t x = 0; x < c.d; ++x) acc[size_t(x)] += e * double(pb.v.get(vb, hk, vj, x));
          }
        const bool empty =
            err.lse(lse[size_t((b * c.heads + h) * c.seq_q + i)], mx == -INFINITY ? -INFINITY : mx + std::log(sum));
        for (int64_t x = 0; x < c.d; ++x) err.value(pb.o.get(b, h, i, x), empty ? 0.0 : acc[size_t(x)] / sum, empty);
      }
    }
  }
  const bool ok = err.ok(c.t) && differ == 0;
  std::printf("%s %s: rel %.2e (tol %.0e), lse max abs err %.2e, empty rows %lld, bad %lld%s\n", ok ? "PASS" : "FAIL",
              label, err.rel(), OutputError::tolerance(c.t), err.lse_err, (long long)err.empty_rows, (long long)err.bad,
              c.repeats > 1 ? (differ ? ", repeats differ" : ", repeats bitwise equal") : "");
  return ok;
}

// The layout's refusals, O untouched: with check_indices, a page a sequence reaches outside
// the pool and a key count above max_seqlen_k (InvalidArgument); pages of 64 keys on the Hopper
// family, by name and through Auto for a prefill shape (NotSupported).
void paged_refusals(int& passed, int& failed) {
  Rng rng(13);
  PagedCase c;
  c.lens = {300, 0, 517};
  c.seq_q = 200, c.causal = true, c.bottom_right = true;
  const auto expect = [&](const char* what, PagedProblem& pb, const sparsek::AttentionOptions& opt,
                          sparsek::Status want, const char* keyword) {
    std::fill(pb.o.host.begin(), pb.o.host.end(), kSentinel);
    pb.o.upload();
    const sparsek::Result r = pb.launch(opt);
    CUDA_CHECK(cudaDeviceSynchronize());
    pb.o.download();
    const bool untouched = all_sentinel(pb.o);
    const bool ok = r.status == want && untouched && std::strstr(r.message, keyword) != nullptr;
    std::printf("%s refusal %s: %s\n", ok ? "PASS" : "FAIL", what, r.message);
    (ok ? passed : failed)++;
  };
  {
    PagedProblem pb(c, rng);
    std::vector<int32_t> table = pb.l.pages.table;
    table[size_t(2 * pb.l.pages.max_pages + 4)] = int32_t(pb.l.pages.num_pages + 9);  // sequence 2's last page
    const DeviceInts bad(table);
    sparsek::AttentionOptions opt = pb.options();
    opt.layout.page_table = bad.p;
    expect("a page outside the pool (check_indices)", pb, opt, sparsek::Status::InvalidArgument, "sequence 2, page 4");
    const DeviceInts above(std::vector<int32_t>{300, 0, 518});
    opt = pb.options();
    opt.layout.seqlens_k = above.p;
    expect("a key count above max_seqlen_k (check_indices)", pb, opt, sparsek::Status::InvalidArgument,
           "layout.seqlens_k");
  }
  c.page = 64;
  PagedProblem pb(c, rng);
  expect("pages of 64 keys on the Hopper family", pb, pb.options(), sparsek::Status::NotSupported, "page size");
  sparsek::AttentionOptions opt = pb.options();
  opt.backend = sparsek::Backend::Auto;
  expect("pages of 64 keys, a prefill shape through Auto", pb, opt, sparsek::Status::NotSupported, "sparsek: ");
}

// ---- --time ----
// The options after the positional ones: K and V's heads, K and V repeated from fewer heads,
// the keys' length, the causal alignment.
struct TimeOptions {
  int64_t heads_kv = 0;   // 0: as Q's
  int64_t repeat_kv = 1;  // K and V made of heads_kv / repeat_kv random heads, each repeated
  int64_t seq_k = 0;      // 0: as Q's
  bool bottom_right = false;
};

// Fills a device tensor with random values from `rng`, chunk by chunk (a host fill of 3 x 64M
// values would dominate the run). With repeat > 1 the random values make x.heads / repeat heads
// and each is copied to `repeat` consecutive heads: the same values, in the same order from
// `rng`, as the tensor of x.heads / repeat heads (GQA's K and V repeated per query head).
void fill_device_random(Heads& x, Rng& rng, int64_t repeat) {
  const int64_t src_heads = x.heads / repeat;
  const size_t n_src = size_t(x.batch * src_heads * x.seq * x.d);
  CUDA_CHECK(cudaMalloc(&x.dev, x.host.size() * 2));
  void* drawn = x.dev;  // where the random values go: x itself, or the heads to repeat
  if (repeat > 1) CUDA_CHECK(cudaMalloc(&drawn, std::max<size_t>(n_src, 1) * 2));
  uint16_t* src = static_cast<uint16_t*>(drawn);
  std::vector<uint16_t> chunk(size_t(1) << 20);
  for (size_t off = 0; off < n_src; off += chunk.size()) {
    const size_t n = std::min(chunk.size(), n_src - off);
    for (size_t i = 0; i < n; ++i) chunk[i] = to_bits(rng.sym(), x.t);
    CUDA_CHECK(cudaMemcpy(src + off, chunk.data(), n * 2, cudaMemcpyHostToDevice));
  }
  if (repeat == 1) return;
  const size_t head = size_t(x.seq * x.d);  // packed: one head is seq * d contiguous values
  for (int64_t b = 0; b < x.batch; ++b)
    for (int64_t h = 0; h < x.heads; ++h)
      CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(x.dev) + x.at(b, h, 0, 0),
                            src + size_t(b * src_heads + h / repeat) * head, head * 2, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaFree(src));
}

int time_usage() {
  std::fprintf(stderr,
               "usage: attention_check --time MASK DTYPE BATCH HEADS SEQ HEAD_DIM ITERS MASK_JSON\n"
               "         [--heads-kv N] [--repeat-kv G] [--seq-k N] [--align top_left|bottom_right]\n");
  return 2;
}

int time_case(int argc, char** argv) {
  if (argc < 10) return time_usage();
  const std::string mask_kind = argv[2];
  const DType t = std::strcmp(argv[3], "f16") == 0 ? DType::F16 : DType::BF16;
  const int64_t B = std::atoll(argv[4]), H = std::atoll(argv[5]), S = std::atoll(argv[6]), D = std::atoll(argv[7]);
  const int iters = std::atoi(argv[8]);
  TimeOptions to;
  for (int a = 10; a < argc; a += 2) {
    if (a + 1 >= argc) return time_usage();
    const std::string flag = argv[a], value = argv[a + 1];
    if (flag == "--heads-kv") {
      to.heads_kv = std::atoll(value.c_str());
    } else if (flag == "--repeat-kv") {
      to.repeat_kv = std::atoll(value.c_str());
    } else if (flag == "--seq-k") {
      to.seq_k = std::atoll(value.c_str());
    } else if (flag == "--align" && (value == "top_left" || value == "bottom_right")) {
      to.bottom_right = value == "bottom_right";
    } else {
      return time_usage();
    }
  }
  const int64_t HK = to.heads_kv > 0 ? to.heads_kv : H, SK = to.seq_k > 0 ? to.seq_k : S;
  const bool causal = mask_kind == "causal" || mask_kind == "topk16_causal";
  const bool topk = mask_kind == "topk16" || mask_kind == "topk16_causal";
  if (!(mask_kind == "dense" || causal || topk)) {
    std::fprintf(stderr, "unknown mask %s\n", mask_kind.c_str());
    return 2;
  }
  if (B < 1 || H < 1 || S < 1 || D < 1 || iters < 1 || to.repeat_kv < 1 || HK % to.repeat_kv != 0) {
    std::fprintf(stderr, "dims must be positive and --repeat-kv must divide K's heads\n");
    return 2;
  }
  // K and V with HK heads (the attention checks that HK divides H).
  Heads q(B, H, S, D, t, false), k(B, HK, SK, D, t, false), v(B, HK, SK, D, t, false), o(B, H, S, D, t, false);
  Rng rng(7);
  fill_device_random(q, rng, 1);
  fill_device_random(k, rng, to.repeat_kv);
  fill_device_random(v, rng, to.repeat_kv);
  CUDA_CHECK(cudaMalloc(&o.dev, o.host.size() * 2));
  float* d_lse = nullptr;
  CUDA_CHECK(cudaMalloc(&d_lse, size_t(B * H * S) * 4));
  const int64_t qb = (S + 127) / 128, kb = (SK + 127) / 128;
  const int64_t offset = causal && to.bottom_right ? SK - S : 0;  // key j kept when j <= i + offset
  const sparsek::CausalAlignment align =
      to.bottom_right ? sparsek::CausalAlignment::BottomRight : sparsek::CausalAlignment::TopLeft;
  BlockMaskView view{};
  int32_t *row = nullptr, *col = nullptr;
  Mask mask;
  double gating_ms = -1;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  if (topk) {
    sparsek::TopkGatingOptions go;
    go.top_k = 16;
    go.causal = causal;
    go.causal_alignment = align;
    int64_t nnzb = 0;
    sparsek::Result r = sparsek::block_topk_nnzb(B, H, S, SK, go, &nnzb);
    CUDA_CHECK(cudaMalloc(&row, size_t(B * H * qb + 1) * 4));
    CUDA_CHECK(cudaMalloc(&col, size_t(std::max<int64_t>(nnzb, 1)) * 4));
    if (r.ok()) r = sparsek::block_topk(q.view(), k.view(), go, row, col, &view, nullptr);  // warm-up
    CUDA_CHECK(cudaEventRecord(e0));
    if (r.ok()) r = sparsek::block_topk(q.view(), k.view(), go, row, col, &view, nullptr);
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    gating_ms = ms;
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.message);
      return 1;
    }
    mask = download_mask(view);
  }
  // Kept pairs, counted exactly: per query row, the keys of each listed block not after the
  // diagonal when causal.
  int64_t pairs = 0;
  const int64_t patterns = topk ? B * H : 1;
  for (int64_t p = 0; p < patterns; ++p)
    for (int64_t i = 0; i < qb; ++i) {
      const int64_t rows = std::min<int64_t>(128, S - i * 128);
      auto count_block = [&](int64_t j) {
        const int64_t cols = std::min<int64_t>(128, SK - j * 128);
        if (!causal) return rows * cols;
        int64_t n = 0;
        for (int64_t r = 0; r < rows; ++r)
          n += std::max<int64_t>(0, std::min(cols, i * 128 + r + offset - j * 128 + 1));
        return n;
      };
      if (topk) {
        for (int32_t x = mask.row_ptr[size_t(p * qb + i)]; x < mask.row_ptr[size_t(p * qb + i + 1)]; ++x)
          pairs += count_block(mask.col_idx[size_t(x)]);
      } else {
        for (int64_t j = 0; j < kb; ++j) pairs += count_block(j);
      }
    }
  if (!topk) pairs *= B * H;
  sparsek::AttentionOptions opt;
  opt.causal = causal;
  opt.causal_alignment = align;
  const BlockMaskView* mp = topk ? &view : nullptr;
  sparsek::Result r = sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, mp, opt, nullptr);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", r.message);
    return 1;
  }
  const double ms =
      median_ms(iters, [&] { r = sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, mp, opt, nullptr); });
  CUDA_CHECK(cudaGetLastError());
  const double tflops = 4.0 * double(pairs) * double(D) / (ms * 1e-3) / 1e12;
  // The case's fields, shared by the JSON line and the case file.
  char dims[512];
  std::snprintf(dims, sizeof dims,
                "\"mask\":\"%s\",\"dtype\":\"%s\",\"batch\":%lld,\"heads\":%lld,\"heads_kv\":%lld,\"seq\":%lld,"
                "\"seq_k\":%lld,\"head_dim\":%lld,\"causal_alignment\":\"%s\",\"kv_repeated\":%lld,\"kept_pairs\":%lld",
                mask_kind.c_str(), name(t), (long long)B, (long long)H, (long long)HK, (long long)S, (long long)SK,
                (long long)D, to.bottom_right ? "bottom_right" : "top_left", (long long)to.repeat_kv, (long long)pairs);
  std::printf("{\"impl\":\"sparsek\",%s,\"ms\":%.5f,\"tflops\":%.2f", dims, ms, tflops);
  if (gating_ms >= 0) std::printf(",\"gating_ms\":%.5f", gating_ms);
  std::printf("}\n");
  // The case and its mask for the peers' script.
  FILE* f = std::fopen(argv[9], "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", argv[9]);
    return 1;
  }
  std::fprintf(f, "{%s,\"block_q\":128,\"block_k\":128,\"q_blocks\":%lld,\"k_blocks\":%lld,\"patterns\":%lld,"
               "\"causal\":%s,\"row_ptr\":[",
               dims, (long long)qb, (long long)kb, (long long)(topk ? B * H : 0), causal ? "true" : "false");
  if (topk)
    for (size_t i = 0; i < mask.row_ptr.size(); ++i) std::fprintf(f, "%s%d", i ? "," : "", mask.row_ptr[i]);
  std::fprintf(f, "],\"col_idx\":[");
  if (topk)
    for (size_t i = 0; i < mask.col_idx.size(); ++i) std::fprintf(f, "%s%d", i ? "," : "", mask.col_idx[i]);
  std::fprintf(f, "]}\n");
  std::fclose(f);
  cudaFree(d_lse);
  cudaFree(row);
  cudaFree(col);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--time") == 0) return time_case(argc, argv);
  print_device();
  const DType H = DType::F16, B = DType::BF16;
  using K = MaskKind;
  const Case cases[] = {
      // batch heads seq_q seq_k d  dtype mask      causal per_head bshd  scale density
      {1, 2, 256, 256, 128, B, K::None, false, false, false, 0, 0},
      {1, 2, 256, 256, 64, H, K::None, false, false, false, 0, 0},
      {2, 2, 300, 300, 128, B, K::None, true, false, false, 0, 0},
      {1, 3, 333, 200, 64, B, K::None, true, false, false, 0.2f, 0},
      {2, 2, 400, 520, 128, H, K::Random, false, true, false, 0, 0.5},
      {2, 2, 400, 520, 64, B, K::Random, false, false, false, 0, 0.5},
      {2, 3, 384, 384, 128, B, K::Random, true, true, false, 0, 0.6},
      {1, 2, 250, 250, 64, H, K::Random, true, true, true, 0, 0.6},
      {2, 2, 500, 500, 128, B, K::Random, false, true, true, 0.05f, 0.4},
      {1, 2, 640, 640, 128, B, K::TopK, false, false, false, 0, 2},
      {1, 2, 700, 700, 64, H, K::TopK, true, false, false, 0, 3},
      {2, 1, 512, 1000, 128, H, K::TopK, false, false, true, 0, 4},
      {1, 1, 1, 1, 128, B, K::None, false, false, false, 0, 0},
      {1, 1, 5, 0, 64, B, K::None, false, false, false, 0, 0},
      {1, 2, 130, 7, 128, H, K::None, true, false, false, 0, 0},
      {3, 1, 129, 129, 128, B, K::Random, false, true, false, 0, 0.5},
      // Grouped-query heads (8 over 2, MQA) and bottom-right causal, on the Hopper family by name
      // (Auto gives decode shapes, seq_q * group <= 16, to the decode family).
      // batch heads seq_q seq_k d  dtype mask   causal per_head bshd scale density heads_kv bottom_right per_kv backend
      {1, 8, 384, 384, 128, B, K::None, true, false, false, 0, 0, 2, false, false, sparsek::Backend::Hopper},
      {2, 8, 300, 520, 64, H, K::Random, false, true, false, 0, 0.5, 2, false, true, sparsek::Backend::Hopper},
      {1, 4, 256, 700, 128, B, K::Random, true, true, false, 0, 0.6, 1, true, false, sparsek::Backend::Hopper},
      {1, 2, 1, 1000, 128, B, K::None, true, false, false, 0, 0, 2, true, false, sparsek::Backend::Hopper},
      {2, 8, 77, 1037, 64, H, K::Random, true, true, true, 0, 0.6, 2, true, true, sparsek::Backend::Hopper},
      {1, 4, 128, 1000, 128, H, K::TopK, true, false, false, 0, 3, 1, true, false, sparsek::Backend::Hopper},
      {1, 4, 500, 500, 64, B, K::TopK, true, false, false, 0, 2, 2, true, false, sparsek::Backend::Hopper},
      {1, 2, 700, 130, 128, B, K::None, true, false, false, 0, 0, 1, true, false, sparsek::Backend::Hopper},
      // The same shapes through Auto (seq_q 1 with a group of 4: the decode family).
      {1, 8, 1, 1000, 128, B, K::None, true, false, false, 0, 0, 2, true, false, sparsek::Backend::Auto},
      {2, 8, 300, 520, 128, B, K::Random, true, true, false, 0, 0.5, 2, true, true, sparsek::Backend::Auto},
  };
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int passed = 0, failed = 0;
  uint64_t seed = 1;
  for (const Case& c : cases) {
    if (quick && seed > 6) break;
    (run(c, seed++) ? passed : failed)++;
  }
  if (!quick) (determinism() ? passed : failed)++;
  struct G {
    int64_t b, h, sq, sk, d;
    DType t;
    int k;
    bool causal, given;
    int64_t hk = 0;  // K's heads; 0: as Q's
    bool bottom_right = false;
  };
  const G gates[] = {
      {2, 3, 1000, 1300, 128, B, 4, false, false}, {1, 2, 900, 900, 64, H, 3, true, false},
      {2, 2, 2048, 2048, 128, B, 16, false, false}, {1, 1, 300, 300, 40, H, 9, false, false},
      {2, 3, 1000, 1300, 0, B, 4, false, true},     {1, 2, 1500, 1500, 0, B, 5, true, true},
      {1, 2, 700, 800, 0, B, 0, false, true},      {1, 2, 700, 800, 0, B, 40, false, true},
      // Grouped-query heads (pooled per query head against its KV head), bottom-right.
      {2, 8, 1000, 1300, 128, B, 4, true, false, 2, true}, {1, 4, 300, 2000, 64, H, 3, true, false, 1, true},
      {1, 4, 1500, 700, 64, B, 2, true, false, 2, true},   {1, 2, 1500, 700, 0, B, 3, true, true, 0, true},
  };
  int gated = 0;
  for (const G& g : gates) {
    if (quick && (gated++ % 4) != 1) continue;  // one pooled, one given
    (gating_case(g.b, g.h, g.hk > 0 ? g.hk : g.h, g.sq, g.sk, g.given ? 64 : g.d, g.t, g.k, g.causal, g.bottom_right,
                 g.given, seed++)
         ? passed
         : failed)++;
  }
  if (!quick) refusals(passed, failed);
  // Packed sequences: lengths 0 .. 3000 not multiples of 128 (empty sequences of queries, of
  // keys and of both), both causal alignments, grouped-query heads, masks per (sequence,
  // query head), per (sequence, KV head) and shared, d 64 and 128, f16 and bf16, fused views,
  // one side packed; decode shapes through Auto (the decode family) and by name on Hopper.
  {
    using VC = VarlenCase;
    std::vector<VC> vcs;
    VC c;
    c.len_q = {1, 300, 0, 1000, 129}, c.len_k = {1, 300, 0, 1000, 129};
    c.heads = 4, c.heads_kv = 2, c.causal = true, c.bottom_right = true;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {1, 3000, 0, 77, 257, 0}, c.len_k = {5, 2999, 0, 0, 1300, 64};
    c.heads = 4, c.heads_kv = 2, c.d = 64, c.t = DType::F16, c.mask = MaskKind::Random, c.per_head = true;
    c.per_kv = true, c.causal = true, c.bshd = true;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {700, 130, 1, 0}, c.len_k = {129, 1000, 2, 5};
    c.heads = 2, c.heads_kv = 2, c.mask = MaskKind::Random, c.per_head = true, c.causal = true;
    c.bottom_right = true;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {200, 513, 1}, c.len_k = {0, 0, 0}, c.packed_k = false, c.pad_k = 700;
    c.heads = 8, c.heads_kv = 1, c.d = 64, c.mask = MaskKind::Random, c.causal = true, c.bottom_right = true;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {0, 0, 0}, c.len_k = {0, 900, 1500}, c.packed_q = false, c.pad_q = 200;
    c.heads = 4, c.heads_kv = 4, c.t = DType::F16, c.causal = true, c.bottom_right = true, c.bshd = true;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {1, 2, 0, 4, 3}, c.len_k = {1000, 0, 37, 2049, 3};
    c.heads = 8, c.heads_kv = 2, c.mask = MaskKind::Random, c.per_head = true, c.per_kv = true, c.causal = true;
    c.bottom_right = true, c.backend = sparsek::Backend::Auto;
    vcs.push_back(c);
    c.backend = sparsek::Backend::Hopper;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {1, 1, 1, 1}, c.len_k = {8192, 0, 5000, 129};
    c.heads = 8, c.heads_kv = 1, c.d = 64, c.t = DType::F16, c.causal = true, c.bottom_right = true;
    c.backend = sparsek::Backend::Auto;
    vcs.push_back(c);
    c = VC{};
    c.len_q = {640, 1, 1200}, c.len_k = {640, 1000, 1300};
    c.heads = 4, c.heads_kv = 2, c.mask = MaskKind::Random, c.per_head = true, c.causal = true, c.repeats = 100;
    vcs.push_back(c);
    int index = 0;
    for (const VC& vc : vcs) {
      if (quick && index++ % 3 != 0) continue;
      (varlen_case(vc, seed++) ? passed : failed)++;
    }
    if (!quick) varlen_refusals(passed, failed);
  }
  // Serving layouts: per-sequence key counts (0 and not multiples of anything) and K/V paged
  // in shuffled pools (pages of 128 and 256 keys), prefill up to 1000 queries with each
  // sequence's own bottom-right diagonal, grouped-query heads, masks over logical key blocks
  // (shared, per KV head, per query head), d 64 and 128, f16 and bf16; a decode shape through
  // Auto (the decode family); 100 repeats bitwise.
  {
    std::vector<PagedCase> pcs;
    PagedCase c;
    c.lens = {0, 1100, 517, 129}, c.seq_q = 1000, c.heads = 8, c.heads_kv = 2, c.causal = true, c.bottom_right = true;
    pcs.push_back(c);
    c.mask = MaskKind::Random, c.per_head = true, c.per_kv = true, c.page = 256, c.t = DType::F16;
    pcs.push_back(c);
    c = PagedCase{};
    c.lens = {77, 0, 1500}, c.seq_q = 300, c.heads = 4, c.heads_kv = 1, c.d = 64, c.page = 128, c.slack = 11;
    c.mask = MaskKind::Random, c.per_head = true, c.causal = true;
    pcs.push_back(c);
    c.page = 0, c.t = DType::F16;  // the same keys padded: seqlens_k alone
    pcs.push_back(c);
    c = PagedCase{};
    c.lens = {640, 1, 2000}, c.seq_q = 129, c.heads = 4, c.heads_kv = 4, c.page = 128, c.mask = MaskKind::Random;
    pcs.push_back(c);
    c = PagedCase{};
    c.lens = {3000, 0, 31, 128}, c.seq_q = 2, c.heads = 8, c.heads_kv = 2, c.page = 128, c.causal = true;
    c.bottom_right = true, c.backend = sparsek::Backend::Auto;
    pcs.push_back(c);
    c.backend = sparsek::Backend::Hopper;
    pcs.push_back(c);
    c = PagedCase{};
    c.lens = {1500, 77, 900}, c.seq_q = 300, c.heads = 8, c.heads_kv = 2, c.page = 128, c.mask = MaskKind::Random;
    c.per_head = true, c.per_kv = true, c.causal = true, c.bottom_right = true, c.repeats = 100;
    pcs.push_back(c);
    int index = 0;
    for (const PagedCase& pc : pcs) {
      if (quick && index++ % 3 != 0) continue;
      (paged_case(pc, seed++) ? passed : failed)++;
    }
    if (!quick) paged_refusals(passed, failed);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
