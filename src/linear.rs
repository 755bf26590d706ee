//! `SparseLinear`: a pruned linear layer `y = act(x·Wᵀ + bias)` with a block-sparse `W`.
//!
//! `W` is `out x in` (BSR), `x` is `batch x in` and `y` is `batch x out`, both row-major
//! (the layout of activations in every framework). The layer computes `yᵀ = W·xᵀ`: a
//! row-major `x` *is* `xᵀ` column-major with `ld = in`, and likewise `y`, so no transpose is
//! ever made (see `sparsek::dense`).

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::dense::{Dense, DenseMut, Layout};
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::{Element, Fp8};
use crate::epilogue::{Activation, Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::SpmmOptions;
use crate::quantize::{ColumnScales, QuantizedBsr};
use crate::spmm::{check_fused, spmm_fp8, spmm_fused, BsrOperand, Fp8Operand};

/// A linear layer with a block-sparse weight, on the host (`W: BsrMatrix<T>`, bias
/// `Vec<T>`) or on the device (`W: DeviceBsr<T>`, bias `CudaSlice<T>`); or with FP8
/// weights and their scales ([`new_fp8`](SparseLinear::new_fp8): `W: QuantizedBsr<Q>`, bias
/// `Vec<V>` of the output's type; `new_fp8_device` (`cuda` feature): `W:
/// DeviceBsr<Q>` holding its scales, bias `CudaSlice<V>`), run by
/// [`spmm_fp8`] through [`forward_fp8`](SparseLinear::forward_fp8).
///
/// ```
/// use sparsek::{f16, Activation, BlockMask, BlockShape, BsrMatrix, SparseLinear};
/// // W: 64 outputs x 128 inputs, 32x32 blocks, a block diagonal.
/// let mask = BlockMask::from_fn(2, 4, |r, c| c == r || c == r + 2)?;
/// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |_, _| f16::from_f32(0.01))?;
/// let layer = SparseLinear::new(w, Some(vec![f16::from_f32(0.5); 64]), Activation::Relu)?;
/// let x = vec![f16::from_f32(1.0); 3 * 128]; // batch 3
/// let mut y = vec![0f32; 3 * 64];
/// layer.forward(&x, 3, &mut y)?;
/// assert!((y[0] - (0.5 + 64.0 * 0.01)).abs() < 1e-3);
/// # Ok::<(), sparsek::Error>(())
/// ```
pub struct SparseLinear<W, V> {
    weight: W,
    bias: Option<V>,
    activation: Activation,
    options: SpmmOptions,
}

impl<W, V> SparseLinear<W, V> {
    /// The activation applied last.
    pub fn activation(&self) -> Activation {
        self.activation
    }
    /// Options of every product (backend, α, β; `β = 1` accumulates into `y`).
    pub fn with_options(mut self, options: SpmmOptions) -> Self {
        self.options = options;
        self
    }
    /// The options set ([`with_options`](Self::with_options); `SpmmOptions::new()` by default).
    pub fn options(&self) -> SpmmOptions {
        self.options
    }
    /// The weight.
    pub fn weight(&self) -> &W {
        &self.weight
    }
    /// The bias, if any.
    pub fn bias(&self) -> Option<&V> {
        self.bias.as_ref()
    }
}

fn check_bias(out_features: usize, len: Option<usize>) -> Result<(), Error> {
    match len {
        Some(len) if len != out_features => Err(Error::ShapeMismatch {
            what: "bias length (= out features)",
            expected: out_features,
            got: len,
        }),
        _ => Ok(()),
    }
}

/// `y (batch x out) = act(x (batch x in) · Wᵀ + bias)` as `yᵀ = W·xᵀ`, for any operands;
/// with `launch` false, its checks alone (`spmm_fused`'s, the kernel's selection on the
/// device included): nothing runs, nothing is written.
fn forward<'a, T: Element, O: Element>(
    weight: impl Into<BsrOperand<'a, T>>,
    x: Dense<'_, T>,
    y: DenseMut<'_, O>,
    bias: Option<Vector<'_, T>>,
    activation: Activation,
    options: &SpmmOptions,
    launch: bool,
) -> Result<(), Error> {
    let mut epilogue = Epilogue::new().activation(activation);
    if let Some(bias) = bias {
        epilogue = epilogue.bias(bias);
    }
    // The layer fixes op(W) = W; only the scalars and the backend come from the options.
    let options = options.transpose_a(false);
    if launch {
        spmm_fused(weight, x, y, &epilogue, &options)
    } else {
        check_fused(&weight.into(), &x, &y, &epilogue, &options, true).map(|_| ())
    }
}

