// The C++ API of attention and top-k gating (include/sparsek/attention.hpp): validation of
// every view once, at the entry, then the registry. The registry's select and launch for both
// operations are defined here (SPARSEK_DEFINE_OPERATION), so every caller of them links this
// object.
#include <climits>
#include <cmath>
#include <cstdint>

#include "attention/gating.hpp"
#include "attention/layout_check.hpp"
#include "attention/operation.hpp"
#include "attention/problem.hpp"
#include "attention/rules.hpp"
#include "attention/gating_rules.hpp"
#include "core/dtype.hpp"
#include "core/index_check.hpp"
#include "core/overlap.hpp"
#include "core/select.hpp"
#include "core/validate.hpp"

namespace sparsek {
namespace detail {
namespace {


// A [batch, heads, seq, head_dim] view by value (C++'s checks alone; how its dims agree with
// the others' is the table's, rules/attention.toml): a DType, non-negative dims and strides,
// rows that do not overlap, data 2-byte aligned (the kernels' elements are 2 bytes; an element
// type they do not take is the table's NotSupported) and non-null when non-empty, its extent
// inside int64 bytes.
Result check_heads(const char* name, const HeadsView& t) {
  if (!valid(t.dtype)) return make_result(Status::InvalidArgument, "%s.dtype = %d is not a DType", name, int(t.dtype));
  if (t.batch < 0 || t.heads < 0 || t.seq < 0 || t.head_dim < 0)
    return make_result(Status::InvalidArgument, "%s is [%lld, %lld, %lld, %lld]: negative", name, (long long)t.batch,
                       (long long)t.heads, (long long)t.seq, (long long)t.head_dim);
  if (t.stride_b < 0 || t.stride_h < 0 || t.stride_s < 0)
    return make_result(Status::InvalidArgument, "%s has a negative stride", name);
  // A row is head_dim contiguous elements, and rows do not overlap: the leading-dimension
  // rule of the products' views (ld >= the contiguous extent), and the Rust entry's.
  if (t.seq > 1 && t.stride_s < t.head_dim)
    return make_result(Status::InvalidArgument, "%s.stride_s = %lld is below head_dim = %lld: its rows overlap", name,
                       (long long)t.stride_s, (long long)t.head_dim);
  if (reinterpret_cast<uintptr_t>(t.data) % 2 != 0)
    return make_result(Status::InvalidArgument, "%s.data is not 2-byte aligned (%s elements)", name,
                       dtype_name(t.dtype));
  if (t.batch == 0 || t.heads == 0 || t.seq == 0) return Result{};
  if (t.data == nullptr) return make_result(Status::InvalidArgument, "%s.data is null", name);
  int64_t last = 0, x = 0, bytes = 0;
  if (__builtin_mul_overflow(t.batch - 1, t.stride_b, &x) || __builtin_add_overflow(last, x, &last) ||
      __builtin_mul_overflow(t.heads - 1, t.stride_h, &x) || __builtin_add_overflow(last, x, &last) ||
      __builtin_mul_overflow(t.seq - 1, t.stride_s, &x) || __builtin_add_overflow(last, x, &last) ||
      __builtin_add_overflow(last, t.head_dim, &last) || __builtin_mul_overflow(last, int64_t(2), &bytes))
    return make_result(Status::InvalidArgument, "%s: its extent overflows int64 bytes", name);
  return Result{};
}

// The bytes of a view that passed check_heads: from data to its last element (empty when the
// view has no element).
ByteRange heads_bytes(const HeadsView& t) {
  if (t.batch == 0 || t.heads == 0 || t.seq == 0) return ByteRange{};
  // Fits int64 bytes (check_heads).
  const int64_t last = (t.batch - 1) * t.stride_b + (t.heads - 1) * t.stride_h + (t.seq - 1) * t.stride_s;
  return elements(t.data, last + t.head_dim, 2);
}

// An output view must not overlap itself: with head_dim contiguous, the dims of extent > 1
// taken by stride ascending, each stride must be at least the span (in elements) of the
// dims inside it (head_dim: span head_dim). So stride_h = 0 with heads > 1 is refused (stride_s <
// head_dim with seq > 1 already was, by check_heads). `t` passed check_heads.
Result check_no_self_overlap(const char* name, const HeadsView& t) {
  struct Dim {
    const char* name;
    int64_t extent, stride;
  };
  Dim dims[3] = {{"stride_s", t.seq, t.stride_s}, {"stride_h", t.heads, t.stride_h}, {"stride_b", t.batch, t.stride_b}};
  if (t.seq == 0 || t.heads == 0 || t.batch == 0) return Result{};
  // Insertion sort by stride (stable: ties keep seq, heads, batch order).
  for (int i = 1; i < 3; ++i)
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) {
      const Dim x = dims[j];
      dims[j] = dims[j - 1];
      dims[j - 1] = x;
    }
  int64_t span = t.head_dim;
  for (const Dim& d : dims) {
    if (d.extent <= 1) continue;
    if (d.stride < span)
      return make_result(Status::InvalidArgument,
                         "%s overlaps itself: its %s = %lld is below the %lld elements it steps over (extent %lld)",
                         name, d.name, (long long)d.stride, (long long)span, (long long)d.extent);
    int64_t step = 0;
    if (__builtin_mul_overflow(d.stride, d.extent - 1, &step) || __builtin_add_overflow(span, step, &span))
      return make_result(Status::InvalidArgument, "%s: its extent overflows int64", name);
  }
  return Result{};
}

// The serving layout by value (C++'s checks alone; how its counts agree with the views is the
// table's): counts non-negative, every array 4-byte aligned (int32). A null array is off.
Result check_layout(const SequenceLayout& l) {
  if (l.batch < 0 || l.max_pages < 0 || l.max_seqlen_q < 0 || l.max_seqlen_k < 0)
    return make_result(Status::InvalidArgument,
                       "layout: batch = %lld, max_pages = %lld, max_seqlen_q = %lld, max_seqlen_k = %lld: negative",
                       (long long)l.batch, (long long)l.max_pages, (long long)l.max_seqlen_q, (long long)l.max_seqlen_k);
  const auto misaligned = [](const int32_t* a) { return reinterpret_cast<uintptr_t>(a) % alignof(int32_t) != 0; };
  if (misaligned(l.cu_seqlens_q) || misaligned(l.cu_seqlens_k) || misaligned(l.seqlens_k) ||
      misaligned(l.page_table))
    return make_result(Status::InvalidArgument, "layout: an array is not 4-byte aligned (int32)");
  return Result{};
}

// ceil(seq / block) into *blocks; false when it does not fit int32.
bool block_count(int64_t seq, int64_t block, int64_t* blocks) {
  *blocks = seq / block + (seq % block != 0 ? 1 : 0);
  return *blocks <= INT32_MAX;
}

}  // namespace

Result validate(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o, const float* lse,
                const BlockMaskView* mask, const AttentionOptions& options, const DeviceSource& devices,
                AttentionProblem* out) {
  // C++'s checks of each view and option by value, then the table's rules (rules/attention.toml,
  // as the Rust entry checks them): the dims here, the element types after the overlaps.
  if (!valid(options.backend))
    return make_result(Status::InvalidArgument, "unknown backend %d", static_cast<int>(options.backend));
  if (options.causal_alignment != CausalAlignment::TopLeft && options.causal_alignment != CausalAlignment::BottomRight)
    return make_result(Status::InvalidArgument, "unknown causal_alignment %d",
                       static_cast<int>(options.causal_alignment));
  Result r = check_heads("Q", q);
  if (r.ok()) r = check_heads("K", k);
  if (r.ok()) r = check_heads("V", v);
  if (r.ok()) r = check_heads("O", o);
  if (r.ok()) r = check_layout(options.layout);
  if (!r.ok()) return r;
  const SequenceLayout& layout = options.layout;
  attention_rules::Facts facts;
  facts.batch = q.batch, facts.heads = q.heads, facts.seq_q = q.seq, facts.head_dim = q.head_dim;
  facts.k_batch = k.batch, facts.k_heads = k.heads, facts.seq_k = k.seq, facts.k_head_dim = k.head_dim;
  facts.v_batch = v.batch, facts.v_heads = v.heads, facts.v_seq = v.seq, facts.v_head_dim = v.head_dim;
  facts.o_batch = o.batch, facts.o_heads = o.heads, facts.o_seq = o.seq, facts.o_head_dim = o.head_dim;
  facts.q = q.dtype, facts.k = k.dtype, facts.v = v.dtype, facts.o = o.dtype;
  facts.device = true;
  facts.backend = options.backend;
  facts.has_mask = mask != nullptr;
  if (mask != nullptr) {
    facts.block_q = mask->block_q, facts.block_k = mask->block_k;
    facts.q_blocks = mask->q_blocks, facts.k_blocks = mask->k_blocks, facts.patterns = mask->patterns;
    facts.made_for = true;  // BlockMaskView's batch and heads
    facts.mask_batch = mask->batch, facts.mask_heads = mask->heads;
  }
  facts.varlen_q = layout.cu_seqlens_q != nullptr, facts.varlen_k = layout.cu_seqlens_k != nullptr;
  facts.seqlens_k = layout.seqlens_k != nullptr, facts.paged = layout.page_table != nullptr;
  facts.layout = facts.varlen_q || facts.varlen_k || facts.seqlens_k || facts.paged;
  facts.layout_batch = layout.batch, facts.max_pages = layout.max_pages;
  facts.max_seqlen_q = layout.max_seqlen_q, facts.max_seqlen_k = layout.max_seqlen_k;
  r = attention_rules::shapes(facts);
  if (!r.ok()) return r;
  int64_t heads = 0, rows = 0;  // batch * heads, and * seq_q: LSE's floats
  if (__builtin_mul_overflow(q.batch, q.heads, &heads) || __builtin_mul_overflow(heads, q.seq, &rows) ||
      rows > INT64_MAX / 4)
    return make_result(Status::InvalidArgument, "batch * heads * seq_q overflows (LSE)");
  if (reinterpret_cast<uintptr_t>(lse) % alignof(float) != 0)
    return make_result(Status::InvalidArgument, "lse is not 4-byte aligned");
  // The scale as C++ gives it (0: the default 1/sqrt(head_dim), which Rust says with None).
  if (!std::isfinite(options.scale) || options.scale < 0.0f)
    return make_result(Status::InvalidArgument, "scale = %g: must be finite and >= 0 (0: 1/sqrt(head_dim))",
                       double(options.scale));
  if (mask != nullptr) {
    const BlockMaskView& m = *mask;
    int64_t row_ptr_len = 0;
    if (__builtin_mul_overflow(m.patterns, m.q_blocks, &row_ptr_len) || row_ptr_len >= INT32_MAX)
      return make_result(Status::InvalidArgument, "patterns * q_blocks + 1 row_ptr entries must fit int32");
    if (m.nnzb < 0 || m.nnzb > INT32_MAX || m.nnzb > row_ptr_len * m.k_blocks)
      return make_result(Status::InvalidArgument, "mask.nnzb = %lld is out of range", (long long)m.nnzb);
    if (m.row_ptr == nullptr) return make_result(Status::InvalidArgument, "mask.row_ptr is null");
    if (reinterpret_cast<uintptr_t>(m.row_ptr) % alignof(int32_t) != 0 ||
        reinterpret_cast<uintptr_t>(m.col_idx) % alignof(int32_t) != 0)
      return make_result(Status::InvalidArgument, "mask.row_ptr or mask.col_idx is not 4-byte aligned");
    if (m.nnzb > 0 && m.col_idx == nullptr) return make_result(Status::InvalidArgument, "mask.col_idx is null");
  }
  // O and LSE are written: O may not overlap itself, and neither may overlap an input or the
  // other (every count below fits int64 bytes: check_heads, rows, the mask's checks).
  r = check_no_self_overlap("O", o);
  if (!r.ok()) return r;
  {
    const ByteRange lse_bytes = elements(lse, rows, 4);
    const bool masked = mask != nullptr;
    // The layout's arrays: batch key counts, batch * max_pages table entries (the table
    // bounds both below 2^31).
    const ByteRange seqlens_k_bytes = elements(layout.seqlens_k, layout.batch, 4);
    const ByteRange page_table_bytes =
        layout.page_table != nullptr ? elements(layout.page_table, layout.batch * layout.max_pages, 4) : ByteRange{};
    // Packed sequences' offsets: batch + 1 entries each (batch < 2^31 - 1: the table).
    const auto offsets = [&](const int32_t* cu) { return cu != nullptr ? elements(cu, layout.batch + 1, 4) : ByteRange{}; };
    const ByteRange inputs[] = {
        heads_bytes(q),
        heads_bytes(k),
        heads_bytes(v),
        masked ? elements(mask->row_ptr, mask->patterns * mask->q_blocks + 1, 4) : ByteRange{},
        masked ? elements(mask->col_idx, mask->nnzb, 4) : ByteRange{},
        seqlens_k_bytes,
        page_table_bytes,
        offsets(layout.cu_seqlens_q),
        offsets(layout.cu_seqlens_k),
    };
    const char* const names[] = {"Q",
                                 "K",
                                 "V",
                                 "mask.row_ptr",
                                 "mask.col_idx",
                                 "layout.seqlens_k",
                                 "layout.page_table",
                                 "layout.cu_seqlens_q",
                                 "layout.cu_seqlens_k"};
    const ByteRange lse_only[] = {lse_bytes};
    const char* const lse_name[] = {"LSE"};
    r = check_disjoint("O", heads_bytes(o), inputs, names);
    if (r.ok()) r = check_disjoint("O", heads_bytes(o), lse_only, lse_name);
    if (r.ok()) r = check_disjoint("LSE", lse_bytes, inputs, names);
    if (!r.ok()) return r;
  }
  r = attention_rules::types(facts);
  if (!r.ok()) return r;
  AttentionProblem p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.lse = const_cast<float*>(lse);  // written only by attention(), whose lse is non-const
  p.has_mask = mask != nullptr;
  if (mask != nullptr) p.mask = *mask;
  p.causal = options.causal;
  p.causal_alignment = options.causal_alignment;
  p.layout = layout;
  p.scale = options.scale > 0.0f ? options.scale : 1.0f / std::sqrt(float(q.head_dim));
  p.backend = options.backend;
  r = devices.resolve(&p.device);
  if (!r.ok()) return r;
  *out = p;
  return Result{};
}

namespace {

// The dims of block_topk's output, checked: q_blocks, k_blocks and nnzb.
Result gating_dims(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k, const TopkGatingOptions& o,
                   const HeadsView* q, const HeadsView* k, GatingProblem* g, gating_rules::Facts* facts) {
  // C++'s checks by value (negative sizes, top_k, the enum, pooled Q and K as views), then
  // the table's rules (rules/gating.toml, as the Rust entry checks them): the inputs and dims
  // here, the element types after the outputs' overlaps (the caller's).
  if (batch < 0 || heads < 0 || seq_q < 0 || seq_k < 0)
    return make_result(Status::InvalidArgument, "gating dims must be >= 0");
  if (o.top_k < 0) return make_result(Status::InvalidArgument, "gating: top_k = %d must be >= 0", o.top_k);
  int64_t pairs = 0;  // C++'s int64 bound (Rust's usize one is the table's)
  if (__builtin_mul_overflow(batch, heads, &pairs))
    return make_result(Status::InvalidArgument, "gating: batch * heads overflows int64");
  if (o.causal_alignment != CausalAlignment::TopLeft && o.causal_alignment != CausalAlignment::BottomRight)
    return make_result(Status::InvalidArgument, "gating: unknown causal_alignment %d",
                       static_cast<int>(o.causal_alignment));
  Result r;
  if (q != nullptr) r = check_heads("Q", *q);
  if (r.ok() && k != nullptr) r = check_heads("K", *k);
  if (!r.ok()) return r;
  gating_rules::Facts& f = *facts;
  f.batch = batch, f.heads = heads, f.seq_q = seq_q, f.seq_k = seq_k, f.block_q = o.block_q, f.block_k = o.block_k;
  f.pooled = q != nullptr && k != nullptr;
  if (f.pooled) {
    f.head_dim = q->head_dim, f.k_batch = k->batch, f.k_heads = k->heads, f.k_head_dim = k->head_dim;
    f.q = q->dtype, f.k = k->dtype;
  }
  f.device = true;
  f.backend = Backend::Auto;
  r = gating_rules::inputs(f);
  if (r.ok()) r = gating_rules::dims(f);
  if (!r.ok()) return r;
  // The table bounds the block counts and batch * heads * query blocks below 2^31.
  int64_t qb = 0, kb = 0;
  block_count(seq_q, o.block_q, &qb);
  block_count(seq_k, o.block_k, &kb);
  const int64_t patterns = pairs;
  // Closed form (qb may be 2^31 - 1 with no pattern at all): at most qb * kb < 2^62.
  const int64_t per_pattern = gating_pattern_keep(o, qb, kb, gating_causal_offset(o, seq_q, seq_k));
  int64_t nnzb = 0;
  if (__builtin_mul_overflow(per_pattern, patterns, &nnzb) || nnzb > INT32_MAX)
    return make_result(Status::InvalidArgument, "gating: the mask's %lld * %lld blocks do not fit int32",
                       (long long)per_pattern, (long long)patterns);
  g->batch = batch;
  g->heads = heads;
  g->seq_q = seq_q;
  g->seq_k = seq_k;
  g->options = o;
  g->q_blocks = qb;
  g->k_blocks = kb;
  g->nnzb = nnzb;
  return Result{};
}

// The outputs of a gating whose inputs passed (`scores`: the caller's scores' range, empty
// when pooled: then Q and K are the inputs), then the table's types, then the device, into g.
Result check_gating_outputs(GatingProblem* g, const ByteRange& scores, int32_t* row_ptr, int32_t* col_idx,
                            const BlockMaskView* mask, const gating_rules::Facts& facts,
                            const DeviceSource& devices) {
  if (row_ptr == nullptr || (g->nnzb > 0 && col_idx == nullptr))
    return make_result(Status::InvalidArgument, "gating: row_ptr or col_idx is null");
  if (reinterpret_cast<uintptr_t>(row_ptr) % alignof(int32_t) != 0 ||
      reinterpret_cast<uintptr_t>(col_idx) % alignof(int32_t) != 0)
    return make_result(Status::InvalidArgument, "gating: row_ptr or col_idx is not 4-byte aligned");
  if (mask == nullptr) return make_result(Status::InvalidArgument, "gating: mask (the output view) is null");
  // The outputs may not overlap each other nor an input (batch * heads * q_blocks + 1 < 2^31
  // and nnzb < 2^31 entries: gating_dims).
  {
    const ByteRange rows = elements(row_ptr, g->batch * g->heads * g->q_blocks + 1, 4);
    const ByteRange cols = elements(col_idx, g->nnzb, 4);
    const ByteRange inputs[] = {g->pooled ? heads_bytes(g->q) : ByteRange{},
                                g->pooled ? heads_bytes(g->k) : ByteRange{}, scores};
    const char* const names[] = {"Q", "K", "scores"};
    const ByteRange row_inputs[] = {cols, inputs[0], inputs[1], inputs[2]};
    const char* const row_names[] = {"col_idx", "Q", "K", "scores"};
    Result r = check_disjoint("gating: row_ptr", rows, row_inputs, row_names);
    if (r.ok()) r = check_disjoint("gating: col_idx", cols, inputs, names);
    if (!r.ok()) return r;
  }
  g->row_ptr = row_ptr;
  g->col_idx = col_idx;
  Result r = gating_rules::types(facts);
  if (!r.ok()) return r;
  return devices.resolve(&g->device);
}

// A validated gating: selected and launched, then the output view written.
Result run_gating(const GatingProblem& g, BlockMaskView* mask, cudaStream_t stream) {
  Result r = select_and_launch(g, stream);
  if (!r.ok()) return r;
  mask->block_q = g.options.block_q;
  mask->block_k = g.options.block_k;
  mask->q_blocks = g.q_blocks;
  mask->k_blocks = g.k_blocks;
  mask->patterns = g.batch * g.heads;
  mask->batch = g.batch;
  mask->heads = g.heads;
  mask->nnzb = g.nnzb;
  mask->row_ptr = g.row_ptr;
  mask->col_idx = g.col_idx;
  return Result{};
}

}  // namespace

Result validate_block_topk(const HeadsView& q, const HeadsView& k, const TopkGatingOptions& options, int32_t* row_ptr,
                           int32_t* col_idx, const BlockMaskView* mask, const DeviceSource& devices,
                           GatingProblem* g) {
  gating_rules::Facts facts;
  Result r = gating_dims(q.batch, q.heads, q.seq, k.seq, options, &q, &k, g, &facts);
  if (!r.ok()) return r;
  g->pooled = true;
  g->q = q;
  g->k = k;
  return check_gating_outputs(g, ByteRange{}, row_ptr, col_idx, mask, facts, devices);
}

Result validate_block_topk_scores(const float* scores, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k,
                                  const TopkGatingOptions& options, int32_t* row_ptr, int32_t* col_idx,
                                  const BlockMaskView* mask, const DeviceSource& devices, GatingProblem* g) {
  gating_rules::Facts facts;
  Result r = gating_dims(batch, heads, seq_q, seq_k, options, nullptr, nullptr, g, &facts);
  if (!r.ok()) return r;
  // batch * heads * q_blocks * k_blocks floats (gating_dims bounds the first three factors'
  // product below 2^31 and k_blocks by 2^31; checked all the same).
  int64_t count = 0, bytes = 0;
  if (__builtin_mul_overflow(g->batch, g->heads, &count) || __builtin_mul_overflow(count, g->q_blocks, &count) ||
      __builtin_mul_overflow(count, g->k_blocks, &count) || __builtin_mul_overflow(count, int64_t(4), &bytes))
    return make_result(Status::InvalidArgument, "gating: batch * heads * q_blocks * k_blocks scores overflow");
  if (scores == nullptr && count > 0) return make_result(Status::InvalidArgument, "scores is null");
  if (reinterpret_cast<uintptr_t>(scores) % alignof(float) != 0)
    return make_result(Status::InvalidArgument, "scores is not 4-byte aligned");
  g->scores = scores;
  return check_gating_outputs(g, byte_range(scores, bytes), row_ptr, col_idx, mask, facts, devices);
}

SPARSEK_DEFINE_OPERATION(AttentionProblem)
SPARSEK_DEFINE_OPERATION(GatingProblem)

}  // namespace detail

