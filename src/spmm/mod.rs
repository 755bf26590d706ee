//! The products, one entry point each for every backend and element type: `C = α·op(A)·B +
//! β·C` ([`spmm`], [`spmm_fused`]) and `C = α·D·op(A) + β·C` ([`dense_spmm`]). (The sampled
//! product is [`sddmm`](crate::sddmm()).)
//!
//! FP8 is a dtype of these products, not an API beside them: an FP8 A comes with its scales
//! ([`BsrOperand::Scaled`], a [`QuantizedBsr`], a `DeviceBsr`, which holds its scales), a B
//! may carry its own ([`Dense::with_scales`]). One check path (`check_spmm`: the shapes
//! and locations every product shares, then the rules of A's element type) and one run
//! path (`run_spmm`) dispatch on it; the FP8 rules are in `fp8.rs`.

pub(crate) mod check;
mod cpu;
mod fp8;
#[cfg(feature = "cuda")]
pub(crate) mod gpu;
pub(crate) mod rules;

#[allow(deprecated)]
pub use fp8::{spmm_fp8, Fp8Operand};

use crate::dense::{Dense, DenseMut, Storage, StorageMut};
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::{Element, Fp8, TakesB, TakesBias};
use crate::epilogue::{Epilogue, Vector};
use crate::error::Error;
use crate::format::{BlockShape, BsrMatrix};
use crate::options::{Backend, SpmmOptions};
use crate::quantize::{BlockScales, QuantizedBsr};
#[cfg(feature = "cuda")]
use check::OPERANDS_TOGETHER;
use check::{check_view, same, Fp8Kind, BIAS_WITH_OPERANDS};

/// The sparse operand A of every product, by reference, with its scales where it has them.
pub enum BsrOperand<'a, T> {
    /// A matrix in host memory (CPU backend), its values read as they are. An FP8 matrix
    /// needs its scales (`Scaled`, or a [`QuantizedBsr`]): alone it is
    /// [`Error::UnsupportedTypes`], since a `BsrMatrix` holds no scales.
    Host(&'a BsrMatrix<T>),
    /// A matrix in host memory with its scales (CPU backend): the values are `stored·scale`
    /// (FP8: none, one per tensor, or one per stored block, [`Error::ScaleLength`]
    /// otherwise). An A that is not FP8 takes [`BlockScales::None`] only
    /// ([`Error::ScalesNotTaken`]). A `&QuantizedBsr` converts to this.
    Scaled(&'a BsrMatrix<T>, &'a BlockScales),
    /// A matrix in device memory with the scales it holds (GPU backends).
    #[cfg(feature = "cuda")]
    Device(&'a DeviceBsr<T>),
}

impl<'a, T> From<&'a BsrMatrix<T>> for BsrOperand<'a, T> {
    fn from(a: &'a BsrMatrix<T>) -> Self {
        BsrOperand::Host(a)
    }
}

impl<'a, Q: Fp8> From<&'a QuantizedBsr<Q>> for BsrOperand<'a, Q> {
    fn from(a: &'a QuantizedBsr<Q>) -> Self {
        BsrOperand::Scaled(a.matrix(), a.scales())
    }
}

#[cfg(feature = "cuda")]
impl<'a, T> From<&'a DeviceBsr<T>> for BsrOperand<'a, T> {
    fn from(a: &'a DeviceBsr<T>) -> Self {
        BsrOperand::Device(a)
    }
}

impl<T: Element> BsrOperand<'_, T> {
    /// Whether the product runs on the FP8 rules: an FP8 A with its scales. (An FP8 host
    /// matrix without them is refused by the rules of an A read as it is.)
    fn scaled_fp8(&self) -> bool {
        T::DTYPE.is_fp8() && !matches!(self, BsrOperand::Host(_))
    }
}

