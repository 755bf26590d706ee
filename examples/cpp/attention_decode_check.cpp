// attention_decode_check: checks the split-KV decode attention family (cpp/attention/decode/)
// through the public C++ header only (include/sparsek/attention.hpp).
//
//   attention_decode_check   built-in decode cases (seq_q * heads / heads_kv <= 16 query rows
//                            per KV head) against a double-precision host reference:
//                            grouped-query heads (groups 1, 4, 8, MQA), seq_q 1..16, seq_k
//                            1..9000 (not multiples of the 16-key tile or of the blocks) and
//                            0, both causal alignments, block masks shared / per KV head /
//                            per query head with empty and full rows, f16/bf16, head_dim
//                            64/128, packed and [batch, seq, heads, d] strided views. O is
//                            poisoned with NaN (every element of the view must be written) and
//                            the gaps of a strided O hold a sentinel (never written);
//                            can_implement must name the Decode backend for each (Auto).
//                            Serving layouts (SequenceLayout): per-sequence key counts (0 and
//                            not multiples of anything) and K/V paged in shuffled pools of
//                            pages of 16, 64, 128 and 256 keys, checked with check_indices.
//                            Then the shapes the family leaves to the Hopper family (Auto must
//                            not name Decode), 100 repeats bitwise identical (a split launch
//                            and an unsplit one, plain and paged), and refusals (O untouched:
//                            a mask no family takes, a page outside the pool and a key count
//                            above max_seqlen_k under check_indices). One PASS/FAIL line
//                            each, then "N passed, N failed".
//   attention_decode_check --quick
//                            the first six cases only (for compute-sanitizer memcheck and
//                            racecheck). With SPARSEK_VARIANT=<row>, cases the row does not
//                            take are SKIP.
//   attention_decode_check --time DTYPE BATCH HEADS_Q HEADS_KV SEQ_Q SEQ_K HEAD_DIM ITERS [PAGE]
//                            Times ITERS launches (CUDA events, median of 5 repeats) of the
//                            dense KV and of a mask keeping a random quarter of the 128-key
//                            blocks per (batch, KV head), and a device-to-device copy of the
//                            K and V bytes as the bandwidth reference; one JSON line each
//                            (GB/s on the K and V bytes read). With PAGE, K and V are a
//                            shuffled pool of pages of PAGE keys read through a page table
//                            (every sequence SEQ_K keys).
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
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "check_common.hpp"

