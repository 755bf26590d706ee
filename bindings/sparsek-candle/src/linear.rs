//! [`SparseLinear`]: `y = act(x·Wᵀ + bias)` with a block-sparse `W`, as a candle `Module`.

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Module, Shape, Tensor};
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, Activation, BlockMask, BlockShape, BsrMatrix, HostWeight, TakesB, TakesBias, F8E4M3,
};

use crate::element::CandleElement;
use crate::error::{Error, Result};
use crate::storage::{host_output, host_rows, Failure};

const OP: &str = "sparsek-candle SparseLinear";

/// How the dense weights are stored once pruned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightFormat {
    /// The dense weight's dtype (f16, bf16 or f32).
    #[default]
    Same,
    /// FP8 E4M3 with scales per tensor or per block (W8A16: the activations keep the dense
    /// weight's dtype, f16 or bf16).
    Fp8E4M3(BlockGranularity),
}

/// One layer's weights on one device, its activations of one dtype.
pub(crate) trait LinearKernel: Send + Sync {
    fn cpu(&self, x: &CpuStorage, l: &Layout, batch: usize) -> Result<CpuStorage>;
    #[cfg(feature = "cuda")]
    fn cuda(
        &self,
        x: &candle_core::CudaStorage,
        l: &Layout,
        batch: usize,
    ) -> Result<candle_core::CudaStorage>;
}

/// The output length `batch · out`, checked.
pub(crate) fn output_len(op: &'static str, batch: usize, features: usize) -> Result<usize> {
    batch
        .checked_mul(features)
        .ok_or_else(|| Error::InvalidArgument {
            op,
            what: format!("batch {batch} x {features} features overflows usize"),
        })
}

/// Host weights a layer of activations `X` is built from, on either device: sparsek's
/// `BsrMatrix<X>` (uploaded as is) and FP8 `QuantizedBsr` (uploaded with its scales), so
/// both take one construction path.
pub(crate) trait LinearWeight<X: CandleElement>: HostWeight + Send + Sync + 'static {
    /// The element type of the uploaded weights.
    #[cfg(feature = "cuda")]
    type OnDevice: TakesB<X> + TakesBias<X> + Send + Sync + 'static;

    /// The weights on `stream`'s device.
    #[cfg(feature = "cuda")]
    fn upload(
        &self,
        stream: &std::sync::Arc<sparsek::cudarc::driver::CudaStream>,
    ) -> Result<sparsek::DeviceBsr<Self::OnDevice>>;
}

impl<T: CandleElement> LinearWeight<T> for BsrMatrix<T> {
    #[cfg(feature = "cuda")]
    type OnDevice = T;

    #[cfg(feature = "cuda")]
    fn upload(
        &self,
        stream: &std::sync::Arc<sparsek::cudarc::driver::CudaStream>,
    ) -> Result<sparsek::DeviceBsr<T>> {
        Ok(sparsek::DeviceBsr::upload(self, stream)?)
    }
}

impl<X: CandleElement> LinearWeight<X> for sparsek::QuantizedBsr<F8E4M3>
where
    F8E4M3: TakesB<X> + TakesBias<X>,
{
    #[cfg(feature = "cuda")]
    type OnDevice = F8E4M3;

    #[cfg(feature = "cuda")]
    fn upload(
        &self,
        stream: &std::sync::Arc<sparsek::cudarc::driver::CudaStream>,
    ) -> Result<sparsek::DeviceBsr<F8E4M3>> {
        Ok(sparsek::DeviceBsr::upload_quantized(self, stream)?)
    }
}

struct HostLayer<W, X> {
    layer: sparsek::SparseLinear<W, Vec<X>>,
}

impl<W, X> LinearKernel for HostLayer<W, X>
where
    W: HostWeight + Send + Sync,
    W::Element: TakesB<X>,
    X: CandleElement,
{
    fn cpu(&self, x: &CpuStorage, l: &Layout, batch: usize) -> Result<CpuStorage> {
        let xs = host_rows::<X>(OP, "x", x, l)?;
        let mut y = host_output::<X>(output_len(OP, batch, self.layer.weight().m())?);
        self.layer.forward(xs, batch, &mut y)?;
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
            what:
                "the weights are on the CPU and x on a CUDA device (build the layer on x's device)"
                    .into(),
        })
    }
}

