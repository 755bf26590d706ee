//! The products, one entry point each for every backend: `C = α·op(A)·B + β·C`
//! ([`spmm`], [`spmm_fused`]) and `C = α·D·op(A) + β·C` ([`dense_spmm`]). (The sampled
//! product is [`sddmm`](crate::sddmm()).)

pub(crate) mod check;
mod cpu;
mod fp8;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;

pub(crate) use fp8::{check_fp8_product, run_fp8};
pub use fp8::{spmm_fp8, Fp8Operand};

use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::Element;
use crate::epilogue::{Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::{Backend, SpmmOptions};
#[cfg(feature = "cuda")]
use check::OPERANDS_TOGETHER;
use check::{check_operands, check_view, same, BIAS_WITH_OPERANDS};

/// The sparse operand: a host `BsrMatrix` or a `DeviceBsr`.
pub enum BsrOperand<'a, T> {
    /// A matrix in host memory (CPU backend).
    Host(&'a BsrMatrix<T>),
    /// A matrix in device memory (GPU backends).
    #[cfg(feature = "cuda")]
    Device(&'a DeviceBsr<T>),
}

impl<'a, T> From<&'a BsrMatrix<T>> for BsrOperand<'a, T> {
    fn from(a: &'a BsrMatrix<T>) -> Self {
        BsrOperand::Host(a)
    }
}

#[cfg(feature = "cuda")]
impl<'a, T> From<&'a DeviceBsr<T>> for BsrOperand<'a, T> {
    fn from(a: &'a DeviceBsr<T>) -> Self {
        BsrOperand::Device(a)
    }
}

/// `m` and `k` of the sparse operand, wherever it lives.
pub(crate) fn bsr_dims<T>(a: &BsrOperand<'_, T>) -> (usize, usize) {
    match a {
        BsrOperand::Host(a) => (a.m(), a.k()),
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => (a.m(), a.k()),
    }
}

/// The rows of the sparse operand's blocks.
fn bsr_bm<T>(a: &BsrOperand<'_, T>) -> usize {
    match a {
        BsrOperand::Host(a) => a.block().rows,
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => a.block().rows,
    }
}

/// The shape checks of a product with `epilogue` (`spmm_fused`, `spmm_fp8`): shapes agree
/// and B and C hold their views ([`check_operands`]), the bias has one value per row of
/// op(A), and a gated epilogue's rules hold (C then has `m/2` rows).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_product(
    (m, k): (usize, usize),
    bm: usize,
    b: &DenseShape,
    b_len: usize,
    c: &DenseShape,
    c_len: usize,
    bias_len: Option<usize>,
    gated: bool,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let transpose = options.transpose_a;
    if gated {
        let rows = check::check_gated(m, bm, transpose, options.beta)?;
        same("rows of C (= m/2 of A, gated)", rows, c.rows)?;
        check_operands((rows, k), false, b, b_len, c, c_len)?;
        return check_bias_len(bias_len, m);
    }
    check_operands((m, k), transpose, b, b_len, c, c_len)?;
    check_bias_len(bias_len, c.rows)
}

