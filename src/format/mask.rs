//! Block patterns: which blocks of a block grid are stored. Build one here, then fill it
//! with `BsrMatrix::from_block_mask`.

use rand::Rng;

use crate::error::BsrError;

/// A `rows x cols` grid of blocks, row-major, `true` where a block is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMask {
    rows: usize,
    cols: usize,
    bits: Vec<bool>,
}

fn invalid(msg: String) -> BsrError {
    BsrError::InvalidPattern(msg)
}

impl BlockMask {
    /// From row-major bits (`rows * cols` of them).
    pub fn new(rows: usize, cols: usize, bits: Vec<bool>) -> Result<Self, BsrError> {
        let expected = rows.checked_mul(cols).ok_or(BsrError::IndexOverflow {
            what: "mask rows * cols",
            value: rows as u128 * cols as u128,
        })?;
        if bits.len() != expected {
            return Err(BsrError::InputLength {
                expected,
                got: bits.len(),
            });
        }
        Ok(Self { rows, cols, bits })
    }

    pub fn from_fn(rows: usize, cols: usize, mut keep: impl FnMut(usize, usize) -> bool) -> Self {
        let mut bits = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            for c in 0..cols {
                bits.push(keep(r, c));
            }
        }
        Self { rows, cols, bits }
    }

    /// Every block kept with probability `density` (uniform random pattern).
    pub fn random(
        rows: usize,
        cols: usize,
        density: f64,
        rng: &mut impl Rng,
    ) -> Result<Self, BsrError> {
        if !(0.0..=1.0).contains(&density) {
            return Err(invalid(format!("density {density} is outside [0, 1]")));
        }
        Ok(Self::from_fn(rows, cols, |_, _| rng.random_bool(density)))
    }

    /// Exactly `per_row` blocks in every block-row, chosen uniformly at random: the top-k
    /// pattern with random scores (the benchmarks' "top-k per row" case).
    pub fn random_per_row(
        rows: usize,
        cols: usize,
        per_row: usize,
        rng: &mut impl Rng,
    ) -> Result<Self, BsrError> {
        let scores: Vec<f32> = (0..rows * cols).map(|_| rng.random::<f32>()).collect();
        Self::topk_per_row(&scores, rows, cols, per_row)
    }

    /// The `k` highest-scoring blocks of each block-row of a row-major `rows x cols` score
    /// matrix (ties go to the lower column; NaN scores rank lowest).
    pub fn topk_per_row(
        scores: &[f32],
        rows: usize,
        cols: usize,
        k: usize,
    ) -> Result<Self, BsrError> {
        if scores.len() != rows * cols {
            return Err(BsrError::InputLength {
                expected: rows * cols,
                got: scores.len(),
            });
        }
        if k > cols {
            return Err(invalid(format!("top-{k} of a row of {cols} blocks")));
        }
        let mut bits = vec![false; rows * cols];
        let mut order: Vec<usize> = Vec::with_capacity(cols);
        for r in 0..rows {
            let row = &scores[r * cols..(r + 1) * cols];
            order.clear();
            order.extend(0..cols);
            let key = |c: &usize| {
                if row[*c].is_nan() {
                    f32::NEG_INFINITY
                } else {
                    row[*c]
                }
            };
            order.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.cmp(b)));
            for &c in &order[..k] {
                bits[r * cols + c] = true;
            }
        }
        Ok(Self { rows, cols, bits })
    }

    /// Lower-triangular (causal) `n x n` pattern; with `band = Some(w)`, only the `w`
    /// blocks ending at the diagonal in each row (sliding-window attention).
    pub fn causal(n: usize, band: Option<usize>) -> Result<Self, BsrError> {
        if band == Some(0) {
            return Err(invalid("a band of width 0 keeps nothing".into()));
        }
        let w = band.unwrap_or(usize::MAX);
        Ok(Self::from_fn(n, n, |r, c| c <= r && r - c < w))
    }

    /// A few dense block-rows among sparse ones: every `period`-th block-row is full, the
    /// others hold `sparse_per_row` random blocks. Long rows like these must not serialize
    /// a GPU kernel; the benchmarks use this.
    pub fn skewed(
        rows: usize,
        cols: usize,
        period: usize,
        sparse_per_row: usize,
        rng: &mut impl Rng,
    ) -> Result<Self, BsrError> {
        if period == 0 {
            return Err(invalid("skew period 0".into()));
        }
        let mut mask = Self::random_per_row(rows, cols, sparse_per_row, rng)?;
        for r in (0..rows).step_by(period) {
            mask.bits[r * cols..(r + 1) * cols].fill(true);
        }
        Ok(mask)
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn get(&self, r: usize, c: usize) -> bool {
        self.bits[r * self.cols + c]
    }
    /// Number of kept blocks.
    pub fn count(&self) -> usize {
        self.bits.iter().filter(|b| **b).count()
    }
    /// The kept columns of block-row `r`, ascending.
    pub fn row_cols(&self, r: usize) -> impl Iterator<Item = usize> + '_ {
        self.bits[r * self.cols..(r + 1) * self.cols]
            .iter()
            .enumerate()
            .filter(|(_, b)| **b)
            .map(|(c, _)| c)
    }
}
