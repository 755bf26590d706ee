//! The FP8 products ([`spmm_fp8`]): `C = act(α·Σ_blocks (sa·A_blk·B_blk)·sb + bias + β·C)`
//! with an FP8 A and its scales, one entry point for every backend.

use super::check::{
    check_fp8, check_fp8_op, check_host_backend, host_vector, Fp8Spec, BIAS_WITH_OPERANDS,
    B_SCALES_WITH_OPERANDS,
};
#[cfg(feature = "cuda")]
use super::check::{check_fp8_device, device_vector, OPERANDS_TOGETHER};
use super::check_product;
use super::cpu;
use crate::dense::{Dense, DenseMut, Storage, StorageMut};
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::{Element, Fp8};
use crate::epilogue::{Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::{Backend, SpmmOptions};
use crate::quantize::{BlockScales, QuantizedBsr};

/// The sparse FP8 operand with its scales: a host matrix and its [`BlockScales`] (a
/// [`QuantizedBsr`], or a `BsrMatrix` of FP8 values read without scales), or a `DeviceBsr`,
/// which holds its scales on the device.
pub enum Fp8Operand<'a, Q> {
    /// Values and scales in host memory (CPU backend). Per-block scales must number the
    /// matrix's stored blocks ([`Error::ScaleLength`] otherwise).
    Host(&'a BsrMatrix<Q>, &'a BlockScales),
    /// A matrix in device memory with its device scales (GPU backends).
    #[cfg(feature = "cuda")]
    Device(&'a DeviceBsr<Q>),
}

static NO_SCALES: BlockScales = BlockScales::None;

impl<'a, Q> From<&'a QuantizedBsr<Q>> for Fp8Operand<'a, Q>
where
    Q: Fp8,
{
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

/// The FP8 product: `C = act(α·Σ_blocks (sa·A_blk·B_blk)·sb + bias + β·C)`, f32
/// accumulation, where `sa` is A's scale (its block's with per-block scales) and `sb` B's
/// (its column's with per-column scales, 1 for an f16/bf16 B), each block's product scaled
/// once, as `include/sparsek/sparsek.hpp` defines it. Two kinds:
/// - **W8A8**: B of A's FP8 type with its own scales (none, per tensor, per column). On
///   the device, the Hopper family; B must be column-major (K-major: a row-major `x` in
///   `y = x·Wᵀ`, see [`crate::dense`]), else [`Error::NotSupported`] naming why.
/// - **W8A16**: B f16 or bf16, without scales (the weights alone are quantized). On the
///   device, the Decode family.
///
/// `A` is `m x k` FP8 BSR ([`F8E4M3`](crate::F8E4M3) or [`F8E5M2`](crate::F8E5M2)) with
/// its scales (none, per tensor, per stored block: [`Fp8Operand`]), `B` is `k x n` (its
/// scales attached with [`Dense::with_scales`]), `C` is `m x n` of f16, bf16 or f32, the
/// bias (if any) `m` values of C's type. `op(A) = A` only
/// ([`SpmmOptions::transpose_a`] is [`Error::NotSupported`]). Host operands run the CPU
/// reference (A and B dequantized to f32, then [`spmm`](crate::spmm())'s product); device
/// operands a GPU family, on C's stream. With `β = 0`, C is not read (it may hold NaN).
///
/// Every check runs first, and on error C is untouched: shapes as [`spmm`](crate::spmm());
/// the types ([`Error::Fp8Types`]); scales only on FP8 operands, per block only on A and
/// per column only on B ([`Error::ScalesNotTaken`]); their lengths: 1 per tensor, `nnzb`
/// per block, `n` per column ([`Error::ScaleLength`]). Scale values are used as given.
///
/// ```
/// use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
/// use sparsek::{spmm_fp8, BlockMask, BlockShape, BsrMatrix, DenseMut, DenseShape, Epilogue,
///               Layout, SpmmOptions, F8E4M3};
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
/// spmm_fp8(&wq, xq.view(), DenseMut::host(&mut y, 64, 4, Layout::ColMajor), &Epilogue::new(),
///          &SpmmOptions::new())?;
/// # Ok::<(), sparsek::Error>(())
/// ```
pub fn spmm_fp8<'a, Q: Fp8, TB: Element, O: Element>(
    a: impl Into<Fp8Operand<'a, Q>>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let a = a.into();
    check_fp8_product(&a, &b, &c, epilogue, options, false)?;
    run_fp8(a, b, c, epilogue, options)
}

/// Every check of [`spmm_fp8`] on these operands, launching nothing and writing nothing:
/// `op(A) = A`, shapes ([`check_product`]), the types and scales ([`check_fp8`]), where
/// the operands, B's scales and the bias are, the backend for host operands, and on the
/// device B's layout for W8A8, the problem's fields and every buffer's context against C's
/// stream. With `select_kernel`, device operands also select their kernel (C++
/// `Mode::Select`): `Some(backend)`, the one that would run (`None` on the host).
pub(crate) fn check_fp8_product<Q: Fp8, TB: Element, O: Element>(
    a: &Fp8Operand<'_, Q>,
    b: &Dense<'_, TB>,
    c: &DenseMut<'_, O>,
    epilogue: &Epilogue<'_, O>,
    options: &SpmmOptions,
    select_kernel: bool,
) -> Result<Option<Backend>, Error> {
    let backend = options.backend;
    check_fp8_op(options.transpose_a, backend)?;
    let (dims, bm, nnzb, a_scales, device) = match a {
        Fp8Operand::Host(a, s) => (
            (a.m(), a.k()),
            a.block().rows,
            a.nnz_blocks(),
            (s.kind(), s.as_slice().len()),
            false,
        ),
        #[cfg(feature = "cuda")]
        Fp8Operand::Device(a) => (
            (a.m(), a.k()),
            a.block().rows,
            a.nnz_blocks(),
            (a.scale_kind(), a.scales.buffer().map_or(0, |s| s.len())),
            true,
        ),
    };
    check_product(
        dims,
        bm,
        &b.shape,
        b.data.len(),
        &c.shape,
        c.data.len(),
        epilogue.bias.as_ref().map(Vector::len),
        epilogue.gated,
        options,
    )?;
    let b_scales = b.scales.values();
    let kind = check_fp8(&Fp8Spec {
        a: Q::DTYPE,
        a_scales,
        nnzb,
        b: TB::DTYPE,
        b_scales: (b.scales.kind(), b_scales.as_ref().map_or(0, Vector::len)),
        b_scales_transposed: b.scales_transposed,
        n: b.shape.cols,
        c: O::DTYPE,
        device,
    })?;
    match (a, &b.data, &c.data) {
        (Fp8Operand::Host(..), Storage::Host(_), StorageMut::Host(_)) => {
            // W8A8 or W8A16 alike: the CPU reference takes either layout of B, and has no
            // kernel to select.
            let _ = (kind, select_kernel);
            check_host_backend(backend)?;
            host_vector(b_scales, B_SCALES_WITH_OPERANDS)?;
            host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?;
            Ok(None)
        }
        #[cfg(feature = "cuda")]
        (Fp8Operand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            check_fp8_device(kind, b.shape.layout, backend)?;
            let operands = super::gpu::Fp8Operands {
                a,
                b: b_data,
                b_shape: &b.shape,
                b_scales: (
                    b.scales.kind(),
                    device_vector(b_scales, B_SCALES_WITH_OPERANDS)?,
                ),
                c: &**c_data,
                c_shape: &c.shape,
                bias: device_vector(epilogue.bias, BIAS_WITH_OPERANDS)?,
            };
            super::gpu::check_spmm_fp8(
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

/// The product of [`spmm_fp8`] once [`check_fp8_product`] has passed on these operands.
pub(crate) fn run_fp8<Q: Fp8, TB: Element, O: Element>(
    a: Fp8Operand<'_, Q>,
    b: Dense<'_, TB>,
    c: DenseMut<'_, O>,
    epilogue: &Epilogue<'_, O>,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let b_scales = b.scales.values();
    match (a, b.data, c.data) {
        (Fp8Operand::Host(a, a_scales), Storage::Host(b_data), StorageMut::Host(c_data)) => {
            cpu::spmm_fp8(
                a,
                a_scales,
                b_data,
                &b.shape,
                host_vector(b_scales, B_SCALES_WITH_OPERANDS)?,
                c_data,
                &c.shape,
                cpu::Scalars {
                    alpha: options.alpha,
                    beta: options.beta,
                    bias: host_vector(epilogue.bias, BIAS_WITH_OPERANDS)?,
                    activation: epilogue.activation,
                    gated: epilogue.gated,
                },
            )
        }
        #[cfg(feature = "cuda")]
        (Fp8Operand::Device(a), Storage::Device(b_data), StorageMut::Device(c_data)) => {
            super::gpu::spmm_fp8(
                super::gpu::Fp8Operands {
                    a,
                    b: b_data,
                    b_shape: &b.shape,
                    b_scales: (
                        b.scales.kind(),
                        device_vector(b_scales, B_SCALES_WITH_OPERANDS)?,
                    ),
                    c: c_data,
                    c_shape: &c.shape,
                    bias: device_vector(epilogue.bias, BIAS_WITH_OPERANDS)?,
                },
                epilogue.activation,
                epilogue.gated,
                options,
            )
        }
        #[cfg(feature = "cuda")]
        _ => Err(Error::MixedLocations(OPERANDS_TOGETHER)),
    }
}
