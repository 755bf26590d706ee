//! The element types sparsek stores and computes with.

use half::{bf16, f16};

/// Which element type a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 half precision ([`half::f16`]).
    F16,
    /// bfloat16 ([`half::bf16`]).
    Bf16,
    /// IEEE 754 single precision (`f32`).
    F32,
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
        })
    }
}

#[cfg(feature = "cuda")]
mod device_bound {
    /// What the GPU side needs of an element: cudarc can copy it and zero it.
    pub trait DeviceElement: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits {}
    impl<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits> DeviceElement for T {}
}
#[cfg(not(feature = "cuda"))]
mod device_bound {
    /// Without the `cuda` feature there is no device: every element qualifies.
    pub trait DeviceElement {}
    impl<T> DeviceElement for T {}
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
}

/// An element of a BSR or dense matrix: `f16`, `bf16` or `f32`. Arithmetic is done in
/// `f32` (the accumulation type), so an element only needs to convert both ways.
pub trait Element:
    Copy
    + Default
    + PartialEq
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
    + sealed::Sealed
    + device_bound::DeviceElement
{
    /// The [`DType`] tag of this type.
    const DTYPE: DType;
    /// Widens to `f32`, exactly.
    fn to_f32(self) -> f32;
    /// Rounds `v` to the nearest value of this type (identity for `f32`).
    fn from_f32(v: f32) -> Self;
    /// Exactly zero (either sign). NaN is not zero.
    fn is_zero(self) -> bool {
        self.to_f32() == 0.0
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::Bf16;
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_f32(self) -> f32 {
        self
    }
    fn from_f32(v: f32) -> Self {
        v
    }
}