/// Whether the sparse operand is in device memory (where the GPU's type rules hold).
pub(crate) fn is_device<T>(a: &BsrOperand<'_, T>) -> bool {
    #[cfg(feature = "cuda")]
    if let BsrOperand::Device(_) = a {
        return true;
    }
    let _ = a;
    false
}

/// `m` and `k` of the sparse operand, wherever it lives.
pub(crate) fn bsr_dims<T>(a: &BsrOperand<'_, T>) -> (usize, usize) {
    match a {
        BsrOperand::Host(a) | BsrOperand::Scaled(a, _) => (a.m(), a.k()),
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => (a.m(), a.k()),
    }
}

/// The block shape of the sparse operand, wherever it lives.
pub(crate) fn bsr_block<T>(a: &BsrOperand<'_, T>) -> BlockShape {
    match a {
        BsrOperand::Host(a) | BsrOperand::Scaled(a, _) => a.block(),
        #[cfg(feature = "cuda")]
        BsrOperand::Device(a) => a.block(),
    }
}

/// A weight of the layers ([`SparseLinear`](crate::SparseLinear),
/// [`SparseMlp`](crate::SparseMlp)), whatever its element type and wherever it lives: a
/// `BsrMatrix` (its values as they are), a [`QuantizedBsr`] (FP8 values with their scales)
/// or a `DeviceBsr` (with the scales it holds). Implemented for those three only.
pub trait SparseWeight: sealed::Sealed {
    /// The element type of the stored values.
    type Element: Element;
    /// The operand every product takes.
    fn operand(&self) -> BsrOperand<'_, Self::Element>;
    /// Rows (`m`).
    fn m(&self) -> usize {
        bsr_dims(&self.operand()).0
    }
    /// Columns (`k`).
    fn k(&self) -> usize {
        bsr_dims(&self.operand()).1
    }
    /// The block shape.
    fn block(&self) -> BlockShape {
        bsr_block(&self.operand())
    }
}

/// A weight in host memory: a `BsrMatrix` or a [`QuantizedBsr`]. What the host layers
/// take; the device ones take a `DeviceBsr`.
pub trait HostWeight: SparseWeight + sealed::Host {}

pub(crate) mod sealed {
    use super::*;

    pub trait Sealed {}
    /// What the host layers need of their weights beyond [`SparseWeight`]: interleaving
    /// the gate and up weights by block-row.
    pub trait Host: Sized {
        /// [`BsrMatrix::interleave_block_rows`] (with the scales following their blocks).
        fn interleave_block_rows(first: &Self, second: &Self) -> Result<Self, Error>;
    }

    impl<T> Sealed for BsrMatrix<T> {}
    impl<Q> Sealed for QuantizedBsr<Q> {}
    #[cfg(feature = "cuda")]
    impl<T> Sealed for DeviceBsr<T> {}

    impl<T: Element> Host for BsrMatrix<T> {
        fn interleave_block_rows(first: &Self, second: &Self) -> Result<Self, Error> {
            Ok(BsrMatrix::interleave_block_rows(first, second)?)
        }
    }
    impl<Q: Fp8> Host for QuantizedBsr<Q> {
        fn interleave_block_rows(first: &Self, second: &Self) -> Result<Self, Error> {
            QuantizedBsr::interleave_block_rows(first, second)
        }
    }
}

impl<T: Element> SparseWeight for BsrMatrix<T> {
    type Element = T;
    fn operand(&self) -> BsrOperand<'_, T> {
        BsrOperand::Host(self)
    }
}

impl<Q: Fp8> SparseWeight for QuantizedBsr<Q> {
    type Element = Q;
    fn operand(&self) -> BsrOperand<'_, Q> {
        BsrOperand::Scaled(self.matrix(), self.scales())
    }
}

#[cfg(feature = "cuda")]
impl<T: Element> SparseWeight for DeviceBsr<T> {
    type Element = T;
    fn operand(&self) -> BsrOperand<'_, T> {
        BsrOperand::Device(self)
    }
}

