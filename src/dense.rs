//! Dense operands: views over host slices or device buffers, row- or column-major.
//!
//! A linear layer `y = x · Wᵀ` with a sparse weight `W` (`out x in`) maps onto
//! `C = A · B` with `A = W` (BSR), `B = xᵀ` and `C = yᵀ`: a row-major activation
//! `x` (`batch x in`) *is* `xᵀ` column-major (`in x batch`, ld = in), and a row-major
//! `y` (`batch x out`) *is* `yᵀ` column-major. So pass `x` and `y` as-is with
//! `Layout::ColMajor`; no transpose is ever materialized.

#[cfg(feature = "cuda")]
use cudarc::driver::CudaSlice;
use rayon::prelude::*;

use crate::element::{Element, Fp8};
use crate::scale::{ColumnScales, ScaleKind};

/// Storage order of a dense matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Element `(i, j)` at `i * ld + j`.
    RowMajor,
    /// Element `(i, j)` at `j * ld + i`.
    ColMajor,
}

impl Layout {
    /// The other layout: a view read with it is the transpose of the view (same buffer, same
    /// leading dimension, rows and columns swapped).
    pub fn flipped(self) -> Layout {
        match self {
            Layout::RowMajor => Layout::ColMajor,
            Layout::ColMajor => Layout::RowMajor,
        }
    }

    /// Offset of element `(i, j)` with leading dimension `ld`, or `None` when it overflows
    /// `usize`.
    #[inline]
    pub fn offset(self, i: usize, j: usize, ld: usize) -> Option<usize> {
        let (outer, inner) = match self {
            Layout::RowMajor => (i, j),
            Layout::ColMajor => (j, i),
        };
        outer.checked_mul(ld)?.checked_add(inner)
    }

    /// [`offset`](Self::offset) of an element inside a view that `spmm` accepted: such an
    /// offset is below the buffer's length ([`DenseShape::required_len`] was checked), so
    /// the arithmetic cannot overflow.
    #[inline]
    pub(crate) fn offset_in_view(self, i: usize, j: usize, ld: usize) -> usize {
        match self {
            Layout::RowMajor => i * ld + j,
            Layout::ColMajor => j * ld + i,
        }
    }
}

/// Shape and storage order of a dense view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseShape {
    /// Rows of the view.
    pub rows: usize,
    /// Columns of the view.
    pub cols: usize,
    /// Storage order: which dimension is contiguous.
    pub layout: Layout,
    /// Leading dimension in elements: the stride between consecutive rows (row-major) or
    /// columns (column-major). Valid views have `ld >= max(contiguous_extent(), 1)`.
    pub ld: usize,
}

impl DenseShape {
    /// Contiguous (packed) shape: `ld` is the length of a row (row-major) or column, at
    /// least 1 (the BLAS convention, so an empty dimension still has a valid `ld`).
    pub fn packed(rows: usize, cols: usize, layout: Layout) -> Self {
        let ld = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        }
        .max(1);
        Self {
            rows,
            cols,
            layout,
            ld,
        }
    }
    /// Length of the contiguous dimension; `ld` must be at least this.
    pub fn contiguous_extent(&self) -> usize {
        match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColMajor => self.rows,
        }
    }
    /// Elements a buffer must hold for this shape, `(outer - 1) * ld + contiguous extent`
    /// (`None` on overflow).
    pub fn required_len(&self) -> Option<usize> {
        if self.rows == 0 || self.cols == 0 {
            return Some(0);
        }
        let outer = match self.layout {
            Layout::RowMajor => self.rows,
            Layout::ColMajor => self.cols,
        };
        (outer - 1)
            .checked_mul(self.ld)?
            .checked_add(self.contiguous_extent())
    }
    /// The transposed shape over the same elements: rows and columns swapped, the layout
    /// flipped, the same `ld` (so the same `required_len`).
    pub fn t(&self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            layout: self.layout.flipped(),
            ld: self.ld,
        }
    }
}

