//! FP8 operands: their scales, the quantized matrices and the host quantizers.
//!
//! An FP8 operand ([`F8E4M3`](crate::F8E4M3), [`F8E5M2`](crate::F8E5M2)) is read as
//! `stored * scale`, its scales f32 values of one of these kinds ([`ScaleKind`]):
//! - A (the BSR operand, [`BlockScales`]): none (1), one per tensor, or one per stored block
//!   (`nnzb` values, in the order of the values);
//! - B (the dense operand, [`ColumnScales`]): none, one per tensor, or one per column of B
//!   (`n` values: one per token of `x` in `y = x·Wᵀ`).
//!
//! The types make the other combinations unrepresentable (a per-column A, a per-block B);
//! the products ([`spmm`](crate::spmm())) refuse with a typed [`Error`] what they cannot
//! rule out (lengths, scales on an operand that is not FP8, a transposed per-column view).
//!
//! The quantizers ([`BsrMatrix::quantize_fp8`], [`QuantizedDense::quantize`]) pick each scale
//! as `amax / MAX`, the largest magnitude of its part over the largest finite FP8 value, so
//! the part's largest value lands on `±MAX`; a part that is all zeros gets the scale 1. Each
//! value is stored as `from_f32(v / scale)`: rounded to nearest, ties to even, saturating
//! (the `f32` quotient of the largest value may land a hair above `MAX`). A scale is never
//! below `f32::MIN_POSITIVE` (the smallest normal f32), so every scale is positive, finite
//! and normal. So a dequantized value `stored * scale` is within half an FP8 spacing (at
//! `v / scale`, scaled back) of `v`: a relative error of at most `2^-(mantissa bits + 1)`
//! (1/16 for E4M3, 1/8 for E5M2) where `|v / scale|` is at least the smallest normal FP8
//! value, and an absolute error of at most half the smallest subnormal times the scale
//! below it; plus the f32 roundings of the division and the product.
//!
//! ```
//! use sparsek::quantize::{BlockGranularity, BlockScales};
//! use sparsek::{BlockShape, BsrMatrix, F8E4M3};
//!
//! let a = BsrMatrix::from_dense(&[1.0f32, -2.0, 0.0, 0.0, 0.5, 0.25, 0.0, 0.0], 2, 4, BlockShape::new(2, 2))?;
//! let q = a.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)?;
//! // One scale per stored block: its largest magnitude over 448.
//! assert_eq!(q.scales(), &BlockScales::PerBlock(vec![2.0 / 448.0]));
//! let back = q.dequantize()?;
//! for (x, y) in back.values().iter().zip(a.values()) {
//!     assert!((x - y).abs() <= y.abs() / 16.0);
//! }
//! # Ok::<(), sparsek::Error>(())
//! ```

use rayon::prelude::*;

#[cfg(feature = "cuda")]
mod gpu;

use crate::check::{check_scale_len, check_view};
use crate::dense::{Dense, DenseShape, Layout};
use crate::element::{Element, Fp8};
use crate::epilogue::Vector;
use crate::error::Error;
use crate::format::{try_vec, BlockShape, BsrMatrix};

// The scale types live below the operands that carry them (crate::scale); this module
// names them where users look for them.
pub(crate) use crate::scale::scale_for;
pub use crate::scale::{BlockGranularity, BlockScales, ColumnGranularity, ColumnScales, ScaleKind};

/// The first value that is NaN or infinite, as `Error::NonFinite` (its index in `values`).
fn check_finite<T: Element>(operand: &'static str, values: &[T]) -> Result<(), Error> {
    match values.iter().position(|v| !v.to_f32().is_finite()) {
        Some(index) => Err(Error::NonFinite {
            operand,
            index,
            value: values[index].to_f32(),
        }),
        None => Ok(()),
    }
}

/// The largest magnitude of `values` (all finite).
fn amax<T: Element>(values: &[T]) -> f32 {
    values.iter().fold(0f32, |m, v| m.max(v.to_f32().abs()))
}

/// A BSR matrix of FP8 values with its scales ([`BlockScales`]): what
/// [`BsrMatrix::quantize_fp8`] makes and [`spmm`](crate::spmm()) takes as A (on the device:
/// `DeviceBsr::upload_quantized`). Its per-block
/// scales, if any, number exactly its stored blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedBsr<Q> {
    matrix: BsrMatrix<Q>,
    scales: BlockScales,
}

