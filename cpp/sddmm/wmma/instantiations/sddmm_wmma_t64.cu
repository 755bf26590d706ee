// The kernels of row sddmm_wmma_t64 of kSddmmWmmaVariants (cpp/sddmm/wmma/configs.hpp).
#include "sddmm/wmma/kernel.cuh"

SPARSEK_SDDMM_WMMA_INSTANTIATE("sddmm_wmma_t64")