pub(crate) enum Storage<'a, T> {
    Host(&'a [T]),
    #[cfg(feature = "cuda")]
    Device(&'a CudaSlice<T>),
}

pub(crate) enum StorageMut<'a, T> {
    Host(&'a mut [T]),
    #[cfg(feature = "cuda")]
    Device(&'a mut CudaSlice<T>),
}

impl<T> Storage<'_, T> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Storage::Host(s) => s.len(),
            #[cfg(feature = "cuda")]
            Storage::Device(s) => s.len(),
        }
    }
}

impl<T> StorageMut<'_, T> {
    pub(crate) fn len(&self) -> usize {
        match self {
            StorageMut::Host(s) => s.len(),
            #[cfg(feature = "cuda")]
            StorageMut::Device(s) => s.len(),
        }
    }
}

/// A read-only dense matrix (the `B` operand): a view of a host slice ([`Dense::host`])
/// or, with the `cuda` feature, of a cudarc device buffer (`Dense::device`). It holds no
/// data; `spmm` checks that the buffer covers the view.
///
/// ```
/// use sparsek::{Dense, DenseShape, Layout};
///
/// // The left 3 columns of a row-major 2 x 4 matrix: a 2 x 3 view with leading dimension 4.
/// let data = [1.0f32, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0];
/// let b = Dense::host(&data, 2, 3, Layout::RowMajor).with_ld(4);
/// assert_eq!(b.shape(), DenseShape { rows: 2, cols: 3, layout: Layout::RowMajor, ld: 4 });
/// assert_eq!(b.shape().required_len(), Some(7));
/// ```
pub struct Dense<'a, T> {
    pub(crate) data: Storage<'a, T>,
    pub(crate) shape: DenseShape,
    /// An FP8 operand's scales ([`with_scales`](Dense::with_scales)); `None` otherwise.
    pub(crate) scales: ColumnScales<'a>,
    /// Whether the view was transposed ([`Dense::t`]) an odd number of times since its
    /// per-column scales were attached: they then scale its rows, which no product takes.
    pub(crate) scales_transposed: bool,
}

/// A writable dense matrix (the `C` operand): a mutable view of a host slice
/// ([`DenseMut::host`]) or, with the `cuda` feature, of a cudarc device buffer
/// (`DenseMut::device`).
///
/// A linear layer's output `y` (`batch x out`, row-major) is `yᵀ` column-major, so it is
/// passed as it is (see the [module docs](crate::dense)):
///
/// ```
/// use sparsek::{f16, spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};
///
/// let (batch, inp, out) = (3, 64, 32);
/// let w = BsrMatrix::from_block_mask(&BlockMask::from_fn(1, 2, |_, c| c == 1)?, BlockShape::new(32, 32),
///                                    |_, _| f16::from_f32(0.5))?;
/// let x = vec![f16::from_f32(1.0); batch * inp];     // batch x in, row-major
/// let mut y = vec![0f32; batch * out];               // batch x out, row-major
/// // y = x·Wᵀ  <=>  yᵀ = W·xᵀ, with xᵀ and yᵀ column-major.
/// spmm(&w, Dense::host(&x, inp, batch, Layout::ColMajor),
///      DenseMut::host(&mut y, out, batch, Layout::ColMajor), &SpmmOptions::new())?;
/// assert!(y.iter().all(|&v| v == 16.0));             // 32 inputs of 1 times 0.5
/// # Ok::<(), sparsek::Error>(())
/// ```
pub struct DenseMut<'a, T> {
    pub(crate) data: StorageMut<'a, T>,
    pub(crate) shape: DenseShape,
}

