//! The operation `C = α·A·B + β·C`, one entry point for every backend.

use crate::format::BsrMatrix;
use crate::dense::{Dense, DenseMut, DenseShape, Storage, StorageMut};
#[cfg(feature = "cuda")]
use crate::element::DType;
use crate::element::Element;
use crate::error::Error;
use crate::options::{Backend, SpmmOptions};
#[cfg(feature = "cuda")]
use crate::gpu::DeviceBsr;

/// The sparse operand: a host `BsrMatrix` or a `DeviceBsr`.
pub enum BsrOperand<'a, T> {
    Host(&'a BsrMatrix<T>),
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
    let needed = shape.required_len().ok_or(Error::BufferTooSmall {
        operand,
        needed: usize::MAX,
        got: len,
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

#[cfg(feature = "cuda")]
/// Whether a GPU backend takes these element types: f16/bf16 in, the same type or f32 out.
pub(crate) fn gpu_types_supported(input: DType, output: DType) -> bool {
    matches!(input, DType::F16 | DType::Bf16) && (output == input || output == DType::F32)
}

/// `C = α·A·B + β·C` with f32 accumulation.
///
/// `A` is `m x k` BSR, `B` is `k x n`, `C` is `m x n`; `B` and `C` each row- or
/// column-major. Host operands run on the CPU backend; device operands (`DeviceBsr` and
/// `Dense::device`) run on a GPU backend, enqueued on `C`'s stream (the call returns
/// once the work is enqueued). Every check runs before anything is launched or written;
/// on error `C` is untouched.
pub fn spmm<'a, T: Element, O: Element>(
    a: impl Into<BsrOperand<'a, T>>,
    b: Dense<'_, T>,
    c: DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let a = a.into();
    let (m, k) = bsr_dims(&a);
    if b.shape.rows != k {
        return Err(Error::ShapeMismatch {
            what: "rows of B (= k of A)",
            expected: k,
            got: b.shape.rows,
        });
    }
    if c.shape.rows != m {
        return Err(Error::ShapeMismatch {
            what: "rows of C (= m of A)",
            expected: m,
            got: c.shape.rows,
        });
    }
    if c.shape.cols != b.shape.cols {
        return Err(Error::ShapeMismatch {
            what: "columns of C (= columns of B)",
            expected: b.shape.cols,
            got: c.shape.cols,
        });
    }
    check_view("B", &b.shape, b.data.len())?;
    check_view("C", &c.shape, c.data.len())?;

    match (a, b.data, c.data) {
        (BsrOperand::Host(a), Storage::Host(b_data), StorageMut::Host(c_data)) => match options
            .backend
        {
            Backend::Auto | Backend::Cpu => {
                crate::cpu::spmm(
                    a,
                    b_data,
                    &b.shape,
                    c_data,
                    &c.shape,
                    options.alpha,
                    options.beta,
                );
                Ok(())
            }
            backend => Err(Error::BackendUnavailable {
                backend,
                reason: "operands are on the host; upload them (DeviceBsr, Dense::device)".into(),
            }),
        },
        #[cfg(feature = "cuda")]
        (BsrOperand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            if options.backend == Backend::Cpu {
                return Err(Error::BackendUnavailable {
                    backend: Backend::Cpu,
                    reason: "operands are on the device".into(),
                });
            }
            if !gpu_types_supported(T::DTYPE, O::DTYPE) {
                return Err(Error::UnsupportedTypes {
                    backend: options.backend,
                    input: T::DTYPE,
                    output: O::DTYPE,
                });
            }
            crate::gpu::spmm(a, b_data, &b.shape, c_data, &c.shape, options)
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(
            "A, B and C must be all host or all device",
        )),
    }
}
