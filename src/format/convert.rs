//! CSR and COO to BSR, on the host.
//!
//! A block is stored when any entry falls in it (even an explicit zero); the rest of the
//! block is filled with zeros. Entries need not be sorted, and entries at the same
//! position (duplicates) are summed, in `f32`, in input order, and rounded to `T` once,
//! as scipy's `sum_duplicates` does. Indices may be any primitive integer type (`i32`,
//! `i64`, `u32`, `usize`, ...); a negative or out-of-range one is a
//! [`BsrError::EntryOutOfRange`].
//!
//! Nothing here panics on bad input: the grid is checked as for every `BsrMatrix`
//! (`m`, `k` multiples of the block, counts within `i32`), and every allocation sized from
//! the input is fallible ([`BsrError::Allocation`]). The values take `nnzb * bm * bk`
//! elements, which for scattered entries and large blocks can be far more than the input.

use crate::element::Element;
use crate::error::BsrError;
use crate::format::bsr::{check_grid, to_i32, values_len_of, BlockShape, BsrMatrix};
use crate::format::{try_grow, try_vec};

/// An index of the input as `usize` if it lies in `0..bound`, else the error naming it.
fn index<I: Copy + TryInto<i128>>(
    entry: usize,
    axis: &'static str,
    v: I,
    bound: usize,
) -> Result<usize, BsrError> {
    let wide: i128 = v.try_into().unwrap_or(i128::MAX);
    match usize::try_from(wide) {
        Ok(u) if u < bound => Ok(u),
        _ => Err(BsrError::EntryOutOfRange {
            entry,
            axis,
            index: wide,
            bound,
        }),
    }
}

/// One entry of a block-row, ready to be placed: its block-column, its position in the
/// input (the tie-breaker that keeps duplicates in input order), and its offset inside
/// the block (`r * bk + c`).
#[derive(Clone, Copy)]
struct Placed {
    block_col: usize,
    entry: usize,
    offset: usize,
}

/// Builds the BSR arrays block-row by block-row. `fill(br, scratch)` appends the entries
/// of block-row `br` to `scratch` (already validated); `value(entry)` is an entry's value.
fn assemble<T: Element>(
    m: usize,
    k: usize,
    block: BlockShape,
    block_rows: usize,
    mut fill: impl FnMut(usize, &mut Vec<Placed>) -> Result<(), BsrError>,
    value: impl Fn(usize) -> T,
) -> Result<BsrMatrix<T>, BsrError> {
    // check_grid validated the block: bm * bk fits usize.
    let blk = block.len();
    let mut row_ptr = try_vec("row_ptr", block_rows + 1)?;
    row_ptr.push(0i32);
    let (mut col_idx, mut values) = (Vec::new(), Vec::<T>::new());
    let mut scratch: Vec<Placed> = Vec::new();
    let mut acc: Vec<f32> = Vec::new();
    for br in 0..block_rows {
        scratch.clear();
        fill(br, &mut scratch)?;
        scratch.sort_unstable_by_key(|p| (p.block_col, p.entry));
        let mut i = 0;
        while i < scratch.len() {
            let bc = scratch[i].block_col;
            if acc.is_empty() {
                acc = try_vec("block accumulator", blk)?;
                acc.resize(blk, 0.0);
            } else {
                acc.fill(0.0);
            }
            while i < scratch.len() && scratch[i].block_col == bc {
                acc[scratch[i].offset] += value(scratch[i].entry).to_f32();
                i += 1;
            }
            try_grow(&mut col_idx, "col_idx", 1)?;
            col_idx.push(to_i32("block column", bc)?);
            // Refuses an nnzb beyond i32 or a values length beyond usize before growing.
            values_len_of(col_idx.len(), block)?;
            try_grow(&mut values, "values", blk)?;
            values.extend(acc.iter().map(|&v| T::from_f32(v)));
        }
        row_ptr.push(to_i32("nnzb", col_idx.len())?);
    }
    BsrMatrix::from_parts(m, k, block, row_ptr, col_idx, values)
}

