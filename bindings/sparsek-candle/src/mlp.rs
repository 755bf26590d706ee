//! [`SparseMlp`]: a gated MLP `y = (act(x·Gᵀ) ⊙ x·Uᵀ)·Dᵀ` with block-sparse weights, as a
//! candle `Module` (sparsek's `SparseMlp`: gate and up in one product with the activation
//! and the product fused, then down).

use std::marker::PhantomData;

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Module, Shape, Tensor};
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, Activation, BlockMask, BlockShape, BsrMatrix, HostWeight, TakesB, F8E4M3,
};

use crate::element::CandleElement;
use crate::error::{Error, Result};
use crate::linear::{dims2, output_len, to_bsr, unsupported_device, WeightFormat};
use crate::storage::{host_output, host_rows, Failure};

const OP: &str = "sparsek-candle SparseMlp";

pub(crate) trait MlpKernel: Send + Sync {
    fn cpu(&self, x: &CpuStorage, l: &Layout, batch: usize) -> Result<CpuStorage>;
    #[cfg(feature = "cuda")]
    fn cuda(
        &self,
        x: &candle_core::CudaStorage,
        l: &Layout,
        batch: usize,
    ) -> Result<candle_core::CudaStorage>;
}

struct HostMlp<W, X> {
    mlp: sparsek::SparseMlp<W>,
    inter: usize,
    out: usize,
    activations: PhantomData<fn() -> X>,
}

impl<W, X> MlpKernel for HostMlp<W, X>
where
    W: HostWeight + Send + Sync,
    W::Element: TakesB<X>,
    X: CandleElement,
{
    fn cpu(&self, x: &CpuStorage, l: &Layout, batch: usize) -> Result<CpuStorage> {
        let xs = host_rows::<X>(OP, "x", x, l)?;
        let mut h = host_output::<X>(output_len(OP, batch, self.inter)?);
        let mut y = host_output::<X>(output_len(OP, batch, self.out)?);
        self.mlp.forward(xs, batch, &mut h, &mut y)?;
        Ok(X::to_cpu_storage_owned(y))
    }

    #[cfg(feature = "cuda")]
    fn cuda(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
        _: usize,
    ) -> Result<candle_core::CudaStorage> {
        Err(Error::Device {
            op: OP,
            what: "the weights are on the CPU and x on a CUDA device (build the MLP on x's device)"
                .into(),
        })
    }
}

#[cfg(feature = "cuda")]
mod device_mlp {
    use super::*;
    use crate::storage::device;
    use candle_core::{CudaDevice, CudaStorage};
    use sparsek::cudarc::driver::sys::CUstreamCaptureStatus;
    use sparsek::cudarc::driver::CudaSlice;
    use sparsek::DeviceBsr;
    use std::sync::Mutex;
    use std::thread::ThreadId;

    /// The largest h kept between calls ([`DeviceMlp::scratch`]): a decode batch's (2048
    /// tokens of an intermediate size of 256, 64 of 8192), not a prefill's.
    const SCRATCH_MAX_BYTES: usize = 1 << 20;

    pub(crate) struct DeviceMlp<T, X> {
        pub(crate) mlp: sparsek::SparseMlp<DeviceBsr<T>>,
        pub(crate) device: CudaDevice,
        pub(crate) inter: usize,
        pub(crate) out: usize,
        pub(crate) activations: PhantomData<fn() -> X>,
        /// h of the last small call and the thread that made it, reused by that thread's
        /// next call instead of a new allocation (a decode step's MLP then allocates y
        /// only). A thread's calls enqueue on one stream (candle's device stream as that
        /// thread sees it), so the next call's writes to h follow the last call's reads in
        /// stream order; another thread's h is never taken (nor freed) here, as its last
        /// reads may be pending on another stream.
        pub(crate) scratch: Mutex<Option<(ThreadId, CudaSlice<X>)>>,
    }

    impl<T, X: CandleElement> DeviceMlp<T, X> {
        pub(crate) fn new(
            mlp: sparsek::SparseMlp<DeviceBsr<T>>,
            device: CudaDevice,
            inter: usize,
            out: usize,
        ) -> Self {
            Self {
                mlp,
                device,
                inter,
                out,
                activations: PhantomData,
                scratch: Mutex::new(None),
            }
        }

        /// This thread's kept h if it holds `len` elements, else a new one (`keep`: the call
        /// is small enough to keep it after).
        fn take_h(&self, dev: &CudaDevice, len: usize, keep: bool) -> Result<CudaSlice<X>> {
            if keep {
                let mut slot = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
                match slot.take() {
                    Some((id, h)) if id == std::thread::current().id() && h.len() >= len => {
                        return Ok(h)
                    }
                    other => *slot = other,
                }
            }
            device::output::<X>(dev, len)
        }

