// The Decode kernel: C = act(alpha * A*B + bias + beta * C) with A in BSR form and few
// columns n (decode-sized batches: y = x W^T with A = W, B = x^T, C = y^T), and the
// per-row launch that cpp/spmm/decode/a row unit (cpp/core/units.cpp) instantiates (one row per TU).
//
// Why it is built this way. The problem is memory-bound (time = A's nonzero bytes / HBM
// bandwidth; B and C are small and stay in L2), so everything serves one goal: every SM
// streams A with enough bytes in flight and little else in the way.
//
//  * Work split. A CTA covers TM rows of one block-row (TM = bm, or the largest multiple of
//    16 dividing bm that is <= tm_max: then bm/TM "slices" share the block-row) and all n
//    columns, so it reads B once per block. The nonzero blocks of a block-row are split
//    over a thread-block cluster of S CTAs (S = 1, 2, 4, 8); rank q takes the contiguous
//    blocks [q*len/S, (q+1)*len/S) (within one block of each other; contiguous, so with
//    TM = bm a rank's A is one contiguous range of memory).
//    S (choose_split) is the largest of 2, 4, 8 with at most one rank per block on average
//    whose clusters can all be resident at once (cudaOccupancyMaxActiveClusters: a second
//    wave of clusters would stream after the first has ended); measured on the H100 for
//    the issue's shapes that is also the fastest S. E.g. 4096 x 4096, 128 x 128 blocks,
//    density 1/2 (32 block-rows): S = 4, 128 CTAs; 14336 x 4096: S = 2, 224 CTAs. sm_80
//    images (no clusters): S = 1, correct, fewer SMs busy. SPARSEK_DECODE_SPLIT=1|2|4|8
//    (read once) forces S for measurements.
//
//  * Ring. A rank's work is a sequence of "parts" (TM rows x KC columns of one block, KC =
//    64, 32 or 16 dividing bk, so any bk multiple of 16 works); a ring stage holds NB
//    parts (about 16 KiB of A whatever bm and bk) and their B (KC k x n_max columns). The
//    stages - 1 stages in flight keep 48 KiB of A per CTA in flight against Little's law's
//    ~24 KiB per SM (3.1 TB/s * ~1 us / 132 SMs).
//    sm_90: one thread issues each part as one 2-D TMA box (cp.async.bulk.tensor, L2
//    evict-first for A, evict-last for B) completing on the stage's mbarrier. Measured:
//    16-byte cp.async issue (LDGSTS) capped a CTA near 16 KiB per us, and 1-D bulk copies
//    of single rows were no faster (~128 small requests per stage); the TMA box needs one
//    instruction per part. The prologue starts A and B boxes right after row_ptr (B from
//    a second thread, reading its block columns itself) and prefetches the descriptors.
//    sm_80 (and sm_90 when a tensor map cannot be made: int32 tensor coordinates): every
//    thread copies 16-byte chunks with cp.async into the same layout, one commit group
//    per stage.
//    Shared-memory rows are KC elements, swizzled exactly like the TMA's 128/64/32-byte
//    swizzle (16-byte chunk c of row r at c ^ f(r)), which makes every 8-row ldmatrix
//    phase conflict-free with no padding.
//
//  * Launch. sm_90 images launch with programmatic dependent launch: barrier set-up and the
//    descriptor prefetch overlap the previous kernel's tail, and griddepcontrol.wait comes
//    before the first global read (row_ptr), so the kernel never sees a predecessor's
//    memory early; once its A stream is done, the next kernel may launch and start its own
//    prologue beside this one's reduction and epilogue.
//
//  * B. Column-major B whose columns are 16-byte aligned (x row-major: the usual layout;
//    b_vec) is copied like A (its tensor map's rows past n arrive as zeros). Any other B
//    (row-major, odd ld, unaligned) is loaded element-wise with plain loads (never past n
//    columns or k rows) one stage ahead into the ring: correct for every layout and ld,
//    slower (its L2 latency is exposed once per stage). Columns past n are zeros.
//
//  * Tensor cores for every n: mma.sync m16n8k16 (fp32 accumulate, f16 or bf16) with
//    ldmatrix; n < 8 (and n not a multiple of 8) runs the same path with B zero-padded to
//    the row's n_max (not a CUDA-core path): at n = 1 the padded work is ~25 TFLOPS at
//    full HBM bandwidth, far below the tensor cores' rate, and one ldmatrix + one mma per
//    16 x 16 piece of A costs fewer issue slots than a CUDA-core dot product.
//    Warps: mw along m (up to gm_max 16-row groups each) x kw along k (warp (m, k) takes
//    the k16-slabs f == k (mod kw) of every stage), so all warps work when TM is small; a
//    warp loads its A fragments once per slab and streams B fragment pairs across them.
//
//  * Deterministic reduction (bitwise identical run to run; no atomics):
//      1. in a warp: stage by stage, its slabs in increasing order, mma by mma;
//      2. in a CTA: the kw partials go to an fp32 tile in shared memory in k-warp order
//         0, 1, ..., kw-1 (one round and barrier each);
//      3. in a cluster: rank q owns rows [q*TM/S, (q+1)*TM/S) of the tile; every rank
//         pushes those rows of its tile into slot `rank` of rank q's receive buffer with
//         distributed-shared-memory stores (no round trip), and after a cluster barrier
//         rank q sums its S slots in rank order 0, 1, ..., S-1 from its own memory.
//    The order depends only on the problem, the row and S (S depends on the device's SM
//    count and the kernel's occupancy), never on scheduling. Results for different S
//    (another device, SPARSEK_DECODE_SPLIT, another row) may differ in the last bits; on
//    one device and build they are identical run to run.
//
//  * Epilogue in fp32: C = act(alpha*acc + bias[row] + beta*C_old) (C read only when
//    beta != 0), rounded to nearest into f16, bf16 or f32; C element-wise with any ld and
//    layout, consecutive threads on consecutive addresses; the activation and output type
//    are template arguments (no branch per element).
//
//  * FP8 weights (W8A16, the rows with fp8_a, issue 27): A in e4m3 or e5m2 (1 byte), B f16
//    or bf16 (the mma's type), C f16, bf16 or f32 with a bias of C's type. Everything above
//    holds with these differences:
//    - A's shared-memory rows are KC bytes, unswizzled (the TMA map is UINT8, box KC bytes x
//      TM rows, no swizzle; cp.async the same layout), KC = 128 where bk allows: measured on
//      the H100 (fp8_check --time), a CTA's TMA stream ran at a rate per box row, not per
//      byte (128 x 64-byte rows took as long as 128 x 128-byte rows of f16: E_hbm 0.40 at
//      14336 x 4096, 22.0 us against f16's 25.8 us; with 128-byte rows 0.51, 17.4 us), so
//      FP8 rows are 128 bytes where they can be (a 128 x 128 block is then one 16 KiB box).
//      A stage still carries up to 16 KiB of A, i.e. twice the elements. B's layout
//      is the 16-bit one; a part of KC = 128 keeps its B as two sub-tiles of 64 k (two TMA
//      boxes), each like a KC = 64 part's, and is computed as two halves of 64 k.
//    - No ldmatrix for A. The dot product over k is order-free, so each k16-slab may use
//      any permutation of its k as long as A's and B's fragments use the same one: lane
//      (g = lane/4, t = lane%4) reads 4*KC'/16 consecutive bytes of rows g and g+8 (KC' =
//      min(KC, 64), k = t * KC'/4 .. of each 64-k half; one 16-byte load per row and half
//      at KC >= 64) and takes bytes 4s .. 4s+3 as slab s's logical k {2t, 2t+1, 2t+8,
//      2t+9}; B's fragment is then the 4 consecutive halves of column g at the same k (one
//      32-byte read of B covers 64 k). At KC <= 64 a phase's lanes read whole consecutive
//      rows (128 contiguous bytes): conflict-free without a swizzle; at KC = 128 a half's
//      reads of rows g and g+1 share banks (2-way; A reads are few beside B's). B's reads
//      are conflict-free under its 128/64/32-byte swizzle.
//    - Dequantized in registers: cvt.rn.f16x2.e4m3x2 / e5m2x2 (sm_89+; family.cu refuses
//      FP8 on older devices and images), for bf16 B then f16 -> f32 -> bf16 (exact: e4m3
//      and e5m2 values are f16 and bf16 values).
//    - Scales in f32, exactly: a warp's unit is one part (KC columns of one block, so one
//      scale); the slabs of each 64-k half (at most 4) are multiplied into a zeroed fragment
//      d, then acc = fma(scale, d, acc) (per-block scales, from shared memory: read with
//      the block columns in the prologue; 1 otherwise). One fold per 64 k per n8 group keeps
//      the scale out of the 16-bit weights (never rounded into them) at 4 FMAs per 4 mma. A
//      per-tensor scale multiplies alpha in the epilogue. k-warps split a stage's parts (not
//      slabs).
//
// The rows (tile configurations) are in configs.hpp; the family (supports, fits, the
// dispatch over rows) in family.cu, which sees only launch.hpp.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>  // CUtensorMap (the driver is reached through the runtime's entry point)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "core/dtype.hpp"
#include "spmm/decode/configs.hpp"
#include "spmm/decode/launch.hpp"
#include "core/activation.cuh"
#include "spmm/problem.hpp"

