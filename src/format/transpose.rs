//! The transpose index of a BSR matrix: its blocks listed by block-column, without moving a
//! value. Block-column `c` of `A` is block-row `c` of `Aᵀ`, so a kernel for `Aᵀ·B` walks
//! this index as it walks `row_ptr`/`col_idx` for `A·B`, reading each block of `A`'s
//! `values` in place and transposed.
//!
//! - `col_ptr[c] .. col_ptr[c + 1]` indexes the blocks of block-column `c`
//!   (`k / bk + 1` entries, from 0 up to `nnzb`);
//! - `row_idx[j]` is the block-row of the `j`-th listed block, ascending within a
//!   block-column (so `Aᵀ`'s block-rows are sorted like `A`'s);
//! - `block_id[j]` is its position in `A` (in `col_idx`, and `values[block_id[j] * bm * bk ..]`):
//!   a permutation of `0..nnzb`.
//!
//! Built in `O(nnzb + k / bk)` by a counting sort; every size is `<= i32::MAX` because the
//! matrix is validated.

use crate::error::BsrError;
use crate::format::bsr::{values_len_of, BsrMatrix};
use crate::format::{try_vec, validate_parts, BlockShape};

/// `A`'s blocks by block-column (see the module docs). Built by
/// [`BsrMatrix::transpose_index`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransposeIndex {
    col_ptr: Vec<i32>,
    row_idx: Vec<i32>,
    block_id: Vec<i32>,
}

impl TransposeIndex {
    /// The transpose index of the pattern `row_ptr` / `col_idx` of an `m x k` matrix of
    /// `block`s, after validating it like [`BsrMatrix::from_parts`] (one [`BsrError`] per
    /// defect): for callers that hold only the index arrays (the C++ bridge's
    /// `sparsek::rust::transpose_index`, weights already on a device).
    ///
    /// ```
    /// use sparsek::{BlockShape, TransposeIndex};
    ///
    /// // 2 x 2 blocks: (0, 1) and (1, 0), (1, 1).
    /// let t = TransposeIndex::from_pattern(4, 4, BlockShape::new(2, 2), &[0, 1, 3], &[1, 0, 1])?;
    /// assert_eq!((t.col_ptr(), t.row_idx(), t.block_id()), (&[0, 1, 3][..], &[1, 0, 1][..], &[1, 0, 2][..]));
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn from_pattern(
        m: usize,
        k: usize,
        block: BlockShape,
        row_ptr: &[i32],
        col_idx: &[i32],
    ) -> Result<Self, BsrError> {
        let values_len = values_len_of(col_idx.len(), block)?;
        validate_parts(m, k, block, row_ptr, col_idx, values_len)?;
        // Validated: block.cols >= 1 divides k.
        transpose_pattern(k / block.cols, row_ptr, col_idx)
    }

    /// Block-column offsets into `row_idx` and `block_id`: `k / bk + 1` entries, from 0 up
    /// to `nnzb`.
    pub fn col_ptr(&self) -> &[i32] {
        &self.col_ptr
    }
    /// The block-row of each listed block, ascending within a block-column.
    pub fn row_idx(&self) -> &[i32] {
        &self.row_idx
    }
    /// The position in `A` of each listed block: a permutation of `0..nnzb`.
    pub fn block_id(&self) -> &[i32] {
        &self.block_id
    }
}

impl<T> BsrMatrix<T> {
    /// The transpose index of this matrix's pattern (module `format::transpose`): what a
    /// kernel for `Aᵀ·B` walks, with no copy of the values. `BsrError::Allocation` when its
    /// three arrays (`k / bk + 1 + 2 * nnzb` integers) cannot be allocated.
    pub fn transpose_index(&self) -> Result<TransposeIndex, BsrError> {
        transpose_pattern(self.num_block_cols(), self.row_ptr(), self.col_idx())
    }
}

/// The transpose index of a validated pattern (`row_ptr`, `col_idx` over `cols`
/// block-columns): a counting sort by block-column, block-rows in order within each.
pub(crate) fn transpose_pattern(
    cols: usize,
    row_ptr: &[i32],
    col_idx: &[i32],
) -> Result<TransposeIndex, BsrError> {
    let nnzb = col_idx.len();
    // cols + 1 <= i32::MAX + 1 fits usize (validated: cols <= i32::MAX).
    let mut col_ptr = try_vec("transpose index col_ptr", cols + 1)?;
    col_ptr.resize(cols + 1, 0i32);
    for &c in col_idx {
        // Validated: 0 <= c < cols; each count <= nnzb <= i32::MAX.
        col_ptr[c as usize + 1] += 1;
    }
    for c in 0..cols {
        col_ptr[c + 1] += col_ptr[c];
    }
    let mut row_idx = try_vec("transpose index row_idx", nnzb)?;
    row_idx.resize(nnzb, 0i32);
    let mut block_id = try_vec("transpose index block_id", nnzb)?;
    block_id.resize(nnzb, 0i32);
    // Next free slot of each block-column; block-rows in order, so rows come out ascending.
    let mut next = try_vec("transpose index cursor", cols)?;
    next.extend_from_slice(&col_ptr[..cols]);
    for (r, bounds) in row_ptr.windows(2).enumerate() {
        // Validated: 0 <= bounds[0] <= bounds[1] <= nnzb.
        for j in bounds[0]..bounds[1] {
            let slot = &mut next[col_idx[j as usize] as usize];
            // slot < col_ptr[c + 1] <= nnzb; r < block-rows <= i32::MAX.
            row_idx[*slot as usize] = r as i32;
            block_id[*slot as usize] = j;
            *slot += 1;
        }
    }
    Ok(TransposeIndex {
        col_ptr,
        row_idx,
        block_id,
    })
}
