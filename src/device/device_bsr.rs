//! `DeviceBsr`: a validated BSR matrix in device memory (cudarc buffers, RAII).

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::check::check_scale_len;
use crate::element::{Element, Fp8};
use crate::error::{BsrError, Error};
use crate::format::bsr::{check_grid, values_len_of};
use crate::format::transpose::transpose_pattern;
use crate::format::{validate_parts, BlockShape, BsrMatrix};
use crate::scale::{BlockScales, ScaleKind};

/// A validated BSR matrix in device memory: the three arrays of [`BsrMatrix`] (see
/// [`crate::format::bsr`]) in cudarc buffers, freed on drop.
///
/// Built by [`upload`](Self::upload) from a `BsrMatrix`, or by
/// [`from_device_parts`](Self::from_device_parts) from buffers already on the GPU, whose
/// index arrays are checked first; either way its index arrays satisfy every BSR invariant
/// the kernels rely on, and nothing can change them afterwards (only the values can be
/// replaced, [`update_values`](Self::update_values), and an FP8 matrix's scales,
/// [`update_scales`](Self::update_scales)).
///
/// An FP8 matrix (`DeviceBsr<F8E4M3>`, `DeviceBsr<F8E5M2>`) holds its scales on the device
/// beside its values ([`DeviceBlockScales`]): [`upload_quantized`](Self::upload_quantized)
/// copies a [`QuantizedBsr`](crate::QuantizedBsr)'s, [`with_scales`](Self::with_scales) takes
/// device buffers; a matrix of any other type has none.
///
/// ```no_run
/// use sparsek::cudarc::driver::CudaContext;
/// use sparsek::{f16, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, DeviceBsr, Layout, SpmmOptions};
///
/// let (m, k, n) = (256, 512, 64);
/// let mask = BlockMask::from_fn(m / 64, k / 64, |r, c| (r + c) % 3 == 0)?;
/// let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(64, 64), |_, _| f16::from_f32(0.5))?;
///
/// let stream = CudaContext::new(0)?.default_stream();
/// let mut da = DeviceBsr::upload(&a, &stream)?;
/// let b = stream.clone_htod(&vec![f16::from_f32(1.0); k * n])?;
/// let mut c = stream.alloc_zeros::<f16>(m * n)?;
/// spmm(&da, Dense::device(&b, k, n, Layout::RowMajor),
///      DenseMut::device(&mut c, m, n, Layout::RowMajor), &SpmmOptions::new())?;
///
/// // op(A) = Aᵀ reads the same buffers through the transpose index, built on first use and
/// // kept (or now, with prepare_transpose): C2 = Aᵀ·B2, B2 m x n, C2 k x n.
/// da.prepare_transpose()?;
/// let b2 = stream.clone_htod(&vec![f16::from_f32(1.0); m * n])?;
/// let mut c2 = stream.alloc_zeros::<f16>(k * n)?;
/// spmm(&da, Dense::device(&b2, m, n, Layout::RowMajor),
///      DenseMut::device(&mut c2, k, n, Layout::RowMajor), &SpmmOptions::new().transpose_a(true))?;
///
/// // New weights, same pattern: only the values are copied.
/// da.update_values(&vec![f16::from_f32(0.25); a.values().len()])?;
/// assert_eq!(da.download()?.values()[0], f16::from_f32(0.25));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DeviceBsr<T> {
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) block: BlockShape,
    pub(crate) nnzb: usize,
    pub(crate) row_ptr: CudaSlice<i32>,
    pub(crate) col_idx: CudaSlice<i32>,
    pub(crate) values: CudaSlice<T>,
    /// The pattern's transpose index on the device, built on first use by `op(A) = Aᵀ`
    /// ([`prepare_transpose`](Self::prepare_transpose)); the pattern never changes, so it
    /// stays valid for the matrix's life.
    pub(crate) transpose: OnceLock<DeviceTransposeIndex>,
    /// An FP8 matrix's scales (`None` for every other type), in the values' context, of
    /// the lengths their kind needs (checked when set).
    pub(crate) scales: DeviceBlockScales,
    /// No kernel that may still be running writes the arrays ([`is_settled`](Self::is_settled)):
    /// true when every write was a copy or is known complete, false after a kernel wrote
    /// them (an SDDMM's output, a device quantization) until [`settle`](Self::settle).
    pub(crate) settled: bool,
}

