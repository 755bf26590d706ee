// The kernels of row wmma_w32x128 of kWmmaVariants (cpp/wmma/configs.hpp).
#include "wmma/kernel.cuh"

SPARSEK_WMMA_INSTANTIATE("wmma_w32x128")
