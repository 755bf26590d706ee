// The kernels of row wmma_h64x256x4w of kWmmaVariants (cpp/wmma/configs.hpp).
#include "wmma/kernel.cuh"

SPARSEK_WMMA_INSTANTIATE("wmma_h64x256x4w")