impl<T: Element> HostWeight for BsrMatrix<T> {}
impl<Q: Fp8> HostWeight for QuantizedBsr<Q> {}

/// `C = α·op(A)·B + β·C` with f32 accumulation, for every element type.
///
/// `A` is `m x k` BSR, `B` is `k x n`, `C` is `m x n`; `B` and `C` each row- or
/// column-major. With [`SpmmOptions::transpose_a`], `op(A) = Aᵀ`: `B` is `m x n` and `C`
/// `k x n`. Host operands run on the CPU backend; device operands (`DeviceBsr` and
/// `Dense::device`) run on a GPU backend, enqueued on `C`'s stream (the call returns
/// once the work is enqueued; a `DeviceBsr`'s first `Aᵀ` product first builds its
/// transpose index, `DeviceBsr::prepare_transpose`). Every check runs before anything is
/// launched or written; on error `C` is untouched.
///
/// The element types: an f16 or bf16 A (f32 on the CPU) takes B of its type and writes C of
/// its type or f32 (the GPU's combinations; the CPU takes any C). An FP8 A
/// ([`F8E4M3`](crate::F8E4M3), [`F8E5M2`](crate::F8E5M2)) comes with its scales (a
/// [`QuantizedBsr`], [`BsrOperand::Scaled`], a `DeviceBsr`) and the product is `C =
/// α·Σ_blocks (sa·A_blk·B_blk)·sb + β·C`, each block's product scaled once, as
/// `include/sparsek/sparsek.hpp` defines it:
/// - **W8A8**: B of A's FP8 type with its own scales (none, per tensor, per column:
///   [`Dense::with_scales`]). On the device, the Hopper family; B must be column-major
///   (K-major: a row-major `x` in `y = x·Wᵀ`, see [`crate::dense`]), else
///   [`Error::NotSupported`] naming why.
/// - **W8A16**: B f16 or bf16, without scales (the weights alone are quantized). On the
///   device, the Decode family; on sm_90 at 64 columns and more, e4m3 A with a column-major
///   f16 B runs on the Hopper family's W8A16 rows (A converted to f16 in registers).
///
/// into C of f16, bf16 or f32, `op(A) = A` only ([`Error::NotSupported`]); the CPU
/// reference dequantizes A and B to f32, then runs the f32 product. Their errors: the types
/// ([`Error::Fp8Types`]); scales only on FP8 operands, per block only on A and per column
/// only on B ([`Error::ScalesNotTaken`]); their lengths: 1 per tensor, `nnzb` per block,
/// `n` per column ([`Error::ScaleLength`]). Scale values are used as given.
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
///
/// FP8 weights, W8A8 (`x` quantized per token) and W8A16 (`x` as it is):
///
/// ```
/// use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
/// use sparsek::{bf16, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, DenseShape, Layout,
///               SpmmOptions, F8E4M3};
///
/// // W: 64 x 128 in 32x32 blocks, quantized per block; x: 4 tokens, quantized per token.
/// let mask = BlockMask::from_fn(2, 4, |r, c| (r + c) % 2 == 0)?;
/// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |i, j| ((i * 3 + j) % 7) as f32 - 3.0)?;
/// let wq = w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
/// let x: Vec<f32> = (0..4 * 128).map(|i| (i % 5) as f32 * 0.25).collect();
/// let xq = QuantizedDense::<F8E4M3>::quantize(&x, DenseShape::packed(128, 4, Layout::ColMajor),
///                                               ColumnGranularity::PerColumn)?;
/// // yᵀ = W·xᵀ, y row-major (4 x 64) = yᵀ column-major.
/// let mut y = vec![0f32; 4 * 64];
/// spmm(&wq, xq.view(), DenseMut::host(&mut y, 64, 4, Layout::ColMajor), &SpmmOptions::new())?;
/// let xh: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
/// spmm(&wq, Dense::host(&xh, 128, 4, Layout::ColMajor), DenseMut::host(&mut y, 64, 4, Layout::ColMajor),
///      &SpmmOptions::new())?;
/// # Ok::<(), sparsek::Error>(())
/// ```
pub fn spmm<'a, TA: TakesB<TB>, TB: Element, O: Element>(
    a: impl Into<BsrOperand<'a, TA>>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    product(a.into(), b, c, &Epilogue::<TA>::new(), options)
}

