// The kernels of row wmma_h128x256k32s5 of kWmmaVariants (cpp/wmma/configs.hpp).
#include "wmma/kernel.cuh"

SPARSEK_WMMA_INSTANTIATE("wmma_h128x256k32s5")
