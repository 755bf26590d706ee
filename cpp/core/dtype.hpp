// Element types: one traits entry per DType (include/sparsek/sparsek.hpp), the one place that
// says a type's size, name and the build feature it needs. A family names the types it takes
// as a DTypeList and reaches the kernel of a run-time DType through dispatch(): a DType
// outside the list is refused, never sent down another type's path, and a listed DType
// without a traits entry does not compile (DTypeTraits has no primary definition).
// With nvcc, the entry's device type (__half, ...), CUTLASS type and TMA data type follow
// (DeviceTypeOf).
#pragma once

#include <cstdint>
#include <utility>

#include <sparsek/sparsek.hpp>

#include "core/features.hpp"

namespace sparsek::detail {

template <DType kT>
struct DTypeTraits;  // every DType a family lists needs an entry below

template <>
struct DTypeTraits<DType::F16> {
  static constexpr DType kDType = DType::F16;
  static constexpr int kBytes = 2;
  static constexpr const char* kName = "f16";
  static constexpr const char* kRowTakes = "the row takes f16 inputs";
  static constexpr uint32_t kNeeds = 0;  // always built
};

template <>
struct DTypeTraits<DType::BF16> {
  static constexpr DType kDType = DType::BF16;
  static constexpr int kBytes = 2;
  static constexpr const char* kName = "bf16";
  static constexpr const char* kRowTakes = "the row takes bf16 inputs";
  static constexpr uint32_t kNeeds = kFeatureBf16;
};

template <>
struct DTypeTraits<DType::F32> {
  static constexpr DType kDType = DType::F32;
  static constexpr int kBytes = 4;
  static constexpr const char* kName = "f32";
  static constexpr const char* kRowTakes = "the row takes f32 inputs";
  static constexpr uint32_t kNeeds = 0;
};

template <>
struct DTypeTraits<DType::E4M3> {
  static constexpr DType kDType = DType::E4M3;
  static constexpr int kBytes = 1;
  static constexpr const char* kName = "e4m3";
  static constexpr const char* kRowTakes = "the row takes e4m3 inputs";
  static constexpr uint32_t kNeeds = kFeatureFp8;
};

template <>
struct DTypeTraits<DType::E5M2> {
  static constexpr DType kDType = DType::E5M2;
  static constexpr int kBytes = 1;
  static constexpr const char* kName = "e5m2";
  static constexpr const char* kRowTakes = "the row takes e5m2 inputs";
  static constexpr uint32_t kNeeds = kFeatureFp8;
};

// The types a family (or an API) takes.
template <DType... kTs>
struct DTypeList {
  static constexpr bool contains(DType t) { return ((t == kTs) || ...); }
};

// Every DType with a traits entry: what the validators call "known".
using KnownDTypes = DTypeList<DType::F16, DType::BF16, DType::F32, DType::E4M3, DType::E5M2>;

// The 8-bit floats, read as stored * scale (include/sparsek/sparsek.hpp, ScaleKind).
using Fp8DTypes = DTypeList<DType::E4M3, DType::E5M2>;
constexpr bool is_fp8(DType t) { return Fp8DTypes::contains(t); }

// The 16-bit floats: the inputs of the 16-bit products (A and B of one type), W8A16's B, and
// attention's Q, K and V. The validators ask these lists, not for named types, so a new type
// joins an operation here and in the families that list it.
using HalfDTypes = DTypeList<DType::F16, DType::BF16>;
constexpr bool is_half(DType t) { return HalfDTypes::contains(t); }

// f(DTypeTraits<t>{}) for the entry of `t` in List, else missing(). Both must return the
// same type.
template <class List, class F, class Missing>
constexpr auto dispatch(DType t, F&& f, Missing&& missing);

template <DType... kTs, class F, class Missing>
constexpr auto dispatch_in(DTypeList<kTs...>, DType t, F&& f, Missing&& missing) {
  using R = decltype(missing());
  R out = R();
  bool hit = false;
  ((!hit && t == kTs ? (out = f(DTypeTraits<kTs>{}), hit = true) : false), ...);
  return hit ? out : missing();
}

template <class List, class F, class Missing>
constexpr auto dispatch(DType t, F&& f, Missing&& missing) {
  return dispatch_in(List{}, t, std::forward<F>(f), std::forward<Missing>(missing));
}

// Bytes of an element of `t` (0 for a DType without an entry).
constexpr int dtype_bytes(DType t) {
  return dispatch<KnownDTypes>(t, [](auto tr) { return decltype(tr)::kBytes; }, [] { return 0; });
}

// The name of `t` ("?" for a DType without an entry).
constexpr const char* dtype_name(DType t) {
  return dispatch<KnownDTypes>(t, [](auto tr) { return decltype(tr)::kName; }, [] { return "?"; });
}

// A family's refusal of a problem whose input type is not its row's `t`.
constexpr const char* row_takes(DType t) {
  return dispatch<KnownDTypes>(t, [](auto tr) { return decltype(tr)::kRowTakes; },
                               [] { return "the row takes another input type"; });
}

// The build features an input of type `t` needs (core/features.hpp).
constexpr uint32_t dtype_needs(DType t) {
  return dispatch<KnownDTypes>(t, [](auto tr) { return decltype(tr)::kNeeds; }, [] { return 0u; });
}

}  // namespace sparsek::detail

// The device side of each entry: kernels name their element type through it, so a new
// DType is one entry above and one here.
#if defined(__CUDACC__)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "cutlass/numeric_types.h"

namespace sparsek::detail {

template <DType kT>
struct DeviceTypeOf;
template <>
struct DeviceTypeOf<DType::F16> {
  using type = __half;
  using cutlass_type = cutlass::half_t;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
};
template <>
struct DeviceTypeOf<DType::BF16> {
  using type = __nv_bfloat16;
  using cutlass_type = cutlass::bfloat16_t;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
};
template <>
struct DeviceTypeOf<DType::F32> {
  using type = float;
  using cutlass_type = float;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
};

template <>
struct DeviceTypeOf<DType::E4M3> {
  using type = __nv_fp8_e4m3;
  using cutlass_type = cutlass::float_e4m3_t;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_UINT8;  // TMA moves the bits
};

template <>
struct DeviceTypeOf<DType::E5M2> {
  using type = __nv_fp8_e5m2;
  using cutlass_type = cutlass::float_e5m2_t;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_UINT8;
};

template <DType kT>
using DeviceType = typename DeviceTypeOf<kT>::type;

}  // namespace sparsek::detail
#endif  // __CUDACC__