impl<T: Element> SparseLinear<BsrMatrix<T>, Vec<T>> {
    /// A host layer: `weight` is `out x in`, `bias` (if any) has `out` values.
    pub fn new(
        weight: BsrMatrix<T>,
        bias: Option<Vec<T>>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_bias(weight.m(), bias.as_ref().map(Vec::len))?;
        Ok(Self {
            weight,
            bias,
            activation,
            options: SpmmOptions::new(),
        })
    }

    /// `y = act(x·Wᵀ + bias)` for row-major `x` (`batch x in`) and `y` (`batch x out`).
    pub fn forward<O: Element>(&self, x: &[T], batch: usize, y: &mut [O]) -> Result<(), Error> {
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward(
            &self.weight,
            Dense::host(x, in_f, batch, Layout::ColMajor),
            DenseMut::host(y, out_f, batch, Layout::ColMajor),
            self.bias.as_deref().map(Vector::Host),
            self.activation,
            &self.options,
            true,
        )
    }
}

/// `y (batch x out) = act(x (batch x in) · Wᵀ + bias)` for an FP8 weight: `x` row-major is
/// `xᵀ` column-major, which is the K-major B that W8A8 needs; its per-token scales are per
/// column of `xᵀ`.
fn forward_fp8<'a, Q: Fp8, X: Element, V: Element>(
    weight: impl Into<Fp8Operand<'a, Q>>,
    x: Dense<'_, X>,
    y: DenseMut<'_, V>,
    bias: Option<Vector<'_, V>>,
    activation: Activation,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let mut epilogue = Epilogue::new().activation(activation);
    if let Some(bias) = bias {
        epilogue = epilogue.bias(bias);
    }
    spmm_fp8(weight, x, y, &epilogue, &options.transpose_a(false))
}

impl<Q: Fp8, V: Element> SparseLinear<QuantizedBsr<Q>, Vec<V>> {
    /// A host layer with FP8 weights (`out x in`, quantized per tensor or per block:
    /// [`BsrMatrix::quantize_fp8`]); `bias` (if any) has `out` values of the output's type
    /// `V`.
    ///
    /// ```
    /// use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
    /// use sparsek::{bf16, Activation, BlockMask, BlockShape, BsrMatrix, ColumnScales, DenseShape,
    ///               Layout, SparseLinear, F8E4M3};
    ///
    /// let mask = BlockMask::from_fn(2, 4, |r, c| c == r || c == r + 2)?;
    /// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |_, _| 0.01f32)?;
    /// let layer = SparseLinear::new_fp8(w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?,
    ///                                   Some(vec![0.5f32; 64]), Activation::Relu)?;
    /// // W8A16: bf16 activations as they are.
    /// let x = vec![bf16::from_f32(1.0); 3 * 128];
    /// let mut y = vec![0f32; 3 * 64];
    /// layer.forward_fp8(&x, ColumnScales::None, 3, &mut y)?;
    /// assert!((y[0] - (0.5 + 64.0 * 0.01)).abs() < 1e-2);
    /// // W8A8: activations quantized per token (x row-major = xᵀ column-major, a token per column).
    /// let xf = vec![1.0f32; 3 * 128];
    /// let xq = QuantizedDense::<F8E4M3>::quantize(&xf, DenseShape::packed(128, 3, Layout::ColMajor),
    ///                                               ColumnGranularity::PerColumn)?;
    /// layer.forward_fp8(xq.values(), xq.column_scales(), 3, &mut y)?;
    /// assert!((y[0] - (0.5 + 64.0 * 0.01)).abs() < 1e-2);
    /// # Ok::<(), sparsek::Error>(())
    /// ```
    pub fn new_fp8(
        weight: QuantizedBsr<Q>,
        bias: Option<Vec<V>>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_bias(weight.m(), bias.as_ref().map(Vec::len))?;
        Ok(Self {
            weight,
            bias,
            activation,
            options: SpmmOptions::new(),
        })
    }