impl<'a, T> Dense<'a, T> {
    /// A packed host matrix.
    pub fn host(data: &'a [T], rows: usize, cols: usize, layout: Layout) -> Self {
        Self {
            data: Storage::Host(data),
            shape: DenseShape::packed(rows, cols, layout),
            scales: ColumnScales::None,
            scales_transposed: false,
        }
    }
    /// A packed device matrix; sparsek runs on this buffer's stream.
    #[cfg(feature = "cuda")]
    pub fn device(data: &'a CudaSlice<T>, rows: usize, cols: usize, layout: Layout) -> Self {
        Self {
            data: Storage::Device(data),
            shape: DenseShape::packed(rows, cols, layout),
            scales: ColumnScales::None,
            scales_transposed: false,
        }
    }
    /// Attaches scales to a view of any element type: the entry points refuse them where
    /// the type is not FP8 (`Error::ScalesNotTaken`).
    pub(crate) fn with_any_scales(mut self, scales: ColumnScales<'a>) -> Self {
        self.scales = scales;
        self.scales_transposed = false;
        self
    }
    /// The kind of the scales attached ([`ScaleKind::None`] unless
    /// [`with_scales`](Dense::with_scales) attached some).
    pub fn scale_kind(&self) -> ScaleKind {
        self.scales.kind()
    }
    /// Sets a leading dimension larger than the packed one (a sub-matrix of a wider one).
    pub fn with_ld(mut self, ld: usize) -> Self {
        self.shape.ld = ld;
        self
    }
    /// The view's shape, layout and leading dimension.
    pub fn shape(&self) -> DenseShape {
        self.shape
    }
    /// The transposed view of the same buffer: rows and columns swapped, the layout
    /// flipped, nothing copied. Per-column scales stay with the buffer's columns, which
    /// are the view's rows now: a product refuses them until the view is transposed back.
    pub fn t(self) -> Self {
        let flip = self.scales.kind() == ScaleKind::PerColumn;
        Self {
            data: self.data,
            shape: self.shape.t(),
            scales: self.scales,
            scales_transposed: self.scales_transposed ^ flip,
        }
    }
}

impl<'a, Q: Fp8> Dense<'a, Q> {
    /// Attaches the scales of an FP8 operand (B of [`spmm`](crate::spmm())): one per
    /// tensor or one per column of this view, host values for a host view and device
    /// buffers for a device one; their lengths are checked by the product.
    ///
    /// ```
    /// use sparsek::quantize::ColumnScales;
    /// use sparsek::{Dense, Layout, ScaleKind, Vector, F8E4M3};
    ///
    /// let x = vec![F8E4M3::from_f32(1.0); 64 * 3]; // 3 tokens of 64, row-major: xᵀ column-major
    /// let per_token = [0.5f32, 0.25, 2.0];
    /// let b = Dense::host(&x, 64, 3, Layout::ColMajor)
    ///     .with_scales(ColumnScales::PerColumn(Vector::Host(&per_token)));
    /// assert_eq!(b.scale_kind(), ScaleKind::PerColumn);
    /// ```
    pub fn with_scales(self, scales: ColumnScales<'a>) -> Self {
        self.with_any_scales(scales)
    }
}

impl<'a, T> DenseMut<'a, T> {
    /// A packed host matrix.
    pub fn host(data: &'a mut [T], rows: usize, cols: usize, layout: Layout) -> Self {
        Self {
            data: StorageMut::Host(data),
            shape: DenseShape::packed(rows, cols, layout),
        }
    }
    /// A packed device matrix; sparsek runs on this buffer's stream.
    #[cfg(feature = "cuda")]
    pub fn device(data: &'a mut CudaSlice<T>, rows: usize, cols: usize, layout: Layout) -> Self {
        Self {
            data: StorageMut::Device(data),
            shape: DenseShape::packed(rows, cols, layout),
        }
    }
    /// Sets a leading dimension larger than the packed one.
    pub fn with_ld(mut self, ld: usize) -> Self {
        self.shape.ld = ld;
        self
    }
    /// The view's shape, layout and leading dimension.
    pub fn shape(&self) -> DenseShape {
        self.shape
    }
    /// The transposed view of the same buffer (see [`Dense::t`]).
    pub fn t(self) -> Self {
        Self {
            data: self.data,
            shape: self.shape.t(),
        }
    }
}

/// A dense view once as packed row-major f32 (`rows x cols`): every layout and type then
/// shares one inner loop. The view was checked (`check::check_view`), so every offset is
/// below its buffer's length.
pub(crate) fn packed_f32<T: Element>(data: &[T], shape: &DenseShape) -> Vec<f32> {
    let (rows, cols) = (shape.rows, shape.cols);
    let mut out = vec![0f32; rows * cols];
    if cols == 0 {
        return out;
    }
    out.par_chunks_mut(cols).enumerate().for_each(|(i, row)| {
        for (j, v) in row.iter_mut().enumerate() {
            *v = data[shape.layout.offset_in_view(i, j, shape.ld)].to_f32();
        }
    });
    out
}
