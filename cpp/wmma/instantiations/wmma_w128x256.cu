// The kernels of row wmma_w128x256 of kWmmaVariants (cpp/wmma/configs.hpp).
#include "wmma/kernel.cuh"

SPARSEK_WMMA_INSTANTIATE("wmma_w128x256")