impl<Q: Fp8> QuantizedBsr<Q> {
    /// Pairs FP8 values with their scales: [`Error::ScaleLength`] unless per-block scales
    /// number the stored blocks.
    pub fn new(matrix: BsrMatrix<Q>, scales: BlockScales) -> Result<Self, Error> {
        check_scale_len(
            "A",
            scales.kind(),
            matrix.nnz_blocks(),
            scales.as_slice().len(),
            false,
        )?;
        Ok(Self { matrix, scales })
    }
    /// The stored FP8 values and their pattern.
    pub fn matrix(&self) -> &BsrMatrix<Q> {
        &self.matrix
    }
    /// The scales.
    pub fn scales(&self) -> &BlockScales {
        &self.scales
    }
    /// Rows of the matrix.
    pub fn m(&self) -> usize {
        self.matrix.m()
    }
    /// Columns of the matrix.
    pub fn k(&self) -> usize {
        self.matrix.k()
    }
    /// The block shape.
    pub fn block(&self) -> BlockShape {
        self.matrix.block()
    }
    /// Number of stored blocks.
    pub fn nnz_blocks(&self) -> usize {
        self.matrix.nnz_blocks()
    }
    /// Takes the values and the scales back.
    pub fn into_parts(self) -> (BsrMatrix<Q>, BlockScales) {
        (self.matrix, self.scales)
    }
    /// The values as f32, `stored * scale` (exact: an FP8 value times an f32 scale rounds
    /// once), on the same pattern. [`crate::BsrError::Allocation`] (as `Error::Bsr`) when
    /// they cannot be allocated.
    pub fn dequantize(&self) -> Result<BsrMatrix<f32>, Error> {
        dequantize_bsr(&self.matrix, &self.scales)
    }
}

/// `stored * scale` of every value of `a`, on its pattern. The scales' length is checked
/// here too (`ScaleLength`).
pub(crate) fn dequantize_bsr<Q: Element>(
    a: &BsrMatrix<Q>,
    scales: &BlockScales,
) -> Result<BsrMatrix<f32>, Error> {
    let nnzb = a.nnz_blocks();
    check_scale_len("A", scales.kind(), nnzb, scales.as_slice().len(), false)?;
    let len = a.values().len();
    let mut out = try_vec("dequantized values", len)?;
    out.resize(len, 0f32);
    // nnzb * bm * bk = len (validated); a block is at least one element.
    let blk = a.block().len();
    out.par_chunks_mut(blk)
        .zip(a.values().par_chunks(blk))
        .enumerate()
        .for_each(|(i, (out, q))| {
            // i < nnzb, and per-block scales number nnzb (checked above).
            let s = scales.of_block(i).unwrap_or(1.0);
            for (o, q) in out.iter_mut().zip(q) {
                *o = q.to_f32() * s;
            }
        });
    Ok(a.with_values(out)?)
}

impl<T: Element> BsrMatrix<T> {
    /// Quantizes the values to FP8 `Q` ([`F8E4M3`](crate::F8E4M3) or
    /// [`F8E5M2`](crate::F8E5M2)) with scales per tensor or per stored block, on the same
    /// pattern: each scale `amax / Q::MAX` of its part (1 for an all-zero block), each value
    /// `Q::from_f32(v / scale)`, rounded to nearest even and saturating (see the
    /// [module docs](crate::quantize) for the error bound). A NaN or infinite value is
    /// [`Error::NonFinite`] (its index in [`values`](Self::values)); a failed allocation
    /// `Error::Bsr(BsrError::Allocation)`.
    pub fn quantize_fp8<Q: Fp8>(
        &self,
        granularity: BlockGranularity,
    ) -> Result<QuantizedBsr<Q>, Error> {
        let values = self.values();
        check_finite("A", values)?;
        let blk = self.block().len();
        let nnzb = self.nnz_blocks();
        let mut q = try_vec("quantized values", values.len())?;
        q.resize(values.len(), Q::default());
        let scales = match granularity {
            BlockGranularity::PerTensor => {
                let s = scale_for::<Q>(values.par_chunks(blk).map(amax).reduce(|| 0f32, f32::max));
                q.par_chunks_mut(blk)
                    .zip(values.par_chunks(blk))
                    .for_each(|(q, v)| quantize_into(q, v, s));
                BlockScales::PerTensor(s)
            }
            BlockGranularity::PerBlock => {
                let mut scales = try_vec("scales", nnzb)?;
                scales.resize(nnzb, 1f32);
                q.par_chunks_mut(blk)
                    .zip(values.par_chunks(blk))
                    .zip(scales.par_iter_mut())
                    .for_each(|((q, v), s)| {
                        *s = scale_for::<Q>(amax(v));
                        quantize_into(q, v, *s);
                    });
                BlockScales::PerBlock(scales)
            }
        };
        QuantizedBsr::new(self.with_values(q)?, scales)
    }
}

