// The Decode kernel: C = act(alpha * A*B + bias + beta * C) with A in BSR form and few
// columns n (decode-sized batches: y = x W^T with A = W, B = x^T, C = y^T). This header is
// its design and what each generated row unit includes (one row per translation unit,
// instantiated with SPARSEK_DECODE_INSTANTIATE below); the code is in the files listed at
// the end of this comment.
//
// Why it is built this way. The problem is memory-bound (time = A's nonzero bytes / HBM
// bandwidth; B and C are small and stay in L2), so everything serves one goal: every SM
// streams A with enough bytes in flight and little else in the way.
//
//  * Work split. A CTA covers TM rows of one block-row (a multiple of 16 dividing bm, at
//    most tm_max; below bm, bm/TM "slices" share the block-row; Auto weighs TM down to the
//    row's tm_min, launch_row.cuh's decode_grid) and all n columns, so it reads B once per
//    block. The nonzero blocks of a block-row are split
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
//    sm_90: each part is one 2-D TMA box of A and one of B (cp.async.bulk.tensor, L2
//    evict-first for A, evict-last for B), issued by its own lane of warp 0 (a stage has up
//    to 32 parts; one thread issuing 16 boxes in a row held 32x32 blocks at 0.55-0.75x the
//    speed), completing on the stage's mbarrier. Measured:
//    16-byte cp.async issue (LDGSTS) capped a CTA near 16 KiB per us, and 1-D bulk copies
//    of single rows were no faster (~128 small requests per stage); the TMA box needs one
//    instruction per part. The prologue starts A and B boxes right after row_ptr (B from
//    a second warp, a part per lane, each lane reading its block column itself: one
//    global-load latency before the boxes, not one per part) and prefetches the descriptors.
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
//    memory early; once its own prologue is issued, the next kernel may launch: its CTAs
//    take the slots this grid leaves and run their prologue (with a settled A, their first
//    stages) beside this one's stream, reduction and epilogue (0.97x the time on the H200's
//    time_decode against letting it go after the A stream). A settled A (BsrView::settled:
//    weights no kernel still running writes) is read earlier: row_ptr and the prologue's A
//    boxes go out before griddepcontrol.wait, so the first stages land during the previous
//    kernel's tail (B, C and the bias still wait). Measured on the H200 (time_decode, 11
//    layer shapes x 64/128 blocks x d 0.5/0.3 x n 1/16, f16 and W8A16, graph-replayed):
//    0.92x the time (geo-mean; 0.82-1.00x, small layers gaining most). A prefetch of the
//    same boxes into L2 instead (which needs no promise) was slower than none (1.03x).
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
//      slabs). The rows of one n8 group (n <= 8: few warps per SM, e.g. 8 on the fill row's
//      256 CTAs, each on a dependent chain of shared load, cvt, mma, scale) run both 64-k
//      halves of a KC = 128 part in one pass and each half's slabs in two mma chains (even
//      and odd slabs, summed in that order before the scale): more independent work per
//      warp, measured 3-10 % faster at n = 1 with 128x128 blocks and up to 6 % with 64x64 (H200,
//      time_decode, 8 layer shapes); the wider rows keep one chain (their registers).
//
// Where it is, in cpp/spmm/decode/:
//   configs.hpp        the rows (tile configurations);
//   launch.hpp         shared memory and the per-problem plan as constexpr functions of a
//                      row, the table's compile-time checks, the per-row entry points'
//                      declarations: all that family.cu (supports, fits, the dispatch over
//                      rows) sees;
//   params.hpp         Traits<kRow> and DecodeArgs, shared by the kernel and its launch;
//   ptx.cuh            the PTX wrappers (cp.async, mbarrier, TMA; ldmatrix and mma from
//                      core/mma_sync.cuh, shared with attention's decode kernel);
//   convert.cuh        FP8 pairs to the mma's 16-bit type;
//   epilogue.cuh       the reduced rows to C (bias, beta, activation, gating, output type);
//   decode_kernel.cuh  the kernel: prologue, ring, main loop, reductions;
//   launch_row.cuh     the host side of a row's launch (limits, tensor maps, S, the launch).
#pragma once

#include <cuda_runtime.h>

#include "spmm/decode/configs.hpp"
#include "spmm/decode/launch.hpp"
#include "spmm/decode/launch_row.cuh"
#include "spmm/problem.hpp"

// The body of a generated row unit: compiles the row NAME's kernels (f16 and bf16 inputs; FP8
// rows: e4m3 and e5m2 A x f16 and bf16 B; layouts, output type and epilogue are runtime
// arguments) and its entry points.
#define SPARSEK_DECODE_INSTANTIATE(NAME)                                                                      \
  namespace sparsek::detail::spmm_decode {                                                                    \
  static_assert(decode_row(NAME) >= 0, "no row named " NAME " in kDecodeVariants (cpp/spmm/decode/configs.hpp)"); \
  template cudaError_t launch_row<decode_row(NAME)>(const Problem&, cudaStream_t);                           \
  template const void* probe_kernel<decode_row(NAME)>();                                                     \
  template DecodeFill fill_score<decode_row(NAME)>(const Problem&);                                          \
  }