namespace {

using namespace check_common;
using sparsek::BlockMaskView;
using sparsek::CausalAlignment;
using sparsek::DType;
using sparsek::HeadsView;

enum class MaskKind { None, Shared, PerKvHead, PerQueryHead };

struct Case {
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, d;
  DType t;
  bool causal;
  CausalAlignment align;
  MaskKind mask;
  int32_t block_q, block_k;
  double density;
  bool bshd;
  // Serving layout: each sequence's own key count (seq_k is then max_seqlen_k), and with
  // page > 0 K and V a shuffled pool of pages of `page` keys.
  bool counted = false;
  int64_t page = 0;
};

// A case's serving layout on the host: key counts (lens[0] = 0, lens[1] = seq_k, the rest
// drawn), and paged, their shuffled pool (shuffled_pages, sequences of at most seq_k keys).
struct Layout {
  std::vector<int32_t> lens;
  PageTable pages;
};

Layout make_layout(const Case& c, Rng& rng) {
  Layout l;
  if (!c.counted) return l;
  for (int64_t b = 0; b < c.batch; ++b)
    l.lens.push_back(b == 0 ? 0 : b == 1 ? int32_t(c.seq_k) : int32_t(rng.next() % uint64_t(c.seq_k + 1)));
  if (c.page > 0) l.pages = shuffled_pages(l.lens, c.seq_k, c.page, rng);
  return l;
}

const char* name(DType t) { return t == DType::F16 ? "f16" : "bf16"; }
const char* name(MaskKind m) {
  return m == MaskKind::None ? "none" : m == MaskKind::Shared ? "shared" : m == MaskKind::PerKvHead ? "per-kv" : "per-q";
}

// ---- the reference (double), from the header's rules alone ----
struct Reference {
  std::vector<double> o;    // [b, h, i, d] packed
  std::vector<double> lse;  // [b, h, i]
};
Reference reference(const Case& c, const Heads& q, const Heads& k, const Heads& v, const Mask* mask,
                    const Layout& l) {
  Reference r;
  r.o.assign(size_t(c.batch * c.heads_q * c.seq_q * c.d), 0.0);
  r.lse.assign(size_t(c.batch * c.heads_q * c.seq_q), -INFINITY);
  const double scale = 1.0 / std::sqrt(double(c.d));
  const int64_t group = c.heads_q / c.heads_kv;
  std::vector<double> s(size_t(c.seq_k));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads_q; ++h) {
      // The sequence's keys (its own count with a layout) and its diagonal.
      const int64_t seq_k = c.counted ? l.lens[size_t(b)] : c.seq_k;
      const int64_t offset = c.align == CausalAlignment::BottomRight ? seq_k - c.seq_q : 0;
      const int64_t kv = h / group;
      const int64_t p = mask == nullptr ? 0 : mask->pattern_of(b, h, c.heads_q);
      for (int64_t i = 0; i < c.seq_q; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < seq_k; ++j) {
          const bool kept = (mask == nullptr || mask->listed(p, i / mask->block_q, j / mask->block_k)) &&
                            (!c.causal || j <= i + offset);
          if (!kept) {
            s[size_t(j)] = -INFINITY;
            continue;
          }
          const auto [kb, kj] = l.pages.key(b, j);
          double dot = 0;
          for (int64_t x = 0; x < c.d; ++x) dot += double(q.get(b, h, i, x)) * double(k.get(kb, kv, kj, x));
          s[size_t(j)] = dot * scale;
          mx = std::max(mx, s[size_t(j)]);
        }
        if (mx == -INFINITY) continue;
        double sum = 0;
        const size_t row = size_t(((b * c.heads_q + h) * c.seq_q + i) * c.d);
        for (int64_t j = 0; j < seq_k; ++j) {
          if (s[size_t(j)] == -INFINITY) continue;
          const double e = std::exp(s[size_t(j)] - mx);
          sum += e;
          const auto [vb, vj] = l.pages.key(b, j);
          for (int64_t x = 0; x < c.d; ++x) r.o[row + size_t(x)] += e * double(v.get(vb, kv, vj, x));
        }
        for (int64_t x = 0; x < c.d; ++x) r.o[row + size_t(x)] /= sum;
        r.lse[size_t((b * c.heads_q + h) * c.seq_q + i)] = mx + std::log(sum);
      }
    }
  return r;
}

