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
use crate::element::{Element, Fp8, TakesB, TakesBias};
use crate::epilogue::{Activation, Epilogue, Vector};
use crate::error::Error;
use crate::options::SpmmOptions;
use crate::quantize::{ColumnScales, QuantizedBsr};
use crate::spmm::{check_spmm, product, BsrOperand, HostWeight, SparseWeight};

/// A linear layer with a block-sparse weight of any element type: on the host (`W` a
/// `BsrMatrix<T>`, or a [`QuantizedBsr<Q>`] of FP8 weights with their scales; bias
/// `Vec<V>`) or on the device (`W` a `DeviceBsr<T>`, FP8 ones holding their scales; bias
/// `CudaSlice<V>`). The bias has the type of the weights' values
/// ([`TakesBias`]): the weights' type (f16, bf16, f32), or for
/// FP8 weights the output's (f16, bf16 or f32: `y`'s type in [`forward`](Self::forward)).
/// One [`new`](Self::new) / `new_device` and one [`forward`](Self::forward) whatever the
/// weights; [`forward_scaled`](Self::forward_scaled) also gives `x`'s scales (W8A8: an `x`
/// of the weights' FP8 type quantized per tensor or per token).
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
///
/// FP8 weights, quantized per block; the bias of the output's type:
///
/// ```
/// use sparsek::quantize::{BlockGranularity, ColumnGranularity, QuantizedDense};
/// use sparsek::{bf16, Activation, BlockMask, BlockShape, BsrMatrix, DenseShape, Layout,
///               SparseLinear, F8E4M3};
///
/// let mask = BlockMask::from_fn(2, 4, |r, c| c == r || c == r + 2)?;
/// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |_, _| 0.01f32)?;
/// let layer = SparseLinear::new(w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?,
///                               Some(vec![0.5f32; 64]), Activation::Relu)?;
/// // W8A16: bf16 activations as they are.
/// let x = vec![bf16::from_f32(1.0); 3 * 128];
/// let mut y = vec![0f32; 3 * 64];
/// layer.forward(&x, 3, &mut y)?;
/// assert!((y[0] - (0.5 + 64.0 * 0.01)).abs() < 1e-2);
/// // W8A8: activations quantized per token (x row-major = xᵀ column-major, a token per column).
/// let xf = vec![1.0f32; 3 * 128];
/// let xq = QuantizedDense::<F8E4M3>::quantize(&xf, DenseShape::packed(128, 3, Layout::ColMajor),
///                                               ColumnGranularity::PerColumn)?;
/// layer.forward_scaled(xq.values(), xq.column_scales(), 3, &mut y)?;
/// assert!((y[0] - (0.5 + 64.0 * 0.01)).abs() < 1e-2);
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

impl<W: SparseWeight, V> SparseLinear<W, V> {
    /// A layer of `weight` (`out x in`) and `bias` (`len` values, if any: `out` of them).
    fn with_parts(
        weight: W,
        bias: Option<V>,
        len: impl Fn(&V) -> usize,
        activation: Activation,
    ) -> Result<Self, Error> {
        let out_features = weight.m();
        if let Some(got) = bias.as_ref().map(len) {
            if got != out_features {
                return Err(Error::ShapeMismatch {
                    what: "bias length (= out features)",
                    expected: out_features,
                    got,
                });
            }
        }
        Ok(Self {
            weight,
            bias,
            activation,
            options: SpmmOptions::new(),
        })
    }
}

/// `y (batch x out) = act(x (batch x in) · Wᵀ + bias)` as `yᵀ = W·xᵀ`, for any operands:
/// `x` row-major is `xᵀ` column-major, the K-major B that W8A8 needs, and an FP8 `x`'s
/// per-token scales are per column of `xᵀ`. With `launch` false, its checks alone (the
/// product's, the kernel's selection on the device included): nothing runs, nothing is
/// written.
fn forward<TA: Element, X: Element, O: Element, V: Element>(
    weight: BsrOperand<'_, TA>,
    x: Dense<'_, X>,
    y: DenseMut<'_, O>,
    bias: Option<Vector<'_, V>>,
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
        product(weight, x, y, &epilogue, &options)
    } else {
        check_spmm(&weight, &x, &y, &epilogue, &options, true).map(|_| ())
    }
}

impl<W: HostWeight, V: Element> SparseLinear<W, Vec<V>> {
    /// A host layer: `weight` is `out x in` (a `BsrMatrix`, or a [`QuantizedBsr`] of FP8
    /// weights quantized per tensor or per block: [`BsrMatrix::quantize_fp8`]), `bias` (if
    /// any) has `out` values of the weights' type, or of the output's for FP8 weights
    /// ([`TakesBias`]; without a bias, FP8 weights name it:
    /// `None::<Vec<f32>>`).
    ///
    /// [`BsrMatrix::quantize_fp8`]: crate::BsrMatrix::quantize_fp8
    pub fn new(weight: W, bias: Option<Vec<V>>, activation: Activation) -> Result<Self, Error>
    where
        W::Element: TakesBias<V>,
    {
        Self::with_parts(weight, bias, Vec::len, activation)
    }

    /// `y = act(x·Wᵀ + bias)` for row-major `x` (`batch x in`) and `y` (`batch x out`):
    /// `x` of the weights' type, or for FP8 weights f16/bf16 (W8A16) or of their FP8 type
    /// without scales (W8A8). The checks are [`spmm_fused`](crate::spmm_fused)'s.
    pub fn forward<X: Element, O: Element>(
        &self,
        x: &[X],
        batch: usize,
        y: &mut [O],
    ) -> Result<(), Error>
    where
        W::Element: TakesB<X>,
    {
        self.forward_host(x, ColumnScales::None, batch, y)
    }