/// The scales of an FP8 [`DeviceBsr`] on the device: none, one value per tensor, or one per
/// stored block (`nnzb` values in the order of the values; a one-element buffer when
/// `nnzb = 0`, CUDA having no empty allocations).
pub enum DeviceBlockScales {
    /// No scale: the stored values are the values.
    None,
    /// One scale for every block (a buffer of one value).
    PerTensor(CudaSlice<f32>),
    /// One scale per stored block.
    PerBlock(CudaSlice<f32>),
}

impl DeviceBlockScales {
    /// The kind: `None`, `PerTensor` or `PerBlock`.
    pub fn kind(&self) -> ScaleKind {
        match self {
            DeviceBlockScales::None => ScaleKind::None,
            DeviceBlockScales::PerTensor(_) => ScaleKind::PerTensor,
            DeviceBlockScales::PerBlock(_) => ScaleKind::PerBlock,
        }
    }
    /// The buffer, if any.
    pub fn buffer(&self) -> Option<&CudaSlice<f32>> {
        match self {
            DeviceBlockScales::None => None,
            DeviceBlockScales::PerTensor(b) | DeviceBlockScales::PerBlock(b) => Some(b),
        }
    }
    /// Copies host scales to the device on `stream`.
    pub(crate) fn upload(scales: &BlockScales, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        Ok(match scales {
            BlockScales::None => DeviceBlockScales::None,
            BlockScales::PerTensor(s) => DeviceBlockScales::PerTensor(stream.clone_htod(&[*s])?),
            BlockScales::PerBlock(v) => DeviceBlockScales::PerBlock(upload_slice(v, stream)?),
        })
    }
}

/// [`TransposeIndex`](crate::TransposeIndex)'s three arrays on the device (each at least
/// one element: CUDA has no empty allocations).
pub(crate) struct DeviceTransposeIndex {
    /// Block-column offsets, `k / bk + 1` entries.
    pub col_ptr: CudaSlice<i32>,
    /// Block-row of each listed block, `nnzb` entries.
    pub row_idx: CudaSlice<i32>,
    /// Stored position of each listed block, `nnzb` entries (a permutation).
    pub block_id: CudaSlice<i32>,
}

/// Uploads `data`, allocating at least one element (CUDA refuses empty allocations).
pub(crate) fn upload_slice<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    data: &[T],
    stream: &Arc<CudaStream>,
) -> Result<CudaSlice<T>, Error> {
    if data.is_empty() {
        Ok(stream.alloc_zeros::<T>(1)?)
    } else {
        Ok(stream.clone_htod(data)?)
    }
}

/// The first `len` elements of `src`, copied to the host on `stream` (empty for `len = 0`,
/// without touching the buffer). `len <= src.len()`.
pub(crate) fn download_prefix<T: cudarc::driver::DeviceRepr>(
    src: &CudaSlice<T>,
    len: usize,
    stream: &Arc<CudaStream>,
) -> Result<Vec<T>, Error> {
    match src.try_slice(..len) {
        Some(view) if len > 0 => Ok(stream.clone_dtoh(&view)?),
        Some(_) => Ok(Vec::new()),
        None => Err(Error::InvalidArgument(format!(
            "{len} elements asked of a buffer of {}",
            src.len()
        ))),
    }
}

/// A buffer shorter than `needed`: `BsrError::LengthMismatch` naming it.
fn at_least(what: &'static str, needed: usize, got: usize) -> Result<(), Error> {
    if got < needed {
        return Err(BsrError::LengthMismatch {
            what,
            expected: needed,
            got,
        }
        .into());
    }
    Ok(())
}

