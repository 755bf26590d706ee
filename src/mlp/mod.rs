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
use crate::element::{Element, Fp8};
use crate::epilogue::{Activation, Epilogue};
use crate::error::Error;
use crate::format::BsrMatrix;
use crate::options::{Backend, SpmmOptions};
use crate::quantize::{BlockScales, QuantizedBsr};
use crate::spmm::{check_fp8_product, check_fused, run_fp8, run_fused, BsrOperand, Fp8Operand};

mod shard;
pub use shard::MlpShards;

/// A gated MLP with block-sparse weights: the gate and up weights interleaved by block-row
/// (`gate_up`, `2·inter x hidden`) and the down weight (`hidden x inter`), on the host
/// (`BsrMatrix<T>`, or `QuantizedBsr<Q>` for FP8 weights) or the device (`DeviceBsr`).
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

/// One weight's `(m, k)` and block rows.
type Dims = ((usize, usize), usize);

/// The weights agree: `gate_up` has an even number of block-rows and `2·inter` rows,
/// `down` takes `inter` inputs. Returns `(inter, hidden in, hidden out)`.
fn check_weights(gate_up: Dims, down: Dims) -> Result<(usize, usize, usize), Error> {
    let ((gu_m, hidden), bm) = gate_up;
    let ((out, inter_in), _) = down;
    crate::spmm::check::check_gated(gu_m, bm, false, 0.0)?;
    crate::check::same(
        "down's inputs (= rows of gate and of up)",
        gu_m / 2,
        inter_in,
    )?;
    Ok((gu_m / 2, hidden, out))
}

/// A forward's two products, every check of both first: the gated gate-and-up product
/// into h, then the down product into y. Both products are checked in full (shapes, types,
/// scales, locations, backends; on the device contexts and the kernels' selection) before
/// the first writes anything, so a refused call leaves h and y untouched; with `$launch`
/// false nothing runs after the checks. `$operand` is the weights' operand type
/// (`BsrOperand` or `Fp8Operand`), `$check` / `$run` that entry's check and product
/// (`check_fused` / `run_fused` or `check_fp8_product` / `run_fp8`), `$view` the views'
/// constructor (`host` or `device`), `$dims` the weights' `Dims`.
macro_rules! two_products {
    ($self:ident, $operand:ident, $check:ident, $run:ident, $view:ident, $dims:expr, $x:ident, $batch:ident, $h:ident, $y:ident, $launch:expr) => {{
        let opts = $self.options();
        let (gu, dn) = $dims;
        let (inter, hidden, out) = check_weights(gu, dn)?;
        let gated = Epilogue::new().activation($self.activation).gated(true);
        let plain = Epilogue::new();
        $check(
            &$operand::from(&$self.gate_up),
            &Dense::$view($x, hidden, $batch, Layout::ColMajor),
            &DenseMut::$view($h, inter, $batch, Layout::ColMajor),
            &gated,
            &opts,
            true,
        )?;
        $check(
            &$operand::from(&$self.down),
            &Dense::$view($h, inter, $batch, Layout::ColMajor),
            &DenseMut::$view($y, out, $batch, Layout::ColMajor),
            &plain,
            &opts,
            true,
        )?;
        if $launch {
            $run(
                $operand::from(&$self.gate_up),
                Dense::$view($x, hidden, $batch, Layout::ColMajor),
                DenseMut::$view($h, inter, $batch, Layout::ColMajor),
                &gated,
                &opts,
            )?;
            $run(
                $operand::from(&$self.down),
                Dense::$view($h, inter, $batch, Layout::ColMajor),
                DenseMut::$view($y, out, $batch, Layout::ColMajor),
                &plain,
                &opts,
            )
        } else {
            Ok(())
        }
    }};
}

fn dims_of<T>(a: &BsrMatrix<T>) -> Dims {
    ((a.m(), a.k()), a.block().rows)
}

impl<T: Element> SparseMlp<BsrMatrix<T>> {
    /// A host MLP from its gate and up (`inter x hidden`, one block shape) and down
    /// (`hidden x inter`) weights; `activation` is the gate's (Silu for SwiGLU). The gate and
    /// up weights are interleaved by block-row ([`BsrMatrix::interleave_block_rows`]).
    pub fn new(
        gate: &BsrMatrix<T>,
        up: &BsrMatrix<T>,
        down: BsrMatrix<T>,
        activation: Activation,
    ) -> Result<Self, Error> {
        Self::from_interleaved(
            BsrMatrix::interleave_block_rows(gate, up)?,
            down,
            activation,
        )
    }

    /// A host MLP from gate and up already interleaved by block-row.
    pub fn from_interleaved(
        gate_up: BsrMatrix<T>,
        down: BsrMatrix<T>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_weights(dims_of(&gate_up), dims_of(&down))?;
        Ok(Self {
            gate_up,
            down,
            activation,
            backend: Backend::Auto,
        })
    }