    /// [`forward`](Self::forward) with `x`'s scales: W8A8 for an `x` of the weights' FP8
    /// type with its scales per tensor or per token (one per row of `x`). Scales on an `x`
    /// that is not FP8 are [`Error::ScalesNotTaken`].
    pub fn forward_scaled<X: Element, O: Element>(
        &self,
        x: &[X],
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut [O],
    ) -> Result<(), Error>
    where
        W::Element: TakesB<X>,
    {
        self.forward_host(x, x_scales, batch, y)
    }

    /// The host forward, without the type bounds (the product checks the types).
    fn forward_host<X: Element, O: Element>(
        &self,
        x: &[X],
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut [O],
    ) -> Result<(), Error> {
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward(
            self.weight.operand(),
            Dense::host(x, in_f, batch, Layout::ColMajor).with_any_scales(x_scales),
            DenseMut::host(y, out_f, batch, Layout::ColMajor),
            self.bias.as_deref().map(Vector::Host),
            self.activation,
            &self.options,
            true,
        )
    }
}

impl<Q: Fp8, V: Element> SparseLinear<QuantizedBsr<Q>, Vec<V>> {
    /// [`new`](SparseLinear::new) for FP8 weights, under its former name.
    #[deprecated(
        since = "0.1.1",
        note = "FP8 is a dtype of the one layer: use `SparseLinear::new`"
    )]
    pub fn new_fp8(
        weight: QuantizedBsr<Q>,
        bias: Option<Vec<V>>,
        activation: Activation,
    ) -> Result<Self, Error> {
        Self::with_parts(weight, bias, Vec::len, activation)
    }

    /// [`forward_scaled`](SparseLinear::forward_scaled) for FP8 weights, under its former
    /// name (`y` of the bias's type).
    #[deprecated(
        since = "0.1.1",
        note = "FP8 is a dtype of the one layer: use `forward` (or `forward_scaled` for an \
                x with scales)"
    )]
    pub fn forward_fp8<X: Element>(
        &self,
        x: &[X],
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut [V],
    ) -> Result<(), Error> {
        self.forward_host(x, x_scales, batch, y)
    }
}

#[cfg(feature = "cuda")]
impl<T: Element, V: Element> SparseLinear<DeviceBsr<T>, CudaSlice<V>> {
    /// A device layer: `weight` is `out x in` (FP8 weights with their scales:
    /// [`DeviceBsr::upload_quantized`]), `bias` (if any) has `out` values of the weights'
    /// type, or of the output's for FP8 weights ([`TakesBias`]).
    pub fn new_device(
        weight: DeviceBsr<T>,
        bias: Option<CudaSlice<V>>,
        activation: Activation,
    ) -> Result<Self, Error>
    where
        T: TakesBias<V>,
    {
        Self::with_parts(weight, bias, CudaSlice::len, activation)
    }

    /// `y = act(x·Wᵀ + bias)` for row-major device `x` (`batch x in`) and `y`
    /// (`batch x out`), enqueued on `y`'s stream: `x` of the weights' type, or for FP8
    /// weights f16/bf16 (W8A16, the Decode family) or of their FP8 type without scales
    /// (W8A8, the Hopper family).
    pub fn forward<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error>
    where
        T: TakesB<X>,
    {
        self.forward_device(x, ColumnScales::None, batch, y, true)
    }

    /// [`forward`](Self::forward) with `x`'s device scales: W8A8 for an `x` of the weights'
    /// FP8 type with its scales per tensor or per token.
    pub fn forward_scaled<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error>
    where
        T: TakesB<X>,
    {
        self.forward_device(x, x_scales, batch, y, true)
    }

    /// Every check of [`forward`](Self::forward) on these buffers, nothing launched
    /// (`sparsek::tp` checks every rank before the first launch).
    #[cfg(feature = "nccl")]
    pub(crate) fn check_forward<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        self.forward_device(x, ColumnScales::None, batch, y, false)
    }

    /// [`forward_scaled`](Self::forward_scaled), or with `launch` false its checks alone.
    fn forward_device<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut CudaSlice<O>,
        launch: bool,
    ) -> Result<(), Error> {
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward(
            BsrOperand::Device(&self.weight),
            Dense::device(x, in_f, batch, Layout::ColMajor).with_any_scales(x_scales),
            DenseMut::device(y, out_f, batch, Layout::ColMajor),
            self.bias.as_ref().map(Vector::Device),
            self.activation,
            &self.options,
            launch,
        )
    }
}

#[cfg(feature = "cuda")]
impl<Q: Fp8, V: Element> SparseLinear<DeviceBsr<Q>, CudaSlice<V>> {
    /// [`new_device`](SparseLinear::new_device) for FP8 weights, under its former name.
    #[deprecated(
        since = "0.1.1",
        note = "FP8 is a dtype of the one layer: use `SparseLinear::new_device`"
    )]
    pub fn new_fp8_device(
        weight: DeviceBsr<Q>,
        bias: Option<CudaSlice<V>>,
        activation: Activation,
    ) -> Result<Self, Error> {
        Self::with_parts(weight, bias, CudaSlice::len, activation)
    }

    /// [`forward_scaled`](SparseLinear::forward_scaled) for FP8 device weights, under its
    /// former name (`y` of the bias's type).
    #[deprecated(
        since = "0.1.1",
        note = "FP8 is a dtype of the one layer: use `forward` (or `forward_scaled` for an \
                x with scales)"
    )]
    pub fn forward_fp8<X: Element>(
        &self,
        x: &CudaSlice<X>,
        x_scales: ColumnScales<'_>,
        batch: usize,
        y: &mut CudaSlice<V>,
    ) -> Result<(), Error> {
        self.forward_device(x, x_scales, batch, y, true)
    }
}