        /// Keeps `h` for this thread's next call, unless the slot holds another thread's.
        fn keep_h(&self, h: CudaSlice<X>) {
            let me = std::thread::current().id();
            let mut slot = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_none_or(|(id, _)| *id == me) {
                *slot = Some((me, h));
            }
        }
    }

    impl<T, X> MlpKernel for DeviceMlp<T, X>
    where
        T: TakesB<X> + Send + Sync,
        X: CandleElement,
    {
        fn cpu(&self, _: &CpuStorage, _: &Layout, _: usize) -> Result<CpuStorage> {
            Err(Error::Device {
                op: OP,
                what: "the weights are on a CUDA device and x on the CPU (build the MLP on x's device)"
                    .into(),
            })
        }

        fn cuda(&self, x: &CudaStorage, l: &Layout, batch: usize) -> Result<CudaStorage> {
            device::same_device(OP, &self.device, &x.device)?;
            let xs = device::rows::<X>(OP, "x", x, l)?;
            // h, the gated product: kept for this thread's next call when small, else
            // freed in stream order after this one. Not while the stream is captured into a
            // CUDA graph: a buffer allocated there belongs to the graph.
            let h_len = output_len(OP, batch, self.inter)?;
            let capturing = x.device.cuda_stream().capture_status()
                != Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE);
            let keep = !capturing
                && h_len
                    .checked_mul(std::mem::size_of::<X>())
                    .is_some_and(|b| b <= SCRATCH_MAX_BYTES);
            let mut h = self.take_h(&x.device, h_len, keep)?;
            let mut y = device::output::<X>(&x.device, output_len(OP, batch, self.out)?)?;
            let done = self.mlp.forward(xs, batch, &mut h, &mut y);
            if keep {
                self.keep_h(h);
            }
            done?;
            Ok(CudaStorage::wrap_cuda_slice(y, x.device.clone()))
        }
    }
}

/// A gated MLP with block-sparse weights on candle tensors: `y = (act(x·Gᵀ) ⊙ x·Uᵀ)·Dᵀ`
/// for `x` of shape `[.., hidden]` and `y` of shape `[.., out]` (`out` = `hidden` in a
/// transformer); activation Silu is SwiGLU (Llama's MLP), GeluTanh GeGLU.
///
/// ```
/// use candle_core::{DType, Device, Module, Tensor};
/// use sparsek::{Activation, BlockShape};
/// use sparsek_candle::{SparseMlp, WeightFormat};
///
/// let dev = Device::Cpu;
/// let w = |r, c| Tensor::randn(0f32, 0.05, (r, c), &dev)?.to_dtype(DType::BF16);
/// let (gate, up, down) = (w(256, 128)?, w(256, 128)?, w(128, 256)?);
/// // Half the blocks of each weight, gate and up keeping the same ones.
/// let mlp = SparseMlp::pruned(&gate, &up, &down, BlockShape::new(64, 64), 0.5,
///                             WeightFormat::Same, Activation::Silu)?;
/// let x = Tensor::randn(0f32, 1.0, (4, 128), &dev)?.to_dtype(DType::BF16)?;
/// assert_eq!(mlp.forward(&x)?.dims(), &[4, 128]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SparseMlp {
    kernel: Box<dyn MlpKernel>,
    hidden: usize,
    inter: usize,
    out: usize,
    dtype: DType,
    device: Device,
}

impl std::fmt::Debug for SparseMlp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseMlp")
            .field("hidden", &self.hidden)
            .field("inter", &self.inter)
            .field("out", &self.out)
            .field("dtype", &self.dtype)
            .field("device", &self.device.location())
            .finish()
    }
}

/// The host MLP of dense weights on their masks, in the weights' dtype `T`.
fn host_mlp<T: CandleElement>(
    (gate, up, down): (&Tensor, &Tensor, &Tensor),
    (gate_up_mask, down_mask): (&BlockMask, &BlockMask),
    block: BlockShape,
    activation: Activation,
) -> Result<sparsek::SparseMlp<BsrMatrix<T>>> {
    let g = to_bsr::<T>(OP, "gate", gate, gate_up_mask, block)?;
    let u = to_bsr::<T>(OP, "up", up, gate_up_mask, block)?;
    let d = to_bsr::<T>(OP, "down", down, down_mask, block)?;
    Ok(sparsek::SparseMlp::new(&g, &u, d, activation)?)
}