    /// `y = down(act(x·Gᵀ) ⊙ (x·Uᵀ))` for row-major `x` (`batch x hidden`), writing the
    /// intermediate to `h` (`batch x inter`, row-major) and the result to `y` (`batch x
    /// hidden`, row-major). Every check of both products runs first.
    pub fn forward<O: Element>(
        &self,
        x: &[T],
        batch: usize,
        h: &mut [T],
        y: &mut [O],
    ) -> Result<(), Error> {
        two_products!(
            self,
            BsrOperand,
            check_fused,
            run_fused,
            host,
            (dims_of(&self.gate_up), dims_of(&self.down)),
            x,
            batch,
            h,
            y,
            true
        )
    }

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
    /// A host MLP with FP8 weights (W8A16: activations f16 or bf16), each quantized per
    /// tensor or per block ([`BsrMatrix::quantize_fp8`]).
    pub fn new_fp8(
        gate: &QuantizedBsr<Q>,
        up: &QuantizedBsr<Q>,
        down: QuantizedBsr<Q>,
        activation: Activation,
    ) -> Result<Self, Error> {
        let gate_up = QuantizedBsr::interleave_block_rows(gate, up)?;
        check_weights(dims_of(gate_up.matrix()), dims_of(down.matrix()))?;
        Ok(Self {
            gate_up,
            down,
            activation,
            backend: Backend::Auto,
        })
    }

    /// [`forward`](SparseMlp::forward) with FP8 weights: `x` and `h` of one 16-bit type
    /// `X` (f16 or bf16), `y` f16, bf16 or f32 (the checks are [`spmm_fp8`](crate::spmm_fp8)'s).
    pub fn forward_fp8<X: Element, O: Element>(
        &self,
        x: &[X],
        batch: usize,
        h: &mut [X],
        y: &mut [O],
    ) -> Result<(), Error> {
        two_products!(
            self,
            Fp8Operand,
            check_fp8_product,
            run_fp8,
            host,
            (dims_of(self.gate_up.matrix()), dims_of(self.down.matrix())),
            x,
            batch,
            h,
            y,
            true
        )
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
fn device_dims<T>(a: &DeviceBsr<T>) -> Dims {
    ((a.m(), a.k()), a.block().rows)
}

#[cfg(feature = "cuda")]
impl<T: Element> SparseMlp<DeviceBsr<T>> {
    /// A device MLP from gate and up already interleaved by block-row
    /// ([`BsrMatrix::interleave_block_rows`], then [`DeviceBsr::upload`]) and down, both in
    /// one CUDA context ([`Error::ContextMismatch`] otherwise). FP8 weights (a `DeviceBsr`
    /// of F8E4M3 / F8E5M2 holding its scales) run through
    /// [`forward_fp8`](Self::forward_fp8).
    pub fn from_device(
        gate_up: DeviceBsr<T>,
        down: DeviceBsr<T>,
        activation: Activation,
    ) -> Result<Self, Error> {
        check_weights(device_dims(&gate_up), device_dims(&down))?;
        // A DeviceBsr's arrays (and scales) share its values' context.
        check_contexts(gate_up.values.stream(), &[("down", down.values.stream())])?;
        Ok(Self {
            gate_up,
            down,
            activation,
            backend: Backend::Auto,
        })
    }

    /// [`forward`](Self::forward), or with `launch` false its checks alone.
    fn forward_device<O: Element>(
        &self,
        x: &CudaSlice<T>,
        batch: usize,
        h: &mut CudaSlice<T>,
        y: &mut CudaSlice<O>,
        launch: bool,
    ) -> Result<(), Error> {
        // The gated product runs on h's stream and the down product on y's.
        same_stream(h, y)?;
        two_products!(
            self,
            BsrOperand,
            check_fused,
            run_fused,
            device,
            (device_dims(&self.gate_up), device_dims(&self.down)),
            x,
            batch,
            h,
            y,
            launch
        )
    }

    /// Every check of [`forward`](Self::forward) on these buffers, nothing launched
    /// (`sparsek::tp` checks every rank before the first launch).
    #[cfg(feature = "nccl")]
    pub(crate) fn check_forward<O: Element>(
        &self,
        x: &CudaSlice<T>,
        batch: usize,
        h: &mut CudaSlice<T>,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        self.forward_device(x, batch, h, y, false)
    }

    /// `y = down(act(x·Gᵀ) ⊙ (x·Uᵀ))` on the device, enqueued on `y`'s stream (`h` and `y`
    /// on the same one): two launches, no allocation, no host synchronization, so it can be
    /// captured in a CUDA graph. Every check of both products runs first, the kernels'
    /// selection included, so a refused call launches nothing.
    pub fn forward<O: Element>(
        &self,
        x: &CudaSlice<T>,
        batch: usize,
        h: &mut CudaSlice<T>,
        y: &mut CudaSlice<O>,
    ) -> Result<(), Error> {
        self.forward_device(x, batch, h, y, true)
    }

    /// [`forward`](Self::forward) for FP8 weights (`T` F8E4M3 or F8E5M2, W8A16): `x` and `h`
    /// of one 16-bit type, `y` f16, bf16 or f32.
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
        same_stream(h, y)?;
        two_products!(
            self,
            Fp8Operand,
            check_fp8_product,
            run_fp8,
            device,
            (device_dims(&self.gate_up), device_dims(&self.down)),
            x,
            batch,
            h,
            y,
            true
        )
    }
}