impl<T: Element> BsrMatrix<T> {
    /// Builds from a CSR `m x k` matrix (scipy's `csr_matrix` arrays `indptr`, `indices`,
    /// `data`): `row_ptr` has `m + 1` entries from 0 up to `col_idx.len()`, non-decreasing;
    /// `col_idx[i]` and `values[i]` are entry `i`'s column and value.
    ///
    /// Stores every `bm x bk` block that holds an entry, zero-filled elsewhere. Columns need
    /// not be sorted within a row, and duplicates (the same row and column twice) are
    /// summed, in `f32`, in input order (see the [module docs](crate::format::convert)).
    /// Errors: the grid's ([`BsrError::NotBlockMultiple`], ...),
    /// [`BsrError::LengthMismatch`], [`BsrError::CsrRowPtr`],
    /// [`BsrError::EntryOutOfRange`], [`BsrError::Allocation`].
    ///
    /// ```
    /// use sparsek::{BlockShape, BsrMatrix};
    ///
    /// // 4 x 4:  [1 . . 2]
    /// //         [. . . .]
    /// //         [. . . .]
    /// //         [. 3 . .]
    /// let a = BsrMatrix::<f32>::from_csr(
    ///     4, 4, BlockShape::new(2, 2),
    ///     &[0, 2, 2, 2, 3],      // row_ptr
    ///     &[0, 3, 1],            // col_idx
    ///     &[1.0, 2.0, 3.0],      // values
    /// )?;
    /// assert_eq!(a.nnz_blocks(), 3);   // blocks (0,0), (0,1) and (1,0)
    /// assert_eq!(a.to_dense()?[3], 2.0);
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn from_csr<I: Copy + TryInto<i128>>(
        m: usize,
        k: usize,
        block: BlockShape,
        row_ptr: &[I],
        col_idx: &[I],
        values: &[T],
    ) -> Result<Self, BsrError> {
        let (block_rows, _) = check_grid(m, k, block)?;
        // block_rows <= i32::MAX and bm >= 1, so m = block_rows * bm; m + 1 may still
        // overflow on a 32-bit target: check it.
        let rows = m.checked_add(1).ok_or(BsrError::SizeOverflow {
            what: "m + 1",
            value: m as u128 + 1,
        })?;
        if row_ptr.len() != rows {
            return Err(BsrError::LengthMismatch {
                what: "CSR row_ptr (m + 1)",
                expected: rows,
                got: row_ptr.len(),
            });
        }
        let nnz = col_idx.len();
        if values.len() != nnz {
            return Err(BsrError::LengthMismatch {
                what: "CSR values (= col_idx)",
                expected: nnz,
                got: values.len(),
            });
        }
        // row_ptr: 0 first, non-decreasing, nnz last; every entry then lies in 0..=nnz.
        // Each index is converted once, here: the arrays below are the only ones read
        // (a conversion need not give the same value twice).
        let mut ptr = try_vec::<usize>("CSR row_ptr", rows)?;
        let mut prev = 0usize;
        for (i, &p) in row_ptr.iter().enumerate() {
            let wide: i128 = p.try_into().unwrap_or(i128::MAX);
            let ragged = |detail: String| BsrError::CsrRowPtr { index: i, detail };
            let v = usize::try_from(wide)
                .ok()
                .filter(|&v| v <= nnz)
                .ok_or_else(|| ragged(format!("{wide} is outside 0..={nnz}")))?;
            if i == 0 && v != 0 {
                return Err(ragged(format!("starts at {v}, not 0")));
            }
            if v < prev {
                return Err(ragged(format!("decreases from {prev} to {v}")));
            }
            prev = v;
            ptr.push(v);
        }
        if prev != nnz {
            return Err(BsrError::CsrRowPtr {
                index: m,
                detail: format!("ends at {prev}, but col_idx has {nnz} entries"),
            });
        }
        // Columns in range, in input order, so the first bad entry is the one reported.
        let mut cols = try_vec::<usize>("CSR col_idx", nnz)?;
        for (e, &c) in col_idx.iter().enumerate() {
            cols.push(index(e, "column", c, k)?);
        }
        let (bm, bk) = (block.rows, block.cols);
        assemble(
            m,
            k,
            block,
            block_rows,
            |br, scratch| {
                // br * bm + r < m, and the entries of those rows are ptr[br * bm] ..
                // ptr[(br + 1) * bm] (non-decreasing, checked above).
                let count = ptr[(br + 1) * bm] - ptr[br * bm];
                try_grow(scratch, "block-row entries", count)?;
                for r in 0..bm {
                    let (first, end) = (ptr[br * bm + r], ptr[br * bm + r + 1]);
                    for (e, &c) in cols[first..end].iter().enumerate() {
                        scratch.push(Placed {
                            block_col: c / bk,
                            entry: first + e,
                            offset: r * bk + c % bk,
                        });
                    }
                }
                Ok(())
            },
            |e| values[e],
        )
    }