namespace sparsek::detail {
namespace spmm_decode {

// Everything derived from a table row.
template <int kRow>
struct Traits {
  static constexpr DecodeVariant cfg = kDecodeVariants[kRow];
  static constexpr bool kFp8 = cfg.fp8_a;  // W8A16
  static constexpr int kNT = cfg.n_max, kNG = kNT / 8;
  static constexpr int kWarps = cfg.warps, kThreads = 32 * kWarps;
  static constexpr int kGM = cfg.gm_max;
  static constexpr int kStages = cfg.stages;
  static constexpr int kMinCtas = cfg.min_ctas;
  static constexpr int kSlotBytes = decode_slot_bytes(cfg);
  static constexpr int kSmemBytes = decode_smem_bytes(cfg);
  static constexpr int kLdr = decode_tile_ld(cfg);             // floats per tile row
  static constexpr int kTileFloats = decode_tile_floats(cfg);  // the partial tile; the receive buffer follows
  static_assert(kNG == 1 || kNG % 2 == 0, "B fragments are loaded in pairs of n8 groups");
  static_assert(kSlotBytes % 128 == 0, "ring slots keep 128-byte alignment");
};

// Everything the kernel needs, by value.
struct DecodeArgs {
  const int32_t* row_ptr;
  const int32_t* col_idx;
  const void* a_values;
  const void* b;
  void* c;
  const void* bias;  // null: no bias (FP8 A: of C's type, else of the input type)
  const float* a_scales;  // FP8 A: its scales (null with none)
  int64_t ldb, ldc;
  int32_t n;
  int32_t bm, bk;
  int32_t tm, slices, kc, kpb, nb, mw, kw;  // DecodePlan
  int32_t cluster;                          // S: CTAs per cluster (1 on sm_80 images)
  float alpha, beta;
  int32_t activation;  // Activation value
  bool b_col;          // B is column-major
  bool b_vec;          // column-major B with 16-byte aligned columns: B copied like A
  bool c_col;          // C is column-major
  bool c_f32;          // C is f32 (else the input type)
  int32_t a_scale_kind;  // FP8 A: ScaleKind value (None, PerTensor, PerBlock)
  int32_t c_type;        // FP8 A: C's type, 0 f16, 1 bf16, 2 f32
  bool tma;            // sm_90: A (and B when b_vec) through the tensor maps; else cp.async
  bool gated;          // gated (GLU): block-rows are (gate, up) pairs, C has m/2 rows
};

// ---- PTX wrappers ----

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A policy that marks A's lines evict-first in L2: A is read once, B and C stay.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// 16-byte cp.async (sm_80+), one commit group per stage.
__device__ __forceinline__ void cp_async_a(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_b(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// B is re-read by every CTA of the layer: keep it (evict-last).
__device__ __forceinline__ uint64_t evict_last_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// sm_90: 2-D tensor copies (TMA: one instruction per TM x KC box) completing on an mbarrier.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int x, int y, uint32_t bar,
                                            uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar), "l"(policy)
      : "memory");
}
#endif

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(addr));
}

// d += a (16x16, row) * b (16x8, col), fp32 accumulate.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// ---- Element conversions ----

__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }

template <typename OutT>
__device__ __forceinline__ OutT from_f32(float v);
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}

// Two FP8 values (the low byte first) as the mma's 16-bit pair: exact (e4m3 and e5m2 values
// are f16 and bf16 values). sm_89+ converts in one instruction (cvt.rn.f16x2.e4m3x2);
// cuda_fp8.h emulates it on older images, which family.cu never runs.
template <typename TA, typename TB>
__device__ __forceinline__ uint32_t fp8x2_to(uint32_t two) {
  constexpr __nv_fp8_interpretation_t kind = std::is_same_v<TA, __nv_fp8_e5m2> ? __NV_E5M2 : __NV_E4M3;
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), kind);
  if constexpr (std::is_same_v<TB, __half>) {
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(h));
    const __nv_bfloat162 b = __float22bfloat162_rn(f);
    return static_cast<uint32_t>(__bfloat16_as_ushort(b.x)) | (static_cast<uint32_t>(__bfloat16_as_ushort(b.y)) << 16);
  }
}

template <int kAct>
__device__ __forceinline__ float activate(float x) {
  return detail::activate(x, kAct);  // kAct is a constant: the switch folds away
}

// The epilogue over `rows` x n reduced values (res: row-major, `ldr` floats per row; its
// row 0 is row grow0 of C and row bias0 of A): C = act(alpha * acc + bias[row] + beta * C)
// in fp32, rounded to nearest. Gated (res_u: the up half's rows, like res; bias0 + bm: their
// rows of A): C = act(alpha * gate + bias[gate row]) * (alpha * up + bias[up row]) (beta = 0).
// Elements go in C's memory order, consecutive threads on consecutive addresses; no branch
// per element but the uniform gated one (the activation and output type are template
// arguments). BiasT: the bias's type.
template <int kAct, typename BiasT, typename OutT, int kThreads>
__device__ __forceinline__ void write_rows(const DecodeArgs& args, float alpha, const float* res, const float* res_u,
                                           int ldr, int rows, int n, int64_t grow0, int64_t bias0) {
  OutT* c = static_cast<OutT*>(args.c);
  const BiasT* bias = static_cast<const BiasT*>(args.bias);
  const bool has_bias = bias != nullptr, read_c = args.beta != 0.0f;
  const float beta = args.beta;
  const bool c_col = args.c_col;
  const int64_t ldc = args.ldc;
  const int inner_len = c_col ? rows : n;  // C's contiguous dimension
  const int E = rows * n;
  const int d_outer = kThreads / inner_len, d_inner = kThreads - d_outer * inner_len;
  int e = threadIdx.x;
  int outer = e / inner_len, inner = e - outer * inner_len;
#pragma unroll 4
  for (; e < E; e += kThreads) {
    const int r = c_col ? inner : outer, col = c_col ? outer : inner;
    const int64_t row = grow0 + r;
    OutT* dst = c + (c_col ? col * ldc + row : row * ldc + col);
    float v = alpha * res[r * ldr + col];
    if (has_bias) v += to_f32(bias[bias0 + r]);
    if (res_u != nullptr) {
      float u = alpha * res_u[r * ldr + col];
      if (has_bias) u += to_f32(bias[bias0 + args.bm + r]);
      v = activate<kAct>(v) * u;
    } else {
      if (read_c) v += beta * to_f32(*dst);
      v = activate<kAct>(v);
    }
    *dst = from_f32<OutT>(v);
    outer += d_outer, inner += d_inner;
    if (inner >= inner_len) inner -= inner_len, ++outer;
  }
}

