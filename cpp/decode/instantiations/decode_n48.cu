// The kernels of row decode_n48 of kDecodeVariants (cpp/decode/configs.hpp).
#include "decode/kernel.cuh"

SPARSEK_DECODE_INSTANTIATE("decode_n48")