impl SparseMlp {
    /// The MLP of dense `gate` and `up` (`[inter, hidden]`, kept on `gate_up_mask`) and
    /// `down` (`[out, inter]`, kept on `down_mask`), f16/bf16/f32 of one dtype, stored as
    /// `format`, on the weights' device. The activations have the weights' dtype.
    #[allow(clippy::too_many_arguments)]
    pub fn from_dense(
        gate: &Tensor,
        up: &Tensor,
        down: &Tensor,
        gate_up_mask: &BlockMask,
        down_mask: &BlockMask,
        block: BlockShape,
        format: WeightFormat,
        activation: Activation,
    ) -> Result<Self> {
        let (inter, hidden) = dims2(OP, "gate", gate)?;
        let (_, down_in) = dims2(OP, "down", down)?;
        if up.dims() != [inter, hidden] || down_in != inter {
            return Err(Error::Shape {
                op: OP,
                operand: if up.dims() != [inter, hidden] {
                    "up"
                } else {
                    "down"
                },
                got: if up.dims() != [inter, hidden] {
                    up.dims().to_vec()
                } else {
                    down.dims().to_vec()
                },
                expected: format!("up [{inter}, {hidden}] (gate's shape), down [out, {inter}]"),
            });
        }
        for (operand, t) in [("up", up), ("down", down)] {
            crate::storage::check_dtype_of(OP, operand, t.dtype(), gate.dtype())?;
        }
        let device = gate.device();
        for t in [up, down] {
            if !t.device().same_device(device) {
                return Err(Error::Device {
                    op: OP,
                    what: "gate, up and down must be on one device".into(),
                });
            }
        }
        let w = (gate, up, down);
        let masks = (gate_up_mask, down_mask);
        match (gate.dtype(), format) {
            (DType::F16, WeightFormat::Same) => {
                Self::from_sparsek(host_mlp::<f16>(w, masks, block, activation)?, device)
            }
            (DType::BF16, WeightFormat::Same) => {
                Self::from_sparsek(host_mlp::<bf16>(w, masks, block, activation)?, device)
            }
            (DType::F32, WeightFormat::Same) => {
                Self::from_sparsek(host_mlp::<f32>(w, masks, block, activation)?, device)
            }
            (DType::F16, WeightFormat::Fp8E4M3(g)) => {
                Self::fp8::<f16>(host_mlp::<f16>(w, masks, block, activation)?, g, device)
            }
            (DType::BF16, WeightFormat::Fp8E4M3(g)) => {
                Self::fp8::<bf16>(host_mlp::<bf16>(w, masks, block, activation)?, g, device)
            }
            (got, format) => Err(Error::DType {
                op: OP,
                operand: "gate",
                got,
                expected: match format {
                    WeightFormat::Same => "f16, bf16 or f32".into(),
                    WeightFormat::Fp8E4M3(_) => "f16 or bf16 (the FP8 MLP's activations)".into(),
                },
            }),
        }
    }

    /// [`from_dense`](Self::from_dense) on masks of the magnitude-pruning helpers: gate and
    /// up keep the `density` share of their blocks by their combined norms
    /// ([`prune::by_joint_block_norm`](crate::prune::by_joint_block_norm)), down by its own.
    pub fn pruned(
        gate: &Tensor,
        up: &Tensor,
        down: &Tensor,
        block: BlockShape,
        density: f64,
        format: WeightFormat,
        activation: Activation,
    ) -> Result<Self> {
        let gate_up_mask = crate::prune::by_joint_block_norm(&[gate, up], block, density)?;
        let down_mask = crate::prune::by_block_norm(down, block, density)?;
        Self::from_dense(
            gate,
            up,
            down,
            &gate_up_mask,
            &down_mask,
            block,
            format,
            activation,
        )
    }

    fn fp8<X: CandleElement>(
        mlp: sparsek::SparseMlp<BsrMatrix<X>>,
        granularity: BlockGranularity,
        device: &Device,
    ) -> Result<Self>
    where
        F8E4M3: TakesB<X>,
    {
        // Gate and up are quantized interleaved, as one weight: each block keeps its scale.
        let gate_up = mlp.gate_up().quantize_fp8::<F8E4M3>(granularity)?;
        let down = mlp.down().quantize_fp8::<F8E4M3>(granularity)?;
        let q = sparsek::SparseMlp::from_interleaved(gate_up, down, mlp.activation())?;
        Self::build::<_, X>(q, device)
    }

    /// The MLP of sparsek's host MLP, on `device` (uploaded with candle's stream for a CUDA
    /// device). Activations of `T`.
    pub fn from_sparsek<T: CandleElement>(
        mlp: sparsek::SparseMlp<BsrMatrix<T>>,
        device: &Device,
    ) -> Result<Self> {
        Self::build::<_, T>(mlp, device)
    }

    fn build<W, X>(mlp: sparsek::SparseMlp<W>, device: &Device) -> Result<Self>
    where
        W: HostWeight + Send + Sync + Uploadable<X> + 'static,
        W::Element: TakesB<X>,
        X: CandleElement,
    {
        let inter = mlp.gate_up().m() / 2;
        let (hidden, out) = (mlp.gate_up().k(), mlp.down().m());
        let kernel: Box<dyn MlpKernel> = match device {
            Device::Cpu => Box::new(HostMlp::<W, X> {
                mlp,
                inter,
                out,
                activations: PhantomData,
            }),
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => W::upload(&mlp, dev, inter, out)?,
            other => return Err(unsupported_device(OP, other)),
        };
        Ok(Self {
            kernel,
            hidden,
            inter,
            out,
            dtype: <X as candle_core::WithDType>::DTYPE,
            device: device.clone(),
        })
    }

