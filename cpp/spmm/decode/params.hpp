// What the Decode kernel and its launch agree on: Traits<kRow>, one table row's numbers
// (configs.hpp) and the sizes launch.hpp derives from them, and DecodeArgs, the kernel's
// arguments by value, which launch_row.cuh fills. No device code: the host side includes it.
#pragma once

#include <cstdint>

#include "spmm/decode/configs.hpp"
#include "spmm/decode/launch.hpp"

namespace sparsek::detail::spmm_decode {

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
  static_assert(decode_plans_ok(cfg, true), "a plan of this row (some bm, bk and cap on TM) breaks decode_plans_ok");
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
  bool a_settled;      // BsrView::settled: A's arrays may be read before griddepcontrol.wait
  bool launch_next_early;  // griddepcontrol.launch_dependents after the prologue (else after A's stream)
};

}  // namespace sparsek::detail::spmm_decode
