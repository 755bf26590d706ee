// sparsek SM90: the fused linear-layer epilogue of the Hopper family (kernel.hpp), as a
// CUTLASS epilogue visitor tree (EVT) for the TMA warp-specialized collective epilogue:
//
//     C = act(alpha * acc + bias[row of C] + beta * C_old)      (fp32, then rounded to C)
//
// One tree per kernel, whatever the problem asks for: the bias pointer (null = no bias) and
// the activation are run-time arguments, so the family keeps one instantiation per row of
// kSm90Variants. The tree is CUTLASS's LinCombPerRowBiasEltAct / LinCombPerColBiasEltAct
// (sm90_callbacks_tma_warpspecialized.hpp), spelled out so that a null bias can default to
// -0.0f rather than +0.0f (see below), with RuntimeActivation as the activation:
//
//   Sm90EVT<Sm90Compute<RuntimeActivation, ElementD, float>,           act(.), rounded to D
//     Sm90EVT<Sm90Compute<homogeneous_multiply_add, float, float>,     beta * C + (.)
//       Sm90ScalarBroadcast<float>,                                    beta
//       Sm90SrcFetch<ElementD>,                                        C (in place: C = D)
//       Sm90EVT<Sm90Compute<homogeneous_multiply_add, float, float>,   alpha * acc + bias
//         Sm90ScalarBroadcast<float>,                                  alpha
//         Sm90AccFetch,                                                acc
//         Sm90ColBroadcast | Sm90RowBroadcast>>>                       bias, one per row of C
//
// Arithmetic: v = fma(alpha, acc, bias); v = fma(beta, C, v); v = act(v) - the order of the
// CPU reference and of the other families (WMMA, Decode). The beta * C node is CUTLASS's
// optimized Sm90TreeVisitor specialization: with beta == 0 the epilogue neither issues the TMA
// loads of C nor reads them (C may hold NaN); the C fragment is zeroed and fma(0, 0, v) = v.
//
// Without bias and activation the results are bitwise those of CUTLASS's LinearCombination
// (the family's epilogue before this one), D = fma(beta, C, alpha * acc): a null bias reads as
// -0.0f, and fma(alpha, acc, -0.0f) == alpha * acc exactly (one rounding; x + -0 == x for
// every x, zeros, infinities and NaN included), the None activation is the identity, and the
// beta node and the rounding to D are unchanged.
//
// Orientation (configs.hpp): natural rows compute C = A*B, so a row of C is a GEMM row and the
// bias is a column vector (Sm90ColBroadcast, loaded straight from global memory into
// registers, no shared memory); transposed rows compute C^T = B^T A^T, so a row of C is a GEMM
// column and the bias is a row vector (Sm90RowBroadcast: TileN values staged per tile through
// shared memory, one barrier per tile).
#pragma once

#include <cstdint>
#include <math.h>

#include "cutlass/cutlass.h"
#include "cutlass/array.h"
#include "cutlass/functional.h"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"

#include "core/activation.cuh"
#include "spmm/problem.hpp"

namespace sparsek::detail::spmm_sm90 {

// The activation's run-time argument (Sm90Compute passes a compute functor's `Arguments` to
// it, see sm90_visitor_compute_tma_warpspecialized.hpp): an Activation value.
struct RuntimeActivationArguments {
  int32_t kind = static_cast<int32_t>(Activation::None);
};

// A compute functor for Sm90Compute whose activation is chosen at run time (uniform per
// launch: no divergence), computed by detail::activate (activation.cuh). Sm90Compute takes
// its Arguments type from RuntimeActivation<ElementCompute> and calls
// RuntimeActivation<Array<ElementCompute, N>>.
template <class T>
struct RuntimeActivation {
  using Arguments = RuntimeActivationArguments;
  CUTLASS_HOST_DEVICE T operator()(T const& x, Arguments const& args = Arguments()) const {
    return T(detail::activate(float(x), args.kind));
  }
};

template <class T, int N>
struct RuntimeActivation<cutlass::Array<T, N>> {
  using Arguments = RuntimeActivationArguments;
  CUTLASS_HOST_DEVICE cutlass::Array<T, N> operator()(cutlass::Array<T, N> const& x,
                                                      Arguments const& args = Arguments()) const {
    cutlass::Array<T, N> y;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < N; ++i) y[i] = T(detail::activate(float(x[i]), args.kind));
    return y;
  }
};

// The fusion (the tree above) of a kernel writing ElementD, with bias values of type
// ElementBias (the input type), for CTA tile TileShape; kBiasPerGemmColumn: transposed rows.
template <class ElementD, class ElementBias, class TileShape, bool kBiasPerGemmColumn>
struct BiasActEpilogue {
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  static constexpr int kAlignBias = 128 / cutlass::sizeof_bits<ElementBias>::value;  // 16 bytes

  using Scalar = cutlass::epilogue::fusion::Sm90ScalarBroadcast<float, cute::Stride<cute::_0, cute::_0, int64_t>>;
  using BiasStride = cute::conditional_t<kBiasPerGemmColumn, cute::Stride<cute::_0, cute::_1, int64_t>,
                                         cute::Stride<cute::_1, cute::_0, int64_t>>;
  using Bias = cute::conditional_t<
      kBiasPerGemmColumn,
      cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, ElementBias, float, BiasStride, kAlignBias>,
      cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, ElementBias, float, BiasStride, kAlignBias>>;

  template <template <class> class Fn, class Out>
  using Compute = cutlass::epilogue::fusion::Sm90Compute<Fn, Out, float, kRound>;

