//! The operation `C = α·A·B + β·C`, one entry point for every backend.

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

/// Every check of the operands that holds for all backends: shapes agree (`a_dims` is
/// `(m, k)` of A) and B and C hold their views. The one validation of the Rust entry point;
/// A itself was validated when it was built.
pub(crate) fn check_operands(
    (m, k): (usize, usize),
    b: &DenseShape,
    b_len: usize,
    c: &DenseShape,
    c_len: usize,
) -> Result<(), Error> {
    if b.rows != k {
        return Err(Error::ShapeMismatch {
            what: "rows of B (= k of A)",
            expected: k,
            got: b.rows,
        });
    }
    if c.rows != m {
        return Err(Error::ShapeMismatch {
            what: "rows of C (= m of A)",
            expected: m,
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

/// `C = α·A·B + β·C` with f32 accumulation.
///
/// `A` is `m x k` BSR, `B` is `k x n`, `C` is `m x n`; `B` and `C` each row- or
/// column-major. Host operands run on the CPU backend; device operands (`DeviceBsr` and
/// `Dense::device`) run on a GPU backend, enqueued on `C`'s stream (the call returns
/// once the work is enqueued). Every check runs before anything is launched or written;
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

/// [`spmm`] with the fused linear-layer epilogue: `C = act(α·A·B + bias + β·C)`, with
/// `bias` (if any) holding one value per row of `C` (`m` values, where the operands live).
pub fn spmm_fused<'a, T: Element, O: Element>(
    a: impl Into<BsrOperand<'a, T>>,
    b: Dense<'_, T>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, T>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let a = a.into();
    let (m, k) = bsr_dims(&a);
    check_operands((m, k), &b.shape, b.data.len(), &c.shape, c.data.len())?;
    if let Some(bias) = &epilogue.bias {
        if bias.len() != m {
            return Err(Error::ShapeMismatch {
                what: "bias length (= m of A)",
                expected: m,
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
            );
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
