// The Decode kernel: C = act(alpha * A*B + bias + beta * C) with A in BSR form and few
// columns n (decode-sized batches: y = x W^T with A = W, B = x^T, C = y^T), and the
// per-row launch that cpp/decode/instantiations/<row>.cu instantiates (one row per TU).
//
// Why it is built this way (the problem is memory-bound: time = A's nonzero bytes / HBM
// bandwidth; B (k x n) and C (m x n) are small and stay in L2):
//
//  * Work split. A CTA covers TM rows of one block-row (TM = bm, or a divisor of it when
//    bm > tm_max: `slices` CTAs share the block-row) and all n columns, so it reads each B
//    slab once per block it multiplies. The nonzero blocks of a block-row are split over a
//    thread-block cluster of S CTAs (S = 1, 2, 4 or 8): rank q takes the blocks
//    row_ptr[r] + q, + q + S, + q + 2S, ... (balanced to within one block). S is chosen at
//    launch (launch_typed below) from the number of CTAs without a split (block_rows *
//    slices), the device's SM count, the kernel's occupancy and the mean blocks per row:
//    the largest power of two <= min(8, mean blocks per block-row, the largest cluster the
//    device can co-schedule) that either still leaves fewer CTAs than SMs or keeps every
//    CTA resident (units * S <= sm_count * CTAs/SM). E.g. 4096 x 4096, 128 x 128 blocks,
//    density 1/2 (32 block-rows) on 132 SMs at 2 CTAs/SM: S = 8, 256 CTAs; 14336 x 4096:
//    S = 2, 224 CTAs. On sm_80 images (no clusters) S = 1: correct, fewer SMs busy.
//
//  * Streaming A. A CTA's blocks are a sequence of k16-slabs (TM rows x 16 columns of one
//    block: bk/16 slabs per block, any bk multiple of 16). A ring stage holds SP
//    consecutive slabs of that sequence (a stage may span blocks), so a stage has about
//    the same bytes (16 KiB of A at TM = 128) whatever bm and bk are. Each thread owns one
//    (slab, 16-byte half) position of every stage and copies rows l, l + LS, ... of it
//    with 16-byte cp.async.cg (L2 evict_first policy: A is read once; 256-byte L2
//    prefetch: a stage reads whole 256-byte pieces of A's rows), so one stage costs a
//    thread a single division. stages - 1 stages are in flight: 48 KiB of A per CTA at
//    TM = 128, several CTAs per SM, against Little's law's ~24 KiB per SM (3.1 TB/s *
//    ~1 us / 132 SMs).
//
//  * B. Column-major B with 16-byte aligned columns (x row-major, the usual layout; the
//    flag b_vec, decided on the host) goes through the same ring: 16-byte cp.async of 8 k
//    of one column, in the stage's group. Otherwise (row-major B, or any ld / alignment)
//    B is loaded element-wise with plain loads (never past n columns or k rows) and stored
//    to the next stage's slot during the current iteration: correct for every layout and
//    ld, slower (the loads' L2 latency is exposed once per stage). B's columns past n are
//    zero in shared memory (zeroed once, never written). The block column of a slab
//    (col_idx) is loaded one iteration before B needs it, so B's copies never wait on it.
//
//  * Tensor cores for every n: mma.sync m16n8k16 (fp32 accumulate, f16 or bf16) with
//    ldmatrix from shared memory; n < 8 (and any n not a multiple of 8) runs the same path
//    with B zero-padded to the row's n_max (not a CUDA-core path): at n = 1 the padded mma
//    work is ~25 TFLOPS at full HBM bandwidth, far below the tensor cores' rate, and one
//    ldmatrix + one mma per 16 x 16 piece of A costs fewer issue slots than the 256 FMAs
//    (plus conversions) a CUDA-core dot product would need. Shared-memory rows are 32
//    bytes (16 elements of a slab); the two 16-byte halves of a row swap when bit 2 of the
//    row is set, which makes every 8-row ldmatrix phase conflict-free.
//
//  * Warps: mw along m (each takes up to gm_max 16-row groups) x kw along k (warp (m, k)
//    takes the slabs s == k (mod kw) of every stage): all warps work even when TM is small.
//    A warp loads its A fragments once per slab and streams B fragment pairs (ldmatrix.x4,
//    two n8 groups) across them.
//
//  * Deterministic reduction (bitwise identical run to run; no atomics):
//      1. in a warp: stage by stage, its slabs in increasing order, mma by mma;
//      2. in a CTA: the kw partials are summed into one fp32 tile in shared memory in
//         k-warp order 0, 1, ..., kw-1 (one round and barrier each);
//      3. in a cluster: after cluster.sync(), rank q owns the q-th 1/S of the tile (in C's
//         memory order) and sums the S partial tiles through distributed shared memory in
//         rank order 0, 1, ..., S-1, then applies the epilogue and writes C; a second
//         cluster.sync() keeps every CTA's tile alive until all ranks have read it.
//    The order depends only on the problem, the row and S (which depends on the device's
//    SM count and the kernel's occupancy), never on scheduling. Results for different S
//    (other devices, other rows) may differ in the last bits; on one device and build
//    they are identical run to run.
//
//  * Epilogue in fp32: C = act(alpha*acc + bias[row] + beta*C_old) (C read only when
//    beta != 0), rounded to nearest into f16, bf16 or f32; C element-wise with any ld and
//    layout, consecutive threads on consecutive addresses of C.
//
// The rows (tile configurations) are in configs.hpp; the family (supports, fits, the
// dispatch over rows) in family.cu, which sees only launch.hpp.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#include "decode/configs.hpp"
#include "decode/launch.hpp"
#include "problem.hpp"

