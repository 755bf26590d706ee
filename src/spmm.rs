//! The products, one entry point each for every backend: `C = α·op(A)·B + β·C`
//! ([`spmm`], [`spmm_fused`]), `C = α·D·op(A) + β·C` ([`dense_spmm`]) and the sampled
//! product `S = α·(A·B) ⊙ mask + β·S` ([`sddmm`]).

use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
#[cfg(feature = "cuda")]
use crate::element::DType;
use crate::element::Element;
use crate::epilogue::{Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
#[cfg(feature = "cuda")]
use crate::gpu::DeviceBsr;
use crate::options::{Backend, SpmmOptions};

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

/// `m`, `k` and block shape of the sparse operand, wherever it lives.
fn bsr_dims<T>(a: &BsrOperand<'_, T>) -> (usize, usize) {
    match a {
        BsrOperand::Host(a) => (a.m(), a.k()),
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => (a.m(), a.k()),
    }
}

fn check_view(operand: &'static str, shape: &DenseShape, len: usize) -> Result<(), Error> {
    let min = shape.contiguous_extent().max(1);
    if shape.ld < min {
        return Err(Error::LeadingDimension {
            operand,
            ld: shape.ld,
            min,
        });
    }
    // A view whose extent overflows usize fits no buffer: say so, not "needs usize::MAX".
    let needed = shape.required_len().ok_or(Error::SizeOverflow {
        operand,
        rows: shape.rows,
        cols: shape.cols,
        ld: shape.ld,
    })?;
    if len < needed {
        return Err(Error::BufferTooSmall {
            operand,
            needed,
            got: len,
        });
    }
    Ok(())
}

/// Every check of the operands that holds for all backends: shapes agree (`(m, k)` of A,
/// which enters as `Aᵀ` when `transpose`) and B and C hold their views. The one validation
/// of the Rust entry point; A itself was validated when it was built.
pub(crate) fn check_operands(
    (m, k): (usize, usize),
    transpose: bool,
    b: &DenseShape,
    b_len: usize,
    c: &DenseShape,
    c_len: usize,
) -> Result<(), Error> {
    let (b_rows, c_rows) = if transpose {
        (
            (m, "rows of B (= m of A, for Aᵀ·B)"),
            (k, "rows of C (= k of A, for Aᵀ·B)"),
        )
    } else {
        ((k, "rows of B (= k of A)"), (m, "rows of C (= m of A)"))
    };
    if b.rows != b_rows.0 {
        return Err(Error::ShapeMismatch {
            what: b_rows.1,
            expected: b_rows.0,
            got: b.rows,
        });
    }
    if c.rows != c_rows.0 {
        return Err(Error::ShapeMismatch {
            what: c_rows.1,
            expected: c_rows.0,
            got: c.rows,
        });
    }
    if c.cols != b.cols {
        return Err(Error::ShapeMismatch {
            what: "columns of C (= columns of B)",
            expected: b.cols,
            got: c.cols,
        });
    }
    check_view("B", b, b_len)?;
    check_view("C", c, c_len)
}

/// The GPU backends take f16/bf16 in and the same type or f32 out.
#[cfg(feature = "cuda")]
pub(crate) fn check_gpu_types<T: Element, O: Element>(backend: Backend) -> Result<(), Error> {
    let (input, output) = (T::DTYPE, O::DTYPE);
    if matches!(input, DType::F16 | DType::Bf16) && (output == input || output == DType::F32) {
        Ok(())
    } else {
        Err(Error::UnsupportedTypes {
            backend,
            input,
            output,
        })
    }
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
pub fn spmm_fused<'a, T: Element, O: Element>(
    a: impl Into<BsrOperand<'a, T>>,
    b: Dense<'_, T>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, T>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let a = a.into();
    let transpose = options.transpose_a;
    check_operands(
        bsr_dims(&a),
        transpose,
        &b.shape,
        b.data.len(),
        &c.shape,
        c.data.len(),
    )?;
    if let Some(bias) = &epilogue.bias {
        if bias.len() != c.shape.rows {
            return Err(Error::ShapeMismatch {
                what: "bias length (= rows of C)",
                expected: c.shape.rows,
                got: bias.len(),
            });
        }
    }

    match (a, b.data, c.data) {
        (BsrOperand::Host(a), Storage::Host(b_data), StorageMut::Host(c_data)) => {
            if !matches!(options.backend, Backend::Auto | Backend::Cpu) {
                return Err(Error::BackendUnavailable {
                    backend: options.backend,
                    reason: "operands are on the host; upload them (DeviceBsr, Dense::device)"
                        .into(),
                });
            }
            let bias = match epilogue.bias {
                None => None,
                Some(Vector::Host(bias)) => Some(bias),
                #[cfg(feature = "cuda")]
                Some(Vector::Device(_)) => {
                    return Err(Error::MixedLocations(
                        "the bias must be where A, B and C are",
                    ))
                }
            };
            crate::cpu::spmm(
                a,
                transpose,
                b_data,
                &b.shape,
                c_data,
                &c.shape,
                crate::cpu::Scalars {
                    alpha: options.alpha,
                    beta: options.beta,
                    bias,
                    activation: epilogue.activation,
                },
            )?;
            Ok(())
        }
        #[cfg(feature = "cuda")]
        (BsrOperand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            check_gpu_types::<T, O>(options.backend)?;
            let bias = match epilogue.bias {
                None => None,
                Some(Vector::Device(bias)) => Some(bias),
                Some(Vector::Host(_)) => {
                    return Err(Error::MixedLocations(
                        "the bias must be where A, B and C are",
                    ))
                }
            };
            let operands = crate::gpu::launch::Operands {
                a,
                b: b_data,
                b_shape: &b.shape,
                c: c_data,
                c_shape: &c.shape,
                bias,
            };
            crate::gpu::launch::spmm(operands, epilogue.activation, options)
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(
            "A, B and C must be all host or all device",
        )),
    }
}

/// `Error::ShapeMismatch` unless a dimension `got` equals what it must (`what` names both).
fn same(what: &'static str, expected: usize, got: usize) -> Result<(), Error> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            what,
            expected,
            got,
        })
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

