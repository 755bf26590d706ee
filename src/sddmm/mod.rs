//! The sampled product `S = α·(A·B) ⊙ mask + β·S` ([`sddmm`]): one entry point for every
//! backend.

mod check;
mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
pub(crate) mod rules;

use crate::dense::{Dense, Storage};
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::Element;
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::{Backend, SpmmOptions};
use check::check_operands;

/// The sparse output of [`sddmm`]: a host `BsrMatrix` or a `DeviceBsr`, its values
/// overwritten in place.
pub enum BsrOperandMut<'a, T> {
    /// A matrix in host memory (CPU backend).
    Host(&'a mut BsrMatrix<T>),
    /// A matrix in device memory (GPU backends).
    #[cfg(feature = "cuda")]
    Device(&'a mut DeviceBsr<T>),
}

impl<'a, T> From<&'a mut BsrMatrix<T>> for BsrOperandMut<'a, T> {
    fn from(s: &'a mut BsrMatrix<T>) -> Self {
        BsrOperandMut::Host(s)
    }
}

#[cfg(feature = "cuda")]
impl<'a, T> From<&'a mut DeviceBsr<T>> for BsrOperandMut<'a, T> {
    fn from(s: &'a mut DeviceBsr<T>) -> Self {
        BsrOperandMut::Device(s)
    }
}

/// SDDMM: `S = α·(A·B) ⊙ mask + β·S`, the product of dense `A` (`m x k`) and `B` (`k x n`)
/// computed only on the blocks of the BSR matrix `S` (`m x n`), whose pattern is the mask
/// and stays as it is; f32 accumulation, `S`'s values overwritten in place (β = 0 never
/// reads them). The backward pass of a pruned linear layer needs it: `dW = dYᵀ·X` on `W`'s
/// pattern. `A` and `B` each row- or column-major (pass a transpose as [`Dense::t`]);
/// `SpmmOptions::transpose_a` does not apply (`Error::InvalidArgument`); FP8 element types
/// are `Error::UnsupportedTypes` (and scales `Error::ScalesNotTaken`). Host operands run
/// on the CPU backend; device operands (a `DeviceBsr` S, `Dense::device` A and B) on the
/// Hopper family (sm_90a, where one of its rows takes the blocks and layouts) or the Wmma
/// family (sm_80+: blocks multiples of 16), enqueued on the stream of S's values.
///
/// ```
/// use sparsek::{sddmm, BlockMask, BlockShape, BsrMatrix, Dense, Layout, SpmmOptions};
///
/// // S: 2 x 2 of 1x1 blocks, the diagonal only; A = [[1, 2]], ..., B = I.
/// let mut s = BsrMatrix::from_block_mask(&BlockMask::from_fn(2, 2, |r, c| r == c)?, BlockShape::new(1, 1),
///                                        |_, _| 0f32)?;
/// let a = [1.0f32, 2.0, 3.0, 4.0];
/// let b = [1.0f32, 0.0, 0.0, 1.0];
/// sddmm(Dense::host(&a, 2, 2, Layout::RowMajor), Dense::host(&b, 2, 2, Layout::RowMajor), &mut s,
///       &SpmmOptions::new().alpha(2.0))?;
/// assert_eq!(s.values(), &[2.0, 8.0]); // 2·(A·B) on the diagonal: 2·1, 2·4
/// # Ok::<(), sparsek::Error>(())
/// ```
pub fn sddmm<'a, T: Element, O: Element>(
    a: Dense<'_, T>,
    b: Dense<'_, T>,
    s: impl Into<BsrOperandMut<'a, O>>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let s = s.into();
    let dims = match &s {
        BsrOperandMut::Host(s) => (s.m(), s.k()),
        #[cfg(feature = "cuda")]
        BsrOperandMut::Device(s) => (s.m(), s.k()),
    };
    #[cfg(feature = "cuda")]
    let device = matches!(s, BsrOperandMut::Device(_));
    #[cfg(not(feature = "cuda"))]
    let device = false;
    check_operands::<T, O>(dims, &a, &b, options, device)?;
    match (s, a.data, b.data) {
        (BsrOperandMut::Host(s), Storage::Host(a_data), Storage::Host(b_data)) => {
            if !matches!(options.backend, Backend::Auto | Backend::Cpu) {
                return Err(Error::BackendUnavailable {
                    backend: options.backend,
                    reason: "operands are on the host; upload them (DeviceBsr, Dense::device)"
                        .into(),
                });
            }
            cpu::sddmm(
                a_data,
                &a.shape,
                b_data,
                &b.shape,
                s,
                options.alpha,
                options.beta,
            );
            Ok(())
        }
        #[cfg(feature = "cuda")]
        (BsrOperandMut::Device(s), Storage::Device(a_data), Storage::Device(b_data)) => {
            let operands = gpu::SddmmOperands {
                a: a_data,
                a_shape: &a.shape,
                b: b_data,
                b_shape: &b.shape,
                s,
            };
            gpu::sddmm(operands, options)
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(
            "A, B and S must be all host or all device",
        )),
    }
}