#[cfg(feature = "cuda")]
mod device_layer {
    use super::*;
    use crate::storage::device;
    use candle_core::{CudaDevice, CudaStorage};
    use sparsek::cudarc::driver::CudaSlice;
    use sparsek::DeviceBsr;

    pub(crate) struct DeviceLayer<T, X> {
        pub(crate) layer: sparsek::SparseLinear<DeviceBsr<T>, CudaSlice<X>>,
        pub(crate) device: CudaDevice,
    }

    impl<T, X> LinearKernel for DeviceLayer<T, X>
    where
        T: TakesB<X> + Send + Sync,
        X: CandleElement,
    {
        fn cpu(&self, _: &CpuStorage, _: &Layout, _: usize) -> Result<CpuStorage> {
            Err(Error::Device {
                op: OP,
                what: "the weights are on a CUDA device and x on the CPU (build the layer on x's device)"
                    .into(),
            })
        }

        fn cuda(&self, x: &CudaStorage, l: &Layout, batch: usize) -> Result<CudaStorage> {
            device::same_device(OP, &self.device, &x.device)?;
            let xs = device::rows::<X>(OP, "x", x, l)?;
            let mut y =
                device::output::<X>(&x.device, output_len(OP, batch, self.layer.weight().m())?)?;
            self.layer.forward(xs, batch, &mut y)?;
            Ok(CudaStorage::wrap_cuda_slice(y, x.device.clone()))
        }
    }
}

/// A pruned linear layer on candle tensors: `y = act(x·Wᵀ + bias)` for `x` of shape `[..,
/// in]` (any leading dims, row-major) and `y` of shape `[.., out]`, on the device the layer
/// was built for. `W` is block-sparse (sparsek's BSR); `x` and `y` have the layer's
/// activation dtype ([`dtype`](Self::dtype)).
///
/// ```
/// use candle_core::{DType, Device, Module, Tensor};
/// use sparsek_candle::{prune, SparseLinear, WeightFormat};
/// use sparsek::{Activation, BlockShape};
///
/// let dev = Device::Cpu;
/// let w = Tensor::randn(0f32, 1.0, (128, 256), &dev)?.to_dtype(DType::F16)?;
/// let block = BlockShape::new(64, 64);
/// let mask = prune::by_block_norm(&w, block, 0.5)?; // keep the larger half of the blocks
/// let layer = SparseLinear::from_dense(&w, None, &mask, block, WeightFormat::Same, Activation::None)?;
/// let x = Tensor::randn(0f32, 1.0, (2, 3, 256), &dev)?.to_dtype(DType::F16)?;
/// assert_eq!(layer.forward(&x)?.dims(), &[2, 3, 128]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SparseLinear {
    kernel: Box<dyn LinearKernel>,
    in_features: usize,
    out_features: usize,
    dtype: DType,
    device: Device,
}

impl std::fmt::Debug for SparseLinear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseLinear")
            .field("in_features", &self.in_features)
            .field("out_features", &self.out_features)
            .field("dtype", &self.dtype)
            .field("device", &self.device.location())
            .finish()
    }
}

/// A dense 2-D weight's `(rows, cols)`.
pub(crate) fn dims2(op: &'static str, operand: &'static str, t: &Tensor) -> Result<(usize, usize)> {
    match *t.dims() {
        [r, c] => Ok((r, c)),
        _ => Err(Error::Shape {
            op,
            operand,
            got: t.dims().to_vec(),
            expected: "a 2-D weight [out, in]".into(),
        }),
    }
}

/// The BSR form of dense `w` (`rows x cols`) on `mask`'s blocks.
pub(crate) fn to_bsr<T: CandleElement>(
    op: &'static str,
    operand: &'static str,
    w: &Tensor,
    mask: &BlockMask,
    block: BlockShape,
) -> Result<BsrMatrix<T>> {
    let (rows, cols) = dims2(op, operand, w)?;
    if mask.rows().checked_mul(block.rows) != Some(rows)
        || mask.cols().checked_mul(block.cols) != Some(cols)
    {
        return Err(Error::Shape {
            op,
            operand,
            got: vec![rows, cols],
            expected: format!(
                "[{} x {}, {} x {}] (the mask's block grid times the block)",
                mask.rows(),
                block.rows,
                mask.cols(),
                block.cols
            ),
        });
    }
    let values: Vec<T> = w.flatten_all()?.to_vec1::<T>()?;
    Ok(BsrMatrix::from_block_mask(mask, block, |r, c| {
        values[r * cols + c]
    })?)
}