fn quantize_into<T: Element, Q: Fp8>(out: &mut [Q], values: &[T], scale: f32) {
    for (o, v) in out.iter_mut().zip(values) {
        *o = Q::from_f32(v.to_f32() / scale);
    }
}

/// A dense FP8 matrix with its scales (per tensor or per column), packed in its layout:
/// what [`quantize`](Self::quantize) makes of B (or of `x` in `y = x·Wᵀ`, per token), and
/// what [`view`](Self::view) hands to [`spmm`](crate::spmm()).
///
/// ```
/// use sparsek::quantize::{ColumnGranularity, QuantizedDense};
/// use sparsek::{DenseShape, F8E4M3, Layout};
///
/// // x: 2 tokens of 3 features, row-major; as B = xᵀ it is 3 x 2 column-major, and its
/// // columns are the tokens: one scale per token.
/// let x = [1.0f32, 2.0, 4.0, -0.5, 0.25, 0.125];
/// let xq = QuantizedDense::<F8E4M3>::quantize(&x, DenseShape::packed(3, 2, Layout::ColMajor),
///                                               ColumnGranularity::PerColumn)?;
/// assert_eq!(xq.scales(), &[4.0 / 448.0, 0.5 / 448.0]);
/// assert_eq!(xq.dequantize()?, x); // these values are exact in E4M3 at their scales
/// # Ok::<(), sparsek::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedDense<Q> {
    values: Vec<Q>,
    shape: DenseShape,
    scales: Vec<f32>,
    granularity: ColumnGranularity,
}

