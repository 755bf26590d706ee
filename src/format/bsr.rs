//! The BSR (block sparse row) format: the one place that defines and validates it.
//!
//! A `m x k` matrix cut into `bm x bk` blocks. Only nonzero blocks are stored:
//! - `row_ptr[r] .. row_ptr[r + 1]` indexes the blocks of block-row `r`
//!   (`m / bm + 1` entries, starting at 0, non-decreasing, ending at `nnzb`);
//! - `col_idx[i]` is block `i`'s block-column, sorted and unique within a block-row,
//!   `< k / bk`;
//! - `values[i * bm * bk ..][.. bm * bk]` is block `i`, row-major.
//!
//! These are the arrays scipy's `bsr_matrix` keeps (`indptr`, `indices`, `data`). Indices
//! are `i32`, as the GPU kernels read them.

use crate::element::Element;
use crate::error::BsrError;
use crate::format::mask::BlockMask;

/// The shape of one block: `rows x cols` (`bm x bk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockShape {
    pub rows: usize,
    pub cols: usize,
}

impl BlockShape {
    pub const fn new(rows: usize, cols: usize) -> Self {
        Self { rows, cols }
    }
    /// Elements in one block.
    pub const fn len(&self) -> usize {
        self.rows * self.cols
    }
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Display for BlockShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// A validated block-sparse matrix on the host. Every constructor checks the invariants in
/// the module docs, so a `BsrMatrix` that exists is well formed.
#[derive(Debug, Clone, PartialEq)]
pub struct BsrMatrix<T> {
    m: usize,
    k: usize,
    block: BlockShape,
    row_ptr: Vec<i32>,
    col_idx: Vec<i32>,
    values: Vec<T>,
}

/// One block-row: its index, its blocks' columns and their values (blocks back to back).
#[derive(Debug, Clone, Copy)]
pub struct BlockRow<'a, T> {
    pub index: usize,
    pub col_idx: &'a [i32],
    pub values: &'a [T],
}

/// Floating-point operations of a BSR x dense product with `n` columns, counting stored
/// blocks only: `2 * n * nnzb * bm * bk`.
pub(crate) fn spmm_flops(n: usize, nnzb: usize, block: BlockShape) -> f64 {
    2.0 * n as f64 * nnzb as f64 * block.len() as f64
}

/// Checks the grid (`m`, `k`, block) and returns (block rows, block cols).
fn check_grid(m: usize, k: usize, block: BlockShape) -> Result<(usize, usize), BsrError> {
    if block.rows == 0 || block.cols == 0 {
        return Err(BsrError::ZeroSizedBlock {
            bm: block.rows,
            bk: block.cols,
        });
    }
    if m % block.rows != 0 {
        return Err(BsrError::NotBlockMultiple {
            dim: "m",
            len: m,
            block: block.rows,
        });
    }
    if k % block.cols != 0 {
        return Err(BsrError::NotBlockMultiple {
            dim: "k",
            len: k,
            block: block.cols,
        });
    }
    let (br, bc) = (m / block.rows, k / block.cols);
    let max = i32::MAX as usize;
    // m and k themselves are used as i64 on the device; the block counts as i32.
    if br > max {
        return Err(BsrError::IndexOverflow {
            what: "block rows",
            value: br as u128,
        });
    }
    if bc > max {
        return Err(BsrError::IndexOverflow {
            what: "block columns",
            value: bc as u128,
        });
    }
    Ok((br, bc))
}

/// `nnzb * bm * bk`, refusing what overflows.
fn values_len_of(nnzb: usize, block: BlockShape) -> Result<usize, BsrError> {
    if nnzb > i32::MAX as usize {
        return Err(BsrError::IndexOverflow {
            what: "nnzb",
            value: nnzb as u128,
        });
    }
    nnzb.checked_mul(block.len())
        .ok_or(BsrError::IndexOverflow {
            what: "nnzb * bm * bk",
            value: nnzb as u128 * block.len() as u128,
        })
}

