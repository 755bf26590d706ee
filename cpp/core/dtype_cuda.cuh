// The device type of each DType with a traits entry (core/dtype.hpp): kernels name their
// element type through it, so a new DType is one entry here and one there.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dtype.hpp"

namespace sparsek::detail {

template <DType kT>
struct DeviceTypeOf;
template <>
struct DeviceTypeOf<DType::F16> {
  using type = __half;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
};
template <>
struct DeviceTypeOf<DType::BF16> {
  using type = __nv_bfloat16;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
};
template <>
struct DeviceTypeOf<DType::F32> {
  using type = float;
  static constexpr CUtensorMapDataType kTensorMap = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
};

template <DType kT>
using DeviceType = typename DeviceTypeOf<kT>::type;

}  // namespace sparsek::detail