impl<T: Element> DeviceBsr<T> {
    /// Copies `a` to the device on `stream` (asynchronously with respect to the host).
    pub fn upload(a: &BsrMatrix<T>, stream: &Arc<CudaStream>) -> Result<Self, Error> {
        Ok(Self {
            m: a.m(),
            k: a.k(),
            block: a.block(),
            nnzb: a.nnz_blocks(),
            row_ptr: stream.clone_htod(a.row_ptr())?,
            col_idx: upload_slice(a.col_idx(), stream)?,
            values: upload_slice(a.values(), stream)?,
            transpose: OnceLock::new(),
            scales: DeviceBlockScales::None,
            // Written by copies only.
            settled: true,
        })
    }

    /// Takes BSR arrays already in device memory (e.g. weights a framework loaded) for an
    /// `m x k` matrix of `block`s, after checking them.
    ///
    /// `row_ptr` must hold exactly `m / bm + 1` entries; its last entry is `nnzb`, and
    /// `col_idx` and `values` must hold at least `nnzb` and `nnzb * bm * bk` elements
    /// (extra elements are ignored, so an empty matrix can pass one-element placeholders,
    /// CUDA having no empty allocations). All three must belong to one CUDA context.
    ///
    /// The check: `row_ptr` and the first `nnzb` entries of `col_idx` are copied to the
    /// host (on `row_ptr`'s stream, which is then synchronized) and validated like
    /// [`BsrMatrix::from_parts`], one [`BsrError`] per defect (as [`Error::Bsr`]). That is
    /// `4 * (m / bm + 1 + nnzb)` bytes, `bm * bk / 2` times fewer than the f16 values,
    /// which are not read. It then waits for the values' stream too, so the matrix is
    /// settled ([`is_settled`](Self::is_settled)). Device failures are [`Error::Cuda`].
    ///
    /// ```no_run
    /// use sparsek::cudarc::driver::CudaContext;
    /// use sparsek::{f16, BlockShape, DeviceBsr};
    ///
    /// let stream = CudaContext::new(0)?.default_stream();
    /// // A 64 x 64 matrix of 32 x 32 blocks: blocks (0, 1) and (1, 0).
    /// let row_ptr = stream.clone_htod(&[0, 1, 2])?;
    /// let col_idx = stream.clone_htod(&[1, 0])?;
    /// let values = stream.alloc_zeros::<f16>(2 * 32 * 32)?;
    /// let a = DeviceBsr::from_device_parts(64, 64, BlockShape::new(32, 32), row_ptr, col_idx, values)?;
    /// assert_eq!(a.nnz_blocks(), 2);
    ///
    /// // A malformed pattern is refused: column 2 is outside the 2 block-columns.
    /// let bad = DeviceBsr::from_device_parts(
    ///     64, 64, BlockShape::new(32, 32),
    ///     stream.clone_htod(&[0, 1, 2])?, stream.clone_htod(&[1, 2])?,
    ///     stream.alloc_zeros::<f16>(2 * 32 * 32)?,
    /// );
    /// assert!(matches!(bad, Err(sparsek::Error::Bsr(sparsek::BsrError::ColumnOutOfRange { .. }))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_device_parts(
        m: usize,
        k: usize,
        block: BlockShape,
        row_ptr: CudaSlice<i32>,
        col_idx: CudaSlice<i32>,
        values: CudaSlice<T>,
    ) -> Result<Self, Error> {
        // Everything that needs no device first.
        let (block_rows, _) = check_grid(m, k, block)?;
        // block_rows <= i32::MAX: + 1 cannot overflow.
        if row_ptr.len() != block_rows + 1 {
            return Err(BsrError::RowPtrLength {
                expected: block_rows + 1,
                got: row_ptr.len(),
            }
            .into());
        }
        super::result::check_contexts(
            row_ptr.stream(),
            &[("col_idx", col_idx.stream()), ("values", values.stream())],
        )?;
        let stream = row_ptr.stream().clone();
        let rp = stream.clone_dtoh(&row_ptr)?;
        stream.synchronize()?;
        // rp has block_rows + 1 >= 1 entries.
        let Ok(nnzb) = usize::try_from(rp[block_rows]) else {
            // A negative end: validation names the first defect (row_ptr must start at 0
            // and never decrease), else this.
            validate_parts(m, k, block, &rp, &[], 0)?;
            return Err(BsrError::RaggedRowPtr {
                index: block_rows,
                detail: format!("ends at {}", rp[block_rows]),
            }
            .into());
        };
        at_least(
            "device col_idx (nnzb = row_ptr's last entry)",
            nnzb,
            col_idx.len(),
        )?;
        let values_len = values_len_of(nnzb, block)?;
        at_least("device values (nnzb * bm * bk)", values_len, values.len())?;
        let ci = download_prefix(&col_idx, nnzb, &stream)?;
        stream.synchronize()?;
        validate_parts(m, k, block, &rp, &ci, values_len)?;
        // Whatever wrote the values (a loader's kernel, say) has completed once their stream
        // has: the matrix is settled. (row_ptr's stream, usually theirs, is done already.)
        if !Arc::ptr_eq(values.stream(), &stream) {
            values.stream().synchronize()?;
        }
        Ok(Self {
            m,
            k,
            block,
            nnzb,
            row_ptr,
            col_idx,
            values,
            transpose: OnceLock::new(),
            scales: DeviceBlockScales::None,
            settled: true,
        })
    }

    /// The seam's view of this matrix (its addresses, the scales' too, filled by `sys`):
    /// one matrix, with its scales' kind.
    pub(crate) fn desc(&self) -> Result<super::sys::BsrDesc, Error>
    where
        T: crate::element::Element,
    {
        use super::result::{dtype, scale_kind, to_i32, to_i64};
        Ok(super::sys::BsrDesc {
            m: to_i64("m", self.m)?,
            k: to_i64("k", self.k)?,
            bm: to_i32("bm", self.block.rows)?,
            bk: to_i32("bk", self.block.cols)?,
            nnzb: to_i64("nnzb", self.nnzb)?,
            row_ptr: 0,
            col_idx: 0,
            values: 0,
            dtype: dtype(T::DTYPE),
            scales: 0,
            scale_kind: scale_kind(self.scales.kind()),
            batch: 1,
            batch_stride: 0,
            settled: self.settled,
        })
    }

    /// `nnzb * bm * bk`, or [`BsrError::ValuesLength`] when `got` differs.
    fn check_values_len(&self, got: usize) -> Result<usize, Error> {
        let len = self.values_len();
        if got != len {
            return Err(BsrError::ValuesLength { expected: len, got }.into());
        }
        Ok(len)
    }

    /// Replaces the values with `values` from the host (`nnzb * bm * bk` elements, each
    /// block row-major, in the order of the stored blocks): fine-tuned weights with the
    /// same pattern. Enqueued on the values buffer's stream; `values` may be reused as soon
    /// as this returns. A wrong length is [`BsrError::ValuesLength`], nothing copied.
    pub fn update_values(&mut self, values: &[T]) -> Result<(), Error> {
        let len = self.check_values_len(values.len())?;
        if len == 0 {
            return Ok(());
        }
        let stream = self.values.stream().clone();
        stream.memcpy_htod(values, &mut self.values.slice_mut(..len))?;
        Ok(())
    }

    /// Replaces the values with a device buffer or view of exactly `nnzb * bm * bk`
    /// elements (same order as [`update_values`](Self::update_values)), copied on the
    /// values buffer's stream (cudarc orders it after pending writes to `values`). A wrong
    /// length is [`BsrError::ValuesLength`], nothing copied.
    pub fn update_values_from_device<S: DevicePtr<T>>(&mut self, values: &S) -> Result<(), Error> {
        let len = self.check_values_len(values.len())?;
        if len == 0 {
            return Ok(());
        }
        let stream = self.values.stream().clone();
        stream.memcpy_dtod(values, &mut self.values.slice_mut(..len))?;
        Ok(())
    }

    /// Builds the transpose index that `op(A) = Aᵀ` walks
    /// ([`SpmmOptions::transpose_a`](crate::SpmmOptions::transpose_a), [`dense_spmm`](crate::dense_spmm))
    /// and keeps it on the device, if not done yet: the first such product does this itself,
    /// so call it ahead to keep that product's latency flat. It copies the index arrays to
    /// the host (`4 * (m / bm + 1 + nnzb)` bytes, waiting for the values buffer's stream),
    /// sorts them by block-column and uploads `4 * (k / bk + 1 + 2 * nnzb)` bytes; the
    /// values are neither read nor copied.
    pub fn prepare_transpose(&self) -> Result<(), Error> {
        self.transpose_index().map(|_| ())
    }

    /// The device transpose index, built on first use (see `prepare_transpose`).
    pub(crate) fn transpose_index(&self) -> Result<&DeviceTransposeIndex, Error> {
        if let Some(t) = self.transpose.get() {
            return Ok(t);
        }
        let stream = self.values.stream().clone();
        let row_ptr = stream.clone_dtoh(&self.row_ptr)?;
        let col_idx = download_prefix(&self.col_idx, self.nnzb, &stream)?;
        stream.synchronize()?;
        // The pattern was validated when this matrix was built.
        let index = transpose_pattern(self.k / self.block.cols, &row_ptr, &col_idx)?;
        let built = DeviceTransposeIndex {
            col_ptr: upload_slice(index.col_ptr(), &stream)?,
            row_idx: upload_slice(index.row_idx(), &stream)?,
            block_id: upload_slice(index.block_id(), &stream)?,
        };
        // Another thread may have built it meanwhile: either copy is the same index.
        let _ = self.transpose.set(built);
        self.transpose.get().ok_or_else(|| {
            Error::InvalidArgument("the device transpose index could not be kept".into())
        })
    }

    /// Copies the matrix back to the host (on the values buffer's stream, then waits for
    /// it): the same `BsrMatrix` that was uploaded, with the latest values.
    pub fn download(&self) -> Result<BsrMatrix<T>, Error> {
        let stream = self.values.stream().clone();
        let row_ptr = stream.clone_dtoh(&self.row_ptr)?;
        let col_idx = download_prefix(&self.col_idx, self.nnzb, &stream)?;
        let values = download_prefix(&self.values, self.values_len(), &stream)?;
        stream.synchronize()?;
        Ok(BsrMatrix::from_parts(
            self.m, self.k, self.block, row_ptr, col_idx, values,
        )?)
    }
}