/// A bias of `len` values of `T`, read to the host.
pub(crate) fn bias_values<T: CandleElement>(
    op: &'static str,
    bias: Option<&Tensor>,
    len: usize,
) -> Result<Option<Vec<T>>> {
    let Some(b) = bias else { return Ok(None) };
    if b.dims() != [len] {
        return Err(Error::Shape {
            op,
            operand: "bias",
            got: b.dims().to_vec(),
            expected: format!("[{len}] (out features)"),
        });
    }
    crate::storage::check_dtype::<T>(op, "bias", b.dtype())?;
    Ok(Some(b.to_vec1::<T>()?))
}

impl SparseLinear {
    /// The layer of dense `weight` (`[out, in]`, f16/bf16/f32, any device) kept on `mask`'s
    /// blocks (`out / block.rows x in / block.cols`), with an optional `bias` (`[out]`, the
    /// weight's dtype), stored as `format`, on the weight's device. The activations have
    /// the weight's dtype. The weight is read once, here.
    pub fn from_dense(
        weight: &Tensor,
        bias: Option<&Tensor>,
        mask: &BlockMask,
        block: BlockShape,
        format: WeightFormat,
        activation: Activation,
    ) -> Result<Self> {
        let device = weight.device();
        match (weight.dtype(), format) {
            (DType::F16, WeightFormat::Same) => {
                let w = to_bsr::<f16>(OP, "weight", weight, mask, block)?;
                Self::from_bsr(
                    w,
                    bias_values(OP, bias, weight.dim(0)?)?,
                    activation,
                    device,
                )
            }
            (DType::BF16, WeightFormat::Same) => {
                let w = to_bsr::<bf16>(OP, "weight", weight, mask, block)?;
                Self::from_bsr(
                    w,
                    bias_values(OP, bias, weight.dim(0)?)?,
                    activation,
                    device,
                )
            }
            (DType::F32, WeightFormat::Same) => {
                let w = to_bsr::<f32>(OP, "weight", weight, mask, block)?;
                Self::from_bsr(
                    w,
                    bias_values(OP, bias, weight.dim(0)?)?,
                    activation,
                    device,
                )
            }
            (DType::F16, WeightFormat::Fp8E4M3(g)) => {
                Self::from_dense_fp8::<f16>(weight, bias, mask, block, g, activation)
            }
            (DType::BF16, WeightFormat::Fp8E4M3(g)) => {
                Self::from_dense_fp8::<bf16>(weight, bias, mask, block, g, activation)
            }
            (got, format) => Err(Error::DType {
                op: OP,
                operand: "weight",
                got,
                expected: match format {
                    WeightFormat::Same => "f16, bf16 or f32".into(),
                    WeightFormat::Fp8E4M3(_) => "f16 or bf16 (the FP8 layer's activations)".into(),
                },
            }),
        }
    }

    fn from_dense_fp8<X: CandleElement>(
        weight: &Tensor,
        bias: Option<&Tensor>,
        mask: &BlockMask,
        block: BlockShape,
        granularity: BlockGranularity,
        activation: Activation,
    ) -> Result<Self>
    where
        F8E4M3: TakesB<X> + TakesBias<X>,
    {
        let w = to_bsr::<X>(OP, "weight", weight, mask, block)?;
        let bias = bias_values::<X>(OP, bias, w.m())?;
        let q = w.quantize_fp8::<F8E4M3>(granularity)?;
        Self::build(q, bias, activation, weight.device())
    }

    /// The layer of sparsek's host weight `w` (`out x in`) and `bias` (`out` values), on
    /// `device` (uploaded with candle's stream for a CUDA device). Activations of `T`.
    pub fn from_bsr<T: CandleElement>(
        w: BsrMatrix<T>,
        bias: Option<Vec<T>>,
        activation: Activation,
        device: &Device,
    ) -> Result<Self> {
        Self::build(w, bias, activation, device)
    }