/// Every check of [`sddmm`]'s operands that holds for all backends: S is `m x n`
/// (`(m, n)`), A `m x k` and B `k x n`, each holding its view; no `op(A)`.
pub(crate) fn check_sddmm(
    (m, n): (usize, usize),
    (a, a_len): (&DenseShape, usize),
    (b, b_len): (&DenseShape, usize),
    options: &SpmmOptions,
) -> Result<(), Error> {
    if options.transpose_a {
        return Err(Error::InvalidArgument(
            "sddmm takes no op(A): pass Aᵀ as a transposed view (Dense::t)".into(),
        ));
    }
    same("rows of A (= rows of S)", m, a.rows)?;
    same("columns of B (= columns of S)", n, b.cols)?;
    same("rows of B (= columns of A)", a.cols, b.rows)?;
    check_view("A", a, a_len)?;
    check_view("B", b, b_len)
}

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
/// `SpmmOptions::transpose_a` does not apply (`Error::InvalidArgument`). Host operands run
/// on the CPU backend; device operands (a `DeviceBsr` S, `Dense::device` A and B) on the
/// Cutlass family (sm_90a, where one of its rows takes the blocks and layouts) or the Wmma
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
    check_sddmm(
        dims,
        (&a.shape, a.data.len()),
        (&b.shape, b.data.len()),
        options,
    )?;
    match (s, a.data, b.data) {
        (BsrOperandMut::Host(s), Storage::Host(a_data), Storage::Host(b_data)) => {
            if !matches!(options.backend, Backend::Auto | Backend::Cpu) {
                return Err(Error::BackendUnavailable {
                    backend: options.backend,
                    reason: "operands are on the host; upload them (DeviceBsr, Dense::device)"
                        .into(),
                });
            }
            crate::cpu::sddmm(
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
            check_gpu_types::<T, O>(options.backend)?;
            let operands = crate::gpu::launch::SddmmOperands {
                a: a_data,
                a_shape: &a.shape,
                b: b_data,
                b_shape: &b.shape,
                s,
            };
            crate::gpu::launch::sddmm(operands, options)
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(
            "A, B and S must be all host or all device",
        )),
    }
}