/// [`spmm`] with the fused linear-layer epilogue: `C = act(α·op(A)·B + bias + β·C)`, with
/// `bias` (if any) holding one value per row of `C` (where the operands live).
///
/// **The bias has the type of A's values** ([`TakesBias`]): A's element type for an f16,
/// bf16 or f32 A (inferred from A); C's for an FP8 A, a storage format whose values
/// (`stored·scale`) the product carries in C's type. Another type is
/// [`Error::OperandTypes`], found before anything runs. With an FP8 A and no bias, name the
/// bias type: `&Epilogue::<f32>::new()` (any of C's types), or call [`spmm`].
pub fn spmm_fused<'a, TA, TB, O, V>(
    a: impl Into<BsrOperand<'a, TA>>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, V>,
    options: &SpmmOptions,
) -> Result<(), Error>
where
    TA: TakesB<TB> + TakesBias<V>,
    TB: Element,
    O: Element,
    V: Element,
{
    product(a.into(), b, c, epilogue, options)
}

/// Every check of the product, then the product: the body of [`spmm_fused`] and of the
/// deprecated `spmm_fp8`, without their type bounds (the checks hold the rules).
pub(crate) fn product<TA: Element, TB: Element, O: Element, V: Element>(
    a: BsrOperand<'_, TA>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, V>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    check_spmm(&a, &b, &c, epilogue, options, false)?;
    run_spmm(a, b, c, epilogue, options)
}

/// Every check of [`spmm_fused`] on these operands, launching nothing and writing nothing:
/// the rules of A's element type (those of an FP8 A with its scales, or of an A read as it
/// is), shapes, locations, the backend for host operands, and on the
/// device the problem's fields and every buffer's context against C's stream. With
/// `select_kernel`, device operands also select their kernel (C++ `Mode::Select`: no device
/// memory read, nothing launched), so a backend that cannot run the product is refused
/// here: `Some(backend)`, the one that would run (`None` on the host). A caller that
/// launches several products checks them all with this first.
pub(crate) fn check_spmm<TA: Element, TB: Element, O: Element, V: Element>(
    a: &BsrOperand<'_, TA>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    epilogue: &Epilogue<'_, V>,
    options: &SpmmOptions,
    select_kernel: bool,
) -> Result<Option<Backend>, Error> {
    // The table's rules (rules/spmm.toml, as the C++ entry checks them), with what only
    // Rust's operands carry between its two groups: the buffers' lengths and the bias's.
    let facts = check::facts(a, b, c, epilogue, options);
    rules::shapes(&facts)?;
    check_view("B", &b.shape, b.data.len())?;
    check_view("C", &c.shape, c.data.len())?;
    let (m, _) = bsr_dims(a);
    let bias_rows = if epilogue.gated { m } else { c.shape.rows };
    check_bias_len(epilogue.bias.as_ref().map(Vector::len), bias_rows)?;
    rules::types(&facts)?;
    // An FP8 A with its scales: the scales' lengths (the table checked their kinds), and
    // whether B is FP8 too (W8A8: the device reads it K-major).
    let w8a8 = a.scaled_fp8() && fp8::check_scale_lengths(a, b)? == Fp8Kind::W8A8;
    #[cfg(not(feature = "cuda"))]
    let _ = w8a8; // read on the device only
    match (a, &b.data, &c.data) {
        (BsrOperand::Host(_) | BsrOperand::Scaled(..), Storage::Host(_), StorageMut::Host(_)) => {
            // The CPU backend has no kernel to select, and takes either layout of B.
            let _ = select_kernel;
            check::check_host_backend(options.backend)?;
            check::host_vector(b.scales.values(), check::B_SCALES_WITH_OPERANDS)?;
            check::host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?;
            Ok(None)
        }
        #[cfg(feature = "cuda")]
        (BsrOperand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            if w8a8 {
                check::check_fp8_device(Fp8Kind::W8A8, b.shape.layout, options.backend)?;
            }
            check_device(
                a,
                (b, b_data),
                (c, c_data),
                epilogue,
                options,
                select_kernel,
            )
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(OPERANDS_TOGETHER)),
    }
}

