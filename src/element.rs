//! The element types sparsek stores and computes with: f16, bf16, f32 and the FP8 types
//! [`F8E4M3`] and [`F8E5M2`] (the [`fp8`] module: their formats, rounding and saturation).

use half::{bf16, f16};

pub mod fp8;

pub use fp8::{Fp8, F8E4M3, F8E5M2};

/// Which element type a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 half precision ([`half::f16`]).
    F16,
    /// bfloat16 ([`half::bf16`]).
    Bf16,
    /// IEEE 754 single precision (`f32`).
    F32,
    /// OCP FP8 E4M3 ([`F8E4M3`]): read as `stored * scale` with its operand's scales.
    E4M3,
    /// OCP FP8 E5M2 ([`F8E5M2`]): read as `stored * scale` with its operand's scales.
    E5M2,
}

impl DType {
    /// Whether this is an FP8 type (`E4M3`, `E5M2`): the types that take scales.
    pub fn is_fp8(self) -> bool {
        matches!(self, DType::E4M3 | DType::E5M2)
    }
    /// Whether this is a 16-bit float (`F16`, `Bf16`): the inputs of the 16-bit products and
    /// of attention, and W8A16's B. The checks ask this, not for named types, so a new type
    /// joins them here (as C++'s `HalfDTypes` in `cpp/core/dtype.hpp`).
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::Bf16)
    }
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            DType::F16 | DType::Bf16 => 2,
            DType::F32 => 4,
            DType::E4M3 | DType::E5M2 => 1,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::F32 => "f32",
            DType::E4M3 => "e4m3",
            DType::E5M2 => "e5m2",
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

pub(crate) mod sealed {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
}

/// An element of a BSR or dense matrix: `f16`, `bf16`, `f32`, or an FP8 type ([`F8E4M3`],
/// [`F8E5M2`]: stored values that the products read with their scales, `stored·scale`:
/// an FP8 A of [`spmm`](crate::spmm()) comes with its scales, a `QuantizedBsr` or a
/// `DeviceBsr`; the SDDMM and attention refuse them). Arithmetic is done in `f32` (the
/// accumulation type), so an element only needs to convert both ways.
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

/// The B element types a product takes with an A of this type (`TB`, and `x` in the layers'
/// `y = x·Wᵀ`): A's own type; with an FP8 A also f16 and bf16 (W8A16). A bound of
/// [`spmm`](crate::spmm()) and the layers, so that B's type follows from A's where A is
/// f16, bf16 or f32 (it is A's). The rest is checked when the product runs: an FP8 B of A's
/// type is W8A8 and may carry scales ([`Dense::with_scales`](crate::Dense::with_scales)).
/// Implemented for the element types only.
pub trait TakesB<TB: Element>: Element {}

/// The bias types a product takes with an A of this type (`V` of [`Epilogue<V>`]).
///
/// **The bias has the type of A's values**: an f16, bf16 or f32 A holds its values, so the
/// bias has A's type; an FP8 A is a storage format (its values are `stored·scale`, which the
/// product carries in C's type), so the bias has C's type (f16, bf16 or f32). A bound of
/// [`spmm_fused`](crate::spmm_fused) and the layers, so that the bias's type follows from A's
/// where A is f16, bf16 or f32; with an FP8 A it admits the three C types and the product
/// checks that the bias is C's ([`Error::OperandTypes`](crate::Error::OperandTypes)
/// otherwise, nothing run or written). A bias of an FP8 A's own type compiles only so that
/// code generic over [`Element`] does, and is refused the same way. Implemented for the
/// element types only.
///
/// [`Epilogue<V>`]: crate::Epilogue
pub trait TakesBias<V: Element>: Element {}

impl<T: Element> TakesB<T> for T {}
impl<T: Element> TakesBias<T> for T {}

/// An FP8 A's other B types (W8A16) and its bias types (C's).
macro_rules! fp8_takes {
    ($($q:ty),+) => {$(
        impl TakesB<f16> for $q {}
        impl TakesB<bf16> for $q {}
        impl TakesBias<f16> for $q {}
        impl TakesBias<bf16> for $q {}
        impl TakesBias<f32> for $q {}
    )+};
}
fp8_takes!(F8E4M3, F8E5M2);

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