/// Validates BSR index arrays for an `m x k` matrix of `block`s holding `values_len`
/// elements of values, without needing the values themselves: every invariant of the
/// module docs, one `BsrError` variant per defect.
pub fn validate_parts(
    m: usize,
    k: usize,
    block: BlockShape,
    row_ptr: &[i32],
    col_idx: &[i32],
    values_len: usize,
) -> Result<(), BsrError> {
    let (block_rows, block_cols) = check_grid(m, k, block)?;
    if row_ptr.len() != block_rows + 1 {
        return Err(BsrError::RowPtrLength {
            expected: block_rows + 1,
            got: row_ptr.len(),
        });
    }
    if row_ptr[0] != 0 {
        return Err(BsrError::RaggedRowPtr {
            index: 0,
            detail: format!("starts at {}, not 0", row_ptr[0]),
        });
    }
    for (i, w) in row_ptr.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(BsrError::RaggedRowPtr {
                index: i + 1,
                detail: format!("decreases from {} to {}", w[0], w[1]),
            });
        }
    }
    let last = row_ptr[block_rows] as usize;
    if last != col_idx.len() {
        return Err(BsrError::RaggedRowPtr {
            index: block_rows,
            detail: format!("ends at {last}, but col_idx has {} entries", col_idx.len()),
        });
    }
    let expected = values_len_of(col_idx.len(), block)?;
    if values_len != expected {
        return Err(BsrError::ValuesLength {
            expected,
            got: values_len,
        });
    }
    for row in 0..block_rows {
        let cols = &col_idx[row_ptr[row] as usize..row_ptr[row + 1] as usize];
        for (j, &col) in cols.iter().enumerate() {
            if col < 0 || col as usize >= block_cols {
                return Err(BsrError::ColumnOutOfRange {
                    row,
                    col,
                    block_cols,
                });
            }
            if j > 0 {
                let prev = cols[j - 1];
                if col == prev {
                    return Err(BsrError::DuplicateColumn { row, col });
                }
                if col < prev {
                    return Err(BsrError::UnsortedColumns {
                        row,
                        prev,
                        next: col,
                    });
                }
            }
        }
    }
    Ok(())
}

impl<T: Element> BsrMatrix<T> {
    /// Builds from the three BSR arrays (scipy's `indptr`, `indices`, `data`), validating
    /// every invariant (see [`validate_parts`]).
    pub fn from_parts(
        m: usize,
        k: usize,
        block: BlockShape,
        row_ptr: Vec<i32>,
        col_idx: Vec<i32>,
        values: Vec<T>,
    ) -> Result<Self, BsrError> {
        validate_parts(m, k, block, &row_ptr, &col_idx, values.len())?;
        Ok(Self {
            m,
            k,
            block,
            row_ptr,
            col_idx,
            values,
        })
    }

    /// Builds from a row-major dense `m x k` matrix, keeping every block with a nonzero
    /// (NaN counts as nonzero).
    pub fn from_dense(
        dense: &[T],
        m: usize,
        k: usize,
        block: BlockShape,
    ) -> Result<Self, BsrError> {
        let (block_rows, block_cols) = check_grid(m, k, block)?;
        let expected = m.checked_mul(k).ok_or(BsrError::IndexOverflow {
            what: "m * k",
            value: m as u128 * k as u128,
        })?;
        if dense.len() != expected {
            return Err(BsrError::InputLength {
                expected,
                got: dense.len(),
            });
        }
        let mask = BlockMask::from_fn(block_rows, block_cols, |br, bc| {
            (0..block.rows).any(|r| {
                let start = (br * block.rows + r) * k + bc * block.cols;
                dense[start..start + block.cols]
                    .iter()
                    .any(|v| !v.is_zero())
            })
        });
        Self::from_block_mask(&mask, block, |row, col| dense[row * k + col])
    }