impl<Q: Fp8> QuantizedDense<Q> {
    /// Quantizes the `shape` view of `data` (its rows, columns, layout and leading
    /// dimension; checked against `data` like an operand) to FP8 `Q`, packed in the same
    /// layout, with one scale per tensor or per column: each `amax / Q::MAX` of its part
    /// (1 for an all-zero part), each value `Q::from_f32(v / scale)`. A NaN or infinite
    /// value in the view is [`Error::NonFinite`] (its index in `data`); per-column scales
    /// that cannot be allocated (a `0 x n` view of a huge `n`) `Error::Bsr(Allocation)`.
    pub fn quantize<T: Element>(
        data: &[T],
        shape: DenseShape,
        granularity: ColumnGranularity,
    ) -> Result<Self, Error> {
        check_view("B", &shape, data.len())?;
        let (rows, cols) = (shape.rows, shape.cols);
        let packed = DenseShape::packed(rows, cols, shape.layout);
        // The view fits data (checked) and ld >= its contiguous extent: rows * cols fits.
        let len = rows * cols;
        let at = |i: usize, j: usize| shape.layout.offset_in_view(i, j, shape.ld);
        // Finite first, in the order of data.
        let mut bad: Option<usize> = None;
        // (An empty view has nothing to read, whatever its other side.)
        for i in 0..if len == 0 { 0 } else { rows } {
            for j in 0..cols {
                let off = at(i, j);
                if !data[off].to_f32().is_finite() && bad.is_none_or(|b| off < b) {
                    bad = Some(off);
                }
            }
        }
        if let Some(index) = bad {
            return Err(Error::NonFinite {
                operand: "B",
                index,
                value: data[index].to_f32(),
            });
        }
        let col_amax = |j: usize| (0..rows).fold(0f32, |m, i| m.max(data[at(i, j)].to_f32().abs()));
        let mut scales = try_vec(
            "scales",
            match granularity {
                ColumnGranularity::PerTensor => 1,
                ColumnGranularity::PerColumn => cols,
            },
        )?;
        match granularity {
            ColumnGranularity::PerTensor => {
                // An empty view (its other side may be huge) has no value: amax 0.
                let a = if len == 0 {
                    0f32
                } else {
                    (0..cols)
                        .into_par_iter()
                        .map(col_amax)
                        .reduce(|| 0f32, f32::max)
                };
                scales.push(scale_for::<Q>(a));
            }
            ColumnGranularity::PerColumn => {
                // With no row, every column is all zeros: scale 1, nothing read.
                scales.resize(cols, 1f32);
                if rows > 0 {
                    scales
                        .par_iter_mut()
                        .enumerate()
                        .for_each(|(j, s)| *s = scale_for::<Q>(col_amax(j)));
                }
            }
        }
        let mut values = try_vec("quantized values", len)?;
        values.resize(len, Q::default());
        let scale = |j: usize| match granularity {
            ColumnGranularity::PerTensor => scales[0],
            ColumnGranularity::PerColumn => scales[j],
        };
        // Packed: the outer index runs over ld-long runs of the contiguous extent.
        let extent = packed.ld;
        if len > 0 {
            values
                .par_chunks_mut(extent)
                .enumerate()
                .for_each(|(outer, run)| {
                    for (inner, o) in run.iter_mut().enumerate() {
                        let (i, j) = match shape.layout {
                            Layout::RowMajor => (outer, inner),
                            Layout::ColMajor => (inner, outer),
                        };
                        *o = Q::from_f32(data[at(i, j)].to_f32() / scale(j));
                    }
                });
        }
        Ok(Self {
            values,
            shape: packed,
            scales,
            granularity,
        })
    }

