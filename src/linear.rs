//! `SparseLinear`: a pruned linear layer `y = act(x·Wᵀ + bias)` with a block-sparse `W`.
//!
//! `W` is `out x in` (BSR), `x` is `batch x in` and `y` is `batch x out`, both row-major
//! (the layout of activations in every framework). The layer computes `yᵀ = W·xᵀ`: a
//! row-major `x` *is* `xᵀ` column-major with `ld = in`, and likewise `y`, so no transpose is
//! ever made (see `sparsek::dense`).

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::dense::{Dense, DenseMut, Layout};
use crate::element::Element;
use crate::epilogue::{Activation, Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
#[cfg(feature = "cuda")]
use crate::gpu::DeviceBsr;
use crate::options::SpmmOptions;
use crate::spmm::{spmm_fused, BsrOperand};

/// A linear layer with a block-sparse weight, on the host (`W: BsrMatrix<T>`, bias
/// `Vec<T>`) or on the device (`W: DeviceBsr<T>`, bias `CudaSlice<T>`).
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
    /// The weight.
    pub fn weight(&self) -> &W {
        &self.weight
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

/// `y (batch x out) = act(x (batch x in) · Wᵀ + bias)` as `yᵀ = W·xᵀ`, for any operands.
fn forward<'a, T: Element, O: Element>(
    weight: impl Into<BsrOperand<'a, T>>,
    x: Dense<'_, T>,
    y: DenseMut<'_, O>,
    bias: Option<Vector<'_, T>>,
    activation: Activation,
    options: &SpmmOptions,
) -> Result<(), Error> {
    let mut epilogue = Epilogue::new().activation(activation);
    if let Some(bias) = bias {
        epilogue = epilogue.bias(bias);
    }
    // The layer fixes op(W) = W; only the scalars and the backend come from the options.
    spmm_fused(weight, x, y, &epilogue, &options.transpose_a(false))
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
        let (out_f, in_f) = (self.weight.m(), self.weight.k());
        forward(
            &self.weight,
            Dense::device(x, in_f, batch, Layout::ColMajor),
            DenseMut::device(y, out_f, batch, Layout::ColMajor),
            self.bias.as_ref().map(Vector::Device),
            self.activation,
            &self.options,
        )
    }
}