// The operands of one case on the device (K and V the pool when paged).
struct Problem {
  Layout layout;
  Heads q, k, v, o;
  Mask mask;
  std::unique_ptr<DeviceMask> d_mask;
  BlockMaskView view{};
  float* d_lse = nullptr;
  std::unique_ptr<DeviceInts> d_lens, d_table;
  Problem(const Case& c, Layout l)
      : layout(std::move(l)),
        q(c.batch, c.heads_q, c.seq_q, c.d, c.t, c.bshd),
        k(c.page > 0 ? layout.pages.num_pages : c.batch, c.heads_kv, c.page > 0 ? c.page : c.seq_k, c.d, c.t, c.bshd),
        v(c.page > 0 ? layout.pages.num_pages : c.batch, c.heads_kv, c.page > 0 ? c.page : c.seq_k, c.d, c.t, c.bshd),
        o(c.batch, c.heads_q, c.seq_q, c.d, c.t, c.bshd) {}
  ~Problem() { cudaFree(d_lse); }
  void setup(const Case& c, Rng& rng) {
    q.fill_random(rng);
    k.fill_random(rng);
    v.fill_random(rng);
    q.upload();
    k.upload();
    v.upload();
    if (c.mask != MaskKind::None) {
      mask.block_q = c.block_q;
      mask.block_k = c.block_k;
      mask.q_blocks = (c.seq_q + c.block_q - 1) / c.block_q;
      mask.k_blocks = (c.seq_k + c.block_k - 1) / c.block_k;
      mask.batch = c.batch;
      mask.heads = c.mask == MaskKind::PerKvHead ? c.heads_kv : c.heads_q;
      mask.patterns = c.mask == MaskKind::Shared ? 1 : c.batch * mask.heads;
      mask.add_random_rows(rng, c.density);
      d_mask = std::make_unique<DeviceMask>(mask);
      view = d_mask->view;
    }
    CUDA_CHECK(cudaMalloc(&d_lse, size_t(std::max<int64_t>(c.batch * c.heads_q * c.seq_q, 1)) * 4));
    if (c.counted) {
      d_lens = std::make_unique<DeviceInts>(layout.lens);
      if (c.page > 0) d_table = std::make_unique<DeviceInts>(layout.pages.table);
    }
  }
  // O poisoned: NaN inside the view, the sentinel in its gaps.
  void poison(const Case& c) {
    check_common::poison(o, o.seq);
    o.upload();
    std::vector<float> nan(size_t(c.batch * c.heads_q * c.seq_q), NAN);
    if (!nan.empty()) CUDA_CHECK(cudaMemcpy(d_lse, nan.data(), nan.size() * 4, cudaMemcpyHostToDevice));
  }
  sparsek::AttentionOptions options(const Case& c) const {
    sparsek::AttentionOptions opt;
    opt.causal = c.causal;
    opt.causal_alignment = c.align;
    opt.check_indices = c.mask != MaskKind::None || c.counted;
    if (c.counted) {
      opt.layout.batch = c.batch;
      opt.layout.seqlens_k = d_lens->p;
      opt.layout.max_seqlen_k = c.seq_k;
      if (c.page > 0) opt.layout.page_table = d_table->p, opt.layout.max_pages = layout.pages.max_pages;
    }
    return opt;
  }
  const BlockMaskView* mask_view(const Case& c) const { return c.mask == MaskKind::None ? nullptr : &view; }
  sparsek::Result launch(const Case& c) {
    return sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, mask_view(c), options(c), nullptr);
  }
};

void label(const Case& c, char* out, size_t n) {
  char layout[48] = "";
  if (c.page > 0) std::snprintf(layout, sizeof(layout), " paged(%lld) counted", (long long)c.page);
  else if (c.counted) std::snprintf(layout, sizeof(layout), " counted");
  std::snprintf(out, n, "b%lld hq%lld hkv%lld sq%lld sk%lld d%lld %s%s mask=%s(%dx%d)%s%s", (long long)c.batch,
                (long long)c.heads_q, (long long)c.heads_kv, (long long)c.seq_q, (long long)c.seq_k, (long long)c.d,
                name(c.t), c.causal ? (c.align == CausalAlignment::BottomRight ? " causal-br" : " causal-tl") : "",
                name(c.mask), c.block_q, c.block_k, c.bshd ? " bshd" : "", layout);
}