Result can_implement(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o, const float* lse,
                     const BlockMaskView* mask, const AttentionOptions& options, Backend* chosen) {
  if (chosen != nullptr) *chosen = Backend::Auto;
  detail::AttentionProblem p = detail::AttentionProblem::from_rust(
      q, k, v, o, nullptr, nullptr, false, CausalAlignment::TopLeft, 1.0f, Backend::Auto, detail::DeviceInfo{});
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate(q, k, v, o, lse, mask, options, detail::DeviceSource::current(), &p);
  detail::AttentionSelection s;
  if (r.ok()) r = detail::select(p, &s);
  if (r.ok() && chosen != nullptr) *chosen = s.family->backend;
  return detail::finish(r);
}

Result attention(const HeadsView& q, const HeadsView& k, const HeadsView& v, const HeadsMutView& o, float* lse,
                 const BlockMaskView* mask, const AttentionOptions& options, cudaStream_t stream) {
  detail::AttentionProblem p = detail::AttentionProblem::from_rust(
      q, k, v, o, nullptr, nullptr, false, CausalAlignment::TopLeft, 1.0f, Backend::Auto, detail::DeviceInfo{});
  Result r = detail::pending_cuda_error();
  if (r.ok()) r = detail::validate(q, k, v, o, lse, mask, options, detail::DeviceSource::of_stream(stream), &p);
  detail::AttentionSelection s;
  if (r.ok()) r = detail::select(p, &s);
  if (r.ok() && options.check_indices && p.has_mask)
    r = detail::check_pattern(p.mask.row_ptr, p.mask.col_idx, p.mask.patterns * p.mask.q_blocks, p.mask.k_blocks,
                              p.mask.nnzb, stream, "mask");
  // The layout's arrays: key counts and the pages they reach, packed sequences' offsets
  // (attention/layout_check.hpp, which the Rust bridge runs too).
  if (r.ok() && options.check_indices) r = detail::check_layout_indices(p, stream);
  if (r.ok()) r = detail::launch(p, s, stream);
  return detail::finish(r);
}