// The rows a rank writes: res (and res_u, gated) of `rows` x n, C's rows grow0 .., A's
// rows bias0 .. (the bias's index).
struct RowsOut {
  const float* res;
  const float* res_u;  // gated: the up half; else null
  int ldr, rows, n;
  int64_t grow0, bias0;
};

template <typename T, int kThreads>
__device__ __forceinline__ void write_rows_any(const DecodeArgs& args, const RowsOut& o) {
  const float a = args.alpha;
#define SPARSEK_ROWS(ACT, OUT) \
  write_rows<ACT, T, OUT, kThreads>(args, a, o.res, o.res_u, o.ldr, o.rows, o.n, o.grow0, o.bias0)
  switch (args.activation * 2 + (args.c_f32 ? 1 : 0)) {
    case 0: SPARSEK_ROWS(0, T); break;
    case 1: SPARSEK_ROWS(0, float); break;
    case 2: SPARSEK_ROWS(1, T); break;
    case 3: SPARSEK_ROWS(1, float); break;
    case 4: SPARSEK_ROWS(2, T); break;
    case 5: SPARSEK_ROWS(2, float); break;
    case 6: SPARSEK_ROWS(3, T); break;
    default: SPARSEK_ROWS(3, float); break;
  }
#undef SPARSEK_ROWS
}

// FP8 A: C (and the bias) f16, bf16 or f32 whatever B's type; a per-tensor scale folds into
// alpha (per-block scales were applied in the main loop).
template <int kAct, int kThreads>
__device__ __forceinline__ void write_rows_fp8(const DecodeArgs& args, float alpha, const RowsOut& o) {
#define SPARSEK_ROWS(T) write_rows<kAct, T, T, kThreads>(args, alpha, o.res, o.res_u, o.ldr, o.rows, o.n, o.grow0, o.bias0)
  switch (args.c_type) {
    case 0: SPARSEK_ROWS(__half); break;
    case 1: SPARSEK_ROWS(__nv_bfloat16); break;
    default: SPARSEK_ROWS(float); break;
  }
#undef SPARSEK_ROWS
}
template <int kThreads>
__device__ __forceinline__ void write_rows_fp8_any(const DecodeArgs& args, const RowsOut& o) {
  float alpha = args.alpha;
  if (args.a_scale_kind == static_cast<int32_t>(ScaleKind::PerTensor)) alpha *= __ldg(args.a_scales);
  switch (args.activation) {
    case 0: write_rows_fp8<0, kThreads>(args, alpha, o); break;
    case 1: write_rows_fp8<1, kThreads>(args, alpha, o); break;
    case 2: write_rows_fp8<2, kThreads>(args, alpha, o); break;
    default: write_rows_fp8<3, kThreads>(args, alpha, o); break;
  }
}

