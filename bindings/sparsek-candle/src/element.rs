//! The element types an op takes: sparsek's and candle's at once (half's f16 and bf16 are
//! the same types in both).

use sparsek::{bf16, f16};

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
}

/// f16, bf16 or f32: a sparsek [`Element`](sparsek::Element), a candle
/// [`WithDType`](candle_core::WithDType) and, with the `cuda` feature, a candle CUDA dtype.
#[cfg(feature = "cuda")]
pub trait CandleElement:
    sealed::Sealed
    + sparsek::Element
    + candle_core::WithDType
    + candle_core::cuda_backend::CudaDType
    + sparsek::cudarc::driver::DeviceRepr
    + sparsek::cudarc::driver::ValidAsZeroBits
{
}

/// f16, bf16 or f32: a sparsek [`Element`](sparsek::Element) and a candle
/// [`WithDType`](candle_core::WithDType).
#[cfg(not(feature = "cuda"))]
pub trait CandleElement: sealed::Sealed + sparsek::Element + candle_core::WithDType {}

impl CandleElement for f16 {}
impl CandleElement for bf16 {}
impl CandleElement for f32 {}