Result block_topk_nnzb(int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k, const TopkGatingOptions& options,
                       int64_t* nnzb) {
  detail::GatingProblem g;
  detail::gating_rules::Facts facts;
  Result r = detail::gating_dims(batch, heads, seq_q, seq_k, options, nullptr, nullptr, &g, &facts);
  if (r.ok() && nnzb != nullptr) *nnzb = g.nnzb;
  return detail::finish(r);
}

Result block_topk(const HeadsView& q, const HeadsView& k, const TopkGatingOptions& options, int32_t* row_ptr,
                  int32_t* col_idx, BlockMaskView* mask, cudaStream_t stream) {
  detail::GatingProblem g;
  Result r = detail::pending_cuda_error();
  if (r.ok())
    r = detail::validate_block_topk(q, k, options, row_ptr, col_idx, mask, detail::DeviceSource::of_stream(stream),
                                    &g);
  if (r.ok()) r = detail::run_gating(g, mask, stream);
  return detail::finish(r);
}

Result block_topk_scores(const float* scores, int64_t batch, int64_t heads, int64_t seq_q, int64_t seq_k,
                         const TopkGatingOptions& options, int32_t* row_ptr, int32_t* col_idx, BlockMaskView* mask,
                         cudaStream_t stream) {
  detail::GatingProblem g;
  Result r = detail::pending_cuda_error();
  if (r.ok())
    r = detail::validate_block_topk_scores(scores, batch, heads, seq_q, seq_k, options, row_ptr, col_idx, mask,
                                           detail::DeviceSource::of_stream(stream), &g);
  if (r.ok()) r = detail::run_gating(g, mask, stream);
  return detail::finish(r);
}

}  // namespace sparsek
