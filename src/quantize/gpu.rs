//! FP8 quantization on the device ([`DeviceBsr::quantize_fp8`],
//! [`DeviceBsr::quantize_fp8_from`]): the kernel of `cpp/quantize/`, computing the bits the
//! host quantizer ([`BsrMatrix::quantize_fp8`](crate::BsrMatrix::quantize_fp8)) computes;
//! and a [`QuantizedBsr`]'s copies to and from the device
//! ([`DeviceBsr::upload_quantized`], [`DeviceBsr::download_quantized`]).

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaSlice, CudaStream};

use super::{BlockGranularity, BlockScales, QuantizedBsr};
use crate::device::device_bsr::download_prefix;
use crate::device::result::{check, check_contexts, dtype, scale_kind, to_i64};
use crate::device::sys;
use crate::device::{DeviceBlockScales, DeviceBsr};
use crate::element::{DType, Element, Fp8};
use crate::error::{check_agree, Error};
use crate::options::Backend;
use crate::scale::ScaleKind;

/// The scale kind of a granularity.
fn kind(g: BlockGranularity) -> ScaleKind {
    match g {
        BlockGranularity::PerTensor => ScaleKind::PerTensor,
        BlockGranularity::PerBlock => ScaleKind::PerBlock,
    }
}

impl<T: Element> DeviceBsr<T> {
    /// Quantizes this matrix to FP8 on the device, on its values buffer's stream: a new
    /// matrix of the same pattern (its index arrays copied on the device) whose values and
    /// scales are the bits [`BsrMatrix::quantize_fp8`](crate::BsrMatrix::quantize_fp8)
    /// computes on the host (each scale `amax / Q::MAX` of its part, 1 for an all-zero
    /// part; each value `v / scale` rounded to nearest even, saturating). The host refuses
    /// NaN and infinite values ([`Error::NonFinite`]); the device cannot without a
    /// synchronizing read, so a part holding one gets a NaN scale and NaN values.
    ///
    /// `T` must be f16, bf16 or f32 ([`Error::NotSupported`] for an FP8 source); a build
    /// without the `fp8` feature refuses every call ([`Error::NotSupported`] naming it).
    /// Allocates the new matrix's buffers; to re-quantize into existing ones (no allocation,
    /// CUDA-graph capturable) use [`quantize_fp8_from`](DeviceBsr::quantize_fp8_from).
    ///
    /// ```no_run
    /// use sparsek::cudarc::driver::CudaContext;
    /// use sparsek::quantize::BlockGranularity;
    /// use sparsek::{f16, BlockMask, BlockShape, BsrMatrix, DeviceBsr, F8E4M3};
    ///
    /// let mask = BlockMask::from_fn(4, 8, |r, c| (r + c) % 2 == 0)?;
    /// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |i, j| f16::from_f32((i + j) as f32 * 1e-3))?;
    /// let stream = CudaContext::new(0)?.default_stream();
    /// let dw = DeviceBsr::upload(&w, &stream)?;
    /// let dq = dw.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
    /// assert_eq!(dq.download_quantized()?, w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn quantize_fp8<Q: Fp8>(
        &self,
        granularity: BlockGranularity,
    ) -> Result<DeviceBsr<Q>, Error> {
        check_source(T::DTYPE)?;
        let stream = self.values.stream().clone();
        let scales_len = match granularity {
            BlockGranularity::PerTensor => 1,
            BlockGranularity::PerBlock => self.nnzb.max(1),
        };
        let scales: CudaSlice<f32> = stream.alloc_zeros(scales_len)?;
        let mut out = DeviceBsr {
            m: self.m,
            k: self.k,
            block: self.block,
            nnzb: self.nnzb,
            row_ptr: stream.clone_dtod(&self.row_ptr)?,
            col_idx: stream.clone_dtod(&self.col_idx)?,
            values: stream.alloc_zeros::<Q>(self.values.len())?,
            transpose: OnceLock::new(),
            scales: match granularity {
                BlockGranularity::PerTensor => DeviceBlockScales::PerTensor(scales),
                BlockGranularity::PerBlock => DeviceBlockScales::PerBlock(scales),
            },
            settled: false,
        };
        out.quantize_fp8_from(self, granularity)?;
        Ok(out)
    }
}