/// `C = α·op(A)·B + β·C` with f32 accumulation.
///
/// `A` is `m x k` BSR, `B` is `k x n`, `C` is `m x n`; `B` and `C` each row- or
/// column-major. With [`SpmmOptions::transpose_a`], `op(A) = Aᵀ`: `B` is `m x n` and `C`
/// `k x n`. Host operands run on the CPU backend; device operands (`DeviceBsr` and
/// `Dense::device`) run on a GPU backend, enqueued on `C`'s stream (the call returns
/// once the work is enqueued; a `DeviceBsr`'s first `Aᵀ` product first builds its
/// transpose index, `DeviceBsr::prepare_transpose`). Every check runs before anything is launched or written;
/// on error `C` is untouched.
///
/// ```
/// use sparsek::{bf16, spmm, BlockShape, BsrMatrix, Dense, DenseMut, Error, Layout, SpmmOptions};
///
/// // A = [[1, 0], [0, 2]] as 1 x 1 blocks; B = [[1, 2], [3, 4]]; C starts at all ones.
/// let a = BsrMatrix::from_dense(&[1.0, 0.0, 0.0, 2.0].map(bf16::from_f32), 2, 2, BlockShape::new(1, 1))?;
/// let b = [1.0, 2.0, 3.0, 4.0].map(bf16::from_f32);
/// let mut c = [1.0f32; 4];
/// // C = 1·A·B + 0.5·C, accumulated in f32, written as f32.
/// spmm(&a, Dense::host(&b, 2, 2, Layout::RowMajor), DenseMut::host(&mut c, 2, 2, Layout::RowMajor),
///      &SpmmOptions::new().beta(0.5))?;
/// assert_eq!(c, [1.5, 2.5, 6.5, 8.5]);
///
/// // Shapes are checked before anything runs: B must have k = 2 rows.
/// let e = spmm(&a, Dense::host(&b, 1, 4, Layout::RowMajor), DenseMut::host(&mut c, 2, 4, Layout::RowMajor),
///              &SpmmOptions::new());
/// assert!(matches!(e, Err(Error::ShapeMismatch { .. })));
/// # Ok::<(), Error>(())
/// ```
pub fn spmm<'a, T: Element, O: Element>(
    a: impl Into<BsrOperand<'a, T>>,
    b: Dense<'_, T>,
    c: DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    spmm_fused(a, b, c, &Epilogue::new(), options)
}

/// [`spmm`] with the fused linear-layer epilogue: `C = act(α·op(A)·B + bias + β·C)`, with
/// `bias` (if any) holding one value per row of `C` (where the operands live).
///
/// FP8 operands (`T` or `O` [`F8E4M3`](crate::F8E4M3) / [`F8E5M2`](crate::F8E5M2)) are
/// [`Error::UnsupportedTypes`] here, on every backend, as is a B with scales
/// ([`Error::ScalesNotTaken`]): their products are [`spmm_fp8`]'s.
pub fn spmm_fused<'a, T: Element, O: Element>(
    a: impl Into<BsrOperand<'a, T>>,
    b: Dense<'_, T>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, T>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let a = a.into();
    check_fused(&a, &b, &c, epilogue, options, false)?;
    run_fused(a, b, c, epilogue, options)
}

/// Every check of [`spmm_fused`] on these operands, launching nothing and writing nothing:
/// shapes, the bias and the gated rules ([`check_product`]), the element types (no FP8, the
/// GPU's types on the device), no scales, where the operands are, the backend for host
/// operands, and on the device the problem's fields and every buffer's context against
/// C's stream. With `select_kernel`, device operands also select their kernel (C++
/// `Mode::Select`: no device memory read, nothing launched), so a backend that cannot run
/// the product is refused here: `Some(backend)`, the one that would run (`None` on the
/// host). A caller that launches several products checks them all with this first.
pub(crate) fn check_fused<T: Element, O: Element>(
    a: &BsrOperand<'_, T>,
    b: &Dense<'_, T>,
    c: &DenseMut<'_, O>,
    epilogue: &Epilogue<'_, T>,
    options: &SpmmOptions,
    select_kernel: bool,
) -> Result<Option<Backend>, Error> {
    check_product(
        bsr_dims(a),
        bsr_bm(a),
        &b.shape,
        b.data.len(),
        &c.shape,
        c.data.len(),
        epilogue.bias.as_ref().map(Vector::len),
        epilogue.gated,
        options,
    )?;
    check::refuse_fp8::<T, O>(options.backend)?;
    check::refuse_scales("B", b.scales.kind())?;
    match (a, &b.data, &c.data) {
        (BsrOperand::Host(_), Storage::Host(_), StorageMut::Host(_)) => {
            // The CPU backend has no kernel to select.
            let _ = select_kernel;
            check::check_host_backend(options.backend)?;
            check::host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?;
            Ok(None)
        }
        #[cfg(feature = "cuda")]
        (BsrOperand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            check::check_gpu_types::<T, O>(options.backend)?;
            let operands = gpu::Operands {
                a,
                b: b_data,
                b_shape: &b.shape,
                c: &**c_data,
                c_shape: &c.shape,
                bias: check::device_vector(epilogue.bias, BIAS_WITH_OPERANDS)?,
            };
            gpu::check_spmm(
                &operands,
                epilogue.activation,
                epilogue.gated,
                options,
                select_kernel,
            )
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(OPERANDS_TOGETHER)),
    }
}