// ---- The kernel ----
// Grid: x = (block-row * slices + slice) * S + rank; clusters of S consecutive CTAs (one
// block-row slice each). Block: 32 * warps threads. TA: A's element type; T: B's and the
// mma's (16-bit rows: TA = T; FP8 rows: TA = __nv_fp8_e4m3 / __nv_fp8_e5m2).
template <int kRow, typename TA, typename T>
__global__ void __launch_bounds__(Traits<kRow>::kThreads, Traits<kRow>::kMinCtas)
    decode_kernel(const DecodeArgs args, const __grid_constant__ CUtensorMap map_a,
                  const __grid_constant__ CUtensorMap map_b) {
  using Tr = Traits<kRow>;
  constexpr int kNT = Tr::kNT, kNG = Tr::kNG, kThreads = Tr::kThreads, kGM = Tr::kGM;
  constexpr int kStages = Tr::kStages, kSlot = Tr::kSlotBytes;
  constexpr bool kFp8 = Tr::kFp8;
  static_assert(kFp8 == (sizeof(TA) == 1) && (kFp8 || std::is_same_v<TA, T>), "FP8 rows take FP8 A, others A = B");

  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int s_cols[kDecodeColCap];  // the CTA's block columns (the first kDecodeColCap)
  // FP8 A with per-block scales: the CTA's blocks' scales (the first kDecodeColCap), read in
  // the prologue with the block columns (a global load per part would stall every warp).
  __shared__ float s_scales[kFp8 ? kDecodeColCap : 1];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __shared__ __align__(8) uint64_t s_full[kStages];  // per slot: its stage's bytes have landed
  const bool tma = args.tma;
#else
  constexpr bool tma = false;
#endif
  // The ring starts at a 1024-byte boundary (the period of the 128-byte swizzle).
  const uint32_t raw0 = smem_u32(smem_raw);
  const uint32_t smem0 = (raw0 + 1023u) & ~1023u;
  unsigned char* smem = smem_raw + (smem0 - raw0);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // ---- This CTA's work: block-row br, rows row0 .. row0+TM of its blocks, split rank ----
  // Gated: the cluster's tile row is a (gate, up) pair of block-rows; ranks [0, S/2) split
  // the gate block-row 2*pair, ranks [S/2, S) the up block-row 2*pair + 1 (S >= 2).
  const int S = args.cluster;
  const int rank = static_cast<int>(blockIdx.x % static_cast<unsigned>(S));  // = cluster rank (1-D clusters)
  const unsigned unit = blockIdx.x / static_cast<unsigned>(S);
  const int64_t tile_row = unit / static_cast<unsigned>(args.slices);  // block-row, or the pair
  const int slice = static_cast<int>(unit % static_cast<unsigned>(args.slices));
  const bool gated = args.gated;
  const int SR = gated ? S / 2 : S;                          // ranks per block-row
  const int row_rank = gated ? rank % SR : rank;             // this rank's share of its block-row
  const int64_t br = gated ? 2 * tile_row + rank / SR : tile_row;
  const int TM = args.tm, KC = args.kc, KPB = args.kpb, NB = args.nb, bk = args.bk;
  const int RS = 2 * KC;                                   // bytes of a part's B column
  const int RSA = kFp8 ? KC : RS;                          // ... of a part's A row (FP8: KC bytes, unswizzled)
  const int kc16_shift = KC == 128 ? 3 : KC == 64 ? 2 : KC == 32 ? 1 : 0;  // KC/16 = 8 (FP8 only), 4, 2, 1
  const int CPR_SHIFT = kc16_shift + 1;                    // 16-byte chunks per B column: KC/8
  // B's shared-memory rows are at most 64 elements (128 bytes, the widest TMA swizzle): an
  // FP8 part of KC = 128 keeps its B as two sub-tiles of kNT rows x 64 k (sub-tile h: k0 +
  // 64h ..), each laid out like a KC = 64 part's B. RSB: bytes per B row.
  const int b_kc16_shift = kc16_shift < 2 ? kc16_shift : 2;
  const int BSUB = 1 << (kc16_shift - b_kc16_shift), RSB = RS / BSUB;
  const int CPR_B_SHIFT = b_kc16_shift + 1;  // 16-byte chunks per B row
  // The swizzle (the TMA's 128-, 64- or 32-byte swizzle for rows of 128, 64, 32 bytes):
  // 16-byte chunk c of row r is stored at chunk c ^ ((r >> sw_shift) & sw_mask).
  const int sw_shift = 2 - b_kc16_shift, sw_mask = (1 << (b_kc16_shift + 1)) - 1;
  auto swz = [&](int r, int c) { return c ^ ((r >> sw_shift) & sw_mask); };
  const int row0 = slice * TM;
  const int RG = TM >> 4;
  const int n = args.n;
  const bool per_block = kFp8 && args.a_scale_kind == static_cast<int32_t>(ScaleKind::PerBlock);

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (tma && tid == 0) {
    // The tensor maps' descriptors load while row_ptr does (a first TMA on a map otherwise
    // waits ~1 us for it).
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_a)) : "memory");
    if (args.b_vec) asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map_b)) : "memory");
    for (int st = 0; st < kStages; ++st) mbar_init(smem_u32(&s_full[st]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the barriers exist before any copy signals them
  // Programmatic dependent launch (launch_typed): the prologue above (barriers, descriptor
  // prefetch) may overlap the previous kernel of the stream; nothing in global memory is
  // read before that kernel has completed and its writes are visible.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif

  // Rank q takes the contiguous blocks [lo, hi) of the block-row (balanced within one).
  const int row_begin = __ldg(args.row_ptr + br);
  const int row_len = __ldg(args.row_ptr + br + 1) - row_begin;
  const int lo = static_cast<int>(static_cast<int64_t>(row_len) * row_rank / SR);
  const int hi = static_cast<int>(static_cast<int64_t>(row_len) * (row_rank + 1) / SR);
  const int nblk = hi - lo;
  const int jb = row_begin + lo;        // this rank's t-th block is jb + t
  const int parts = nblk * KPB;         // part u: block u / KPB, columns (u % KPB) * KC ..
  const int nst = (parts + NB - 1) / NB;  // ring stages: stage q holds parts q*NB .. q*NB + NB-1
  const uint32_t b_off = static_cast<uint32_t>(NB * TM * RSA);  // B's region in a slot
  // Parts of stage q that exist.
  auto valid_parts = [&](int q) { return max(0, min(NB, parts - q * NB)); };

  auto col_of = [&](int t) { return t < kDecodeColCap ? s_cols[t] : __ldg(args.col_idx + jb + t); };

  const TA* a_vals = static_cast<const TA*>(args.a_values);
  const T* b_vals = static_cast<const T*>(args.b);
  const int64_t ldb = args.ldb;
  const uint64_t policy = evict_first_policy();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint64_t policy_b = evict_last_policy();
#endif
  // The first element of part u's row r in A (block jb + u/KPB, row row0 + r, column k0).
  auto a_row = [&](int u, int r) {
    const int t = KPB == 1 ? u : u / KPB;
    const int k0 = (u - t * KPB) * KC;
    return a_vals + (static_cast<int64_t>(jb + t) * args.bm + row0 + r) * bk + k0;
  };
  // The first k row of B that part u multiplies: col_idx * bk + k0.
  auto b_krow = [&](int u) {
    const int t = KPB == 1 ? u : u / KPB;
    const int k0 = (u - t * KPB) * KC;
    return static_cast<int64_t>(col_of(t)) * bk + k0;
  };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool b_tma = tma && args.b_vec;  // B through its tensor map too
  // Stage q on the TMA path (thread 0): arm the slot's barrier with the stage's bytes, then
  // one box per part of A (TM rows x KC columns) and, with b_tma, of B (KC k x n_max
  // columns; the columns past n are outside B's tensor and arrive as zeros). do_a /
  // do_b split the two for the prologue (do_a arms the barrier for both; a box may land
  // before the arm: the barrier's transaction count goes below zero until then, and the
  // phase cannot complete before the arm's arrival). `cols` reads the block columns from
  // shared memory (s_cols) or, before they are there, from global memory.
  auto issue_tma = [&](int q, bool do_a, bool do_b, bool cols = true) {
    const int vp = valid_parts(q);
    if (vp == 0) return;
    const uint32_t slot = smem0 + static_cast<uint32_t>((q % kStages) * kSlot);
    const uint32_t bar = smem_u32(&s_full[q % kStages]);
    if (do_a) mbar_arrive_expect_tx(bar, static_cast<uint32_t>(vp * (TM * RSA + (b_tma ? kNT * RS : 0))));
    for (int b = 0; b < vp; ++b) {
      const int u = q * NB + b;
      const int t = KPB == 1 ? u : u / KPB;
      const int k0 = (u - t * KPB) * KC;
      if (do_a) tma_load_2d(slot + b * TM * RSA, &map_a, k0, (jb + t) * args.bm + row0, bar, policy);
      if (do_b && b_tma) {
        const int col = cols ? col_of(t) : __ldg(args.col_idx + jb + t);
        for (int h = 0; h < BSUB; ++h)
          tma_load_2d(slot + b_off + (b * BSUB + h) * kNT * RSB, &map_b, col * bk + k0 + h * 64, 0, bar, policy_b);
      }
    }
  };
#endif
  // Stage q on the cp.async path (every thread): 16-byte chunks of A's rows and, when b_vec,
  // of B's columns, in the same layout as the TMA's (swizzled; FP8 A: plain).
  auto issue_cp = [&](int q) {
    const int vp = valid_parts(q);
    if (vp == 0) return;
    const uint32_t slot = smem0 + static_cast<uint32_t>((q % kStages) * kSlot);
    const int a_shift = kFp8 ? CPR_SHIFT - 1 : CPR_SHIFT;  // log2 of A's 16-byte chunks per row
    for (int c = tid; c < (vp * TM) << a_shift; c += kThreads) {
      const int p = c >> a_shift, w = c & ((1 << a_shift) - 1);
      const int b = p / TM, r = p - b * TM;
      const unsigned char* src = reinterpret_cast<const unsigned char*>(a_row(q * NB + b, r)) + w * 16;
      cp_async_a(slot + p * RSA + (kFp8 ? w : swz(r, w)) * 16, src, policy);
    }
    if (args.b_vec) {
      for (int c = tid; c < (vp * n) << CPR_SHIFT; c += kThreads) {
        const int p = c >> CPR_SHIFT, w = c & ((1 << CPR_SHIFT) - 1);
        const int b = p / n, col = p - b * n;
        const int h = w >> CPR_B_SHIFT, wb = w & ((1 << CPR_B_SHIFT) - 1);  // sub-tile, its chunk
        cp_async_b(slot + b_off + ((b * BSUB + h) * kNT + col) * RSB + swz(col, wb) * 16,
                   b_vals + col * ldb + b_krow(q * NB + b) + w * 8);
      }
    }
  };
  // Issues stage q on this CTA's path (one commit group per stage either way).
  auto issue = [&](int q) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (tma) {
      if (tid == 0) issue_tma(q, true, true);
    } else
#endif
    {
      issue_cp(q);
    }
    cp_async_commit();
  };

  // Loads stage q's B element by element (every B that is not b_vec: any layout and ld)
  // and stores it to the stage's slot. Reads only elements of B's view.
  auto store_b = [&](int q) {
    const int vp = valid_parts(q);
    unsigned char* slot = smem + (q % kStages) * kSlot + b_off;
    const unsigned short* braw = reinterpret_cast<const unsigned short*>(b_vals);
    const int64_t stride = args.b_col ? 1 : ldb;  // between consecutive k
    for (int c = tid; c < (vp * n) << CPR_SHIFT; c += kThreads) {
      const int p = c >> CPR_SHIFT, w = c & ((1 << CPR_SHIFT) - 1);
      const int b = p / n, col = p - b * n;
      const int64_t krow = b_krow(q * NB + b) + w * 8;  // the first of 8 k rows
      const unsigned short* src = braw + (args.b_col ? col * ldb + krow : krow * ldb + col);
      uint32_t x[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t lo16 = __ldg(src + (2 * e) * stride), hi16 = __ldg(src + (2 * e + 1) * stride);
        x[e] = lo16 | (hi16 << 16);
      }
      const int h = w >> CPR_B_SHIFT, wb = w & ((1 << CPR_B_SHIFT) - 1);  // sub-tile, its chunk
      *reinterpret_cast<uint4*>(slot + ((b * BSUB + h) * kNT + col) * RSB + swz(col, wb) * 16) =
          make_uint4(x[0], x[1], x[2], x[3]);
    }
  };

  // ---- Warp roles and fragment addresses ----
  const int MW = args.mw, KW = args.kw;
  const int mw = warp % MW, kw = warp / MW;
  const bool active = kw < KW;
  // A fragment (16 rows x 16 k): lane -> matrix q = lane/8 (rows +8 for odd q, k half q/2),
  // row lane%8 of it. Every fragment starts on a row that is a multiple of 16, so the
  // swizzle of a lane's row depends on the lane only: chunk (2*kk16 + half) is stored at
  // 2*kk16 ^ (half ^ key), key = the row's swizzle.
  const int a_r = ((lane >> 3) & 1) * 8 + (lane & 7);
  const uint32_t a_lane = static_cast<uint32_t>(a_r * RS);
  const int a_key = ((lane >> 4) & 1) ^ ((a_r >> sw_shift) & sw_mask);
  // B fragment pair (two n8 groups x 16 k): matrix q: group q/2, k half q%2 (x2: lanes 0-15,
  // one group).
  const int lb = kNG == 1 ? (lane & 15) : lane;
  const int b_r = ((lb >> 4) & 1) * 8 + (lb & 7);
  const uint32_t b_lane = static_cast<uint32_t>(b_r * RS);
  const int b_key = ((lb >> 3) & 1) ^ ((b_r >> sw_shift) & sw_mask);

  float acc[kGM][kNG][4];
#pragma unroll
  for (int g = 0; g < kGM; ++g)
#pragma unroll
    for (int j = 0; j < kNG; ++j)
#pragma unroll
      for (int x = 0; x < 4; ++x) acc[g][j][x] = 0.0f;

  // FP8 A: stage i's parts b == kw (mod KW) on slot slot_p (see the file comment). Lane (g8,
  // t4) = (lane / 4, lane % 4) reads 4 * kS bytes of rows g8 and g8 + 8 of its row groups at
  // byte 4 * kS * t4 and the 4 * kS halves of B's column j*8 + g8 at the same k; k16-slab s
  // is bytes (halves) 4s .. 4s+3 of those, its logical k {2 t4, 2 t4 + 1, 2 t4 + 8, 2 t4 + 9}.
  // kS = KC / 16 (at most 4): the slabs of a part (of each half at KC = 128).
  const int g8 = lane >> 2, t4 = lane & 3;
  auto fp8_parts = [&](auto slabs, int i, int vp, const unsigned char* slot_p) {
    // KC = 128: the part is two halves of 64 k (A bytes 64h .., B sub-tile h), each read as
    // a KC = 64 part, both folded with the part's scale.
    constexpr int kHalves = decltype(slabs)::value == 8 ? 2 : 1;
    constexpr int kS = decltype(slabs)::value / kHalves;
#pragma unroll 1
    for (int b = kw; b < vp; b += KW) {
      const int u = i * NB + b;
      const int t = KPB == 1 ? u : u / KPB;
      const float scale = !per_block ? 1.0f : t < kDecodeColCap ? s_scales[t] : __ldg(args.a_scales + jb + t);
#pragma unroll 1
      for (int hh = 0; hh < kHalves; ++hh) {
        uint32_t af[kGM][kS][4];
        const unsigned char* a_p = slot_p + b * TM * RSA + g8 * RSA + 64 * hh + 4 * kS * t4;
#pragma unroll
        for (int gi = 0; gi < kGM; ++gi) {
          const int rg = mw + gi * MW;
          if (rg >= RG) continue;
          uint32_t lo[kS], hi[kS];  // rows g8 and g8 + 8: word s = slab s's 4 bytes
          const unsigned char* r_lo = a_p + rg * 16 * RSA;
          const unsigned char* r_hi = r_lo + 8 * RSA;
          if constexpr (kS == 4) {
            const uint4 x = *reinterpret_cast<const uint4*>(r_lo), y = *reinterpret_cast<const uint4*>(r_hi);
            lo[0] = x.x, lo[1] = x.y, lo[2] = x.z, lo[3] = x.w, hi[0] = y.x, hi[1] = y.y, hi[2] = y.z, hi[3] = y.w;
          } else if constexpr (kS == 2) {
            const uint2 x = *reinterpret_cast<const uint2*>(r_lo), y = *reinterpret_cast<const uint2*>(r_hi);
            lo[0] = x.x, lo[1] = x.y, hi[0] = y.x, hi[1] = y.y;
          } else {
            lo[0] = *reinterpret_cast<const uint32_t*>(r_lo), hi[0] = *reinterpret_cast<const uint32_t*>(r_hi);
          }
#pragma unroll
          for (int sl = 0; sl < kS; ++sl) {
            af[gi][sl][0] = fp8x2_to<TA, T>(lo[sl] & 0xffffu);  // row g8, logical k 2 t4, 2 t4 + 1
            af[gi][sl][1] = fp8x2_to<TA, T>(hi[sl] & 0xffffu);  // row g8 + 8
            af[gi][sl][2] = fp8x2_to<TA, T>(lo[sl] >> 16);      // row g8, logical k 2 t4 + 8, 2 t4 + 9
            af[gi][sl][3] = fp8x2_to<TA, T>(hi[sl] >> 16);
          }
        }
        const unsigned char* b_p = slot_p + b_off + (b * BSUB + hh) * kNT * RSB;
#pragma unroll
        for (int j = 0; j < kNG; ++j) {
          const int col = j * 8 + g8;
          const unsigned char* col_p = b_p + col * RSB;
          uint32_t bw[2 * kS];  // halves 4 kS t4 ..: slab s's b0, b1 = words 2s, 2s+1
          if constexpr (kS == 4) {  // chunks 2 t4 and 2 t4 + 1 of the column
            const uint4 x = *reinterpret_cast<const uint4*>(col_p + (swz(col, 2 * t4) << 4));
            const uint4 y = *reinterpret_cast<const uint4*>(col_p + (swz(col, 2 * t4 + 1) << 4));
            bw[0] = x.x, bw[1] = x.y, bw[2] = x.z, bw[3] = x.w, bw[4] = y.x, bw[5] = y.y, bw[6] = y.z, bw[7] = y.w;
          } else if constexpr (kS == 2) {  // chunk t4
            const uint4 x = *reinterpret_cast<const uint4*>(col_p + (swz(col, t4) << 4));
            bw[0] = x.x, bw[1] = x.y, bw[2] = x.z, bw[3] = x.w;
          } else {  // half of chunk t4 / 2
            const uint2 x = *reinterpret_cast<const uint2*>(col_p + (swz(col, t4 >> 1) << 4) + (t4 & 1) * 8);
            bw[0] = x.x, bw[1] = x.y;
          }
#pragma unroll
          for (int gi = 0; gi < kGM; ++gi) {
            if (mw + gi * MW >= RG) continue;
            float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // the part's product, then scaled once in f32
#pragma unroll
            for (int sl = 0; sl < kS; ++sl) mma_16816<T>(d, af[gi][sl], bw[2 * sl], bw[2 * sl + 1]);
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[gi][j][x] = fmaf(scale, d[x], acc[gi][j][x]);
          }
        }
      }
    }
  };

  // ---- Prologue: stages 0 .. stages-2 in flight ----
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A (thread 0) and B (thread 32, reading its block columns itself) start right away;
  // the other threads load the block columns meanwhile.
  if (tma && tid == 0)
    for (int q = 0; q < kStages - 1; ++q) issue_tma(q, true, false);
  if (tma && tid == 32 % kThreads)
    for (int q = 0; q < kStages - 1; ++q) issue_tma(q, false, true, false);
#endif
  // The block columns, and zeros in B's region of every slot where B is not copied by the
  // TMA (columns n .. n_max are then never written and must be zero).
  for (int t = tid; t < nblk && t < kDecodeColCap; t += kThreads) s_cols[t] = __ldg(args.col_idx + jb + t);
  if (kFp8 && per_block)
    for (int t = tid; t < nblk && t < kDecodeColCap; t += kThreads) s_scales[t] = __ldg(args.a_scales + jb + t);
  if (!(tma && args.b_vec)) {
    for (int st = 0; st < kStages; ++st) {
      unsigned char* b_slot = smem + st * kSlot + b_off;
      for (int o = tid * 16; o < NB * kNT * RS; o += kThreads * 16)
        *reinterpret_cast<uint4*>(b_slot + o) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  __syncthreads();  // block columns and zeros are visible
  if (!tma) {
#pragma unroll 1
    for (int q = 0; q < kStages - 1; ++q) issue_cp(q), cp_async_commit();
  }
  if (!args.b_vec) store_b(0);

  // ---- Main loop: one stage per iteration ----
#pragma unroll 1
  for (int i = 0; i < nst; ++i) {
    const int slot_i = i % kStages;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (tma) mbar_wait(smem_u32(&s_full[slot_i]), static_cast<uint32_t>((i / kStages) & 1));
#endif
    cp_async_wait<kStages - 2>();  // cp.async path: stage i has landed (group q = stage q)
    // Every warp is done with the slot computed last iteration, which the copies below
    // overwrite; store_b's stage i is visible.
    __syncthreads();
    issue(i + kStages - 1);  // (an empty group past the end keeps the count uniform)
    if (!args.b_vec) store_b(i + 1);

    if constexpr (kFp8) {
      // Stage i: part b goes to k-warp b % KW (one scale per part).
      if (active) {
        const unsigned char* slot_p = smem + slot_i * kSlot;
        const int vp = valid_parts(i);
        if (kc16_shift == 3) fp8_parts(std::integral_constant<int, 8>{}, i, vp, slot_p);
        else if (kc16_shift == 2) fp8_parts(std::integral_constant<int, 4>{}, i, vp, slot_p);
        else if (kc16_shift == 1) fp8_parts(std::integral_constant<int, 2>{}, i, vp, slot_p);
        else fp8_parts(std::integral_constant<int, 1>{}, i, vp, slot_p);
      }
    } else {
      // Stage i: k16-slab f = (part f / (KC/16), columns 16 * (f % (KC/16))) goes to k-warp f % KW.
      const uint32_t slot = smem0 + static_cast<uint32_t>(slot_i * kSlot);
      const int nf = valid_parts(i) << kc16_shift;
      if (active) {
#pragma unroll 2
        for (int f = kw; f < nf; f += KW) {
          const int b = f >> kc16_shift, c0 = (f & ((1 << kc16_shift) - 1)) * 2;  // part, first 16-byte chunk
          uint32_t af[kGM][4];
          const uint32_t a_s = slot + static_cast<uint32_t>(b * TM * RS + ((c0 ^ a_key) << 4)) + a_lane;
#pragma unroll
          for (int g = 0; g < kGM; ++g) {
            const int rg = mw + g * MW;
            if (rg < RG)
              ldsm_x4(a_s + static_cast<uint32_t>(rg * 16 * RS), af[g][0], af[g][1], af[g][2], af[g][3]);
          }
          const uint32_t b_s = slot + b_off + static_cast<uint32_t>(b * kNT * RS + ((c0 ^ b_key) << 4)) + b_lane;
          if constexpr (kNG == 1) {
            uint32_t b0, b1;
            ldsm_x2(b_s, b0, b1);
#pragma unroll
            for (int g = 0; g < kGM; ++g)
              if (mw + g * MW < RG) mma_16816<T>(acc[g][0], af[g], b0, b1);
          } else {
#pragma unroll
            for (int pr = 0; pr < kNG / 2; ++pr) {
              uint32_t b0, b1, b2, b3;
              ldsm_x4(b_s + static_cast<uint32_t>(pr * 16 * RS), b0, b1, b2, b3);
#pragma unroll
              for (int g = 0; g < kGM; ++g) {
                if (mw + g * MW < RG) {
                  mma_16816<T>(acc[g][2 * pr], af[g], b0, b1);
                  mma_16816<T>(acc[g][2 * pr + 1], af[g], b2, b3);
                }
              }
            }
          }
        }
      }
    }
  }

  // ---- The CTA's partial tile: k-warps summed in order 0, 1, ..., KW-1 ----
  cp_async_wait<0>();  // only empty groups can be pending
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A's stream is done: the next kernel may launch and run its prologue beside this one's
  // reduction and epilogue. (Triggered at the start instead, the next grid's waiting CTAs
  // took SM slots through the whole stream: 14336 x 4096, n = 1, 27.0 -> 30.2 us, session 21.)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // This thread is done with the ring: the receive buffer below (in the ring's memory,
  // after the tile) may be written by the other ranks once all threads have arrived.
  if (S > 1) asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
  __syncthreads();  // the ring becomes the tile
  // The tile: TM rows of n_max + 4 floats (16-byte rows), row-major whatever C's layout.
  float* tile = reinterpret_cast<float*>(smem);
  constexpr int ldr = Tr::kLdr;
#pragma unroll 1
  for (int round = 0; round < KW; ++round) {
    if (active && kw == round) {
#pragma unroll
      for (int g = 0; g < kGM; ++g) {
        const int rg = mw + g * MW;
        if (rg >= RG) continue;
#pragma unroll
        for (int j = 0; j < kNG; ++j)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int r = rg * 16 + (lane >> 2) + 8 * hh, c = j * 8 + 2 * (lane & 3);
            float2* p = reinterpret_cast<float2*>(tile + r * ldr + c);
            float2 v = make_float2(acc[g][j][2 * hh], acc[g][j][2 * hh + 1]);
            if (round > 0) {
              const float2 o = *p;
              v.x = o.x + v.x, v.y = o.y + v.y;
            }
            *p = v;
          }
      }
    }
    __syncthreads();
  }

  // ---- Cluster reduction (ranks in order 0..S-1) and the epilogue ----
  // Rank q owns rows [q*TM/S, (q+1)*TM/S) of the tile (S divides 16, so it divides TM).
  // Each rank pushes those rows of its tile into slot `rank` of rank q's receive buffer
  // (distributed shared memory stores do not wait for a reply: a linear float4 copy);
  // after a cluster barrier each rank sums its S slots in rank order, from its own shared
  // memory, and writes its rows of C. The receive buffers lie in the ring's memory, so the
  // pushes wait for a first cluster barrier (arrived at right after the main loop, waited
  // for once the tile is built).
  // Gated: C's rows are the pair's (C has m/2 rows); the bias is read at A's gate rows (and
  // bm further down for the up rows).
  const int rows_own = TM / S;
  RowsOut out{tile, nullptr, ldr, rows_own, n, tile_row * args.bm + row0 + rank * rows_own, 0};
  out.bias0 = gated ? 2 * tile_row * args.bm + row0 + rank * rows_own : out.grow0;
  if (S > 1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float* recv = tile + Tr::kTileFloats;            // S slots of rows_own * ldr floats
    const int slot4 = rows_own * ldr / 4;            // float4 per slot
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");  // every rank is past its ring
    for (int q = 0; q < S; ++q) {
      float4* dst = reinterpret_cast<float4*>(cluster.map_shared_rank(recv, q)) + rank * slot4;
      const float4* src = reinterpret_cast<const float4*>(tile) + q * slot4;
      for (int i = tid; i < slot4; i += kThreads) dst[i] = src[i];
    }
    cluster.sync();  // every slot of every rank is written (release / acquire)
    // The tile's first rows are free now: the sum (gated: the gate half's, then the up
    // half's, each over its S/2 ranks in rank order; 2 * slot4 <= the tile since S >= 2).
    float4* sum = reinterpret_cast<float4*>(tile);
    const float4* in = reinterpret_cast<const float4*>(recv);
    for (int h = 0; h < (gated ? 2 : 1); ++h) {
      const int q0 = h * SR;
      for (int i = tid; i < slot4; i += kThreads) {
        float4 v = in[q0 * slot4 + i];
        for (int q = q0 + 1; q < q0 + SR; ++q) {
          const float4 x = in[q * slot4 + i];
          v.x += x.x, v.y += x.y, v.z += x.z, v.w += x.w;
        }
        sum[h * slot4 + i] = v;
      }
    }
    if (gated) out.res_u = tile + 4 * slot4;
    __syncthreads();
#else
    __trap();  // the host launches sm_80 images with S = 1 only
#endif
  }
  if constexpr (kFp8)
    write_rows_fp8_any<kThreads>(args, out);
  else
    write_rows_any<T, kThreads>(args, out);
}

// ---------------------------------------------------------------------------------------
// Host side: one row's launch.

// Per device, per kernel: CTAs per SM at the row's shared memory, whether the image is
// sm_90 code, and how many clusters of 2, 4 and 8 CTAs can be resident at once (0: that
// size cannot run). Queried once per device.
struct DecodeLimits {
  int ctas_per_sm = 1;
  bool sm90 = false;          // the kernel's image is sm_90 code: clusters and the TMA path
  int max_clusters[4] = {};   // [log2 S] for S = 2, 4, 8 (index 0 unused)
};

inline DecodeLimits query_limits(const void* fn, int threads, int smem, const Problem& p) {
  DecodeLimits lim;
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, static_cast<size_t>(smem)) == cudaSuccess &&
      occ > 0)
    lim.ctas_per_sm = occ;
  else
    (void)cudaGetLastError();
  // Clusters need cc >= 9.0 and code compiled for it: an image from sm_80 code (an sm_80
  // cubin, or compute_80 PTX compiled at load time: ptxVersion 80) has the cluster code
  // compiled out, uses cp.async instead of the TMA, and runs with S = 1.
  cudaFuncAttributes attr{};
  if (p.device.cc_major >= 9 && cudaFuncGetAttributes(&attr, fn) == cudaSuccess && attr.binaryVersion >= 90 &&
      attr.ptxVersion >= 90) {
    lim.sm90 = true;
    for (int l = 1; l <= 3; ++l) {
      const int s = 1 << l;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(static_cast<unsigned>(s));
      cfg.blockDim = dim3(static_cast<unsigned>(threads));
      cfg.dynamicSmemBytes = static_cast<size_t>(smem);
      cudaLaunchAttribute at[1];
      at[0].id = cudaLaunchAttributeClusterDimension;
      at[0].val.clusterDim.x = static_cast<unsigned>(s);
      at[0].val.clusterDim.y = 1;
      at[0].val.clusterDim.z = 1;
      cfg.attrs = at;
      cfg.numAttrs = 1;
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg) == cudaSuccess) lim.max_clusters[l] = clusters;
      else (void)cudaGetLastError();
    }
  } else {
    (void)cudaGetLastError();
  }
  return lim;
}