    /// Builds from a block mask: block `(r, c)` is stored where the mask is set, and its
    /// element at matrix position `(row, col)` is `value(row, col)`.
    pub fn from_block_mask(
        mask: &BlockMask,
        block: BlockShape,
        mut value: impl FnMut(usize, usize) -> T,
    ) -> Result<Self, BsrError> {
        let m = mask.rows().checked_mul(block.rows);
        let k = mask.cols().checked_mul(block.cols);
        let (Some(m), Some(k)) = (m, k) else {
            return Err(BsrError::IndexOverflow {
                what: "mask rows/cols * block",
                value: mask.rows().max(mask.cols()) as u128 * block.len() as u128,
            });
        };
        let (block_rows, _) = check_grid(m, k, block)?;
        let nnzb = mask.count();
        let mut values = Vec::with_capacity(values_len_of(nnzb, block)?);
        let mut row_ptr = Vec::with_capacity(block_rows + 1);
        let mut col_idx = Vec::with_capacity(nnzb);
        row_ptr.push(0i32);
        for br in 0..block_rows {
            for bc in mask.row_cols(br) {
                col_idx.push(bc as i32);
                for r in 0..block.rows {
                    for c in 0..block.cols {
                        values.push(value(br * block.rows + r, bc * block.cols + c));
                    }
                }
            }
            row_ptr.push(col_idx.len() as i32);
        }
        Self::from_parts(m, k, block, row_ptr, col_idx, values)
    }

    /// The dense row-major `m x k` matrix (zeros outside stored blocks).
    pub fn to_dense(&self) -> Vec<T> {
        let mut dense = vec![T::from_f32(0.0); self.m * self.k];
        let (bm, bk) = (self.block.rows, self.block.cols);
        for row in self.block_rows() {
            for (j, &col) in row.col_idx.iter().enumerate() {
                let blk = &row.values[j * bm * bk..][..bm * bk];
                for r in 0..bm {
                    let start = (row.index * bm + r) * self.k + col as usize * bk;
                    dense[start..start + bk].copy_from_slice(&blk[r * bk..][..bk]);
                }
            }
        }
        dense
    }
}

impl<T> BsrMatrix<T> {
    pub fn m(&self) -> usize {
        self.m
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn block(&self) -> BlockShape {
        self.block
    }
    pub fn row_ptr(&self) -> &[i32] {
        &self.row_ptr
    }
    pub fn col_idx(&self) -> &[i32] {
        &self.col_idx
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Number of block-rows, `m / bm`.
    pub fn num_block_rows(&self) -> usize {
        self.row_ptr.len() - 1
    }
    /// Number of block-columns, `k / bk`.
    pub fn num_block_cols(&self) -> usize {
        self.k / self.block.cols
    }
    /// Number of stored blocks.
    pub fn nnz_blocks(&self) -> usize {
        self.col_idx.len()
    }
    /// Stored blocks over all blocks (0 for an empty grid).
    pub fn density(&self) -> f64 {
        let all = self.num_block_rows() * self.num_block_cols();
        if all == 0 {
            0.0
        } else {
            self.nnz_blocks() as f64 / all as f64
        }
    }
    /// Floating-point operations of `A * B` with `n` columns, counting stored blocks only:
    /// `2 * n * nnzb * bm * bk`.
    pub fn flops(&self, n: usize) -> f64 {
        spmm_flops(n, self.nnz_blocks(), self.block)
    }
    /// The block-rows in order.
    pub fn block_rows(&self) -> impl ExactSizeIterator<Item = BlockRow<'_, T>> + '_ {
        let blk = self.block.len();
        (0..self.num_block_rows()).map(move |index| {
            let (s, e) = (
                self.row_ptr[index] as usize,
                self.row_ptr[index + 1] as usize,
            );
            BlockRow {
                index,
                col_idx: &self.col_idx[s..e],
                values: &self.values[s * blk..e * blk],
            }
        })
    }
    /// The block pattern, without values.
    pub fn mask(&self) -> BlockMask {
        BlockMask::from_fn(self.num_block_rows(), self.num_block_cols(), |r, c| {
            let cols = &self.col_idx[self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize];
            cols.binary_search(&(c as i32)).is_ok()
        })
    }
    /// Takes the three arrays back.
    pub fn into_parts(self) -> (Vec<i32>, Vec<i32>, Vec<T>) {
        (self.row_ptr, self.col_idx, self.values)
    }
}
