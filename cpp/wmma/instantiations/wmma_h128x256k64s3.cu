// The kernels of row wmma_h128x256k64s3 of kWmmaVariants (cpp/wmma/configs.hpp).
#include "wmma/kernel.cuh"

SPARSEK_WMMA_INSTANTIATE("wmma_h128x256k64s3")