// cuTensorMapEncodeTiled, through the runtime (no link against the driver library); null
// when unavailable (then the kernel uses its cp.async path).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The element types a tensor map of this family takes (A: 16-bit or FP8; B: 16-bit).
using DecodeMapDTypes = DTypeList<DType::F16, DType::BF16, DType::E4M3, DType::E5M2>;

// A 2-D tensor map over a matrix of `outer` rows of `inner` contiguous elements, `ld`
// elements apart, read in boxes of box_outer x kc with the swizzle of rows of kc 16-bit
// elements (128, 64 or 32 bytes), or unswizzled (`swizzle` false: FP8 A's rows).
inline bool make_tensor_map(CUtensorMap* map, DType t, const void* base, int64_t inner, int64_t outer, int64_t ld,
                            int kc, int box_outer, bool swizzle = true) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * static_cast<cuuint64_t>(dtype_bytes(t))};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kc), static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t unit[2] = {1, 1};
  const CUtensorMapSwizzle swizzle_mode = !swizzle   ? CU_TENSOR_MAP_SWIZZLE_NONE
                                          : kc == 64 ? CU_TENSOR_MAP_SWIZZLE_128B
                                          : kc == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                     : CU_TENSOR_MAP_SWIZZLE_32B;
  const bool known = dispatch<DecodeMapDTypes>(t, [](auto) { return true; }, [] { return false; });
  if (!known) return false;
  const CUtensorMapDataType type = dispatch<DecodeMapDTypes>(
      t, [](auto tr) { return DeviceTypeOf<decltype(tr)::kDType>::kTensorMap; },
      [] { return CU_TENSOR_MAP_DATA_TYPE_FLOAT16; });  // unreachable: refused above
  const CUresult r = encode(map, type, 2, const_cast<void*>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_mode,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// The cluster size S for `units` CTAs without a split (see the file comment): the largest S
// in {2, 4, 8}, at most the mean number of blocks per block-row, whose `units` clusters can
// all be resident at once (one wave: a later wave would stream after the first has ended);
// 1 if none. Gated (`halves` = 2): the cluster covers two block-rows with S/2 ranks each,
// and S is at least 2 whatever the waves (the halves meet in the cluster).
inline int choose_split(int64_t units, int64_t mean_blocks, const DecodeLimits& lim, int halves = 1) {
  int s = halves;
  for (int l = 1; l <= 3; ++l) {
    const int next = 1 << l;
    if (next <= s) continue;
    if (next / halves > mean_blocks || units * next > INT_MAX || units > lim.max_clusters[l]) break;
    s = next;
  }
  return s;
}

template <int kRow, typename TA, typename T>
cudaError_t launch_typed(const Problem& p, cudaStream_t stream) {
  using Tr = Traits<kRow>;
  constexpr DecodeVariant v = Tr::cfg;
  const void* fn = reinterpret_cast<const void*>(&decode_kernel<kRow, TA, T>);
  cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return e;

  // Limits, once per device and kernel (racing first calls store the same value).
  constexpr int kMaxDevices = 64;
  static DecodeLimits cache[kMaxDevices];
  static std::atomic<bool> cached[kMaxDevices] = {};
  const int dev = p.device.id;
  DecodeLimits lim;
  if (dev >= 0 && dev < kMaxDevices && cached[dev].load(std::memory_order_acquire)) {
    lim = cache[dev];
  } else {
    lim = query_limits(fn, Tr::kThreads, Tr::kSmemBytes, p);
    if (dev >= 0 && dev < kMaxDevices) {
      cache[dev] = lim;
      cached[dev].store(true, std::memory_order_release);
    }
  }

  // SPARSEK_DECODE_TM=<16|32|64|...> (a measuring knob, read once) caps the rows per CTA.
  static const int tm_cap = [] {
    const char* v = std::getenv("SPARSEK_DECODE_TM");
    return v == nullptr ? 0 : std::atoi(v) / 16 * 16;
  }();
  const DecodePlan plan = decode_plan(v, p.a.bm, p.a.bk, tm_cap);
  const int64_t block_rows = p.block_rows();
  // Gated: a cluster per (gate, up) pair of block-rows, which needs clusters (family.cu's
  // supports checked the device and image; a device where no 2-CTA cluster fits gets none).
  const int halves = p.gated ? 2 : 1;
  if (p.gated && (!lim.sm90 || lim.max_clusters[1] <= 0)) return cudaErrorNotSupported;
  const int64_t units = block_rows / halves * plan.slices;  // <= INT_MAX (family.cu's supports)
  const int64_t mean_blocks = block_rows > 0 ? p.a.nnzb / block_rows : 0;
  int S = choose_split(units, mean_blocks, lim, halves);
  // SPARSEK_DECODE_SPLIT=<1|2|4|8> (a measuring knob, read once) forces S where the device
  // and the grid allow it.
  static const int forced_split = [] {
    const char* v = std::getenv("SPARSEK_DECODE_SPLIT");
    return v == nullptr ? 0 : std::atoi(v);
  }();
  if (((forced_split == 1 && !p.gated) || (forced_split == 2 && lim.max_clusters[1] > 0) ||
       (forced_split == 4 && lim.max_clusters[2] > 0) || (forced_split == 8 && lim.max_clusters[3] > 0)) &&
      units * forced_split <= INT_MAX)
    S = forced_split;

  DecodeArgs args{};
  args.row_ptr = p.a.row_ptr;
  args.col_idx = p.a.col_idx;
  args.a_values = p.a.values;
  args.b = p.b.data;
  args.c = p.c.data;
  args.bias = p.bias;
  args.ldb = p.b.ld;
  args.ldc = p.c.ld;
  args.n = static_cast<int32_t>(p.n());  // <= n_max (fits)
  args.bm = p.a.bm;
  args.bk = p.a.bk;
  args.tm = plan.tm;
  args.slices = plan.slices;
  args.kc = plan.kc;
  args.kpb = plan.kpb;
  args.nb = plan.nb;
  args.mw = plan.mw;
  args.kw = plan.kw;
  args.cluster = S;
  args.alpha = p.alpha;
  args.beta = p.beta;
  args.activation = static_cast<int32_t>(p.activation);
  args.b_col = p.b.layout == Layout::ColMajor;
  args.b_vec = args.b_col && p.b.ld % 8 == 0 && reinterpret_cast<uintptr_t>(p.b.data) % 16 == 0;
  args.c_col = p.c.layout == Layout::ColMajor;
  args.c_f32 = p.c.dtype == DType::F32;
  args.a_scales = p.a.scales;
  args.a_scale_kind = static_cast<int32_t>(p.a.scale_kind);
  // C's type, by value (a Problem's C is f16, bf16 or f32: api.cu); anything else launches nothing.
  switch (p.c.dtype) {
    case DType::F16: args.c_type = 0; break;
    case DType::BF16: args.c_type = 1; break;
    case DType::F32: args.c_type = 2; break;
    default: return cudaErrorInvalidValue;
  }

  // sm_90 images stream A (and aligned column-major B) with the TMA; the tensor coordinates
  // are int32 (A's rows: nnzb * bm; B's rows: k). Otherwise, or if a map cannot be made,
  // the cp.async path (the kernel never reads a map it was not given).
  alignas(64) CUtensorMap map_a{};
  alignas(64) CUtensorMap map_b{};
  // FP8 A: a UINT8 map of unswizzled KC-byte rows (kernel.cuh's file comment).
  args.gated = p.gated;
  args.tma = lim.sm90 && p.a.nnzb > 0 && p.a.nnzb * p.a.bm <= INT_MAX && p.k() <= INT_MAX &&
             make_tensor_map(&map_a, p.input(), p.a.values, p.a.bk, p.a.nnzb * p.a.bm, p.a.bk, plan.kc, plan.tm,
                             !Tr::kFp8);
  // B's boxes are at most 64 k (an FP8 part of KC = 128 takes two: kernel.cuh).
  if (args.tma && args.b_vec &&
      !make_tensor_map(&map_b, p.b.dtype, p.b.data, p.k(), p.n(), p.b.ld, plan.kc < 64 ? plan.kc : 64, v.n_max))
    args.tma = false;

  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(units * S));
  cfg.blockDim = dim3(static_cast<unsigned>(Tr::kThreads));
  cfg.dynamicSmemBytes = static_cast<size_t>(Tr::kSmemBytes);
  cfg.stream = stream;
  cudaLaunchAttribute at[2];
  unsigned num_attrs = 0;
  if (S > 1) {
    at[num_attrs].id = cudaLaunchAttributeClusterDimension;
    at[num_attrs].val.clusterDim.x = static_cast<unsigned>(S);
    at[num_attrs].val.clusterDim.y = 1;
    at[num_attrs].val.clusterDim.z = 1;
    ++num_attrs;
  }
  // sm_90 images wait for the previous kernel inside the kernel (griddepcontrol.wait), so
  // its launch and prologue may overlap that kernel's tail. SPARSEK_DECODE_PDL=0 (a
  // measuring knob, read once) launches in plain stream order.
  static const bool pdl = [] {
    const char* v = std::getenv("SPARSEK_DECODE_PDL");
    return v == nullptr || std::atoi(v) != 0;
  }();
  if (lim.sm90 && pdl) {
    at[num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[num_attrs].val.programmaticStreamSerializationAllowed = 1;
    ++num_attrs;
  }
  cfg.attrs = num_attrs > 0 ? at : nullptr;
  cfg.numAttrs = num_attrs;
  void* params[] = {&args, &map_a, &map_b};
  e = cudaLaunchKernelExC(&cfg, fn, params);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream) {
  if constexpr (Traits<kRow>::kFp8) {
    // W8A16: A's FP8 type x B's 16-bit type.
    return dispatch<DecodeFp8DTypes>(
        p.input(),
        [&](auto ta) {
          using TA = DeviceType<decltype(ta)::kDType>;
          return dispatch<DecodeDTypes>(
              p.b.dtype, [&](auto tb) { return launch_typed<kRow, TA, DeviceType<decltype(tb)::kDType>>(p, stream); },
              [] { return cudaErrorNotSupported; });
        },
        [] { return cudaErrorNotSupported; });
  } else {
    return dispatch<DecodeDTypes>(
        p.input(),
        [&](auto tr) {
          using T = DeviceType<decltype(tr)::kDType>;
          return launch_typed<kRow, T, T>(p, stream);
        },
        [] { return cudaErrorNotSupported; });
  }
}

template <int kRow>
const void* probe_kernel() {
  if constexpr (Traits<kRow>::kFp8)
    return reinterpret_cast<const void*>(&decode_kernel<kRow, __nv_fp8_e4m3, __half>);
  else
    return reinterpret_cast<const void*>(&decode_kernel<kRow, __half, __half>);
}

}  // namespace spmm_decode
}  // namespace sparsek::detail

// The body of cpp/spmm/decode/a row unit (cpp/core/units.cpp): compiles the row NAME's kernels (f16 and
// bf16 inputs; FP8 rows: e4m3 and e5m2 A x f16 and bf16 B; layouts, output type and epilogue
// are runtime arguments) and its entry points.
#define SPARSEK_DECODE_INSTANTIATE(NAME)                                                                      \
  namespace sparsek::detail::spmm_decode {                                                                    \
  static_assert(decode_row(NAME) >= 0, "no row named " NAME " in kDecodeVariants (cpp/spmm/decode/configs.hpp)"); \
  template cudaError_t launch_row<decode_row(NAME)>(const Problem&, cudaStream_t);                           \
  template const void* probe_kernel<decode_row(NAME)>();                                                     \
  }