impl<Q: Fp8> DeviceBsr<Q> {
    /// Attaches scales already on the device (e.g. with weights a framework loaded,
    /// [`from_device_parts`](Self::from_device_parts)), replacing any: one value per tensor,
    /// or `nnzb` per block (a one-element buffer when `nnzb = 0`); another length is
    /// [`Error::ScaleLength`], a buffer of another CUDA context than the values'
    /// [`Error::ContextMismatch`], and the matrix is dropped with the error. It waits for
    /// the scales' stream, so whatever wrote them has completed (settledness unchanged).
    pub fn with_scales(mut self, scales: DeviceBlockScales) -> Result<Self, Error> {
        if let Some(buf) = scales.buffer() {
            check_scale_len("A", scales.kind(), self.nnzb, buf.len(), true)?;
            super::result::check_contexts(self.values.stream(), &[("A.scales", buf.stream())])?;
            // As for from_device_parts' values: whatever wrote them has completed.
            buf.stream().synchronize()?;
        }
        self.scales = scales;
        Ok(self)
    }

    /// Replaces the scales with `scales` from the host (per-block ones numbering the stored
    /// blocks, else [`Error::ScaleLength`] and nothing changes), copied on the values
    /// buffer's stream: re-quantized weights on the same pattern, with
    /// [`update_values`](Self::update_values).
    pub fn update_scales(&mut self, scales: &BlockScales) -> Result<(), Error> {
        check_scale_len(
            "A",
            scales.kind(),
            self.nnzb,
            scales.as_slice().len(),
            false,
        )?;
        let stream = self.values.stream().clone();
        self.scales = DeviceBlockScales::upload(scales, &stream)?;
        Ok(())
    }
}