    /// The FP8 values, packed in [`shape`](Self::shape)'s layout.
    pub fn values(&self) -> &[Q] {
        &self.values
    }
    /// The packed shape (rows, columns, layout, `ld`).
    pub fn shape(&self) -> DenseShape {
        self.shape
    }
    /// The scales: one value per tensor, or one per column.
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }
    /// The scales' granularity.
    pub fn granularity(&self) -> ColumnGranularity {
        self.granularity
    }
    /// The scales as an operand's ([`ColumnScales`], host).
    pub fn column_scales(&self) -> ColumnScales<'_> {
        match self.granularity {
            ColumnGranularity::PerTensor => ColumnScales::PerTensor(Vector::Host(&self.scales)),
            ColumnGranularity::PerColumn => ColumnScales::PerColumn(Vector::Host(&self.scales)),
        }
    }
    /// The host operand: the values in their shape with their scales, for
    /// [`spmm`](crate::spmm()).
    pub fn view(&self) -> Dense<'_, Q> {
        let s = self.shape;
        Dense::host(&self.values, s.rows, s.cols, s.layout).with_scales(self.column_scales())
    }
    /// The values as f32, `stored * scale`, packed in the same layout.
    pub fn dequantize(&self) -> Result<Vec<f32>, Error> {
        let mut out = try_vec("dequantized values", self.values.len())?;
        // Packed: ld is the contiguous extent, at least 1.
        let ld = self.shape.ld;
        for (idx, q) in self.values.iter().enumerate() {
            let j = match self.shape.layout {
                Layout::RowMajor => idx % ld,
                Layout::ColMajor => idx / ld,
            };
            let s = match self.granularity {
                ColumnGranularity::PerTensor => self.scales[0],
                ColumnGranularity::PerColumn => self.scales[j],
            };
            out.push(q.to_f32() * s);
        }
        Ok(out)
    }
    /// Takes the values and the scales back.
    pub fn into_parts(self) -> (Vec<Q>, Vec<f32>) {
        (self.values, self.scales)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::{F8E4M3, F8E5M2};
    use crate::format::BlockShape;

    #[test]
    fn zero_blocks_scale_one() {
        let a = BsrMatrix::from_parts(
            2,
            4,
            BlockShape::new(2, 2),
            vec![0, 2],
            vec![0, 1],
            vec![0.0f32, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 448.0 * 3.0],
        )
        .unwrap();
        let q = a
            .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap();
        assert_eq!(q.scales(), &BlockScales::PerBlock(vec![1.0, 3.0]));
        assert_eq!(q.matrix().values()[7].to_f32(), 448.0);
        let t = a
            .quantize_fp8::<F8E5M2>(BlockGranularity::PerTensor)
            .unwrap();
        assert_eq!(t.scales(), &BlockScales::PerTensor(1344.0 / 57344.0));
        let z = BsrMatrix::from_parts(
            2,
            2,
            BlockShape::new(2, 2),
            vec![0, 0],
            vec![],
            vec![0f32; 0],
        )
        .unwrap();
        let zq = z
            .quantize_fp8::<F8E4M3>(BlockGranularity::PerTensor)
            .unwrap();
        assert_eq!(zq.scales(), &BlockScales::PerTensor(1.0));
    }

    #[test]
    fn non_finite_refused() {
        let a = BsrMatrix::from_parts(
            1,
            2,
            BlockShape::new(1, 1),
            vec![0, 2],
            vec![0, 1],
            vec![1.0f32, f32::INFINITY],
        )
        .unwrap();
        assert!(matches!(
            a.quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock),
            Err(Error::NonFinite { index: 1, .. })
        ));
        let b = [1.0f32, f32::NAN, 0.0, 2.0];
        let e = QuantizedDense::<F8E5M2>::quantize(
            &b,
            DenseShape::packed(2, 2, Layout::RowMajor),
            ColumnGranularity::PerTensor,
        );
        assert!(matches!(e, Err(Error::NonFinite { index: 1, .. })));
        // Outside the view (ld padding) nothing is read.
        let ok = QuantizedDense::<F8E5M2>::quantize(
            &b,
            DenseShape {
                rows: 2,
                cols: 1,
                layout: Layout::RowMajor,
                ld: 2,
            },
            ColumnGranularity::PerColumn,
        )
        .unwrap();
        assert_eq!(ok.dequantize().unwrap(), vec![1.0, 0.0]);
    }

    #[test]
    fn scale_lengths() {
        let a = BsrMatrix::from_parts(
            1,
            2,
            BlockShape::new(1, 1),
            vec![0, 2],
            vec![0, 1],
            vec![F8E4M3::from_f32(1.0); 2],
        )
        .unwrap();
        assert!(QuantizedBsr::new(a.clone(), BlockScales::PerBlock(vec![1.0])).is_err());
        assert!(QuantizedBsr::new(a.clone(), BlockScales::PerBlock(vec![1.0, 2.0])).is_ok());
        assert!(QuantizedBsr::new(a, BlockScales::PerTensor(2.0)).is_ok());
        assert!(check_scale_len("A", ScaleKind::PerBlock, 0, 1, true).is_ok());
        assert!(check_scale_len("A", ScaleKind::PerBlock, 0, 1, false).is_err());
        assert!(check_scale_len("B", ScaleKind::PerColumn, 3, 4, true).is_err());
    }

    #[test]
    fn dense_layouts_agree() {
        let (rows, cols) = (3, 5);
        let data: Vec<f32> = (0..rows * cols).map(|i| (i as f32 - 7.0) * 0.37).collect();
        let rm = QuantizedDense::<F8E4M3>::quantize(
            &data,
            DenseShape::packed(rows, cols, Layout::RowMajor),
            ColumnGranularity::PerColumn,
        )
        .unwrap();
        // The same matrix column-major.
        let t: Vec<f32> = (0..rows * cols)
            .map(|idx| data[(idx % rows) * cols + idx / rows])
            .collect();
        let cm = QuantizedDense::<F8E4M3>::quantize(
            &t,
            DenseShape::packed(rows, cols, Layout::ColMajor),
            ColumnGranularity::PerColumn,
        )
        .unwrap();
        assert_eq!(rm.scales(), cm.scales());
        let (dr, dc) = (rm.dequantize().unwrap(), cm.dequantize().unwrap());
        for i in 0..rows {
            for j in 0..cols {
                assert_eq!(dr[i * cols + j], dc[j * rows + i]);
            }
        }
    }
}