/// The product of [`spmm_fused`] once [`check_fused`] has passed on these operands.
pub(crate) fn run_fused<T: Element, O: Element>(
    a: BsrOperand<'_, T>,
    b: Dense<'_, T>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, T>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    match (a, b.data, c.data) {
        (BsrOperand::Host(a), Storage::Host(b_data), StorageMut::Host(c_data)) => {
            let bias = check::host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?;
            cpu::spmm(
                a,
                options.transpose_a,
                b_data,
                &b.shape,
                c_data,
                &c.shape,
                cpu::Scalars {
                    alpha: options.alpha,
                    beta: options.beta,
                    bias,
                    activation: epilogue.activation,
                    gated: epilogue.gated,
                },
            )?;
            Ok(())
        }
        #[cfg(feature = "cuda")]
        (BsrOperand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            let operands = gpu::Operands {
                a,
                b: b_data,
                b_shape: &b.shape,
                c: c_data,
                c_shape: &c.shape,
                bias: check::device_vector(epilogue.bias, BIAS_WITH_OPERANDS)?,
            };
            gpu::spmm(operands, epilogue.activation, epilogue.gated, options)
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(OPERANDS_TOGETHER)),
    }
}

/// `ShapeMismatch` unless the bias, if any, has one value per row of op(A) (of C, or of A
/// when gated).
pub(crate) fn check_bias_len(len: Option<usize>, rows: usize) -> Result<(), Error> {
    match len {
        Some(len) if len != rows => Err(Error::ShapeMismatch {
            what: "bias length (= rows of op(A))",
            expected: rows,
            got: len,
        }),
        _ => Ok(()),
    }
}

/// `C = α·D·op(A) + β·C` with f32 accumulation: a dense matrix times a sparse one.
///
/// `D` is `p x m`, `A` `m x k` BSR, `C` `p x k` (`op(A) = Aᵀ` with
/// [`SpmmOptions::transpose_a`]: `D` `p x k`, `C` `p x m`). It runs as the transposed
/// product `Cᵀ = op(A)ᵀ·Dᵀ` on transposed views of the same buffers ([`Dense::t`]), so
/// nothing is copied; the checks and backends are [`spmm`]'s.
///
/// ```
/// use sparsek::{dense_spmm, f16, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};
///
/// // Weights stored `in x out` (A: 4 x 2, 2x1 blocks, the top block only), x: 1 x 4.
/// let a = BsrMatrix::from_dense(&[1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0].map(f16::from_f32), 4, 2,
///                               BlockShape::new(2, 1))?;
/// let x = [1.0, 1.0, 1.0, 1.0].map(f16::from_f32);
/// let mut y = [0f32; 2];
/// dense_spmm(Dense::host(&x, 1, 4, Layout::RowMajor), &a, DenseMut::host(&mut y, 1, 2, Layout::RowMajor),
///            &SpmmOptions::new())?;
/// assert_eq!(y, [3.0, 0.0]);
/// # Ok::<(), sparsek::Error>(())
/// ```
pub fn dense_spmm<'a, T: Element, O: Element>(
    d: Dense<'_, T>,
    a: impl Into<BsrOperand<'a, T>>,
    c: DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let a = a.into();
    let (m, k) = bsr_dims(&a);
    let (op_rows, op_cols) = if options.transpose_a { (k, m) } else { (m, k) };
    same("columns of D (= rows of op(A))", op_rows, d.shape.cols)?;
    same("rows of C (= rows of D)", d.shape.rows, c.shape.rows)?;
    same("columns of C (= columns of op(A))", op_cols, c.shape.cols)?;
    check_view("D", &d.shape, d.data.len())?;
    check_view("C", &c.shape, c.data.len())?;
    let transposed = options.transpose_a(!options.transpose_a);
    spmm(a, d.t(), c.t(), &transposed)
}