    /// The layer of host weights `w` and `bias` on `device`: kept on the host for the CPU,
    /// uploaded with candle's stream for a CUDA device. Activations of `X`.
    fn build<W, X>(
        w: W,
        bias: Option<Vec<X>>,
        activation: Activation,
        device: &Device,
    ) -> Result<Self>
    where
        W: LinearWeight<X>,
        W::Element: TakesB<X> + TakesBias<X>,
        X: CandleElement,
    {
        let (in_features, out_features) = (w.k(), w.m());
        let kernel: Box<dyn LinearKernel> = match device {
            Device::Cpu => Box::new(HostLayer {
                layer: sparsek::SparseLinear::new(w, bias, activation)?,
            }),
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => {
                let stream = dev.cuda_stream();
                let layer = sparsek::SparseLinear::new_device(
                    w.upload(&stream)?,
                    bias.map(|b| stream.clone_htod(&b))
                        .transpose()
                        .map_err(sparsek::Error::from)?,
                    activation,
                )?;
                Box::new(device_layer::DeviceLayer {
                    layer,
                    device: dev.clone(),
                })
            }
            other => return Err(unsupported_device(OP, other)),
        };
        Ok(Self {
            kernel,
            in_features,
            out_features,
            dtype: <X as candle_core::WithDType>::DTYPE,
            device: device.clone(),
        })
    }

    /// The layer of sparsek's device weight `w` and bias, already on `device`'s context
    /// (uploaded with `device.cuda_stream()`, or given by `DeviceBsr::from_device_parts`).
    /// `T` is the weights' element type; activations are of `X` (`X = T`, or f16/bf16 for
    /// FP8 weights).
    #[cfg(feature = "cuda")]
    pub fn from_device_bsr<T, X>(
        w: sparsek::DeviceBsr<T>,
        bias: Option<sparsek::cudarc::driver::CudaSlice<X>>,
        activation: Activation,
        device: &candle_core::CudaDevice,
    ) -> Result<Self>
    where
        T: TakesB<X> + sparsek::TakesBias<X> + Send + Sync,
        X: CandleElement,
    {
        let (in_features, out_features) = (w.k(), w.m());
        let layer = sparsek::SparseLinear::new_device(w, bias, activation)?;
        Ok(Self {
            kernel: Box::new(device_layer::DeviceLayer {
                layer,
                device: device.clone(),
            }),
            in_features,
            out_features,
            dtype: <X as candle_core::WithDType>::DTYPE,
            device: Device::Cuda(device.clone()),
        })
    }

    /// Input features (`W`'s columns).
    pub fn in_features(&self) -> usize {
        self.in_features
    }
    /// Output features (`W`'s rows).
    pub fn out_features(&self) -> usize {
        self.out_features
    }
    /// The activations' dtype (x's and y's).
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The device of the weights (x's must be the same).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `y = act(x·Wᵀ + bias)`, or the typed reason it was refused (nothing launched).
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let Some((&last, lead)) = dims.split_last() else {
            return Err(Error::Shape {
                op: OP,
                operand: "x",
                got: dims.to_vec(),
                expected: format!("[.., {}]", self.in_features),
            });
        };
        if last != self.in_features {
            return Err(Error::Shape {
                op: OP,
                operand: "x",
                got: dims.to_vec(),
                expected: format!("[.., {}] (in features)", self.in_features),
            });
        }
        crate::storage::check_dtype_of(OP, "x", x.dtype(), self.dtype)?;
        let batch = lead.iter().product::<usize>();
        let mut out = lead.to_vec();
        out.push(self.out_features);
        let op = LinearOp {
            kernel: &*self.kernel,
            batch,
            out: Shape::from(out),
            failure: Failure::default(),
        };
        x.apply_op1_no_bwd(&op).map_err(|e| op.failure.typed(e))
    }
}

impl Module for SparseLinear {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        self.try_forward(x).map_err(Error::into_candle)
    }
}

struct LinearOp<'a> {
    kernel: &'a dyn LinearKernel,
    batch: usize,
    out: Shape,
    failure: Failure,
}

impl CustomOp1 for LinearOp<'_> {
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

/// The refusal of a device this integration does not drive.
pub(crate) fn unsupported_device(op: &'static str, d: &Device) -> Error {
    Error::Device {
        op,
        what: format!(
            "{:?}: sparsek runs candle's CPU and CUDA devices (CUDA with the `cuda` feature)",
            d.location()
        ),
    }
}
