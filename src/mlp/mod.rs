//! `SparseMlp`: a pruned gated MLP (SwiGLU, GeGLU) `y = down(act(x·Gᵀ) ⊙ (x·Uᵀ))` with
//! block-sparse gate `G`, up `U` (`inter x hidden`) and down `D` (`hidden x inter`) weights,
//! in two launches: the gate and up products as one gated product (their weights
//! interleaved by block-row, the GLU in its epilogue: [`Epilogue::gated`]), then the down
//! product.
//!
//! `x` (`batch x hidden`), the intermediate `h` (`batch x inter`) and `y` (`batch x
//! hidden`) are row-major, as in every framework, so each product is `yᵀ = W·xᵀ` on the
//! same buffers ([`crate::dense`]). `h` is the caller's: nothing is allocated per call, so
//! the device forward can be captured in a CUDA graph.

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;

use crate::dense::{Dense, DenseMut, Layout};
#[cfg(feature = "cuda")]
use crate::device::result::check_contexts;
#[cfg(feature = "cuda")]
use crate::device::DeviceBsr;
use crate::element::{Element, Fp8, TakesB};
use crate::epilogue::{Activation, Epilogue, Vector};
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::{Backend, SpmmOptions};
use crate::quantize::{BlockScales, QuantizedBsr};
use crate::spmm::{check_spmm, run_spmm, HostWeight, SparseWeight};

mod shard;
pub use shard::MlpShards;

/// A gated MLP with block-sparse weights of any element type: the gate and up weights
/// interleaved by block-row (`gate_up`, `2·inter x hidden`) and the down weight (`hidden x
/// inter`), on the host (`BsrMatrix<T>`, or [`QuantizedBsr<Q>`] for FP8 weights with their
/// scales) or the device (`DeviceBsr`, FP8 ones holding their scales). One
/// [`new`](Self::new) and one [`forward`](Self::forward) whatever the weights: `x` and `h`
/// of the weights' type, or f16/bf16 with FP8 weights (W8A16).
///
/// ```
/// use sparsek::{f16, Activation, BlockMask, BlockShape, BsrMatrix, SparseMlp};
/// // hidden 64, inter 128, 32x32 blocks, half of them kept.
/// let w = |rows: usize, cols: usize, v: f32| -> Result<BsrMatrix<f16>, sparsek::Error> {
///     let mask = BlockMask::from_fn(rows / 32, cols / 32, |r, c| (r + c) % 2 == 0)?;
///     Ok(BsrMatrix::from_block_mask(&mask, BlockShape::new(32, 32), |_, _| f16::from_f32(v))?)
/// };
/// let mlp = SparseMlp::new(&w(128, 64, 0.02)?, &w(128, 64, 0.03)?, w(64, 128, 0.01)?, Activation::Silu)?;
/// let x = vec![f16::from_f32(1.0); 2 * 64]; // batch 2
/// let mut h = vec![f16::ZERO; 2 * 128];
/// let mut y = vec![0f32; 2 * 64];
/// mlp.forward(&x, 2, &mut h, &mut y)?;
/// let g = 32.0 * 0.02f32; // each row of G meets one block of x's 64 values
/// let hv = g / (1.0 + (-g).exp()) * (32.0 * 0.03);
/// assert!((y[0] - 64.0 * 0.01 * hv).abs() < 1e-2 * y[0].abs().max(1.0));
///
/// // The same MLP with FP8 weights quantized per block (W8A16: x and h stay f16).
/// use sparsek::{quantize::BlockGranularity, F8E4M3};
/// let q = |m: &BsrMatrix<f16>| {
///     let f = BsrMatrix::from_parts(m.m(), m.k(), m.block(), m.row_ptr().to_vec(), m.col_idx().to_vec(),
///                                   m.values().iter().map(|v| v.to_f32()).collect())?;
///     f.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
/// };
/// let fp8 = SparseMlp::new(&q(&w(128, 64, 0.02)?)?, &q(&w(128, 64, 0.03)?)?, q(&w(64, 128, 0.01)?)?,
///                          Activation::Silu)?;
/// let mut y8 = vec![0f32; 2 * 64];
/// fp8.forward(&x, 2, &mut h, &mut y8)?;
/// assert!((y8[0] - y[0]).abs() < 2e-2 * y[0].abs().max(1.0));
/// # Ok::<(), sparsek::Error>(())
/// ```
pub struct SparseMlp<W> {
    gate_up: W,
    down: W,
    activation: Activation,
    backend: Backend,
}

