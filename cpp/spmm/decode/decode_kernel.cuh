// The Decode kernel, decode_kernel<kRow, TA, T>: the prologue (barriers, block columns, the
// first ring stages in flight), the main loop over ring stages (16-bit A through ldmatrix,
// FP8 A dequantized in registers), the k-warp and cluster reductions, and the epilogue's
// call. How it works and why it is built this way: kernel.cuh's file comment.
#pragma once

#include <cooperative_groups.h>
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include <sparsek/sparsek.hpp>  // ScaleKind

#include "spmm/decode/convert.cuh"
#include "spmm/decode/epilogue.cuh"
#include "spmm/decode/launch.hpp"
#include "spmm/decode/params.hpp"
#include "spmm/decode/ptx.cuh"

namespace sparsek::detail::spmm_decode {

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
  // read before that kernel has completed and its writes are visible. A settled A
  // (BsrView::settled: that kernel does not write it) is the exception: row_ptr and the
  // first stages' A boxes go out before the wait (below), so A's first bytes are on their
  // way during that kernel's tail; B, C and the bias still wait.
  if (!args.a_settled) asm volatile("griddepcontrol.wait;\n" ::: "memory");
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
  // Part u's B boxes (its KC k of B's block column `col`, BSUB sub-tiles) into place b of
  // slot `slot`, completing on `bar`.
  auto issue_b_boxes = [&](uint32_t slot, uint32_t bar, int u, int b, int col) {
    const int t = KPB == 1 ? u : u / KPB;
    const int k0 = (u - t * KPB) * KC;
    for (int h = 0; h < BSUB; ++h)
      tma_load_2d(slot + b_off + (b * BSUB + h) * kNT * RSB, &map_b, col * bk + k0 + h * 64, 0, bar, policy_b);
  };
  // Stage q on the TMA path (warp 0): lane 0 arms the slot's barrier with the stage's bytes
  // (A's and, with b_tma, B's); lane b issues part b's box of A (TM rows x KC columns) and,
  // with b_tma and with_b, of B (KC k x n_max columns; the columns past n are outside B's
  // tensor and arrive as zeros), its block column from s_cols. One lane per part: small
  // blocks put up to 16 boxes in a stage, which one thread issued one after another while
  // its warp's MMAs waited. The prologue's stages pass with_b = false: warp 1 issues their B
  // boxes (below). A box may land before the arm: the barrier's transaction count goes below
  // zero until then, and the phase cannot complete before the arm's arrival.
  static_assert(kDecodeMaxParts <= 32, "a stage's parts fit the lanes of warp 0");
  auto issue_tma = [&](int q, bool with_b) {
    const int vp = valid_parts(q);
    if (vp == 0) return;
    const uint32_t slot = smem0 + static_cast<uint32_t>((q % kStages) * kSlot);
    const uint32_t bar = smem_u32(&s_full[q % kStages]);
    if (lane == 0) mbar_arrive_expect_tx(bar, static_cast<uint32_t>(vp * (TM * RSA + (b_tma ? kNT * RS : 0))));
    if (lane < vp) {  // vp <= NB <= kDecodeMaxParts (launch.hpp)
      const int b = lane, u = q * NB + b;
      const int t = KPB == 1 ? u : u / KPB;
      const int k0 = (u - t * KPB) * KC;
      tma_load_2d(slot + b * TM * RSA, &map_a, k0, (jb + t) * args.bm + row0, bar, policy);
      if (with_b && b_tma) issue_b_boxes(slot, bar, u, b, col_of(t));
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
      if (warp == 0) issue_tma(q, true);
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
    // Rows of one n8 group (kernel.cuh): both 64-k halves in one pass, two mma chains a half.
    constexpr int kHalvesAtOnce = kNG == 1 ? kHalves : 1;
    constexpr int kChains = kNG == 1 && kS > 1 ? 2 : 1;
#pragma unroll 1
    for (int b = kw; b < vp; b += KW) {
      const int u = i * NB + b;
      const int t = KPB == 1 ? u : u / KPB;
      const float scale = !per_block ? 1.0f : t < kDecodeColCap ? s_scales[t] : __ldg(args.a_scales + jb + t);
#pragma unroll kHalvesAtOnce
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
            // The half's product (slab s in chain s % kChains; the chains summed in order),
            // then scaled once in f32.
            float d[kChains][4] = {};
#pragma unroll
            for (int sl = 0; sl < kS; ++sl)
              mma_16816<T>(d[sl % kChains], af[gi][sl], bw[2 * sl], bw[2 * sl + 1]);
#pragma unroll
            for (int x = 0; x < 4; ++x) {
              float sum = d[0][x];
#pragma unroll
              for (int c = 1; c < kChains; ++c) sum += d[c][x];
              acc[gi][j][x] = fmaf(scale, sum, acc[gi][j][x]);
            }
          }
        }
      }
    }
  };

  // ---- Prologue: stages 0 .. stages-2 in flight ----
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A (warp 0) and B (warp 1, one part per lane, each lane reading its block column
  // itself) start right away; the other threads load the block columns meanwhile. One part
  // per lane: in one thread's loop each box's address waits for its column's load, and the
  // TMA issue (asm with a memory clobber) keeps the next load behind it (on the H100 the
  // first stage's A dominates, so this is worth ~2 % at decode shapes).
  static_assert(kThreads >= 64, "the prologue issues B from warp 1");
  if (tma && warp == 0)
    for (int q = 0; q < kStages - 1; ++q) issue_tma(q, false);
  // A settled A's reads are out: wait for the previous kernel before B's (see above).
  if (args.a_settled) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (b_tma && warp == 1) {
    const int pro = min(parts, (kStages - 1) * NB);
    for (int u = lane; u < pro; u += 32) {
      const int q = u / NB;  // < stages - 1: slot q, barrier q
      issue_b_boxes(smem0 + static_cast<uint32_t>(q * kSlot), smem_u32(&s_full[q]), u, u - q * NB,
                    __ldg(args.col_idx + jb + (KPB == 1 ? u : u / KPB)));
    }
  }
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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The next kernel of the stream may launch now: its CTAs take the SM slots this grid leaves
  // and, with settled weights, stream their first stages while this grid streams and reduces
  // (it still waits for this grid's completion before reading anything this grid may write).
  // H200, time_decode's 176 cases from graphs: 0.972x the time of launching it after A's
  // stream (0.93x on the tall layers), the MLP 0.97-1.01x, the worked decoder unchanged.
  if (args.launch_next_early) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
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
  // Without the early launch (SPARSEK_DECODE_EARLY_LAUNCH=0): A's stream is done, the next
  // kernel may launch and run its prologue beside this one's reduction and epilogue.
  if (!args.launch_next_early) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
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

}  // namespace sparsek::detail::spmm_decode