namespace sparsek::detail {
namespace decode_impl {

// Everything derived from a table row.
template <int kRow>
struct Traits {
  static constexpr DecodeVariant cfg = kDecodeVariants[kRow];
  static constexpr int kNT = cfg.n_max, kNG = kNT / 8;
  static constexpr int kWarps = cfg.warps, kThreads = 32 * kWarps;
  static constexpr int kGM = cfg.gm_max;
  static constexpr int kStages = cfg.stages;
  static constexpr int kMinCtas = cfg.min_ctas;
  static constexpr int kSlotBytes = decode_slot_bytes(cfg);
  static constexpr int kSmemBytes = decode_smem_bytes(cfg);
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
  const void* bias;  // null: no bias
  int64_t ldb, ldc;
  int32_t n;
  int32_t bm, bk;
  int32_t tm, slices, sp, mw, kw;  // DecodePlan
  int32_t cluster;                 // S: CTAs per cluster (1 on sm_80 images)
  float alpha, beta;
  int32_t activation;  // Activation value
  bool b_col;          // B is column-major
  bool b_vec;          // column-major B with 16-byte aligned columns: B through cp.async
  bool c_col;          // C is column-major
  bool c_f32;          // C is f32 (else the input type)
};

// ---- PTX wrappers ----

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A policy that marks A's lines evict-first in L2: A is streamed once, B and C stay.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// 16 bytes of A, global -> shared, L2 only, evict-first, 256-byte L2 prefetch.
__device__ __forceinline__ void cp_async_a(uint32_t dst, const void* src, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "l"(policy)
               : "memory");
}

// 16 bytes of B, global -> shared, L2 only.
__device__ __forceinline__ void cp_async_b(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

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

__device__ __forceinline__ float activate(float x, int act) {
  switch (act) {
    case static_cast<int>(Activation::Relu):
      return fmaxf(x, 0.0f);
    case static_cast<int>(Activation::GeluTanh): {
      const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);  // sqrt(2/pi) * (x + 0.044715 x^3)
      return 0.5f * x * (1.0f + tanhf(u));
    }
    case static_cast<int>(Activation::Silu):
      return x / (1.0f + expf(-x));
    default:
      return x;
  }
}

// C[row, col] = act(alpha * acc + bias[row] + beta * C[row, col]) for one element.
template <typename T, typename OutT>
__device__ __forceinline__ void write_c(const DecodeArgs& args, int64_t row, int64_t col, float acc) {
  OutT* c = static_cast<OutT*>(args.c) + (args.c_col ? col * args.ldc + row : row * args.ldc + col);
  float v = args.alpha * acc;
  if (args.bias != nullptr) v += to_f32(static_cast<const T*>(args.bias)[row]);
  if (args.beta != 0.0f) v += args.beta * to_f32(*c);
  *c = from_f32<OutT>(activate(v, args.activation));
}

// ---- The kernel ----
// Grid: x = (block-row * slices + slice) * S + rank; clusters of S consecutive CTAs (one
// block-row slice each). Block: 32 * warps threads.
template <int kRow, typename T>
__global__ void __launch_bounds__(Traits<kRow>::kThreads, Traits<kRow>::kMinCtas)
    decode_kernel(const DecodeArgs args) {
  using Tr = Traits<kRow>;
  constexpr int kNT = Tr::kNT, kNG = Tr::kNG, kThreads = Tr::kThreads, kGM = Tr::kGM;
  constexpr int kStages = Tr::kStages, kSlot = Tr::kSlotBytes;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem0 = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // ---- This CTA's work: block-row br, rows row0 .. row0+TM of its blocks, split rank. ----
  const int S = args.cluster;
  const int rank = static_cast<int>(blockIdx.x % static_cast<unsigned>(S));  // = cluster rank (1-D clusters)
  const unsigned unit = blockIdx.x / static_cast<unsigned>(S);
  const int64_t br = unit / static_cast<unsigned>(args.slices);
  const int slice = static_cast<int>(unit % static_cast<unsigned>(args.slices));
  const int TM = args.tm, SP = args.sp, bk = args.bk, KSL = bk >> 4;
  const int row0 = slice * TM;
  const int RG = TM >> 4;
  const int n = args.n;

  const int row_begin = __ldg(args.row_ptr + br);
  const int row_len = __ldg(args.row_ptr + br + 1) - row_begin;
  const int nblk = row_len > rank ? (row_len - rank + S - 1) / S : 0;  // blocks of this rank
  const int jb = row_begin + rank;                                     // its t-th block: jb + t*S
  const int total = nblk * KSL;                                        // its k16-slabs
  const int nst = (total + SP - 1) / SP;                               // its ring stages

  // This thread's position in every stage: slab s_t, 16-byte half h_t, and lines (rows of
  // A, columns of B) l_t, l_t + LS, ...
  const int s_t = (tid >> 1) & (SP - 1);
  const int h_t = tid & 1;
  const int l_t = tid / (2 * SP);
  const int LS = kThreads / (2 * SP);
  const uint32_t b_part = static_cast<uint32_t>(SP * TM * 32);  // B's offset in a slot

  // Zero B's part of every slot: columns n .. n_max are never written and must be zeros.
  for (int st = 0; st < kStages; ++st) {
    unsigned char* b_slot = smem + st * kSlot + b_part;
    for (int o = tid * 16; o < SP * kNT * 32; o += kThreads * 16)
      *reinterpret_cast<uint4*>(b_slot + o) = make_uint4(0u, 0u, 0u, 0u);
  }
  __syncthreads();

  const T* a_vals = static_cast<const T*>(args.a_values);
  const T* b_vals = static_cast<const T*>(args.b);
  const int64_t blk_elems = static_cast<int64_t>(args.bm) * bk;
  const int64_t ldb = args.ldb;
  const uint64_t policy = evict_first_policy();

  // Slab s_t of stage q: the index (in this rank's block sequence) of its block, or -1
  // past the end, and its k offset in the block (*kk).
  auto slab_of = [&](int q, int* kk) -> int {
    const int gs = q * SP + s_t;
    if (gs >= total) return -1;
    const int t = gs / KSL;
    *kk = (gs - t * KSL) << 4;
    return t;
  };
  // The block column of slab s_t of stage q (-1 past the end).
  auto col_of = [&](int q) -> int {
    int kk = 0;
    const int t = slab_of(q, &kk);
    return t < 0 ? -1 : __ldg(args.col_idx + jb + t * S);
  };

  // Issues this thread's copies of stage q (block column `col`): A always, B when b_vec.
  auto issue = [&](int q, int col) {
    int kk = 0;
    const int t = slab_of(q, &kk);
    if (t < 0) return;
    const uint32_t slot = smem0 + static_cast<uint32_t>((q % kStages) * kSlot);
    const T* a_src = a_vals + static_cast<int64_t>(jb + t * S) * blk_elems + static_cast<int64_t>(row0 + l_t) * bk +
                     kk + h_t * 8;
    // Rolled loops with running addresses: unrolled, the compiler hoists every copy's
    // address out of the main loop and runs out of registers.
    const int64_t a_step = static_cast<int64_t>(LS) * bk;
    const uint32_t a_dst = slot + static_cast<uint32_t>(s_t * TM * 32);
#pragma unroll 1
    for (int r = l_t; r < TM; r += LS, a_src += a_step)
      cp_async_a(a_dst + static_cast<uint32_t>(r * 32 + ((h_t ^ ((r >> 2) & 1)) << 4)), a_src, policy);
    if (args.b_vec) {
      // Column c, k rows col*bk + kk + 8*h_t .. +8: 16 contiguous, aligned bytes.
      const T* b_src = b_vals + static_cast<int64_t>(l_t) * ldb + static_cast<int64_t>(col) * bk + kk + h_t * 8;
      const int64_t b_step = static_cast<int64_t>(LS) * ldb;
      const uint32_t b_dst = slot + b_part + static_cast<uint32_t>(s_t * kNT * 32);
#pragma unroll 1
      for (int c = l_t; c < n; c += LS, b_src += b_step)
        cp_async_b(b_dst + static_cast<uint32_t>(c * 32 + ((h_t ^ ((c >> 2) & 1)) << 4)), b_src);
    }
  };

  // Loads this thread's part of stage q's B element by element and stores it to stage q's
  // slot (the path for every B that is not b_vec).
  auto store_b = [&](int q, int col) {
    int kk = 0;
    const int t = slab_of(q, &kk);
    if (t < 0) return;
    unsigned char* slot = smem + (q % kStages) * kSlot + b_part;
    const int64_t krow = static_cast<int64_t>(col) * bk + kk + h_t * 8;  // first of the 8 k rows
    const unsigned short* braw = reinterpret_cast<const unsigned short*>(b_vals);
    const int64_t stride = args.b_col ? 1 : ldb;  // between consecutive k
#pragma unroll 1
    for (int c = l_t; c < n; c += LS) {
      const unsigned short* src = braw + (args.b_col ? c * ldb + krow : krow * ldb + c);
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t lo = __ldg(src + (2 * e) * stride), hi = __ldg(src + (2 * e + 1) * stride);
        w[e] = lo | (hi << 16);
      }
      *reinterpret_cast<uint4*>(slot + (s_t * kNT + c) * 32 + ((h_t ^ ((c >> 2) & 1)) << 4)) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  };

  // ---- Warp roles and fragment addresses ----
  const int MW = args.mw, KW = args.kw;
  const int mw = warp % MW, kw = warp / MW;
  const bool active = kw < KW;
  // A fragment (16 rows x 16 k of a slab): lane -> matrix q = lane/8 (rows +8 for odd q,
  // k half q/2), row lane%8 of it; the half is swizzled by bit 2 of the row.
  const uint32_t a_lane = static_cast<uint32_t>((((lane >> 3) & 1) * 8 + (lane & 7)) * 32 +
                                                ((((lane >> 4) & 1) ^ ((lane >> 2) & 1)) << 4));
  // B fragment pair (two n8 groups x 16 k): matrix q: group q/2, k half q%2 (x2: lanes 0-15,
  // one group).
  const int lb = kNG == 1 ? (lane & 15) : lane;
  const uint32_t b_lane = static_cast<uint32_t>((((lb >> 4) & 1) * 8 + (lb & 7)) * 32 +
                                                ((((lb >> 3) & 1) ^ ((lb >> 2) & 1)) << 4));

  float acc[kGM][kNG][4];
#pragma unroll
  for (int g = 0; g < kGM; ++g)
#pragma unroll
    for (int j = 0; j < kNG; ++j)
#pragma unroll
      for (int x = 0; x < 4; ++x) acc[g][j][x] = 0.0f;

  // ---- Prologue ----
  // B of stage q is produced at iteration q - D: with A (b_vec), or by store_b one
  // iteration ahead. next_col holds the block column of the next stage whose B is produced.
  const int D = args.b_vec ? kStages - 1 : 1;
  {
    int pcol[kStages - 1];
#pragma unroll
    for (int q = 0; q < kStages - 1; ++q) pcol[q] = (args.b_vec || q == 0) ? col_of(q) : -1;
#pragma unroll
    for (int q = 0; q < kStages - 1; ++q) {
      issue(q, pcol[q]);
      cp_async_commit();
    }
    if (!args.b_vec) store_b(0, pcol[0]);
  }
  int next_col = col_of(D);

  // ---- Main loop: one stage per iteration ----
#pragma unroll 1
  for (int i = 0; i < nst; ++i) {
    // Stage i has landed once at most stages-2 later groups are pending (group q = stage q).
    // The barrier also tells every warp that all are done with the slot computed last
    // iteration, which the copies below overwrite, and publishes store_b's stage i.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    issue(i + kStages - 1, next_col);  // next_col is stage i + D's column; = i + stages - 1 when b_vec
    cp_async_commit();                 // (an empty group past the end keeps the count uniform)
    if (!args.b_vec) store_b(i + 1, next_col);
    next_col = col_of(i + 1 + D);

    const uint32_t slot = smem0 + static_cast<uint32_t>((i % kStages) * kSlot);
    const int nvalid = min(SP, total - i * SP);
    if (active) {
#pragma unroll 1
      for (int s = kw; s < nvalid; s += KW) {
        uint32_t af[kGM][4];
        const uint32_t a_s = slot + static_cast<uint32_t>(s * TM * 32) + a_lane;
#pragma unroll
        for (int g = 0; g < kGM; ++g) {
          const int rg = mw + g * MW;
          if (rg < RG) ldsm_x4(a_s + static_cast<uint32_t>(rg * 512), af[g][0], af[g][1], af[g][2], af[g][3]);
        }
        const uint32_t b_s = slot + b_part + static_cast<uint32_t>(s * kNT * 32) + b_lane;
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
            ldsm_x4(b_s + static_cast<uint32_t>(pr * 512), b0, b1, b2, b3);
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

  // ---- The CTA's partial tile: k-warps summed in order 0, 1, ..., KW-1 ----
  cp_async_wait<0>();  // only empty groups can be pending; the ring becomes the tile
  __syncthreads();
  float* part = reinterpret_cast<float*>(smem);
  const int ldr = kNT + 8;  // row-major tile: TM rows of n_max + 8 floats
  const int ldk = TM + 4;   // column-major tile: n_max columns of TM + 4 floats
  const bool c_col = args.c_col;
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
            const float v0 = acc[g][j][2 * hh], v1 = acc[g][j][2 * hh + 1];
            if (c_col) {
              float* p = part + c * ldk + r;
              if (round == 0) p[0] = v0, p[ldk] = v1;
              else p[0] += v0, p[ldk] += v1;
            } else {
              float2* p = reinterpret_cast<float2*>(part + r * ldr + c);
              if (round == 0) *p = make_float2(v0, v1);
              else {
                float2 o = *p;
                o.x += v0, o.y += v1;
                *p = o;
              }
            }
          }
      }
    }
    __syncthreads();
  }

