//! Two matrices of one shape interleaved by block-row: the gate and up weights of a
//! SwiGLU/GeGLU layer as the one operand of a gated product (`Epilogue::gated`), so that
//! one launch computes both and its epilogue sees the two halves of every row.

use super::bsr::BsrMatrix;
use super::try_vec;
use crate::element::Element;
use crate::error::BsrError;

fn same_dim(what: &'static str, first: usize, second: usize) -> Result<(), BsrError> {
    if first == second {
        Ok(())
    } else {
        Err(BsrError::Interleave {
            what,
            first,
            second,
        })
    }
}

impl<T: Element> BsrMatrix<T> {
    /// `first` and `second` (both `m x k`, one block shape) as one `2m x k` matrix whose
    /// block-row `2i` is `first`'s block-row `i` and block-row `2i + 1` is `second`'s: the
    /// gate and up weights of a gated product (`first` the gate). Their patterns may differ.
    /// [`BsrError::Interleave`] when the shapes differ; [`BsrError::IndexOverflow`] /
    /// [`BsrError::SizeOverflow`] where the result's sizes do not fit.
    ///
    /// ```
    /// use sparsek::{BlockShape, BsrMatrix};
    /// let g = BsrMatrix::from_dense(&[1.0f32, 0.0, 0.0, 2.0], 2, 2, BlockShape::new(1, 1))?;
    /// let u = BsrMatrix::from_dense(&[0.0f32, 3.0, 4.0, 0.0], 2, 2, BlockShape::new(1, 1))?;
    /// let gu = BsrMatrix::interleave_block_rows(&g, &u)?;
    /// assert_eq!(gu.to_dense()?, vec![1.0, 0.0, 0.0, 3.0, 0.0, 2.0, 4.0, 0.0]);
    /// assert_eq!(gu.deinterleave_block_rows()?, (g, u));
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn interleave_block_rows(first: &Self, second: &Self) -> Result<Self, BsrError> {
        same_dim("rows", first.m(), second.m())?;
        same_dim("columns", first.k(), second.k())?;
        same_dim("block rows", first.block().rows, second.block().rows)?;
        same_dim("block columns", first.block().cols, second.block().cols)?;
        let sum = |what: &'static str, a: usize, b: usize| {
            a.checked_add(b).ok_or(BsrError::SizeOverflow {
                what,
                value: a as u128 + b as u128,
            })
        };
        let m = sum("2 * m", first.m(), first.m())?;
        let nnzb = sum("nnzb + nnzb", first.nnz_blocks(), second.nnz_blocks())?;
        i32::try_from(nnzb).map_err(|_| BsrError::IndexOverflow {
            what: "nnzb of the interleaved matrix",
            value: nnzb as u128,
        })?;
        let block_len = first.block().len();
        let values_len = sum("values", first.values().len(), second.values().len())?;
        let rows = 2 * first.num_block_rows();
        let mut row_ptr = try_vec("row_ptr", rows + 1)?;
        let mut col_idx = try_vec("col_idx", nnzb)?;
        let mut values = try_vec("values", values_len)?;
        row_ptr.push(0i32);
        for (a, b) in first.block_rows().zip(second.block_rows()) {
            for row in [a, b] {
                col_idx.extend_from_slice(row.col_idx);
                values.extend_from_slice(row.values);
                // col_idx.len() <= nnzb, which fits i32 (checked above).
                row_ptr.push(col_idx.len() as i32);
            }
        }
        debug_assert_eq!(values.len(), nnzb * block_len);
        BsrMatrix::from_parts(m, first.k(), first.block(), row_ptr, col_idx, values)
    }

    /// The inverse of [`interleave_block_rows`](Self::interleave_block_rows): the even and
    /// the odd block-rows as two matrices. [`BsrError::Interleave`] when the block-rows are
    /// odd in number.
    pub fn deinterleave_block_rows(&self) -> Result<(Self, Self), BsrError> {
        let rows = self.num_block_rows();
        if rows % 2 != 0 {
            return Err(BsrError::Interleave {
                what: "block-rows (even, for pairs)",
                first: rows,
                second: rows + 1,
            });
        }
        let half = |parity: usize| -> Result<Self, BsrError> {
            let mut row_ptr = try_vec("row_ptr", rows / 2 + 1)?;
            let mut col_idx = Vec::new();
            let mut values = Vec::new();
            row_ptr.push(0i32);
            for row in self.block_rows().filter(|r| r.index % 2 == parity) {
                col_idx
                    .try_reserve(row.col_idx.len())
                    .map_err(|_| BsrError::Allocation {
                        what: "col_idx",
                        elements: row.col_idx.len(),
                    })?;
                values
                    .try_reserve(row.values.len())
                    .map_err(|_| BsrError::Allocation {
                        what: "values",
                        elements: row.values.len(),
                    })?;
                col_idx.extend_from_slice(row.col_idx);
                values.extend_from_slice(row.values);
                // At most this matrix's nnzb, which fits i32.
                row_ptr.push(col_idx.len() as i32);
            }
            BsrMatrix::from_parts(
                self.m() / 2,
                self.k(),
                self.block(),
                row_ptr,
                col_idx,
                values,
            )
        };
        Ok((half(0)?, half(1)?))
    }
}
