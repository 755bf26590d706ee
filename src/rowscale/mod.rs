//! Row scaling `C = diag(s)·A` of a BSR matrix ([`rowscale`]): one entry point for every
//! backend.

mod check;
mod cpu;
#[cfg(feature = "cuda")]
mod gpu;

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::Element;
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::Backend;
use check::check_rowscale;

/// The operands of [`rowscale`], all on the host or all on the device. `c_values` is C's
/// values (`nnzb * bm * bk` elements, in A's block order, each block row-major): C has A's
/// pattern.
pub enum Rowscale<'a, T> {
    /// Host memory (CPU backend).
    Host {
        /// A, `m x k`.
        a: &'a BsrMatrix<T>,
        /// The row scales, `m` values.
        s: &'a [f32],
        /// C's values, overwritten.
        c_values: &'a mut [T],
    },
    /// Device memory (GPU backends), enqueued on the stream of `c_values`.
    #[cfg(feature = "cuda")]
    Device {
        /// A, `m x k`, without scales.
        a: &'a DeviceBsr<T>,
        /// The row scales, `m` values.
        s: &'a CudaSlice<f32>,
        /// C's values, overwritten.
        c_values: &'a mut CudaSlice<T>,
    },
}

/// `C = diag(s)·A`: every value of row `i` of A's stored blocks times `s[i]`, computed in f32
/// and rounded once to `T`, into C's values (A's pattern). Host operands run on the CPU
/// (f16, bf16, f32); device operands on the SIMT kernel (f16, bf16). A length of `s` other
/// than `m` or of `c_values` other than A's values is [`Error::ShapeMismatch`], an FP8 `T`
/// [`Error::UnsupportedTypes`]; on any error nothing is written.
///
/// ```
/// use sparsek::{rowscale, BlockMask, BlockShape, BsrMatrix, Rowscale};
///
/// // A: 2 x 2 of 1x1 blocks, the diagonal only.
/// let a = BsrMatrix::from_block_mask(&BlockMask::from_fn(2, 2, |r, c| r == c)?, BlockShape::new(1, 1),
///                                    |i, _| (i + 1) as f32)?;
/// let mut c = [0f32; 2];
/// rowscale(Rowscale::Host { a: &a, s: &[10.0, 100.0], c_values: &mut c })?;
/// assert_eq!(c, [10.0, 200.0]);
/// # Ok::<(), sparsek::Error>(())
/// ```
pub fn rowscale<T: Element>(operands: Rowscale<'_, T>) -> Result<(), Error> {
    crate::check::refuse_fp8::<T, T>(Backend::Auto)?;
    match operands {
        Rowscale::Host { a, s, c_values } => {
            check_rowscale(a.m(), a.values().len(), s.len(), c_values.len())?;
            cpu::rowscale(a, s, c_values);
            Ok(())
        }
        #[cfg(feature = "cuda")]
        Rowscale::Device { a, s, c_values } => {
            check_rowscale(a.m(), a.values_len(), s.len(), c_values.len())?;
            crate::check::check_gpu_types::<T, T>(Backend::Auto)?;
            crate::check::refuse_scales("A", a.scale_kind())?;
            gpu::rowscale(a, s, c_values)
        }
    }
}
