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

use crate::check::rules::int;
use crate::element::Element;
use crate::error::BsrError;
use crate::format::bsr_rules;
use crate::format::mask::BlockMask;
use crate::format::{try_grow, try_vec};

/// The shape of one block: `rows x cols` (`bm x bk`).
///
/// Any shape can be built; a `BsrMatrix` accepts only sides in `1..=i32::MAX` whose
/// product fits `usize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockShape {
    /// Rows of a block (`bm`).
    pub rows: usize,
    /// Columns of a block (`bk`).
    pub cols: usize,
}

impl BlockShape {
    /// A `rows x cols` block shape; not validated here.
    pub const fn new(rows: usize, cols: usize) -> Self {
        Self { rows, cols }
    }
    /// Elements in one block, `rows * cols`, or `None` when that overflows `usize`.
    pub const fn checked_len(&self) -> Option<usize> {
        self.rows.checked_mul(self.cols)
    }
    /// Elements in one block, `rows * cols`, saturating at `usize::MAX` instead of
    /// overflowing (it never panics). Exact for the block of a `BsrMatrix`, which is
    /// validated; use [`checked_len`](Self::checked_len) on a shape from elsewhere.
    pub const fn len(&self) -> usize {
        self.rows.saturating_mul(self.cols)
    }
    /// Whether a side is 0.
    pub const fn is_empty(&self) -> bool {
        self.rows == 0 || self.cols == 0
    }
}

impl std::fmt::Display for BlockShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

/// A validated block-sparse matrix on the host. Every constructor checks the invariants in
/// the module docs, so a `BsrMatrix` that exists is well formed. In particular `bm`, `bk`,
/// the block-row and block-column counts and `nnzb` are all at most `i32::MAX`, so `m`,
/// `k` (`< 2^62`) and `nnzb * bm * bk` (`== values.len()`) fit `usize` and `i64`.
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
    /// The block-row's index, in `0..m / bm`.
    pub index: usize,
    /// Block-columns of its stored blocks, ascending.
    pub col_idx: &'a [i32],
    /// Its blocks' values, `col_idx.len() * bm * bk` elements, each block row-major.
    pub values: &'a [T],
}

/// Floating-point operations of a BSR x dense product with `n` columns, counting stored
/// blocks only: `2 * n * nnzb * bm * bk` (computed in `f64`: it cannot overflow).
pub(crate) fn spmm_flops(n: usize, nnzb: usize, block: BlockShape) -> f64 {
    2.0 * n as f64 * nnzb as f64 * block.rows as f64 * block.cols as f64
}

/// The grid's facts for its table's rules (`rules/bsr.toml`, generated into
/// [`bsr_rules`](super::bsr_rules)).
fn grid_facts(m: usize, k: usize, block: BlockShape, nnzb: usize) -> bsr_rules::Facts {
    bsr_rules::Facts {
        m: int(m),
        k: int(k),
        bm: int(block.rows),
        bk: int(block.cols),
        nnzb: int(nnzb),
    }
}

/// Checks a block shape: both sides in `1..=i32::MAX` (the kernels take them as `i32`:
/// the table's rules) and `bm * bk` fits `usize`. Returns `bm * bk`.
fn check_block(block: BlockShape) -> Result<usize, BsrError> {
    bsr_rules::block(&grid_facts(0, 0, block, 0))?;
    // Both sides are below 2^31: this only fails where usize is narrower than 62 bits.
    block.checked_len().ok_or(BsrError::SizeOverflow {
        what: "bm * bk",
        value: block.rows as u128 * block.cols as u128,
    })
}

/// Checks the grid (`m`, `k`, block: the table's rules) and returns (block rows, block cols).
/// With the block counts and the block sides at most `i32::MAX`, `m = br * bm` and `k = bc *
/// bk` are below 2^62: they fit the device's `i64`.
pub(crate) fn check_grid(
    m: usize,
    k: usize,
    block: BlockShape,
) -> Result<(usize, usize), BsrError> {
    check_block(block)?;
    bsr_rules::grid(&grid_facts(m, k, block, 0))?;
    Ok((m / block.rows, k / block.cols))
}