    /// `y = act(x·Wᵀ + bias)` for row-major `x` (`batch x in`) and `y` (`batch x out`):
    /// W8A16 for an f16/bf16 `x` (`x_scales` [`ColumnScales::None`]), W8A8 for an `x` of the
    /// weight's FP8 type with its scales per tensor or per token (one per row of `x`).
    /// The checks are [`spmm_fp8`]'s.
    pub fn forward_fp8<X: Element>(
        &self,
        x: &[X],
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut [V],
    ) -> Result<(), Error> {
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward_fp8(
            &self.weight,
            Dense::host(x, in_f, batch, Layout::ColMajor).with_any_scales(x_scales),
            DenseMut::host(y, out_f, batch, Layout::ColMajor),
            self.bias.as_deref().map(Vector::Host),
            self.activation,
            &self.options,
        )
    }
}

#[cfg(feature = "cuda")]
impl<Q: Fp8, V: Element> SparseLinear<DeviceBsr<Q>, CudaSlice<V>> {
    /// A device layer with FP8 weights (`out x in`, with their scales:
    /// [`DeviceBsr::upload_quantized`]); `bias` (if any) has `out` values of the output's
    /// type `V`.
    pub fn new_fp8_device(
        weight: DeviceBsr<Q>,
        bias: Option<CudaSlice<V>>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_bias(weight.m(), bias.as_ref().map(CudaSlice::len))?;
        Ok(Self {
            weight,
            bias,
            activation,
            options: SpmmOptions::new(),
        })
    }

    /// `y = act(x·Wᵀ + bias)` for row-major device `x` (`batch x in`) and `y`
    /// (`batch x out`), enqueued on `y`'s stream: W8A16 (the Decode family) for an f16/bf16
    /// `x` without scales, W8A8 (the Hopper family) for an `x` of the weight's FP8 type with
    /// device scales per tensor or per token. The checks are [`spmm_fp8`]'s.
    pub fn forward_fp8<X: Element>(
        &self,
        x: &CudaSlice<X>,
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut CudaSlice<V>,
    ) -> Result<(), Error> {
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward_fp8(
            &self.weight,
            Dense::device(x, in_f, batch, Layout::ColMajor).with_any_scales(x_scales),
            DenseMut::device(y, out_f, batch, Layout::ColMajor),
            self.bias.as_ref().map(Vector::Device),
            self.activation,
            &self.options,
        )
    }
}

#[cfg(feature = "cuda")]
impl<T: Element> SparseLinear<DeviceBsr<T>, CudaSlice<T>> {
    /// A device layer: `weight` is `out x in`, `bias` (if any) has `out` values.
    pub fn new_device(
        weight: DeviceBsr<T>,
        bias: Option<CudaSlice<T>>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_bias(weight.m(), bias.as_ref().map(CudaSlice::len))?;
        Ok(Self {
            weight,
            bias,
            activation,
            options: SpmmOptions::new(),
        })
    }

    /// `y = act(x·Wᵀ + bias)` for row-major device `x` (`batch x in`) and `y`
    /// (`batch x out`), enqueued on `y`'s stream.
    pub fn forward<O: Element>(
        &self,
        x: &CudaSlice<T>,
        batch: usize,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        self.forward_device(x, batch, y, true)
    }

    /// Every check of [`forward`](Self::forward) on these buffers, nothing launched
    /// (`sparsek::tp` checks every rank before the first launch).
    #[cfg(feature = "nccl")]
    pub(crate) fn check_forward<O: Element>(
        &self,
        x: &CudaSlice<T>,
        batch: usize,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        self.forward_device(x, batch, y, false)
    }

    /// [`forward`](Self::forward), or with `launch` false its checks alone.
    fn forward_device<O: Element>(
        &self,
        x: &CudaSlice<T>,
        batch: usize,
        y: &mut CudaSlice<O>,
        launch: bool,
    ) -> Result<(), Error> {
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward(
            &self.weight,
            Dense::device(x, in_f, batch, Layout::ColMajor),
            DenseMut::device(y, out_f, batch, Layout::ColMajor),
            self.bias.as_ref().map(Vector::Device),
            self.activation,
            &self.options,
            launch,
        )
    }
}