impl<T> DeviceBsr<T> {
    /// Whether the matrix is settled: no kernel that may still be running writes its
    /// arrays. Products on sm_90 launch while the kernel before them in the stream may still
    /// be finishing (programmatic dependent launch), and the Decode family starts reading a
    /// settled matrix's weights before that kernel completes: about 1 µs less per launch at
    /// decode sizes. A matrix that is not settled is read after it, like B.
    ///
    /// True for a matrix made by [`upload`](Self::upload),
    /// [`upload_quantized`](Self::upload_quantized) or
    /// [`from_device_parts`](Self::from_device_parts) (which waits for the buffers' streams);
    /// copies ([`update_values`](Self::update_values) and the like) keep it as it is. False
    /// once a kernel wrote the matrix: the output of [`sddmm`](crate::sddmm),
    /// [`quantize_fp8`](Self::quantize_fp8) and
    /// [`quantize_fp8_from`](Self::quantize_fp8_from), until [`settle`](Self::settle).
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// Waits for the streams of the matrix's buffers (the host blocks until every kernel
    /// enqueued on them has completed), after which the matrix is settled
    /// ([`is_settled`](Self::is_settled)): call it once on weights a kernel wrote (e.g.
    /// quantized on the device) before they serve decode steps. Not for a launch path (it
    /// synchronizes); a CUDA failure is [`Error::Cuda`] and leaves the flag as it was.
    pub fn settle(&mut self) -> Result<(), Error> {
        let mut streams = vec![
            self.values.stream(),
            self.row_ptr.stream(),
            self.col_idx.stream(),
        ];
        streams.extend(self.scales.buffer().map(|b| b.stream()));
        // Each stream once (the buffers usually share one).
        for (i, s) in streams.iter().enumerate() {
            if !streams[..i].iter().any(|seen| Arc::ptr_eq(seen, s)) {
                s.synchronize()?;
            }
        }
        self.settled = true;
        Ok(())
    }