  // ---- Cluster reduction (ranks in order 0..S-1) and the epilogue ----
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  if (S > 1) cg::this_cluster().sync();  // every rank's tile is complete
#else
  if (S > 1) __trap();  // the host launches sm_80 images with S = 1 only
#endif
  // Rank q writes elements [q*E/S, (q+1)*E/S) of the TM x n tile in C's memory order.
  const int E = TM * n;
  const int e_begin = static_cast<int>(static_cast<int64_t>(E) * rank / S);
  const int e_end = static_cast<int>(static_cast<int64_t>(E) * (rank + 1) / S);
  const int64_t grow0 = br * args.bm + row0;
#pragma unroll 1
  for (int e = e_begin + tid; e < e_end; e += kThreads) {
    int r, c;
    if (c_col) c = e / TM, r = e - c * TM;
    else r = e / n, c = e - r * n;
    const int off = c_col ? c * ldk + r : r * ldr + c;
    float v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (S > 1) {
      // All S loads are issued before the sum (S <= 8), which stays in rank order.
      cg::cluster_group cluster = cg::this_cluster();
      float x[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) x[q] = q < S ? *cluster.map_shared_rank(part + off, q) : 0.0f;
      v = x[0];
#pragma unroll
      for (int q = 1; q < 8; ++q)
        if (q < S) v += x[q];
    } else
#endif
    {
      v = part[off];
    }
    if (args.c_f32) write_c<T, float>(args, grow0 + r, c, v);
    else write_c<T, T>(args, grow0 + r, c, v);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (S > 1) cg::this_cluster().sync();  // no CTA leaves while others read its tile
#endif
}

// ---------------------------------------------------------------------------------------
// Host side: one row's launch.

// Per device, per kernel: CTAs per SM at the row's shared memory, and the largest cluster
// size (1, 2, 4, 8) the kernel can run with. Queried once per device.
struct DecodeLimits {
  int ctas_per_sm = 1;
  int max_cluster = 1;
};

inline DecodeLimits query_limits(const void* fn, int threads, int smem, const Problem& p) {
  DecodeLimits lim;
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, static_cast<size_t>(smem)) == cudaSuccess &&
      occ > 0)
    lim.ctas_per_sm = occ;
  else
    (void)cudaGetLastError();
  // Clusters need cc >= 9.0 and a kernel image built for it (an sm_80 image has the cluster
  // code compiled out and runs with S = 1).
  cudaFuncAttributes attr{};
  if (p.device.cc_major >= 9 && cudaFuncGetAttributes(&attr, fn) == cudaSuccess && attr.binaryVersion >= 90) {
    for (int s = 8; s >= 2; s /= 2) {
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
      if (cudaOccupancyMaxActiveClusters(&clusters, fn, &cfg) == cudaSuccess && clusters >= 1) {
        lim.max_cluster = s;
        break;
      }
      (void)cudaGetLastError();
    }
  } else {
    (void)cudaGetLastError();
  }
  return lim;
}