impl<Q: Fp8> DeviceBsr<Q> {
    /// Copies a quantized matrix to the device on `stream`: its values and pattern as
    /// [`upload`](Self::upload), and its scales.
    ///
    /// ```no_run
    /// use sparsek::cudarc::driver::CudaContext;
    /// use sparsek::quantize::BlockGranularity;
    /// use sparsek::{BlockMask, BlockShape, BsrMatrix, DeviceBsr, ScaleKind, F8E4M3};
    ///
    /// let mask = BlockMask::from_fn(4, 4, |r, c| r == c)?;
    /// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |i, j| (i + j) as f32 * 1e-3)?;
    /// let wq = w.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
    /// let stream = CudaContext::new(0)?.default_stream();
    /// let dw = DeviceBsr::upload_quantized(&wq, &stream)?;
    /// assert_eq!(dw.scale_kind(), ScaleKind::PerBlock);
    /// assert_eq!(dw.download_quantized()?, wq);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn upload_quantized(a: &QuantizedBsr<Q>, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        let mut d = Self::upload(a.matrix(), stream)?;
        d.scales = DeviceBlockScales::upload(a.scales(), stream)?;
        Ok(d)
    }

    /// Copies the matrix and its scales back to the host (on the values buffer's stream,
    /// then waits for it).
    pub fn download_quantized(&self) -> Result<QuantizedBsr<Q>, Error> {
        let matrix = self.download()?;
        let stream = self.values.stream().clone();
        let scales = match &self.scales {
            DeviceBlockScales::None => BlockScales::None,
            DeviceBlockScales::PerTensor(b) => {
                let v = download_prefix(b, 1, &stream)?;
                stream.synchronize()?;
                BlockScales::PerTensor(v[0])
            }
            DeviceBlockScales::PerBlock(b) => {
                let v = download_prefix(b, self.nnzb, &stream)?;
                stream.synchronize()?;
                BlockScales::PerBlock(v)
            }
        };
        QuantizedBsr::new(matrix, scales)
    }

    /// Re-quantizes `src` into this matrix's values and scales, on this matrix's values
    /// buffer's stream: weights updated on the device, quantized again without allocating
    /// (CUDA-graph capturable). The bits are [`quantize_fp8`](DeviceBsr::quantize_fp8)'s.
    ///
    /// `src` must have this matrix's pattern: its shape, block shape and stored-block count
    /// are checked ([`Error::ShapeMismatch`]), its index arrays are not (values are matched
    /// by position). This matrix's scales must be of `granularity`'s kind
    /// ([`Error::ScalesNotTaken`] otherwise, nothing written); `src` must live in the same
    /// CUDA context ([`Error::ContextMismatch`]) and be f16, bf16 or f32
    /// ([`Error::NotSupported`]).
    pub fn quantize_fp8_from<T: Element>(
        &mut self,
        src: &DeviceBsr<T>,
        granularity: BlockGranularity,
    ) -> Result<(), Error> {
        check_source(T::DTYPE)?;
        check_agree(&[
            ("rows of the source", self.m, src.m),
            ("columns of the source", self.k, src.k),
            ("block rows of the source", self.block.rows, src.block.rows),
            (
                "block columns of the source",
                self.block.cols,
                src.block.cols,
            ),
            ("stored blocks of the source", self.nnzb, src.nnzb),
        ])?;
        let stream = self.values.stream().clone();
        check_contexts(&stream, &[("the source", src.values.stream())])?;
        // The kernels launch into the current context: the stream's must be it, whatever
        // the caller left current (another GPU's, say).
        stream.context().bind_to_thread()?;
        // `nnzb * bm * bk` values fit a Vec on both sides (the matrices exist), so in usize.
        let problem = sys::QuantizeProblem {
            values: 0,
            dtype: dtype(T::DTYPE),
            nnzb: to_i64("nnzb", self.nnzb)?,
            block_len: to_i64("bm * bk", self.block.rows * self.block.cols)?,
            out: 0,
            out_dtype: dtype(Q::DTYPE),
            scales: 0,
            granularity: scale_kind(kind(granularity)),
            stream: 0,
        };
        let scales = match (&mut self.scales, granularity) {
            (DeviceBlockScales::PerTensor(b), BlockGranularity::PerTensor)
            | (DeviceBlockScales::PerBlock(b), BlockGranularity::PerBlock) => b,
            (held, _) => {
                return Err(Error::ScalesNotTaken {
                    operand: "A",
                    kind: held.kind(),
                    reason: "quantize_fp8_from writes scales of the granularity asked for, and this matrix holds another kind",
                })
            }
        };
        // A kernel writes the values and scales: unsettled until `settle`.
        self.settled = false;
        let status = sys::quantize_fp8(problem, &src.values, &mut self.values, scales, &stream);
        check(status, Backend::Auto).map(|_| ())
    }
}

/// The source types the kernel reads.
fn check_source(t: DType) -> Result<(), Error> {
    match t {
        DType::F16 | DType::Bf16 | DType::F32 => Ok(()),
        other => Err(Error::NotSupported {
            backend: Backend::Auto,
            reason: format!("quantize_fp8 reads f16, bf16 or f32 values, not {other}"),
        }),
    }
}