    /// The kind of the scales ([`ScaleKind::None`] for a matrix that is not FP8, or an FP8
    /// one without scales).
    pub fn scale_kind(&self) -> ScaleKind {
        self.scales.kind()
    }
    /// The scales on the device.
    pub fn scales(&self) -> &DeviceBlockScales {
        &self.scales
    }
    /// Rows of the matrix.
    pub fn m(&self) -> usize {
        self.m
    }
    /// Columns of the matrix.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The block shape `bm x bk`.
    pub fn block(&self) -> BlockShape {
        self.block
    }
    /// Number of stored blocks.
    pub fn nnz_blocks(&self) -> usize {
        self.nnzb
    }
    /// Elements of the stored blocks, `nnzb * bm * bk` (the values buffer may be longer).
    pub fn values_len(&self) -> usize {
        // Checked at construction: nnzb * bm * bk fits usize.
        self.nnzb * self.block.len()
    }
    /// Floating-point operations of `A * B` with `n` columns: `2 * n * nnzb * bm * bk`.
    pub fn flops(&self, n: usize) -> f64 {
        crate::format::bsr::spmm_flops(n, self.nnzb, self.block)
    }
    /// The values buffer, read-only (at least [`values_len`](Self::values_len) elements).
    pub fn values(&self) -> &CudaSlice<T> {
        &self.values
    }
    /// Gives the three buffers back: `(row_ptr, col_idx, values)` (an FP8 matrix's scales
    /// are dropped: [`into_parts_with_scales`](Self::into_parts_with_scales) keeps them).
    pub fn into_parts(self) -> (CudaSlice<i32>, CudaSlice<i32>, CudaSlice<T>) {
        (self.row_ptr, self.col_idx, self.values)
    }
    /// Gives the buffers back with the scales: `(row_ptr, col_idx, values, scales)`.
    pub fn into_parts_with_scales(
        self,
    ) -> (
        CudaSlice<i32>,
        CudaSlice<i32>,
        CudaSlice<T>,
        DeviceBlockScales,
    ) {
        (self.row_ptr, self.col_idx, self.values, self.scales)
    }
}