// The cluster size S for `units` CTAs without a split (see the file comment).
inline int choose_split(int64_t units, int64_t mean_blocks, const DecodeLimits& lim, int sm_count) {
  const int64_t slots = static_cast<int64_t>(sm_count) * lim.ctas_per_sm;
  int64_t cap = lim.max_cluster < 8 ? lim.max_cluster : 8;
  if (mean_blocks < cap) cap = mean_blocks < 1 ? 1 : mean_blocks;
  int s = 1;
  while (s * 2 <= cap && units * s * 2 <= INT_MAX && (units * s < sm_count || units * s * 2 <= slots)) s *= 2;
  return s;
}

template <int kRow, typename T>
cudaError_t launch_typed(const Problem& p, cudaStream_t stream) {
  using Tr = Traits<kRow>;
  constexpr DecodeVariant v = Tr::cfg;
  const void* fn = reinterpret_cast<const void*>(&decode_kernel<kRow, T>);
  cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (e != cudaSuccess) return e;

  // Limits, once per device (racing first calls store the same value).
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};  // 0: not asked; else ctas_per_sm * 16 + max_cluster
  const int dev = p.device.id;
  DecodeLimits lim;
  const int known = dev >= 0 && dev < kMaxDevices ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (known != 0) {
    lim.ctas_per_sm = known / 16, lim.max_cluster = known % 16;
  } else {
    lim = query_limits(fn, Tr::kThreads, Tr::kSmemBytes, p);
    if (dev >= 0 && dev < kMaxDevices) cached[dev].store(lim.ctas_per_sm * 16 + lim.max_cluster, std::memory_order_relaxed);
  }

  const DecodePlan plan = decode_plan(v, p.a.bm);
  const int64_t block_rows = p.block_rows();
  const int64_t units = block_rows * plan.slices;  // <= INT_MAX (family.cu's supports)
  const int64_t mean_blocks = block_rows > 0 ? p.a.nnzb / block_rows : 0;
  int S = choose_split(units, mean_blocks, lim, p.device.sm_count);
  // SPARSEK_DECODE_SPLIT=<1|2|4|8> (a measuring knob, read once) forces S where the device
  // and the grid allow it.
  static const int forced_split = [] {
    const char* v = std::getenv("SPARSEK_DECODE_SPLIT");
    return v == nullptr ? 0 : std::atoi(v);
  }();
  if ((forced_split == 1 || forced_split == 2 || forced_split == 4 || forced_split == 8) &&
      forced_split <= lim.max_cluster && units * forced_split <= INT_MAX)
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
  args.sp = plan.sp;
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

  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(units * S));
  cfg.blockDim = dim3(static_cast<unsigned>(Tr::kThreads));
  cfg.dynamicSmemBytes = static_cast<size_t>(Tr::kSmemBytes);
  cfg.stream = stream;
  cudaLaunchAttribute at[1];
  if (S > 1) {
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = static_cast<unsigned>(S);
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
  }
  void* params[] = {&args};
  e = cudaLaunchKernelExC(&cfg, fn, params);
  if (e != cudaSuccess) return e;
  return cudaGetLastError();
}

template <int kRow>
cudaError_t launch_row(const Problem& p, cudaStream_t stream) {
  if (p.input() == DType::BF16) return launch_typed<kRow, __nv_bfloat16>(p, stream);
  return launch_typed<kRow, __half>(p, stream);
}

template <int kRow>
const void* probe_kernel() {
  return reinterpret_cast<const void*>(&decode_kernel<kRow, __half>);
}

}  // namespace decode_impl
}  // namespace sparsek::detail

// The body of cpp/decode/instantiations/<row>.cu: compiles the row NAME's kernels (f16 and
// bf16 inputs; layouts, output type and epilogue are runtime arguments) and its entry points.
#define SPARSEK_DECODE_INSTANTIATE(NAME)                                                                      \
  namespace sparsek::detail::decode_impl {                                                                    \
  static_assert(decode_row(NAME) >= 0, "no row named " NAME " in kDecodeVariants (cpp/decode/configs.hpp)"); \
  template cudaError_t launch_row<decode_row(NAME)>(const Problem&, cudaStream_t);                           \
  template const void* probe_kernel<decode_row(NAME)>();                                                     \
  }