impl<W> SparseMlp<W> {
    /// The activation of the gate (Silu: SwiGLU; GeluTanh: GeGLU).
    pub fn activation(&self) -> Activation {
        self.activation
    }
    /// The gate and up weights interleaved by block-row (`2·inter x hidden`).
    pub fn gate_up(&self) -> &W {
        &self.gate_up
    }
    /// The down weight (`hidden x inter`).
    pub fn down(&self) -> &W {
        &self.down
    }
    /// Runs both products on `backend` (`Auto` by default).
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }
    fn options(&self) -> SpmmOptions {
        SpmmOptions::new().backend(self.backend)
    }
}

/// The biases of a [`SparseMlp`] forward ([`forward_with_bias`](SparseMlp::forward_with_bias)),
/// each optional and each of its product's bias type: the weights' type, or with FP8
/// weights the product's output type (`h`'s for `gate_up`, `y`'s for `down`).
#[derive(Clone, Copy)]
pub struct MlpBias<'a, G, D> {
    /// `2·inter` values in `gate_up`'s row order (the gate's and up's biases interleaved by
    /// block-row: [`interleave_bias`]), added before the activation and the product:
    /// `h = act(x·Gᵀ + b_g) ⊙ (x·Uᵀ + b_u)`.
    pub gate_up: Option<Vector<'a, G>>,
    /// `out` values, added to the down product: `y = h·Dᵀ + b_down`.
    pub down: Option<Vector<'a, D>>,
}

impl<G, D> MlpBias<'_, G, D> {
    /// No bias on either product.
    pub fn none() -> Self {
        Self {
            gate_up: None,
            down: None,
        }
    }
}

/// The gate's and up's biases (`inter` values each) interleaved by block-row of `bm` rows,
/// as [`BsrMatrix::interleave_block_rows`] interleaves their weights: the `gate_up` bias of
/// [`MlpBias`].
pub fn interleave_bias<T: Copy>(gate: &[T], up: &[T], bm: usize) -> Result<Vec<T>, Error> {
    crate::check::same(
        "the up bias's length (= the gate bias's)",
        gate.len(),
        up.len(),
    )?;
    if bm == 0 || gate.len() % bm != 0 {
        return Err(Error::InvalidArgument(format!(
            "interleave_bias: the biases' length {} is not a multiple of the block height {bm}",
            gate.len()
        )));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(2 * gate.len())
        .map_err(|_| crate::error::BsrError::Allocation {
            what: "the interleaved bias",
            elements: 2 * gate.len(),
        })?;
    for (g, u) in gate.chunks(bm).zip(up.chunks(bm)) {
        out.extend_from_slice(g);
        out.extend_from_slice(u);
    }
    Ok(out)
}

/// One weight's `(m, k)` and block rows.
type Dims = ((usize, usize), usize);

fn dims<W: SparseWeight>(w: &W) -> Dims {
    ((w.m(), w.k()), w.block().rows)
}

/// The weights agree: `gate_up` has an even number of block-rows and `2·inter` rows,
/// `down` takes `inter` inputs. Returns `(inter, hidden in, hidden out)`.
fn check_weights(gate_up: Dims, down: Dims) -> Result<(usize, usize, usize), Error> {
    let ((gu_m, hidden), bm) = gate_up;
    let ((out, inter_in), _) = down;
    crate::spmm::check::check_gated_weight(gu_m, hidden, bm)?;
    crate::check::same(
        "down's inputs (= rows of gate and of up)",
        gu_m / 2,
        inter_in,
    )?;
    Ok((gu_m / 2, hidden, out))
}

/// A buffer of row-major activations (`x`, `h`, `y`), host or device, viewed as the
/// column-major `rows x batch` operand of `yᵀ = W·xᵀ`.
trait Activations<T> {
    fn view(&self, rows: usize, batch: usize) -> Dense<'_, T>;
    fn view_mut(&mut self, rows: usize, batch: usize) -> DenseMut<'_, T>;
}

impl<T> Activations<T> for [T] {
    fn view(&self, rows: usize, batch: usize) -> Dense<'_, T> {
        Dense::host(self, rows, batch, Layout::ColMajor)
    }
    fn view_mut(&mut self, rows: usize, batch: usize) -> DenseMut<'_, T> {
        DenseMut::host(self, rows, batch, Layout::ColMajor)
    }
}