/// `nnzb * bm * bk`, refusing an `nnzb` beyond `i32::MAX` (the table's rule) and a product
/// beyond `usize`.
pub(crate) fn values_len_of(nnzb: usize, block: BlockShape) -> Result<usize, BsrError> {
    bsr_rules::stored(&grid_facts(0, 0, block, nnzb))?;
    let blk = check_block(block)?;
    nnzb.checked_mul(blk).ok_or(BsrError::SizeOverflow {
        what: "nnzb * bm * bk",
        value: nnzb as u128 * blk as u128,
    })
}

/// A count as an `i32` index, or `IndexOverflow`.
pub(crate) fn to_i32(what: &'static str, v: usize) -> Result<i32, BsrError> {
    i32::try_from(v).map_err(|_| BsrError::IndexOverflow {
        what,
        value: v as u128,
    })
}

/// Validates BSR index arrays for an `m x k` matrix of `block`s holding `values_len`
/// elements of values, without needing the values themselves: every invariant of the
/// module docs, one `BsrError` variant per defect. Never panics, whatever the input.
pub fn validate_parts(
    m: usize,
    k: usize,
    block: BlockShape,
    row_ptr: &[i32],
    col_idx: &[i32],
    values_len: usize,
) -> Result<(), BsrError> {
    let (block_rows, block_cols) = check_grid(m, k, block)?;
    // block_rows <= i32::MAX: + 1 cannot overflow.
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
    // From here on row_ptr starts at 0 and never decreases: every entry is >= 0 (so
    // `as usize` is exact) and <= its last, which is col_idx.len() once checked below.
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
    for (row, w) in row_ptr.windows(2).enumerate() {
        let cols = &col_idx[w[0] as usize..w[1] as usize];
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
    ///
    /// ```
    /// use sparsek::{BlockShape, BsrError, BsrMatrix};
    ///
    /// // 4 x 6 with 2 x 2 blocks: block-row 0 holds block-columns 0 and 2, block-row 1 none.
    /// let a = BsrMatrix::from_parts(4, 6, BlockShape::new(2, 2), vec![0, 2, 2], vec![0, 2], vec![1.0f32; 8])?;
    /// assert_eq!((a.nnz_blocks(), a.num_block_rows(), a.num_block_cols()), (2, 2, 3));
    ///
    /// // Each defect is its own error; nothing panics.
    /// let e = BsrMatrix::from_parts(4, 6, BlockShape::new(2, 2), vec![0, 2, 2], vec![2, 0], vec![1.0f32; 8]);
    /// assert_eq!(e, Err(BsrError::UnsortedColumns { row: 0, prev: 2, next: 0 }));
    /// # Ok::<(), BsrError>(())
    /// ```
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
    ///
    /// ```
    /// use sparsek::{BlockShape, BsrMatrix};
    ///
    /// #[rustfmt::skip]
    /// let dense = [
    ///     1.0, 2.0, 0.0, 0.0,
    ///     0.0, 3.0, 0.0, 0.0,
    ///     0.0, 0.0, 0.0, 0.0,
    ///     0.0, 0.0, 0.0, 4.0f32,
    /// ];
    /// let a = BsrMatrix::from_dense(&dense, 4, 4, BlockShape::new(2, 2))?;
    /// assert_eq!((a.row_ptr(), a.col_idx()), (&[0, 1, 2][..], &[0, 1][..]));
    /// assert_eq!(a.values(), &[1.0, 2.0, 0.0, 3.0, 0.0, 0.0, 0.0, 4.0]);
    /// assert_eq!(a.to_dense()?, dense);
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn from_dense(
        dense: &[T],
        m: usize,
        k: usize,
        block: BlockShape,
    ) -> Result<Self, BsrError> {
        let (block_rows, block_cols) = check_grid(m, k, block)?;
        let expected = m.checked_mul(k).ok_or(BsrError::SizeOverflow {
            what: "m * k",
            value: m as u128 * k as u128,
        })?;
        if dense.len() != expected {
            return Err(BsrError::InputLength {
                expected,
                got: dense.len(),
            });
        }
        let (bm, bk) = (block.rows, block.cols);
        // Every element index below is < m * k = dense.len() and bm * bk fits (both checked
        // above); the arrays grow no larger than block_rows + 1 <= i32::MAX + 1 and
        // dense.len().
        let mut row_ptr = try_vec("row_ptr", block_rows + 1)?;
        let (mut col_idx, mut values) = (Vec::new(), Vec::new());
        row_ptr.push(0i32);
        for br in 0..block_rows {
            for bc in 0..block_cols {
                let start = |r: usize| (br * bm + r) * k + bc * bk;
                let block_row = |r: usize| &dense[start(r)..][..bk];
                if !(0..bm).any(|r| block_row(r).iter().any(|v| !v.is_zero())) {
                    continue;
                }
                try_grow(&mut col_idx, "col_idx", 1)?;
                col_idx.push(to_i32("block column", bc)?);
                try_grow(&mut values, "values", bm * bk)?;
                for r in 0..bm {
                    values.extend_from_slice(block_row(r));
                }
            }
            row_ptr.push(to_i32("nnzb", col_idx.len())?);
        }
        Self::from_parts(m, k, block, row_ptr, col_idx, values)
    }

    /// Builds from a block mask: block `(r, c)` is stored where the mask is set, and its
    /// element at matrix position `(row, col)` is `value(row, col)`.
    ///
    /// ```
    /// use sparsek::{f16, BlockMask, BlockShape, BsrMatrix};
    ///
    /// // A 256 x 256 block-diagonal matrix of 64 x 64 blocks, W[i][j] = (i - j) / 64.
    /// let mask = BlockMask::from_fn(4, 4, |r, c| r == c)?;
    /// let w = BsrMatrix::from_block_mask(&mask, BlockShape::new(64, 64), |i, j| {
    ///     f16::from_f32((i as f32 - j as f32) / 64.0)
    /// })?;
    /// assert_eq!((w.m(), w.k(), w.nnz_blocks()), (256, 256, 4));
    /// assert_eq!(w.density(), 0.25);
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn from_block_mask(
        mask: &BlockMask,
        block: BlockShape,
        mut value: impl FnMut(usize, usize) -> T,
    ) -> Result<Self, BsrError> {
        check_block(block)?;
        let m = mask
            .rows()
            .checked_mul(block.rows)
            .ok_or(BsrError::SizeOverflow {
                what: "mask rows * bm",
                value: mask.rows() as u128 * block.rows as u128,
            })?;
        let k = mask
            .cols()
            .checked_mul(block.cols)
            .ok_or(BsrError::SizeOverflow {
                what: "mask cols * bk",
                value: mask.cols() as u128 * block.cols as u128,
            })?;
        let (block_rows, _) = check_grid(m, k, block)?;
        let nnzb = mask.count();
        let mut values = try_vec("values", values_len_of(nnzb, block)?)?;
        let mut row_ptr = try_vec("row_ptr", block_rows + 1)?;
        let mut col_idx = try_vec("col_idx", nnzb)?;
        row_ptr.push(0i32);
        for br in 0..block_rows {
            for bc in mask.row_cols(br) {
                col_idx.push(to_i32("block column", bc)?);
                // br * bm + r < m and bc * bk + c < k, both computed above without overflow.
                for r in 0..block.rows {
                    for c in 0..block.cols {
                        values.push(value(br * block.rows + r, bc * block.cols + c));
                    }
                }
            }
            row_ptr.push(to_i32("nnzb", col_idx.len())?);
        }
        Self::from_parts(m, k, block, row_ptr, col_idx, values)
    }

    /// The dense row-major `m x k` matrix (zeros outside stored blocks), or
    /// `BsrError::SizeOverflow` when `m * k` overflows and `BsrError::Allocation` when it
    /// cannot be allocated.
    pub fn to_dense(&self) -> Result<Vec<T>, BsrError> {
        let len = self.m.checked_mul(self.k).ok_or(BsrError::SizeOverflow {
            what: "m * k",
            value: self.m as u128 * self.k as u128,
        })?;
        let mut dense = try_vec("dense matrix", len)?;
        dense.resize(len, T::from_f32(0.0));
        // Element indices are < m * k = len; block offsets < nnzb * bm * bk = values.len()
        // (validated), so none of the products below overflows.
        let (bm, bk) = (self.block.rows, self.block.cols);
        for row in self.block_rows() {
            for (j, &col) in row.col_idx.iter().enumerate() {
                let blk = &row.values[j * bm * bk..][..bm * bk];
                // col is in 0..k / bk (validated).
                let col = col as usize;
                for r in 0..bm {
                    let start = (row.index * bm + r) * self.k + col * bk;
                    dense[start..start + bk].copy_from_slice(&blk[r * bk..][..bk]);
                }
            }
        }
        Ok(dense)
    }
}

impl<T> BsrMatrix<T> {
    /// Rows of the matrix (a multiple of `bm`).
    pub fn m(&self) -> usize {
        self.m
    }
    /// Columns of the matrix (a multiple of `bk`).
    pub fn k(&self) -> usize {
        self.k
    }
    /// The block shape `bm x bk`.
    pub fn block(&self) -> BlockShape {
        self.block
    }
    /// Block-row offsets into `col_idx`: `m / bm + 1` entries, from 0 up to `nnzb`.
    pub fn row_ptr(&self) -> &[i32] {
        &self.row_ptr
    }
    /// Block-column of each stored block (`nnzb` entries), ascending within a block-row.
    pub fn col_idx(&self) -> &[i32] {
        &self.col_idx
    }
    /// Values of the stored blocks, `nnzb * bm * bk` elements, each block row-major.
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// The block values, mutable (`nnzb * bm * bk`, block by block, each row-major): what
    /// [`sddmm`](crate::sddmm) writes. The pattern cannot change through them.
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
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
        // In f64: the block count cannot overflow.
        let all = self.num_block_rows() as f64 * self.num_block_cols() as f64;
        if all == 0.0 {
            0.0
        } else {
            self.nnz_blocks() as f64 / all
        }
    }
    /// Floating-point operations of `A * B` with `n` columns, counting stored blocks only:
    /// `2 * n * nnzb * bm * bk`.
    pub fn flops(&self, n: usize) -> f64 {
        spmm_flops(n, self.nnz_blocks(), self.block)
    }
    /// The block-rows in order.
    pub fn block_rows(&self) -> impl ExactSizeIterator<Item = BlockRow<'_, T>> + '_ {
        // Exact: nnzb * bm * bk = values.len() was validated.
        let blk = self.block.len();
        (0..self.num_block_rows()).map(move |index| {
            // Validated: 0 <= row_ptr[index] <= row_ptr[index + 1] <= nnzb, so the casts
            // are exact and s * blk, e * blk <= values.len().
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
    /// The block pattern, without values: `BsrError::MaskTooLarge` when the block grid is
    /// beyond [`BlockMask::MAX_BLOCKS`] (a mask stores every block of the grid).
    pub fn mask(&self) -> Result<BlockMask, BsrError> {
        let (rows, cols) = (self.num_block_rows(), self.num_block_cols());
        let len = BlockMask::check_size(rows, cols)?;
        let mut bits = try_vec("mask bits", len)?;
        bits.resize(len, false);
        for row in self.block_rows() {
            for &c in row.col_idx {
                // Validated: 0 <= c < cols, so index * cols + c < rows * cols = len.
                bits[row.index * cols + c as usize] = true;
            }
        }
        BlockMask::new(rows, cols, bits)
    }
    /// Takes the three arrays back.
    pub fn into_parts(self) -> (Vec<i32>, Vec<i32>, Vec<T>) {
        (self.row_ptr, self.col_idx, self.values)
    }
    /// The same pattern with other values (`values` holds one per stored element, in the
    /// same order: `BsrError::ValuesLength` otherwise); the index arrays are copied
    /// (fallibly, `BsrError::Allocation`), not re-validated.
    pub(crate) fn with_values<U>(&self, values: Vec<U>) -> Result<BsrMatrix<U>, BsrError> {
        if values.len() != self.values.len() {
            return Err(BsrError::ValuesLength {
                expected: self.values.len(),
                got: values.len(),
            });
        }
        let mut row_ptr = try_vec("row_ptr", self.row_ptr.len())?;
        row_ptr.extend_from_slice(&self.row_ptr);
        let mut col_idx = try_vec("col_idx", self.col_idx.len())?;
        col_idx.extend_from_slice(&self.col_idx);
        Ok(BsrMatrix {
            m: self.m,
            k: self.k,
            block: self.block,
            row_ptr,
            col_idx,
            values,
        })
    }
}
