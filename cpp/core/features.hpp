// sparsek build features: which operations and which rows of the kernel tables a build
// compiles. One bit per feature; the cargo features of the same names and the CMake options
// SPARSEK_WITH_<NAME> pick them, and the build passes the set as -DSPARSEK_FEATURES=<bits>
// to the units that select rows (registries, families, APIs). The row units themselves do
// not depend on it (the units generator makes them per feature set of their rows), so one
// compiled row serves every build that has it.
//
// A row names the features it needs (each family's `needs(row)`, configs.hpp); a row that
// needs a feature the build lacks is not compiled, Auto passes over it, and a problem only
// such a row would run is refused with NotSupported naming the feature.
#pragma once

#include <cstdint>

// Without SPARSEK_FEATURES (a unit compiled outside build.rs / CMake): every feature.
#ifndef SPARSEK_FEATURES
#define SPARSEK_FEATURES 0xffffffffu
#endif

// The bits, as macros too: #if needs them (a family of a feature not built is not linked).
#define SPARSEK_FEATURE_BF16 (1u << 0)
#define SPARSEK_FEATURE_TRANSPOSE (1u << 1)
#define SPARSEK_FEATURE_ANY_BLOCK (1u << 2)
#define SPARSEK_FEATURE_TUNING (1u << 3)
#define SPARSEK_FEATURE_SDDMM (1u << 4)
#define SPARSEK_FEATURE_ATTENTION (1u << 5)
#define SPARSEK_FEATURE_FP8 (1u << 6)

namespace sparsek::detail {

enum Feature : uint32_t {
  kFeatureBf16 = SPARSEK_FEATURE_BF16,            // bf16 inputs (f16 is always built)
  kFeatureTranspose = SPARSEK_FEATURE_TRANSPOSE,  // Hopper rows of op(A) = A^T and D*op(A)
  kFeatureAnyBlock = SPARSEK_FEATURE_ANY_BLOCK,   // Hopper rows of blocks other than 64/128 squares
  kFeatureTuning = SPARSEK_FEATURE_TUNING,        // candidate rows Auto never picks (SPARSEK_VARIANT)
  kFeatureSddmm = SPARSEK_FEATURE_SDDMM,          // the SDDMM families
  kFeatureAttention = SPARSEK_FEATURE_ATTENTION,  // attention and the top-k gating
  kFeatureFp8 = SPARSEK_FEATURE_FP8,              // FP8 (e4m3, e5m2) inputs
};

struct FeatureName {
  uint32_t bit;
  const char* name;  // the cargo feature (CMake: SPARSEK_WITH_<NAME upper-cased, '-' as '_'>)
};

inline constexpr FeatureName kFeatureNames[] = {
    {kFeatureBf16, "bf16"},   {kFeatureTranspose, "transpose"}, {kFeatureAnyBlock, "any-block"},
    {kFeatureTuning, "tuning"}, {kFeatureSddmm, "sddmm"},         {kFeatureAttention, "attention"},
    {kFeatureFp8, "fp8"},
};

inline constexpr uint32_t kBuiltFeatures = uint32_t(SPARSEK_FEATURES);

// Whether a row (or family) needing `needs` is compiled into this build.
constexpr bool built(uint32_t needs) { return (needs & ~kBuiltFeatures) == 0; }

// The first feature of `needs` this build lacks ("" when none).
constexpr const char* missing_feature(uint32_t needs) {
  for (const FeatureName& f : kFeatureNames)
    if ((needs & f.bit) != 0 && (kBuiltFeatures & f.bit) == 0) return f.name;
  return "";
}

}  // namespace sparsek::detail