/// The device checks of a product whose type rules have passed (both dtypes' paths): its
/// problem's fields, every buffer's context against C's stream and, with `select_kernel`,
/// the kernel C++ would run (`gpu::check_spmm`). B's scales are FP8 B's alone (the type
/// rules refused any other's).
#[cfg(feature = "cuda")]
fn check_device<TA: Element, TB: Element, O: Element, V: Element>(
    a: &DeviceBsr<TA>,
    (b, b_data): (&Dense<'_, TB>, &cudarc::driver::CudaSlice<TB>),
    (c, c_data): (&DenseMut<'_, O>, &cudarc::driver::CudaSlice<O>),
    epilogue: &Epilogue<'_, V>,
    options: &SpmmOptions,
    select_kernel: bool,
) -> Result<Option<Backend>, Error> {
    let operands = gpu::Operands {
        a,
        b: b_data,
        b_shape: &b.shape,
        b_scales: (
            b.scales.kind(),
            check::device_vector(b.scales.values(), check::B_SCALES_WITH_OPERANDS)?,
        ),
        c: c_data,
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

/// The product once [`check_spmm`] has passed on these operands.
pub(crate) fn run_spmm<TA: Element, TB: Element, O: Element, V: Element>(
    a: BsrOperand<'_, TA>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, V>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let b_scales = b.scales.values();
    let scalars = |bias| cpu::Scalars {
        alpha: options.alpha,
        beta: options.beta,
        bias,
        activation: epilogue.activation,
        gated: epilogue.gated,
    };
    match (a, b.data, c.data) {
        // An FP8 A with its scales (the FP8 rules, fp8.rs), and B's scales if any.
        (BsrOperand::Scaled(a, a_scales), Storage::Host(b_data), StorageMut::Host(c_data))
            if TA::DTYPE.is_fp8() =>
        {
            cpu::spmm_fp8(
                a,
                a_scales,
                b_data,
                &b.shape,
                check::host_vector(b_scales, check::B_SCALES_WITH_OPERANDS)?,
                c_data,
                &c.shape,
                scalars(check::host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?),
            )
        }
        // An A read as it is.
        (
            BsrOperand::Host(a) | BsrOperand::Scaled(a, _),
            Storage::Host(b_data),
            StorageMut::Host(c_data),
        ) => {
            let bias = check::host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?;
            cpu::spmm(
                a,
                options.transpose_a,
                b_data,
                &b.shape,
                c_data,
                &c.shape,
                scalars(bias),
            )?;
            Ok(())
        }
        // Every dtype alike: A's scales live in the DeviceBsr, B's (FP8 only: the checks
        // refused any other's) beside B.
        #[cfg(feature = "cuda")]
        (BsrOperand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            let operands = gpu::Operands {
                a,
                b: b_data,
                b_shape: &b.shape,
                b_scales: (
                    b.scales.kind(),
                    check::device_vector(b_scales, check::B_SCALES_WITH_OPERANDS)?,
                ),
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
/// nothing is copied; the checks, element types and backends are [`spmm`]'s (an FP8 A, which
/// takes `op(A) = A` only, runs with [`SpmmOptions::transpose_a`]: `y = x·Wᵀ`).
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
pub fn dense_spmm<'a, TA: TakesB<TD>, TD: Element, O: Element>(
    d: Dense<'_, TD>,
    a: impl Into<BsrOperand<'a, TA>>,
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
