//! FP8 as a dtype of the products: `C = act(α·Σ_blocks (sa·A_blk·B_blk)·sb + bias + β·C)`
//! with an FP8 A and its scales (`sa`, per tensor or per block) and B's (`sb`, per tensor or
//! per column; 1 for an f16/bf16 B). These are the FP8 element types' rules and run path,
//! which [`spmm`](crate::spmm()) and [`spmm_fused`](crate::spmm_fused) dispatch to; the
//! deprecated names of the former parallel API ([`spmm_fp8`], [`Fp8Operand`]) call them.

use super::check::{check_scale_counts, Fp8Kind};
use super::BsrOperand;
use crate::dense::{Dense, DenseMut};
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::{Element, Fp8};
use crate::epilogue::{Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::SpmmOptions;
use crate::quantize::{BlockScales, QuantizedBsr};
use crate::scale::ScaleKind;

/// The FP8 rules only Rust's operands can break, once the table's rules have passed (`op(A)
/// = A`, the shapes, the types and the scales' kinds: `rules/spmm.toml`): A's and B's scales
/// hold the values their kinds need. Returns the kind of product (W8A8: B of A's FP8 type).
pub(super) fn check_scale_lengths<TA: Element, TB: Element>(
    a: &BsrOperand<'_, TA>,
    b: &Dense<'_, TB>,
) -> Result<Fp8Kind, Error> {
    let (nnzb, a_scales, device) = match a {
        BsrOperand::Host(a) => (a.nnz_blocks(), (ScaleKind::None, 0), false),
        BsrOperand::Scaled(a, s) => (a.nnz_blocks(), (s.kind(), s.as_slice().len()), false),
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => (
            a.nnz_blocks(),
            (a.scale_kind(), a.scales.buffer().map_or(0, |s| s.len())),
            true,
        ),
    };
    check_scale_counts(
        (a_scales.0, a_scales.1, nnzb),
        (
            b.scales.kind(),
            b.scales.values().as_ref().map_or(0, Vector::len),
            b.shape.cols,
        ),
        device,
    )?;
    Ok(if TB::DTYPE == TA::DTYPE {
        Fp8Kind::W8A8
    } else {
        Fp8Kind::W8A16
    })
}

/// The sparse FP8 operand with its scales: a host matrix and its [`BlockScales`] (a
/// [`QuantizedBsr`], or a `BsrMatrix` of FP8 values read without scales), or a `DeviceBsr`,
/// which holds its scales on the device. Each converts to the [`BsrOperand`] that every
/// product takes.
#[deprecated(
    since = "0.1.1",
    note = "FP8 is a dtype of the one product: use `BsrOperand` (`Scaled(&matrix, &scales)`, \
            `&QuantizedBsr`, `&DeviceBsr`)"
)]
pub enum Fp8Operand<'a, Q> {
    /// Values and scales in host memory (CPU backend): [`BsrOperand::Scaled`].
    Host(&'a BsrMatrix<Q>, &'a BlockScales),
    /// A matrix in device memory with its device scales: [`BsrOperand::Device`].
    #[cfg(feature = "cuda")]
    Device(&'a DeviceBsr<Q>),
}

#[allow(deprecated)]
mod conversions {
    use super::*;

    static NO_SCALES: BlockScales = BlockScales::None;

    impl<'a, Q: Fp8> From<&'a QuantizedBsr<Q>> for Fp8Operand<'a, Q> {
        fn from(a: &'a QuantizedBsr<Q>) -> Self {
            Fp8Operand::Host(a.matrix(), a.scales())
        }
    }

    impl<'a, Q> From<&'a BsrMatrix<Q>> for Fp8Operand<'a, Q> {
        fn from(a: &'a BsrMatrix<Q>) -> Self {
            Fp8Operand::Host(a, &NO_SCALES)
        }
    }

    #[cfg(feature = "cuda")]
    impl<'a, Q> From<&'a DeviceBsr<Q>> for Fp8Operand<'a, Q> {
        fn from(a: &'a DeviceBsr<Q>) -> Self {
            Fp8Operand::Device(a)
        }
    }

    impl<'a, Q> From<Fp8Operand<'a, Q>> for BsrOperand<'a, Q> {
        fn from(a: Fp8Operand<'a, Q>) -> Self {
            match a {
                Fp8Operand::Host(a, scales) => BsrOperand::Scaled(a, scales),
                #[cfg(feature = "cuda")]
                Fp8Operand::Device(a) => BsrOperand::Device(a),
            }
        }
    }
}

/// The FP8 product of [`spmm_fused`](crate::spmm_fused) under its former name: an FP8 A
/// with its scales ([`Fp8Operand`]), B of A's FP8 type with its scales (W8A8) or f16/bf16
/// (W8A16), C f16, bf16 or f32, the bias of C's type. The same checks, errors and results,
/// bit for bit.
///
/// ```
/// # #![allow(deprecated)]
/// use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
/// use sparsek::{spmm_fp8, spmm_fused, BlockMask, BlockShape, BsrMatrix, DenseMut, DenseShape,
///               Epilogue, Layout, SpmmOptions, F8E4M3};
///
/// let mask = BlockMask::from_fn(2, 4, |r, c| (r + c) % 2 == 0)?;
/// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |i, j| ((i * 3 + j) % 7) as f32 - 3.0)?;
/// let wq = w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
/// let x: Vec<f32> = (0..4 * 128).map(|i| (i % 5) as f32 * 0.25).collect();
/// let xq = QuantizedDense::<F8E4M3>::quantize(&x, DenseShape::packed(128, 4, Layout::ColMajor),
///                                               ColumnGranularity::PerColumn)?;
/// let (mut y, mut y2) = (vec![0f32; 4 * 64], vec![1f32; 4 * 64]);
/// spmm_fp8(&wq, xq.view(), DenseMut::host(&mut y, 64, 4, Layout::ColMajor), &Epilogue::new(),
///          &SpmmOptions::new())?;
/// // The same product, FP8 a dtype of the one entry point.
/// spmm_fused(&wq, xq.view(), DenseMut::host(&mut y2, 64, 4, Layout::ColMajor),
///            &Epilogue::<f32>::new(), &SpmmOptions::new())?;
/// assert_eq!(y, y2);
/// # Ok::<(), sparsek::Error>(())
/// ```
#[deprecated(
    since = "0.1.1",
    note = "FP8 is a dtype of the one product: use `spmm_fused` (or `spmm`) with a \
            `QuantizedBsr`, `BsrOperand::Scaled` or an FP8 `DeviceBsr`"
)]
#[allow(deprecated)]
pub fn spmm_fp8<'a, Q: Fp8, TB: Element, O: Element>(
    a: impl Into<Fp8Operand<'a, Q>>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    super::product(a.into().into(), b, c, epilogue, options)
}