    /// Builds from COO triplets of an `m x k` matrix (scipy's `coo_matrix` arrays `row`,
    /// `col`, `data`): entry `i` is `values[i]` at `(rows[i], cols[i])`, in any order.
    ///
    /// Stores every `bm x bk` block that holds an entry, zero-filled elsewhere.
    /// Duplicates (the same row and column twice) are summed, in `f32`, in input order
    /// (see the [module docs](crate::format::convert)). Errors: the grid's
    /// ([`BsrError::NotBlockMultiple`], ...), [`BsrError::LengthMismatch`],
    /// [`BsrError::EntryOutOfRange`], [`BsrError::Allocation`].
    ///
    /// ```
    /// use sparsek::{f16, BlockShape, BsrMatrix};
    ///
    /// let one = f16::from_f32(1.0);
    /// // (0, 1) given twice: summed to 2.
    /// let a = BsrMatrix::from_coo(
    ///     4, 4, BlockShape::new(2, 2),
    ///     &[3, 0, 0],      // rows
    ///     &[3, 1, 1],      // cols
    ///     &[one, one, one],
    /// )?;
    /// assert_eq!(a.col_idx(), &[0, 1]);   // block (0,0) in block-row 0, (1,1) in block-row 1
    /// assert_eq!(a.to_dense()?[1].to_f32(), 2.0);
    /// # Ok::<(), sparsek::BsrError>(())
    /// ```
    pub fn from_coo<I: Copy + TryInto<i128>>(
        m: usize,
        k: usize,
        block: BlockShape,
        rows: &[I],
        cols: &[I],
        values: &[T],
    ) -> Result<Self, BsrError> {
        let (block_rows, _) = check_grid(m, k, block)?;
        let nnz = rows.len();
        if cols.len() != nnz {
            return Err(BsrError::LengthMismatch {
                what: "COO cols (= rows)",
                expected: nnz,
                got: cols.len(),
            });
        }
        if values.len() != nnz {
            return Err(BsrError::LengthMismatch {
                what: "COO values (= rows)",
                expected: nnz,
                got: values.len(),
            });
        }
        // Each index converted once, here; only these arrays are read below (a conversion
        // need not give the same value twice).
        let mut at = try_vec::<(usize, usize)>("COO entries", nnz)?;
        for (e, (&r, &c)) in rows.iter().zip(cols).enumerate() {
            at.push((index(e, "row", r, m)?, index(e, "column", c, k)?));
        }
        // Group the entries by block-row (a counting sort): start[br] .. start[br + 1] of
        // `order` are block-row br's entries, in input order.
        let mut start = try_vec::<usize>("block-row counts", block_rows + 1)?;
        start.resize(block_rows + 1, 0);
        for &(r, _) in &at {
            start[r / block.rows + 1] += 1;
        }
        for br in 0..block_rows {
            start[br + 1] += start[br];
        }
        let mut order = try_vec::<usize>("entry order", nnz)?;
        order.resize(nnz, 0);
        let mut next = try_vec::<usize>("block-row cursors", block_rows)?;
        next.extend_from_slice(&start[..block_rows]);
        for (e, &(r, _)) in at.iter().enumerate() {
            let br = r / block.rows;
            order[next[br]] = e;
            next[br] += 1;
        }
        let (bm, bk) = (block.rows, block.cols);
        assemble(
            m,
            k,
            block,
            block_rows,
            |br, scratch| {
                let entries = &order[start[br]..start[br + 1]];
                try_grow(scratch, "block-row entries", entries.len())?;
                for &e in entries {
                    let (r, c) = at[e];
                    scratch.push(Placed {
                        block_col: c / bk,
                        entry: e,
                        offset: (r % bm) * bk + c % bk,
                    });
                }
                Ok(())
            },
            |e| values[e],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    const B2: BlockShape = BlockShape::new(2, 2);

    /// A dense row-major matrix as CSR (row by row, columns ascending).
    fn csr_of(dense: &[f32], m: usize, k: usize) -> (Vec<i64>, Vec<i64>, Vec<f32>) {
        let (mut rp, mut ci, mut v) = (vec![0i64], vec![], vec![]);
        for i in 0..m {
            for j in 0..k {
                if dense[i * k + j] != 0.0 {
                    ci.push(j as i64);
                    v.push(dense[i * k + j]);
                }
            }
            rp.push(ci.len() as i64);
        }
        (rp, ci, v)
    }

    fn sample(m: usize, k: usize) -> Vec<f32> {
        // Sparse, with an empty row and an empty block-row, a few scattered entries.
        (0..m * k)
            .map(|i| {
                let (r, c) = (i / k, i % k);
                if r == 1 || (2..4).contains(&r) || (r * 7 + c * 3) % 5 != 0 {
                    0.0
                } else {
                    (i % 9) as f32 - 4.0
                }
            })
            .collect()
    }

    #[test]
    fn csr_round_trip_matches_from_dense() {
        for (m, k, block) in [
            (8, 12, B2),
            (8, 12, BlockShape::new(4, 3)),
            (6, 6, BlockShape::new(1, 1)),
            (6, 6, BlockShape::new(6, 6)),
        ] {
            let dense = sample(m, k);
            let (rp, ci, v) = csr_of(&dense, m, k);
            let a = BsrMatrix::from_csr(m, k, block, &rp, &ci, &v).unwrap();
            assert_eq!(a.to_dense().unwrap(), dense);
            // Same blocks as from_dense: no entry is an explicit zero here.
            assert_eq!(a, BsrMatrix::from_dense(&dense, m, k, block).unwrap());
        }
    }

    #[test]
    fn coo_round_trip_shuffled() {
        let (m, k) = (8, 12);
        let dense = sample(m, k);
        let (mut rows, mut cols, mut vals) = (vec![], vec![], vec![]);
        for i in (0..m * k).rev() {
            if dense[i] != 0.0 {
                rows.push((i / k) as u32);
                cols.push((i % k) as u32);
                vals.push(f16::from_f32(dense[i]));
            }
        }
        let a = BsrMatrix::from_coo(m, k, B2, &rows, &cols, &vals).unwrap();
        let back: Vec<f32> = a.to_dense().unwrap().iter().map(|v| v.to_f32()).collect();
        assert_eq!(back, dense);
        let (rp, ci, _) = csr_of(&dense, m, k);
        let v16: Vec<f16> = csr_of(&dense, m, k)
            .2
            .into_iter()
            .map(f16::from_f32)
            .collect();
        assert_eq!(a, BsrMatrix::from_csr(m, k, B2, &rp, &ci, &v16).unwrap());
    }

    #[test]
    fn empty_inputs_and_rows() {
        let a = BsrMatrix::<f32>::from_csr(4, 4, B2, &[0usize; 5], &[], &[]).unwrap();
        assert_eq!((a.nnz_blocks(), a.row_ptr()), (0, &[0, 0, 0][..]));
        let e: [i32; 0] = [];
        let a = BsrMatrix::<f32>::from_coo(4, 4, B2, &e, &e, &[]).unwrap();
        assert_eq!(a.nnz_blocks(), 0);
        let a = BsrMatrix::<f32>::from_coo(0, 0, B2, &e, &e, &[]).unwrap();
        assert_eq!((a.m(), a.k(), a.row_ptr()), (0, 0, &[0][..]));
        // Only the last row holds anything.
        let a = BsrMatrix::from_csr(4, 4, B2, &[0, 0, 0, 0, 1], &[2], &[5.0f32]).unwrap();
        assert_eq!((a.row_ptr(), a.col_idx()), (&[0, 0, 1][..], &[1][..]));
        assert_eq!(a.values(), &[0.0, 0.0, 5.0, 0.0]);
    }

    #[test]
    fn explicit_zero_keeps_its_block() {
        let a = BsrMatrix::from_coo(4, 4, B2, &[2], &[0], &[0.0f32]).unwrap();
        assert_eq!((a.row_ptr(), a.col_idx()), (&[0, 0, 1][..], &[0][..]));
        assert!(a.values().iter().all(|v| *v == 0.0));
    }

    #[test]
    fn duplicates_are_summed() {
        // CSR with unsorted columns and a duplicate in row 0.
        let a = BsrMatrix::from_csr(2, 4, B2, &[0, 3, 4], &[3, 0, 3], &[1.0f32, 2.0, 0.5, 7.0])
            .unwrap_err();
        assert!(matches!(a, BsrError::LengthMismatch { .. }), "{a}");
        let a = BsrMatrix::from_csr(
            2,
            4,
            B2,
            &[0, 3, 4],
            &[3, 0, 3, 1],
            &[1.0f32, 2.0, 0.5, 7.0],
        )
        .unwrap();
        assert_eq!(
            a.to_dense().unwrap(),
            vec![2.0, 0.0, 0.0, 1.5, 0.0, 7.0, 0.0, 0.0]
        );
        // COO: three copies of one position, summed in f32 and rounded once.
        let x = f16::from_f32(1.0 / 3.0);
        let a = BsrMatrix::from_coo(2, 2, B2, &[1, 1, 1], &[1, 1, 1], &[x, x, x]).unwrap();
        let want = f16::from_f32(3.0 * x.to_f32());
        assert_eq!(a.values()[3], want);
    }

    #[test]
    fn bad_input_is_an_error() {
        let e = BsrMatrix::from_csr(4, 4, B2, &[0, 1, 1, 1], &[0], &[1.0f32]).unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::LengthMismatch {
                    expected: 5,
                    got: 4,
                    ..
                }
            ),
            "{e}"
        );
        let e = BsrMatrix::from_csr(4, 4, B2, &[1, 1, 1, 1, 1], &[0], &[1.0f32]).unwrap_err();
        assert!(matches!(e, BsrError::CsrRowPtr { index: 0, .. }), "{e}");
        let e = BsrMatrix::from_csr(4, 4, B2, &[0, 1, 0, 1, 1], &[0], &[1.0f32]).unwrap_err();
        assert!(matches!(e, BsrError::CsrRowPtr { index: 2, .. }), "{e}");
        let e =
            BsrMatrix::from_csr(4, 4, B2, &[0, 1, 1, 1, 1], &[0, 1], &[1.0f32, 1.0]).unwrap_err();
        assert!(matches!(e, BsrError::CsrRowPtr { index: 4, .. }), "{e}");
        let e = BsrMatrix::from_csr(4, 4, B2, &[0, -1, 1, 1, 1], &[0], &[1.0f32]).unwrap_err();
        assert!(matches!(e, BsrError::CsrRowPtr { index: 1, .. }), "{e}");
        let e = BsrMatrix::from_csr(4, 4, B2, &[0, 9, 9, 9, 9], &[0], &[1.0f32]).unwrap_err();
        assert!(matches!(e, BsrError::CsrRowPtr { index: 1, .. }), "{e}");
        let e =
            BsrMatrix::from_csr(4, 4, B2, &[0, 2, 2, 2, 2], &[1, 4], &[1.0f32, 1.0]).unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::EntryOutOfRange {
                    entry: 1,
                    axis: "column",
                    index: 4,
                    bound: 4
                }
            ),
            "{e}"
        );
        let e = BsrMatrix::from_csr(4, 4, B2, &[0, 1, 1, 1, 1], &[-3], &[1.0f32]).unwrap_err();
        assert!(
            matches!(e, BsrError::EntryOutOfRange { index: -3, .. }),
            "{e}"
        );
        let e = BsrMatrix::<f32>::from_csr(3, 4, B2, &[0, 0, 0, 0], &[0i32; 0], &[]).unwrap_err();
        assert!(
            matches!(e, BsrError::NotBlockMultiple { dim: "m", .. }),
            "{e}"
        );
        let e = BsrMatrix::<f32>::from_csr(4, 4, BlockShape::new(0, 2), &[0; 5], &[0i32; 0], &[])
            .unwrap_err();
        assert!(matches!(e, BsrError::ZeroSizedBlock { .. }), "{e}");

        let e = BsrMatrix::from_coo(4, 4, B2, &[0, 4], &[0, 0], &[1.0f32, 1.0]).unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::EntryOutOfRange {
                    entry: 1,
                    axis: "row",
                    index: 4,
                    bound: 4
                }
            ),
            "{e}"
        );
        let e = BsrMatrix::from_coo(4, 4, B2, &[0i64], &[-1], &[1.0f32]).unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::EntryOutOfRange {
                    axis: "column",
                    index: -1,
                    ..
                }
            ),
            "{e}"
        );
        let e = BsrMatrix::from_coo(4, 4, B2, &[u64::MAX], &[0], &[1.0f32]).unwrap_err();
        assert!(
            matches!(e, BsrError::EntryOutOfRange { axis: "row", .. }),
            "{e}"
        );
        let e = BsrMatrix::from_coo(4, 4, B2, &[0, 1], &[0], &[1.0f32]).unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::LengthMismatch {
                    what: "COO cols (= rows)",
                    ..
                }
            ),
            "{e}"
        );
        let e = BsrMatrix::from_coo(4, 4, B2, &[0], &[0], &[1.0f32, 2.0]).unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::LengthMismatch {
                    what: "COO values (= rows)",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn huge_blocks_fail_cleanly() {
        // One entry in a block of 2^30 x 2^30 elements: the allocation is refused, no abort.
        let side = 1usize << 30;
        let e = BsrMatrix::from_coo(
            side,
            side,
            BlockShape::new(side, side),
            &[0],
            &[0],
            &[1.0f32],
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                BsrError::Allocation { .. } | BsrError::SizeOverflow { .. }
            ),
            "{e}"
        );
    }
}