  using Fusion = cutlass::epilogue::fusion::Sm90EVT<
      Compute<RuntimeActivation, ElementD>,                                          // act(.)
      cutlass::epilogue::fusion::Sm90EVT<
          Compute<cutlass::homogeneous_multiply_add, float>,                         // beta * C + (.)
          Scalar,                                                                    // beta
          cutlass::epilogue::fusion::Sm90SrcFetch<ElementD>,                         // C
          cutlass::epilogue::fusion::Sm90EVT<Compute<cutlass::homogeneous_multiply_add, float>,  // alpha*acc+bias
                                             Scalar,                                 // alpha
                                             cutlass::epilogue::fusion::Sm90AccFetch,  // acc
                                             Bias>>>;                                // bias

  // The fusion's arguments: bias null (no bias) or m values of ElementBias, 16-byte aligned;
  // `activation` an Activation value. A null bias reads as -0.0f (see the file comment).
  static typename Fusion::Arguments arguments(float alpha, float beta, const void* bias, Activation activation) {
    const auto* bias_ptr = static_cast<const ElementBias*>(bias);
    const ElementBias null_bias = ElementBias(-0.0f);
    return {
        // unary: act(beta * C + (alpha * acc + bias))
        {
            // ternary: beta * C + (alpha * acc + bias)
            {{beta}, {nullptr}, {}},  // beta
            {},                       // C
            {
                // ternary: alpha * acc + bias
                {{alpha}, {nullptr}, {}},           // alpha
                {},                                 // acc
                {bias_ptr, null_bias, BiasStride{}},  // bias (batch stride 0: L = 1)
                {}                                  // multiply_add
            },
            {}  // multiply_add
        },
        RuntimeActivationArguments{static_cast<int32_t>(activation)}  // act
    };
  }
};

// The FP8 rows' TMA epilogue (EpilogueKind::Scaled): C = alpha * acc + bias[row of C], with
// alpha = alpha * A's per-tensor scale * B's per-tensor scale * B's scale of the column of C,
// rounded to D; no activation, and C is not read (beta = 0: family.cu leaves other problems to
// the Direct rows). The tree, natural orientation (a row of C is a GEMM row):
//
//   Sm90EVT<Sm90Compute<homogeneous_multiply_add, ElementD, float>,   alpha * acc + bias, rounded
//     Sm90EVT<Sm90Compute<multiplies, float, float>,                   alpha, per GEMM column
//       Sm90ScalarBroadcast<float, 3 factors>,                         alpha * scale_a * scale_b
//       Sm90RowBroadcast<float>>,                                      B's scale of the column
//     Sm90AccFetch,                                                    acc
//     Sm90ColBroadcast<ElementD>>                                      bias (C's dtype)
//
// The products and their order are direct_epilogue.hpp's (alpha, A's scale, B's, then the
// column's; an absent factor is 1, an absent bias -0.0f, exact), so both write the same bits.
// Why no activation and no C: the activation's run-time switch, unrolled over the 128 x 256
// tile's fragments, made this kernel instruction-fetch bound (ncu: 55 % of the warps' stall
// cycles waiting on instruction fetch; 3-4x slower than LinearCombination), and C's staging
// buffers took a ring stage (3 instead of 4 at 128 x 256).
//
// Transposed rows (kTransposed: C^T = B^T A^T, a row of C is a GEMM column): B's column scales
// are then one per GEMM row (Sm90ColBroadcast) and the bias one per GEMM column
// (Sm90RowBroadcast), the same products.
template <class ElementD, class TileShape, bool kTransposed = false>
struct ScaledBiasEpilogue {
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
  static constexpr int kAlignBias = 128 / cutlass::sizeof_bits<ElementD>::value;  // 16 bytes

  using PerGemmRow = cute::Stride<cute::_1, cute::_0, int64_t>;
  using PerGemmColumn = cute::Stride<cute::_0, cute::_1, int64_t>;
  using ScaleProduct = cutlass::epilogue::fusion::Sm90ScalarBroadcast<float, cute::Stride<cute::_0, cute::_0, int64_t>, 3>;
  using ColumnScaleStride = cute::conditional_t<kTransposed, PerGemmRow, PerGemmColumn>;
  using ColumnScale =
      cute::conditional_t<kTransposed,
                          cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, float, float, ColumnScaleStride>,
                          cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, float, float, ColumnScaleStride>>;
  using BiasStride = cute::conditional_t<kTransposed, PerGemmColumn, PerGemmRow>;
  using Bias = cute::conditional_t<
      kTransposed, cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, ElementD, float, BiasStride, kAlignBias>,
      cutlass::epilogue::fusion::Sm90ColBroadcast<0, TileShape, ElementD, float, BiasStride, kAlignBias>>;

  using Fusion = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<cutlass::homogeneous_multiply_add, ElementD, float, kRound>,
      cutlass::epilogue::fusion::Sm90EVT<cutlass::epilogue::fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>,
                                         ScaleProduct, ColumnScale>,
      cutlass::epilogue::fusion::Sm90AccFetch, Bias>;

  // bias null or m values of ElementD, 16-byte aligned; scale_a, scale_b one float each or null;
  // column_scale n floats, 16-byte aligned, or null. A null factor is 1, a null bias -0.0f.
  static typename Fusion::Arguments arguments(float alpha, const void* bias, const float* scale_a, const float* scale_b,
                                              const float* column_scale) {
    return {
        {
            {{alpha, 1.0f, 1.0f}, {nullptr, scale_a, scale_b}, {}},  // alpha * A's scale * B's
            {column_scale, 1.0f, ColumnScaleStride{}},             // B's scale of the column
            {}                                                     // multiplies
        },
        {},                                                                       // acc
        {static_cast<const ElementD*>(bias), ElementD(-0.0f), BiasStride{}},     // bias
        {}                                                                        // multiply_add
    };
  }
};

}  // namespace sparsek::detail::spmm_sm90