#[cfg(feature = "cuda")]
impl<T> Activations<T> for CudaSlice<T> {
    fn view(&self, rows: usize, batch: usize) -> Dense<'_, T> {
        Dense::device(self, rows, batch, Layout::ColMajor)
    }
    fn view_mut(&mut self, rows: usize, batch: usize) -> DenseMut<'_, T> {
        DenseMut::device(self, rows, batch, Layout::ColMajor)
    }
}

impl<W: SparseWeight> SparseMlp<W> {
    /// A forward's two products, every check of both first: the gated gate-and-up product
    /// into h, then the down product into y. Both products are checked in full (shapes,
    /// types, scales, locations, backends; on the device contexts and the kernels'
    /// selection) before the first writes anything, so a refused call leaves h and y
    /// untouched; with `launch` false nothing runs after the checks. One body for every
    /// weight type and location: the rules of each are the product's.
    #[allow(clippy::too_many_arguments)]
    fn two_products<X, O, G, D, XB, YB>(
        &self,
        x: &XB,
        batch: usize,
        h: &mut XB,
        y: &mut YB,
        bias: &MlpBias<'_, G, D>,
        launch: bool,
    ) -> Result<(), Error>
    where
        X: Element,
        O: Element,
        G: Element,
        D: Element,
        XB: Activations<X> + ?Sized,
        YB: Activations<O> + ?Sized,
    {
        let opts = self.options();
        let (inter, hidden, out) = check_weights(dims(&self.gate_up), dims(&self.down))?;
        // Each bias's type is checked by its product's rules (the weights' or the output's).
        let mut gated = Epilogue::<G>::new().activation(self.activation).gated(true);
        if let Some(b) = bias.gate_up {
            gated = gated.bias(b);
        }
        let mut plain = Epilogue::<D>::new();
        if let Some(b) = bias.down {
            plain = plain.bias(b);
        }
        let (gate_up, down) = (self.gate_up.operand(), self.down.operand());
        check_spmm(
            &gate_up,
            &x.view(hidden, batch),
            &h.view_mut(inter, batch),
            &gated,
            &opts,
            true,
        )?;
        check_spmm(
            &down,
            &h.view(inter, batch),
            &y.view_mut(out, batch),
            &plain,
            &opts,
            true,
        )?;
        if !launch {
            return Ok(());
        }
        run_spmm(
            gate_up,
            x.view(hidden, batch),
            h.view_mut(inter, batch),
            &gated,
            &opts,
        )?;
        run_spmm(
            down,
            h.view(inter, batch),
            y.view_mut(out, batch),
            &plain,
            &opts,
        )
    }
}

impl<W: HostWeight> SparseMlp<W> {
    /// A host MLP from its gate and up (`inter x hidden`, one block shape) and down
    /// (`hidden x inter`) weights, `BsrMatrix` or FP8 [`QuantizedBsr`] (each quantized per
    /// tensor or per block: [`BsrMatrix::quantize_fp8`]); `activation` is the gate's (Silu
    /// for SwiGLU). The gate and up weights are interleaved by block-row
    /// ([`BsrMatrix::interleave_block_rows`], [`QuantizedBsr::interleave_block_rows`]).
    pub fn new(gate: &W, up: &W, down: W, activation: Activation) -> Result<Self, Error> {
        Self::from_interleaved(
            crate::spmm::sealed::Host::interleave_block_rows(gate, up)?,
            down,
            activation,
        )
    }

    /// A host MLP from gate and up already interleaved by block-row.
    pub fn from_interleaved(gate_up: W, down: W, activation: Activation) -> Result<Self, Error> {
        check_weights(dims(&gate_up), dims(&down))?;
        Ok(Self {
            gate_up,
            down,
            activation,
            backend: Backend::Auto,
        })
    }

    /// `y = down(act(x·Gᵀ) ⊙ (x·Uᵀ))` for row-major `x` (`batch x hidden`), writing the
    /// intermediate to `h` (`batch x inter`, row-major) and the result to `y` (`batch x
    /// hidden`, row-major). `x` and `h` of the weights' type, or f16/bf16 for FP8 weights
    /// (W8A16); `y` of a type the products write. Every check of both products runs first.
    pub fn forward<X: Element, O: Element>(
        &self,
        x: &[X],
        batch: usize,
        h: &mut [X],
        y: &mut [O],
    ) -> Result<(), Error>
    where
        W::Element: TakesB<X>,
    {
        self.two_products(x, batch, h, y, &MlpBias::<X, O>::none(), true)
    }