    /// The MLP of sparsek's device MLP, already on `device`'s context. `T` is the weights'
    /// element type; activations are of `X` (`X = T`, or f16/bf16 for FP8 weights).
    #[cfg(feature = "cuda")]
    pub fn from_device<T, X>(
        mlp: sparsek::SparseMlp<sparsek::DeviceBsr<T>>,
        device: &candle_core::CudaDevice,
    ) -> Result<Self>
    where
        T: TakesB<X> + Send + Sync + 'static,
        X: CandleElement,
    {
        let inter = mlp.gate_up().m() / 2;
        let (hidden, out) = (mlp.gate_up().k(), mlp.down().m());
        Ok(Self {
            kernel: Box::new(device_mlp::DeviceMlp::<T, X>::new(
                mlp,
                device.clone(),
                inter,
                out,
            )),
            hidden,
            inter,
            out,
            dtype: <X as candle_core::WithDType>::DTYPE,
            device: Device::Cuda(device.clone()),
        })
    }

    /// Hidden size (x's last dim).
    pub fn hidden(&self) -> usize {
        self.hidden
    }
    /// Intermediate size (rows of gate and of up).
    pub fn inter(&self) -> usize {
        self.inter
    }
    /// Output features (y's last dim; down's rows).
    pub fn out_features(&self) -> usize {
        self.out
    }
    /// The activations' dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The device of the weights.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The MLP on `x` (`[.., hidden]`), or the typed reason it was refused.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let lead = match dims.split_last() {
            Some((&last, lead)) if last == self.hidden => lead,
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    operand: "x",
                    got: dims.to_vec(),
                    expected: format!("[.., {}] (hidden)", self.hidden),
                })
            }
        };
        crate::storage::check_dtype_of(OP, "x", x.dtype(), self.dtype)?;
        let mut out = lead.to_vec();
        out.push(self.out);
        let op = MlpOp {
            kernel: &*self.kernel,
            batch: lead.iter().product(),
            out: Shape::from(out),
            failure: Failure::default(),
        };
        x.apply_op1_no_bwd(&op).map_err(|e| op.failure.typed(e))
    }
}

impl Module for SparseMlp {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.try_forward(x).map_err(Error::into_candle)
    }
}

/// Host weights sparsek can upload as a device MLP of activations `X` (`BsrMatrix<T>`,
/// `QuantizedBsr<F8E4M3>`).
pub(crate) trait Uploadable<X>: Sized {
    #[cfg(feature = "cuda")]
    fn upload(
        mlp: &sparsek::SparseMlp<Self>,
        dev: &candle_core::CudaDevice,
        inter: usize,
        out: usize,
    ) -> Result<Box<dyn MlpKernel>>;
}

impl<T, X> Uploadable<X> for BsrMatrix<T>
where
    T: TakesB<X> + Send + Sync + 'static,
    X: CandleElement,
{
    #[cfg(feature = "cuda")]
    fn upload(
        mlp: &sparsek::SparseMlp<Self>,
        dev: &candle_core::CudaDevice,
        inter: usize,
        out: usize,
    ) -> Result<Box<dyn MlpKernel>> {
        Ok(Box::new(device_mlp::DeviceMlp::<T, X>::new(
            mlp.upload(&dev.cuda_stream())?,
            dev.clone(),
            inter,
            out,
        )))
    }
}

impl<X> Uploadable<X> for sparsek::QuantizedBsr<F8E4M3>
where
    F8E4M3: TakesB<X>,
    X: CandleElement,
{
    #[cfg(feature = "cuda")]
    fn upload(
        mlp: &sparsek::SparseMlp<Self>,
        dev: &candle_core::CudaDevice,
        inter: usize,
        out: usize,
    ) -> Result<Box<dyn MlpKernel>> {
        Ok(Box::new(device_mlp::DeviceMlp::<F8E4M3, X>::new(
            mlp.upload(&dev.cuda_stream())?,
            dev.clone(),
            inter,
            out,
        )))
    }
}

struct MlpOp<'a> {
    kernel: &'a dyn MlpKernel,
    batch: usize,
    out: Shape,
    failure: Failure,
}

impl CustomOp1 for MlpOp<'_> {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let y = self.failure.keep(self.kernel.cpu(s, l, self.batch))?;
        Ok((y, self.out.clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let y = self.failure.keep(self.kernel.cuda(s, l, self.batch))?;
        Ok((y, self.out.clone()))
    }
}