// Runs one case: can_implement's backend, the poisoned O, the launch, then every element
// against the reference. `decode`: whether Auto must choose the Decode backend (else it must
// not).
bool run(const Case& c, uint64_t seed, bool decode) {
  Rng rng(seed);
  Problem pb(c, make_layout(c, rng));
  pb.setup(c, rng);
  pb.poison(c);
  char what[240];
  label(c, what, sizeof(what));
  sparsek::Backend chosen = sparsek::Backend::Auto;
  const sparsek::Result can = sparsek::can_implement(pb.q.view(), pb.k.view(), pb.v.view(), pb.o.out(), pb.d_lse,
                                                     pb.mask_view(c), pb.options(c), &chosen);
  const sparsek::Result r = pb.launch(c);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (!r.ok()) {
    // A forced row takes only its dtype and head_dim (and decode shapes): the rest is skipped.
    const bool skip = skipped(r);
    std::printf("%s %s: %s\n", skip ? "SKIP" : "FAIL", what, r.message);
    return skip;
  }
  bool ok = can.ok();
  if (!forced_variant() && ok && (chosen == sparsek::Backend::Decode) != decode) {
    std::printf("FAIL %s: can_implement chose backend %d, %s expected\n", what, int(chosen),
                decode ? "Decode" : "not Decode");
    ok = false;
  }
  pb.o.download();
  std::vector<float> lse(size_t(c.batch * c.heads_q * c.seq_q));
  if (!lse.empty()) CUDA_CHECK(cudaMemcpy(lse.data(), pb.d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
  const Reference ref =
      reference(c, pb.q, pb.k, pb.v, c.mask == MaskKind::None ? nullptr : &pb.mask, pb.layout);
  OutputError err;
  err.infinite_is_bad = true;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads_q; ++h)
      for (int64_t i = 0; i < c.seq_q; ++i) {
        const size_t li = size_t((b * c.heads_q + h) * c.seq_q + i);
        const bool empty = err.lse(lse[li], ref.lse[li]);
        for (int64_t x = 0; x < c.d; ++x) err.value(pb.o.get(b, h, i, x), ref.o[li * size_t(c.d) + size_t(x)], empty);
      }
  const int64_t touched_gap = c.bshd ? gap_writes(pb.o) : 0;
  ok = ok && err.ok(c.t) && touched_gap == 0;
  std::printf("%s %s: rel %.2e (tol %.0e), lse max abs err %.2e, empty rows %lld, bad %lld, gap writes %lld%s\n",
              ok ? "PASS" : "FAIL", what, err.rel(), OutputError::tolerance(c.t), err.lse_err,
              (long long)err.empty_rows, (long long)err.bad, (long long)touched_gap,
              can.ok() ? "" : " (can_implement refused)");
  return ok;
}

// 100 launches: O and LSE bitwise identical.
bool determinism(const Case& c, uint64_t seed) {
  Rng rng(seed);
  Problem pb(c, make_layout(c, rng));
  pb.setup(c, rng);
  pb.o.upload();  // O's device buffer (the runs below reset it)
  char what[240];
  label(c, what, sizeof(what));
  std::vector<uint16_t> first_o;
  std::vector<float> first_lse, lse(size_t(c.batch * c.heads_q * c.seq_q));
  for (int run = 0; run < 100; ++run) {
    CUDA_CHECK(cudaMemset(pb.o.dev, 0, pb.o.host.size() * 2));
    const sparsek::Result r = pb.launch(c);
    if (!r.ok()) {
      const bool skip = skipped(r);
      std::printf("%s determinism %s: %s\n", skip ? "SKIP" : "FAIL", what, r.message);
      return skip;
    }
    pb.o.download();
    CUDA_CHECK(cudaMemcpy(lse.data(), pb.d_lse, lse.size() * 4, cudaMemcpyDeviceToHost));
    if (run == 0) {
      first_o = pb.o.host;
      first_lse = lse;
    } else if (first_o != pb.o.host || std::memcmp(first_lse.data(), lse.data(), lse.size() * 4) != 0) {
      std::printf("FAIL determinism %s: run %d differs from the first\n", what, run);
      return false;
    }
  }
  std::printf("PASS determinism %s: 100 runs bitwise identical (O and LSE)\n", what);
  return true;
}

// A mask of two query blocks (seq_q > block_q) with 64-key blocks: neither the decode family
// (one query block) nor the Hopper family (128 x 128 blocks) takes it; O stays untouched.
bool refusal(uint64_t seed) {
  const Case c{1, 4, 4, 8, 200, 128, DType::BF16, false, CausalAlignment::TopLeft, MaskKind::Shared, 4, 64, 0.5,
               false};
  Rng rng(seed);
  Problem pb(c, make_layout(c, rng));
  pb.setup(c, rng);
  std::fill(pb.o.host.begin(), pb.o.host.end(), kSentinel);
  pb.o.upload();
  const sparsek::Result r = pb.launch(c);
  CUDA_CHECK(cudaDeviceSynchronize());
  pb.o.download();
  const bool untouched = all_sentinel(pb.o);
  const bool ok = r.status == sparsek::Status::NotSupported && untouched && std::strncmp(r.message, "sparsek: ", 9) == 0;
  std::printf("%s refusal (a mask of two query blocks, 64-key blocks): %s\n", ok ? "PASS" : "FAIL", r.message);
  return ok;
}

// check_indices over a paged layout: a page a sequence reaches outside the pool, a negative
// page, and a key count above max_seqlen_k are InvalidArgument, O untouched; past each
// sequence's pages the table holds -1 (not read, not checked).
bool paged_refusals(uint64_t seed) {
  const Case c{3, 8, 2, 1, 300, 128, DType::BF16, true, CausalAlignment::BottomRight, MaskKind::None, 16, 128, 0,
               false, true, 16};
  Rng rng(seed);
  Problem pb(c, make_layout(c, rng));
  pb.setup(c, rng);
  std::fill(pb.o.host.begin(), pb.o.host.end(), kSentinel);
  pb.o.upload();
  bool ok = true;
  const auto expect = [&](const char* what, const char* keyword) {
    const sparsek::Result r = pb.launch(c);
    CUDA_CHECK(cudaDeviceSynchronize());
    if (skipped(r)) {  // the row takes another dtype or head_dim
      std::printf("SKIP paged refusal (%s): %s\n", what, r.message);
      return;
    }
    const bool pass = r.status == sparsek::Status::InvalidArgument && std::strstr(r.message, keyword) != nullptr;
    std::printf("%s paged refusal (%s): %s\n", pass ? "PASS" : "FAIL", what, r.message);
    ok = ok && pass;
  };
  // Sequence 1 (300 keys) reaches pages 0 .. 18; its page 3 outside the pool, then negative.
  std::vector<int32_t> table = pb.layout.pages.table;
  table[size_t(pb.layout.pages.max_pages + 3)] = int32_t(pb.layout.pages.num_pages);
  CUDA_CHECK(cudaMemcpy(pb.d_table->p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  expect("a page outside the pool", "sequence 1, page 3");
  table[size_t(pb.layout.pages.max_pages + 3)] = -1;
  CUDA_CHECK(cudaMemcpy(pb.d_table->p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  expect("a negative page", "sequence 1, page 3");
  CUDA_CHECK(cudaMemcpy(pb.d_table->p, pb.layout.pages.table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  std::vector<int32_t> lens = pb.layout.lens;
  lens[2] = int32_t(c.seq_k + 1);
  CUDA_CHECK(cudaMemcpy(pb.d_lens->p, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  expect("a key count above max_seqlen_k", "sequence 2");
  pb.o.download();
  const bool untouched = all_sentinel(pb.o);
  std::printf("%s paged refusals leave O untouched\n", untouched ? "PASS" : "FAIL");
  return ok && untouched;
}

// ---- --time ----
int time_case(int argc, char** argv) {
  if (argc != 10 && argc != 11) {
    std::fprintf(stderr,
                 "usage: attention_decode_check --time DTYPE BATCH HEADS_Q HEADS_KV SEQ_Q SEQ_K HEAD_DIM ITERS "
                 "[PAGE]\n");
    return 2;
  }
  const DType t = std::strcmp(argv[2], "f16") == 0 ? DType::F16 : DType::BF16;
  const int64_t B = std::atoll(argv[3]), HQ = std::atoll(argv[4]), HKV = std::atoll(argv[5]),
                SQ = std::atoll(argv[6]), SK = std::atoll(argv[7]), D = std::atoll(argv[8]);
  const int iters = std::atoi(argv[9]);
  const int64_t page = argc == 11 ? std::atoll(argv[10]) : 0;
  if (B < 1 || HQ < 1 || HKV < 1 || HQ % HKV != 0 || SQ < 1 || SK < 1 || (D != 64 && D != 128) || iters < 1 ||
      page < 0 || (page > 0 && 128 % page != 0 && page % 128 != 0)) {
    std::fprintf(stderr, "bad dims (PAGE must nest with the mask's 128-key blocks)\n");
    return 2;
  }
  // Paged: every sequence SK keys in ceil(SK / PAGE) pages of a shuffled pool.
  Rng rng(7);
  const int64_t pages_per = page > 0 ? (SK + page - 1) / page : 0;
  std::vector<int32_t> lens = std::vector<int32_t>(size_t(B), int32_t(SK)), table;
  if (page > 0) {
    table.resize(size_t(B * pages_per));
    for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
    for (size_t i = table.size() - 1; i > 0; --i) std::swap(table[i], table[size_t(rng.next() % (i + 1))]);
  }
  const int64_t kv_batch = page > 0 ? B * pages_per : B, kv_seq = page > 0 ? page : SK;
  // Device data: one random chunk per tensor, repeated (a host fill of the whole KV cache
  // would dominate the run; the timing does not depend on the values).
  Heads q(B, HQ, SQ, D, t, false), k(kv_batch, HKV, kv_seq, D, t, false), v(kv_batch, HKV, kv_seq, D, t, false),
      o(B, HQ, SQ, D, t, false);
  std::vector<uint16_t> chunk(size_t(1) << 20);
  const auto fill = [&](Heads& x) {
    for (uint16_t& e : chunk) e = to_bits(rng.sym(), t);
    for (size_t off = 0; off < x.host.size(); off += chunk.size()) {
      const size_t n = std::min(chunk.size(), x.host.size() - off);
      CUDA_CHECK(cudaMemcpy(static_cast<uint16_t*>(x.dev) + off, chunk.data(), n * 2, cudaMemcpyHostToDevice));
    }
  };
  for (Heads* x : {&q, &k, &v, &o}) {
    CUDA_CHECK(cudaMalloc(&x->dev, x->host.size() * 2));
    fill(*x);
  }
  float* d_lse = nullptr;
  CUDA_CHECK(cudaMalloc(&d_lse, size_t(B * HQ * SQ) * 4));
  // A quarter of the 128-key blocks per (batch, KV head), at random, ascending.
  Mask mask;
  mask.block_q = int32_t(SQ);
  mask.block_k = 128;
  mask.q_blocks = 1;
  mask.k_blocks = (SK + 127) / 128;
  mask.batch = B;
  mask.heads = HKV;
  mask.patterns = B * HKV;
  const int64_t keep = std::max<int64_t>(1, mask.k_blocks / 4);
  std::vector<int32_t> all(size_t(mask.k_blocks));
  for (int64_t p = 0; p < mask.patterns; ++p) {
    for (int64_t j = 0; j < mask.k_blocks; ++j) all[size_t(j)] = int32_t(j);
    for (int64_t j = 0; j < keep; ++j) std::swap(all[size_t(j)], all[size_t(j + int64_t(rng.next() % uint64_t(mask.k_blocks - j)))]);
    std::sort(all.begin(), all.begin() + keep);
    mask.col_idx.insert(mask.col_idx.end(), all.begin(), all.begin() + keep);
    mask.row_ptr.push_back(int32_t(mask.col_idx.size()));
  }
  const DeviceMask d_mask(mask);
  const BlockMaskView view = d_mask.view;
  int64_t kept_keys = 0;  // keys of the kept blocks (the last block may be partial)
  for (int32_t j : mask.col_idx) kept_keys += std::min<int64_t>(128, SK - int64_t(j) * 128);

  const auto median = [&](const auto& body) {
    body();  // warm-up
    CUDA_CHECK(cudaDeviceSynchronize());
    return median_ms(iters, body);
  };
  const double kv_bytes = double(B * HKV * SK) * double(D) * 2.0 * 2.0;
  const double masked_bytes = double(kept_keys) * double(D) * 2.0 * 2.0;
  // The bandwidth reference: a device-to-device copy of K into V's buffer reads and writes
  // K's bytes (V is rewritten with random data after).
  const double copy_ms = median([&] {
    CUDA_CHECK(cudaMemcpyAsync(v.dev, k.dev, k.host.size() * 2, cudaMemcpyDeviceToDevice, nullptr));
  });
  const double copy_gbs = 2.0 * double(k.host.size() * 2) / (copy_ms * 1e-3) / 1e9;
  fill(v);
  sparsek::AttentionOptions opt;
  opt.causal = true;
  opt.causal_alignment = CausalAlignment::BottomRight;
  std::unique_ptr<DeviceInts> d_lens, d_table;
  if (page > 0) {
    d_lens = std::make_unique<DeviceInts>(lens);
    d_table = std::make_unique<DeviceInts>(table);
    opt.layout.batch = B;
    opt.layout.seqlens_k = d_lens->p;
    opt.layout.max_seqlen_k = SK;
    opt.layout.page_table = d_table->p;
    opt.layout.max_pages = pages_per;
  }
  bool failed = false;
  for (int masked = 0; masked < 2; ++masked) {
    const BlockMaskView* mp = masked ? &view : nullptr;
    sparsek::Backend chosen = sparsek::Backend::Auto;
    sparsek::Result r = sparsek::can_implement(q.view(), k.view(), v.view(), o.out(), d_lse, mp, opt, &chosen);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.message);
      return 1;
    }
    const double ms = median([&] {
      const sparsek::Result x = sparsek::attention(q.view(), k.view(), v.view(), o.out(), d_lse, mp, opt, nullptr);
      if (!x.ok()) {
        std::fprintf(stderr, "%s\n", x.message);
        failed = true;
      }
    });
    const double bytes = masked ? masked_bytes : kv_bytes;
    const char* kv = page > 0 ? (masked ? "paged_topk_quarter" : "paged_dense") : masked ? "topk_quarter" : "dense";
    std::printf("{\"impl\":\"sparsek\",\"backend\":%d,\"kv\":\"%s\",\"page\":%lld,\"dtype\":\"%s\",\"batch\":%lld,"
                "\"heads_q\":%lld,\"heads_kv\":%lld,\"seq_q\":%lld,\"seq_k\":%lld,\"head_dim\":%lld,\"kv_bytes\":%.0f,"
                "\"us\":%.2f,\"gbs\":%.1f,\"copy_gbs\":%.1f}\n",
                int(chosen), kv, (long long)page, name(t), (long long)B, (long long)HQ, (long long)HKV, (long long)SQ,
                (long long)SK, (long long)D, bytes, ms * 1e3, bytes / (ms * 1e-3) / 1e9, copy_gbs);
  }
  CUDA_CHECK(cudaGetLastError());
  cudaFree(d_lse);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--time") == 0) return time_case(argc, argv);
  const cudaDeviceProp prop = print_device();
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const DType H = DType::F16, B = DType::BF16;
  const CausalAlignment TL = CausalAlignment::TopLeft, BR = CausalAlignment::BottomRight;
  using K = MaskKind;
  const Case cases[] = {
      // batch hq hkv seq_q seq_k d  dtype causal align mask           block_q block_k density bshd
      {2, 32, 8, 1, 2049, 128, B, true, BR, K::None, 16, 128, 0, false},
      {1, 8, 2, 2, 1500, 128, H, true, BR, K::PerKvHead, 16, 64, 0.5, false},
      {2, 4, 4, 3, 37, 64, B, true, TL, K::None, 16, 128, 0, true},
      {1, 16, 1, 1, 3000, 64, H, false, TL, K::Shared, 16, 100, 0.4, false},
      {2, 4, 4, 16, 9, 128, B, true, BR, K::None, 16, 128, 0, false},
      {1, 2, 2, 5, 0, 128, H, false, TL, K::None, 16, 128, 0, false},
      {4, 32, 8, 1, 8999, 128, B, false, TL, K::None, 16, 128, 0, false},
      {2, 32, 8, 4, 3001, 128, H, true, BR, K::PerKvHead, 4, 128, 0.25, false},
      {1, 16, 2, 2, 4097, 64, B, true, BR, K::Shared, 2, 16, 0.5, true},
      {3, 8, 8, 1, 1, 128, H, false, TL, K::None, 16, 128, 0, false},
      {1, 2, 2, 16, 4097, 128, B, true, BR, K::PerQueryHead, 16, 33, 0.5, false},
      {1, 6, 3, 8, 641, 64, H, true, BR, K::PerKvHead, 8, 7, 0.6, false},
      {1, 5, 5, 13, 47, 128, B, true, BR, K::None, 16, 128, 0, false},
      {1, 4, 2, 7, 2500, 128, H, true, TL, K::None, 16, 128, 0, true},
      {2, 16, 1, 1, 9000, 128, H, true, BR, K::PerKvHead, 1, 128, 0.5, false},
      {2, 8, 2, 2, 500, 64, B, false, TL, K::Shared, 16, 128, 0.0, false},
      {1, 4, 4, 16, 300, 64, B, true, TL, K::None, 16, 128, 0, false},
      // Serving layouts: key counts per sequence (seq_k the longest), paged in pages of 16..256
      // keys (masks' key blocks nesting with the pages), or not.
      {4, 32, 8, 1, 3000, 128, B, true, BR, K::None, 16, 128, 0, false, true, 16},
      {3, 8, 2, 2, 2049, 64, H, true, BR, K::PerKvHead, 16, 64, 0.5, false, true, 64},
      {3, 8, 1, 2, 1000, 128, B, false, TL, K::Shared, 16, 256, 0.5, false, true, 128},
      {2, 4, 4, 16, 777, 64, H, true, TL, K::PerQueryHead, 16, 64, 0.5, false, true, 256},
      {3, 16, 2, 2, 4097, 128, H, true, BR, K::PerKvHead, 16, 16, 0.3, false, true, 64},
      {3, 6, 3, 5, 641, 64, B, true, BR, K::None, 16, 128, 0, false, true, 0},
      {2, 16, 1, 1, 9000, 128, B, true, BR, K::Shared, 16, 128, 0.5, false, true, 128},
  };
  // Shapes the family leaves to the Hopper family: more than 16 rows per KV head, a
  // per-query-head mask under GQA.
  const Case others[] = {
      {1, 8, 2, 5, 700, 128, B, true, BR, K::None, 16, 128, 0, false},
      {1, 4, 4, 17, 300, 64, H, false, TL, K::None, 16, 128, 0, false},
      {2, 8, 2, 2, 900, 128, B, false, TL, K::PerQueryHead, 128, 128, 0.5, false},
  };
  int passed = 0, failed = 0;
  uint64_t seed = 1;
  for (const Case& c : cases) {
    if (quick && seed > 6) break;
    (run(c, seed++, true) ? passed : failed)++;
  }
  if (!quick) {
    const bool hopper = prop.major == 9 && prop.minor == 0;
    for (const Case& c : others) {
      if (!hopper) {
        std::printf("SKIP (not Hopper) a shape for the Hopper family\n");
        continue;
      }
      (run(c, seed++, false) ? passed : failed)++;
    }
    // Few (batch, KV head) pairs over many keys (split), many pairs (not split).
    const Case split{1, 8, 2, 2, 9000, 128, B, true, BR, K::PerKvHead, 16, 64, 0.5, false};
    const Case whole{64, 32, 8, 1, 2000, 128, B, true, BR, K::None, 16, 128, 0, false};
    (determinism(split, seed++) ? passed : failed)++;
    (determinism(whole, seed++) ? passed : failed)++;
    const Case paged{3, 8, 2, 2, 9000, 128, B, true, BR, K::PerKvHead, 16, 64, 0.5, false, true, 16};
    (determinism(paged, seed++) ? passed : failed)++;
    (refusal(seed++) ? passed : failed)++;
    (paged_refusals(seed++) ? passed : failed)++;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