    /// [`forward`](Self::forward) with biases on either product ([`MlpBias`], host vectors).
    pub fn forward_with_bias<X: Element, O: Element, G: Element, D: Element>(
        &self,
        x: &[X],
        batch: usize,
        h: &mut [X],
        y: &mut [O],
        bias: &MlpBias<'_, G, D>,
    ) -> Result<(), Error>
    where
        W::Element: TakesB<X>,
    {
        self.two_products(x, batch, h, y, bias, true)
    }
}

impl<T: Element> SparseMlp<BsrMatrix<T>> {
    /// The MLP on the device of `stream` (its weights uploaded).
    #[cfg(feature = "cuda")]
    pub fn upload(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<SparseMlp<DeviceBsr<T>>, Error> {
        Ok(SparseMlp {
            gate_up: DeviceBsr::upload(&self.gate_up, stream)?,
            down: DeviceBsr::upload(&self.down, stream)?,
            activation: self.activation,
            backend: self.backend,
        })
    }
}

impl<Q: Fp8> QuantizedBsr<Q> {
    /// [`BsrMatrix::interleave_block_rows`] for FP8 weights with their scales: per-block
    /// scales follow their blocks; one scale per tensor stays so where both agree, and
    /// becomes per-block scales otherwise (exact: each block keeps its tensor's scale).
    pub fn interleave_block_rows(first: &Self, second: &Self) -> Result<Self, Error> {
        let matrix = BsrMatrix::interleave_block_rows(first.matrix(), second.matrix())?;
        let scales = match (first.scales(), second.scales()) {
            (BlockScales::None, BlockScales::None) => BlockScales::None,
            (BlockScales::PerTensor(a), BlockScales::PerTensor(b))
                if a.to_bits() == b.to_bits() =>
            {
                BlockScales::PerTensor(*a)
            }
            (a, b) => {
                let (fa, fb) = (first.matrix(), second.matrix());
                let mut s = Vec::new();
                s.try_reserve_exact(matrix.nnz_blocks()).map_err(|_| {
                    crate::error::BsrError::Allocation {
                        what: "block scales",
                        elements: matrix.nnz_blocks(),
                    }
                })?;
                let scale = |sc: &BlockScales, i: usize| sc.of_block(i).unwrap_or(1.0);
                for (ra, rb) in fa.block_rows().zip(fb.block_rows()) {
                    // row_ptr entries are validated, non-negative and <= nnzb.
                    let a0 = fa.row_ptr()[ra.index] as usize;
                    let b0 = fb.row_ptr()[rb.index] as usize;
                    s.extend((0..ra.col_idx.len()).map(|j| scale(a, a0 + j)));
                    s.extend((0..rb.col_idx.len()).map(|j| scale(b, b0 + j)));
                }
                BlockScales::PerBlock(s)
            }
        };
        QuantizedBsr::new(matrix, scales)
    }
}

impl<Q: Fp8> SparseMlp<QuantizedBsr<Q>> {
    /// [`new`](SparseMlp::new) for FP8 weights, under its former name.
    #[deprecated(
        since = "0.1.1",
        note = "FP8 is a dtype of the one MLP: use `SparseMlp::new`"
    )]
    pub fn new_fp8(
        gate: &QuantizedBsr<Q>,
        up: &QuantizedBsr<Q>,
        down: QuantizedBsr<Q>,
        activation: Activation,
    ) -> Result<Self, Error> {
        Self::new(gate, up, down, activation)
    }

    /// [`forward`](SparseMlp::forward) for FP8 weights, under its former name.
    #[deprecated(since = "0.1.1", note = "FP8 is a dtype of the one MLP: use `forward`")]
    pub fn forward_fp8<X: Element, O: Element>(
        &self,
        x: &[X],
        batch: usize,
        h: &mut [X],
        y: &mut [O],
    ) -> Result<(), Error> {
        self.two_products(x, batch, h, y, &MlpBias::<X, O>::none(), true)
    }

    /// The MLP on the device of `stream` (weights and scales uploaded).
    #[cfg(feature = "cuda")]
    pub fn upload(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<SparseMlp<DeviceBsr<Q>>, Error> {
        Ok(SparseMlp {
            gate_up: DeviceBsr::upload_quantized(&self.gate_up, stream)?,
            down: DeviceBsr::upload_quantized(&self.down, stream)?,
            activation: self.activation,
            backend: self.backend,
        })
    }
}

/// The gated product runs on `h`'s stream and the down product on `y`'s: one stream, so
/// the second reads what the first wrote.
#[cfg(feature = "cuda")]
fn same_stream<A, B>(h: &CudaSlice<A>, y: &CudaSlice<B>) -> Result<(), Error> {
    if h.stream().cu_stream() == y.stream().cu_stream() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(
            "SparseMlp: h and y must be on one stream (the down product reads h)".into(),
        ))
    }
}

#[cfg(feature = "cuda")]
impl<T: Element> SparseMlp<DeviceBsr<T>> {
    /// A device MLP from gate and up already interleaved by block-row
    /// ([`BsrMatrix::interleave_block_rows`], then [`DeviceBsr::upload`]; FP8 weights with
    /// their scales: [`QuantizedBsr::interleave_block_rows`], then
    /// [`DeviceBsr::upload_quantized`]) and down, both in one CUDA context
    /// ([`Error::ContextMismatch`] otherwise).
    pub fn from_device(
        gate_up: DeviceBsr<T>,
        down: DeviceBsr<T>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_weights(dims(&gate_up), dims(&down))?;
        // A DeviceBsr's arrays (and scales) share its values' context.
        check_contexts(gate_up.values.stream(), &[("down", down.values.stream())])?;
        Ok(Self {
            gate_up,
            down,
            activation,
            backend: Backend::Auto,
        })
    }

    /// [`forward_with_bias`](Self::forward_with_bias), or with `launch` false its checks alone.
    fn forward_device<X: Element, O: Element, G: Element, D: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        h: &mut CudaSlice<X>,
        y: &mut CudaSlice<O>,
        bias: &MlpBias<'_, G, D>,
        launch: bool,
    ) -> Result<(), Error> {
        // The gated product runs on h's stream and the down product on y's.
        same_stream(h, y)?;
        self.two_products(x, batch, h, y, bias, launch)
    }

    /// Every check of [`forward`](Self::forward) on these buffers, nothing launched
    /// (`sparsek::tp` checks every rank before the first launch).
    #[cfg(feature = "nccl")]
    pub(crate) fn check_forward<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        h: &mut CudaSlice<X>,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        self.forward_device(x, batch, h, y, &MlpBias::<X, O>::none(), false)
    }

    /// `y = down(act(x·Gᵀ) ⊙ (x·Uᵀ))` on the device, enqueued on `y`'s stream (`h` and `y`
    /// on the same one): two launches, no allocation, no host synchronization, so it can be
    /// captured in a CUDA graph. `x` and `h` of the weights' type, or f16/bf16 for FP8
    /// weights (W8A16); `y` of a type the products write. Every check of both products
    /// runs first, the kernels' selection included, so a refused call launches nothing.
    pub fn forward<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        h: &mut CudaSlice<X>,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error>
    where
        T: TakesB<X>,
    {
        self.forward_device(x, batch, h, y, &MlpBias::<X, O>::none(), true)
    }

    /// [`forward`](Self::forward) with biases on either product ([`MlpBias`], device
    /// vectors in the weights' context).
    pub fn forward_with_bias<X: Element, O: Element, G: Element, D: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        h: &mut CudaSlice<X>,
        y: &mut CudaSlice<O>,
        bias: &MlpBias<'_, G, D>,
    ) -> Result<(), Error>
    where
        T: TakesB<X>,
    {
        self.forward_device(x, batch, h, y, bias, true)
    }

    /// [`forward`](Self::forward) for FP8 weights (`T` F8E4M3 or F8E5M2, W8A16), under its
    /// former name.
    #[deprecated(since = "0.1.1", note = "FP8 is a dtype of the one MLP: use `forward`")]
    pub fn forward_fp8<X: Element, O: Element>(
        &self,
        x: &CudaSlice<X>,
        batch: usize,
        h: &mut CudaSlice<X>,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error>
    where
        T: Fp8,
    {
        self.forward_device(x, batch, h, y, &MlpBias::<X, O>::none(), true)
    }
}
