//! Fuzz of the BSR format and the block-pattern builders: random inputs, valid and
//! malformed, small and huge, through `BsrMatrix::from_parts`, `validate_parts`,
//! `BsrMatrix::from_dense` and every `BlockMask` constructor. Every case must
//! - not panic (each runs under `catch_unwind`; the first failing input is reported),
//! - not abort: a global allocator refuses any single allocation above `ALLOC_LIMIT`
//!   (16 MiB) and counts it, so a huge request either surfaces as a typed error through
//!   `try_reserve` or aborts the test; the fuzz asserts none was even attempted,
//! - agree with an independent oracle on accept / reject (written with `u128` sizes),
//! - round-trip when accepted: `from_parts(into_parts())` is equal, `to_dense` ->
//!   `from_dense` gives the same matrix (values are nonzero), `mask()` matches the arrays
//!   and `from_block_mask(mask())` gives the pattern back.
//!
//! `SPARSEK_FUZZ_SEED=<u64>` replays a run (the seed is printed; random by default),
//! `SPARSEK_FUZZ_CASES=<n>` sets the number of cases (100 000 by default).

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use rand::Rng;
use sparsek::{validate_parts, BlockMask, BlockShape, BsrError, BsrMatrix};

// ---------------------------------------------------------------------------------------
// The allocation guard (tests/common/alloc_guard.rs).

#[path = "common/alloc_guard.rs"]
mod alloc_guard;

use alloc_guard::{Guard, ALLOC_LIMIT, CASE, LARGEST, REFUSED, REFUSED_SIZE};

#[global_allocator]
static GLOBAL: Guard = Guard;

// ---------------------------------------------------------------------------------------
// Inputs.

#[path = "common/fuzz_rng.rs"]
mod fuzz_rng;

use fuzz_rng::FuzzRng;

/// Largest values / dense / mask sizes the fuzz materializes (elements).
const SMALL_CAP: usize = 1 << 14;

const I32_MAX: usize = i32::MAX as usize;

/// Sizes at the edges: i32::MAX ± 1, 2^32, 2^63, near usize::MAX, and the products that
/// wrap (`(2^32 + 16) * (2^60 - 2^32 + 16) = 256 mod 2^64`).
const HUGE: [usize; 20] = [
    I32_MAX - 1,
    I32_MAX,
    I32_MAX + 1,
    I32_MAX + 2,
    (1 << 32) - 1,
    1 << 32,
    (1 << 32) + 16,
    (1 << 60) - (1 << 32) + 16,
    1 << 30,
    1 << 31,
    1 << 33,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 1,
    usize::MAX - 1,
    usize::MAX,
    65_536,
    65_537,
    16 * I32_MAX,
];

const EDGE_I32: [i32; 8] = [i32::MIN, i32::MIN + 1, -2, -1, 0, 1, i32::MAX - 1, i32::MAX];

fn huge(rng: &mut FuzzRng) -> usize {
    if rng.random_bool(0.15) {
        rng.random::<u64>() as usize
    } else {
        HUGE[rng.random_range(0..HUGE.len())]
    }
}

/// A dimension: mostly small, sometimes huge.
fn dim(rng: &mut FuzzRng, small: usize, p_huge: f64) -> usize {
    if rng.random_bool(p_huge) {
        huge(rng)
    } else {
        rng.random_range(0..=small)
    }
}

fn edge_i32(rng: &mut FuzzRng, small: i32) -> i32 {
    if rng.random_bool(0.5) {
        EDGE_I32[rng.random_range(0..EDGE_I32.len())]
    } else {
        rng.random_range(-2..=small)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum MaskCtor {
    New,
    FromFn,
    Random,
    RandomPerRow,
    TopK,
    Causal,
    Skewed,
}

#[derive(Debug)]
enum Case {
    /// `from_parts` (with `min(values_len, SMALL_CAP)` values) and `validate_parts`.
    Parts {
        m: usize,
        k: usize,
        block: BlockShape,
        row_ptr: Vec<i32>,
        col_idx: Vec<i32>,
        values_len: usize,
    },
    /// `from_dense` on `dense` (row-major, `m x k` claimed).
    Dense {
        m: usize,
        k: usize,
        block: BlockShape,
        dense: Vec<f32>,
    },
    /// One `BlockMask` constructor; `param` is top-k / per-row / band / sparse-per-row,
    /// `period` the skew period, `input` the bits or scores, `block` the shape for the
    /// `from_block_mask` round trip.
    Mask {
        ctor: MaskCtor,
        rows: usize,
        cols: usize,
        param: usize,
        period: usize,
        density: f64,
        scores: Vec<f32>,
        bits: Vec<bool>,
        block: BlockShape,
        seed: u64,
    },
}

/// A random valid pattern of `br x bc` blocks as (row_ptr, col_idx).
fn valid_arrays(rng: &mut FuzzRng, br: usize, bc: usize) -> (Vec<i32>, Vec<i32>) {
    let p: f64 = rng.random();
    let (mut row_ptr, mut col_idx) = (vec![0i32], vec![]);
    for _ in 0..br {
        for c in 0..bc {
            if rng.random_bool(p) {
                col_idx.push(c as i32);
            }
        }
        row_ptr.push(col_idx.len() as i32);
    }
    (row_ptr, col_idx)
}

fn small_block(rng: &mut FuzzRng) -> BlockShape {
    BlockShape::new(rng.random_range(1..=4), rng.random_range(1..=4))
}

fn gen_parts(rng: &mut FuzzRng) -> Case {
    let mut block = small_block(rng);
    let (br, bc) = (rng.random_range(0..=6), rng.random_range(0..=6));
    let (mut m, mut k) = (br * block.rows, bc * block.cols);
    let (mut row_ptr, mut col_idx) = valid_arrays(rng, br, bc);
    let mut values_len = col_idx.len() * block.len();
    let mutations = [0, 0, 1, 1, 1, 2, 3][rng.random_range(0..7)];
    for _ in 0..mutations {
        match rng.random_range(0..14) {
            // Grid: huge or off-by-one m, k; huge or zero block sides.
            0 => {
                m = if rng.random_bool(0.5) {
                    huge(rng)
                } else {
                    m.wrapping_add(1)
                }
            }
            1 => {
                k = if rng.random_bool(0.5) {
                    huge(rng)
                } else {
                    k.saturating_sub(1)
                }
            }
            2 => {
                block.rows = dim(rng, 2, 0.8);
                if rng.random_bool(0.5) {
                    m = block.rows.wrapping_mul(br);
                }
            }
            3 => {
                block.cols = dim(rng, 2, 0.8);
                if rng.random_bool(0.5) {
                    k = block.cols.wrapping_mul(bc);
                }
            }
            // The wrapping block of defect 2, or a valid huge grid with few blocks.
            4 => {
                let (r, c) = (huge(rng), huge(rng));
                block = BlockShape::new(r, c);
                (m, k) = (r, c);
                if rng.random_bool(0.5) {
                    (row_ptr, col_idx) = (vec![0, 1], vec![0]);
                }
                // What an unchecked product would say (2^32+16 x 2^60-2^32+16: 256).
                values_len = r.wrapping_mul(c).wrapping_mul(col_idx.len()) % (SMALL_CAP + 1);
            }
            5 => {
                let side = [1usize << 20, 1 << 30, I32_MAX][rng.random_range(0..3)];
                block = BlockShape::new(side, rng.random_range(1..=3));
                m = side * br;
                let extra = I32_MAX * rng.random_range(0..2);
                k = block.cols * rng.random_range(bc..=bc + 2 + extra);
                values_len = col_idx.len().wrapping_mul(block.len());
            }
            // row_ptr: one entry changed, an entry added or removed, two swapped.
            6 => {
                if !row_ptr.is_empty() {
                    let i = rng.random_range(0..row_ptr.len());
                    row_ptr[i] = edge_i32(rng, col_idx.len() as i32 + 1);
                }
            }
            7 => {
                if rng.random_bool(0.5) {
                    row_ptr.push(edge_i32(rng, col_idx.len() as i32 + 1));
                } else {
                    row_ptr.pop();
                }
            }
            8 => {
                if row_ptr.len() >= 2 {
                    let (i, j) = (
                        rng.random_range(0..row_ptr.len()),
                        rng.random_range(0..row_ptr.len()),
                    );
                    row_ptr.swap(i, j);
                }
            }
            // col_idx: an entry changed (out of range, negative), duplicated, swapped.
            9 => {
                if !col_idx.is_empty() {
                    let i = rng.random_range(0..col_idx.len());
                    col_idx[i] = edge_i32(rng, bc as i32 + 1);
                }
            }
            10 => {
                if col_idx.len() >= 2 {
                    let i = rng.random_range(1..col_idx.len());
                    if rng.random_bool(0.5) {
                        col_idx[i] = col_idx[i - 1];
                    } else {
                        col_idx.swap(i - 1, i);
                    }
                }
            }
            11 => {
                if rng.random_bool(0.5) {
                    col_idx.push(edge_i32(rng, bc as i32));
                } else {
                    col_idx.pop();
                }
            }
            // Wrong values length.
            12 => {
                values_len = match rng.random_range(0..4) {
                    0 => values_len.wrapping_add(1),
                    1 => values_len.wrapping_sub(1),
                    2 => huge(rng),
                    _ => rng.random_range(0..=SMALL_CAP),
                }
            }
            // Garbage arrays.
            _ => {
                let n = rng.random_range(0..=8);
                row_ptr = (0..n).map(|_| edge_i32(rng, 8)).collect();
                let n = rng.random_range(0..=8);
                col_idx = (0..n).map(|_| edge_i32(rng, 8)).collect();
            }
        }
    }
    Case::Parts {
        m,
        k,
        block,
        row_ptr,
        col_idx,
        values_len,
    }
}

fn gen_dense(rng: &mut FuzzRng) -> Case {
    let mut block = small_block(rng);
    let (br, bc) = (rng.random_range(0..=5), rng.random_range(0..=5));
    let (mut m, mut k) = (br * block.rows, bc * block.cols);
    let keep: f64 = rng.random();
    let mut dense = vec![0f32; m * k];
    for r in 0..br {
        for c in 0..bc {
            if !rng.random_bool(keep) {
                continue;
            }
            // A block with at least one nonzero; some -0.0 (zero) and NaN (nonzero).
            for i in 0..block.rows {
                for j in 0..block.cols {
                    let v = match rng.random_range(0..10) {
                        0 => -0.0,
                        1..=3 => 0.0,
                        4 => f32::NAN,
                        _ => rng.random_range(-2.0..2.0),
                    };
                    dense[(r * block.rows + i) * k + c * block.cols + j] = v;
                }
            }
            let (i, j) = (
                rng.random_range(0..block.rows),
                rng.random_range(0..block.cols),
            );
            dense[(r * block.rows + i) * k + c * block.cols + j] = 1.5;
        }
    }
    match rng.random_range(0..8) {
        // A huge m with k = 0 is valid and needs a row_ptr of m / bm entries: not here.
        0 if k > 0 => m = huge(rng),
        1 => k = huge(rng),
        2 => block = BlockShape::new(dim(rng, 2, 0.7), dim(rng, 2, 0.7)),
        3 => {
            dense.pop();
        }
        4 => dense.push(1.0),
        _ => {}
    }
    Case::Dense { m, k, block, dense }
}

fn gen_mask(rng: &mut FuzzRng) -> Case {
    use MaskCtor::*;
    let ctor = [New, FromFn, Random, RandomPerRow, TopK, Causal, Skewed][rng.random_range(0..7)];
    let (mut rows, mut cols) = (dim(rng, 10, 0.3), dim(rng, 10, 0.3));
    if ctor == Causal {
        cols = rows;
    }
    // A grid within the limits but larger than the fuzz materializes would really be
    // allocated: draw small sides instead (huge grids are those refused up front).
    if matches!(BlockMask::check_size(rows, cols), Ok(len) if len > SMALL_CAP) {
        rows = rng.random_range(0..=10);
        cols = if ctor == Causal {
            rows
        } else {
            rng.random_range(0..=10)
        };
    }
    let len = BlockMask::check_size(rows, cols).unwrap_or(0);
    let param = match rng.random_range(0..10) {
        0 => huge(rng),
        1 => 0,
        _ => rng.random_range(0..=cols.min(16) + 2),
    };
    let period = if rng.random_bool(0.1) {
        huge(rng)
    } else {
        rng.random_range(0..=4)
    };
    let density = match rng.random_range(0..10) {
        0 => [-0.5, 1.5, f64::NAN, f64::INFINITY, -0.0, 1.0][rng.random_range(0..6)],
        _ => rng.random(),
    };
    let n = match rng.random_range(0..6) {
        0 => rng.random_range(0..=SMALL_CAP),
        1 => (len + 1).min(SMALL_CAP),
        2 => len.saturating_sub(1),
        _ => len,
    };
    let scores = (0..if ctor == TopK { n } else { 0 })
        .map(|_| match rng.random_range(0..12) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => 0.5,
            _ => rng.random(),
        })
        .collect();
    let bits = (0..if ctor == New { n } else { 0 })
        .map(|_| rng.random_bool(0.3))
        .collect();
    let block = if rng.random_bool(0.1) {
        BlockShape::new(dim(rng, 2, 0.5), dim(rng, 2, 0.5))
    } else {
        small_block(rng)
    };
    Case::Mask {
        ctor,
        rows,
        cols,
        param,
        period,
        density,
        scores,
        bits,
        block,
        seed: rng.random(),
    }
}

// ---------------------------------------------------------------------------------------
// Oracles: the format's rules again, independently, in u128.

fn block_ok(b: BlockShape) -> bool {
    (1..=I32_MAX).contains(&b.rows) && (1..=I32_MAX).contains(&b.cols)
}

/// Whether `validate_parts` must accept.
fn parts_valid(
    m: usize,
    k: usize,
    block: BlockShape,
    row_ptr: &[i32],
    col_idx: &[i32],
    values_len: usize,
) -> bool {
    if !block_ok(block) || m % block.rows != 0 || k % block.cols != 0 {
        return false;
    }
    let (br, bc) = (m / block.rows, k / block.cols);
    if br > I32_MAX || bc > I32_MAX || row_ptr.len() != br + 1 || row_ptr[0] != 0 {
        return false;
    }
    if row_ptr.windows(2).any(|w| w[1] < w[0]) || row_ptr[br] as i64 != col_idx.len() as i64 {
        return false;
    }
    let want = col_idx.len() as u128 * block.rows as u128 * block.cols as u128;
    if want != values_len as u128 {
        return false;
    }
    row_ptr.windows(2).all(|w| {
        let cols = &col_idx[w[0] as usize..w[1] as usize];
        cols.iter().all(|&c| c >= 0 && (c as u128) < bc as u128)
            && cols.windows(2).all(|p| p[0] < p[1])
    })
}

fn mask_size_ok(rows: usize, cols: usize) -> bool {
    rows <= I32_MAX && cols <= I32_MAX && rows as u128 * cols as u128 <= 1 << 32
}

// ---------------------------------------------------------------------------------------
// Checks of accepted results.

type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Equal matrices, values compared bit for bit (NaN included).
fn same(a: &BsrMatrix<f32>, b: &BsrMatrix<f32>) -> bool {
    (a.m(), a.k(), a.block(), a.row_ptr(), a.col_idx())
        == (b.m(), b.k(), b.block(), b.row_ptr(), b.col_idx())
        && a.values().len() == b.values().len()
        && a.values()
            .iter()
            .zip(b.values())
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

/// An accepted matrix round-trips through every conversion the fuzz can afford.
fn check_matrix(a: &BsrMatrix<f32>, nonzero_values: bool) -> Check {
    let (m, k, block) = (a.m(), a.k(), a.block());
    ensure!(
        a.values().len() <= SMALL_CAP && a.row_ptr().len() <= SMALL_CAP,
        "accepted matrix larger than its input"
    );
    // from_parts(into_parts()) is the same matrix.
    let (rp, ci, v) = a.clone().into_parts();
    let b = BsrMatrix::from_parts(m, k, block, rp, ci, v).map_err(|e| format!("re-parts: {e}"))?;
    ensure!(same(&b, a), "from_parts(into_parts()) differs");
    // The dense form, where it exists and is small.
    let dense = match m.checked_mul(k) {
        None => {
            let e = a.to_dense().err();
            ensure!(
                matches!(e, Some(BsrError::SizeOverflow { what: "m * k", .. })),
                "to_dense with m * k overflowing gave {e:?}"
            );
            None
        }
        Some(len) if len <= SMALL_CAP => {
            let d = a.to_dense().map_err(|e| format!("to_dense: {e}"))?;
            ensure!(d.len() == len, "to_dense length {} != {len}", d.len());
            let stored = d.iter().filter(|v| **v != 0.0).count();
            if nonzero_values {
                ensure!(
                    stored == a.values().len(),
                    "to_dense holds {stored} nonzeros"
                );
                let back = BsrMatrix::from_dense(&d, m, k, block)
                    .map_err(|e| format!("from_dense(to_dense): {e}"))?;
                ensure!(same(&back, a), "from_dense(to_dense()) differs");
            }
            Some(d)
        }
        Some(_) => None,
    };
    // The mask matches the arrays, and from_block_mask gives the pattern back.
    let (br, bc) = (a.num_block_rows(), a.num_block_cols());
    if !mask_size_ok(br, bc) {
        let e = a.mask().err();
        ensure!(
            matches!(e, Some(BsrError::MaskTooLarge { .. })),
            "mask of a {br} x {bc} grid gave {e:?}"
        );
    } else if br * bc <= SMALL_CAP {
        let mask = a.mask().map_err(|e| format!("mask: {e}"))?;
        ensure!(mask.rows() == br && mask.cols() == bc, "mask shape");
        ensure!(mask.count() == a.nnz_blocks(), "mask count");
        for row in a.block_rows() {
            let cols: Vec<usize> = mask.row_cols(row.index).collect();
            let want: Vec<usize> = row.col_idx.iter().map(|&c| c as usize).collect();
            ensure!(
                cols == want,
                "mask row {} is {cols:?}, not {want:?}",
                row.index
            );
            ensure!(
                mask.get(row.index, bc).is_none(),
                "get past the last column"
            );
        }
        ensure!(mask.get(br, 0).is_none(), "get past the last row");
        let rebuilt = BsrMatrix::<f32>::from_block_mask(&mask, block, |i, j| match &dense {
            Some(d) => d[i * k + j],
            None => 1.0,
        })
        .map_err(|e| format!("from_block_mask(mask): {e}"))?;
        ensure!(
            rebuilt.row_ptr() == a.row_ptr() && rebuilt.col_idx() == a.col_idx(),
            "from_block_mask(mask()) changed the pattern"
        );
        if dense.is_some() {
            ensure!(
                same(&rebuilt, a),
                "from_block_mask(mask()) changed the values"
            );
        }
    }
    Ok(())
}

fn check_mask(ctor: MaskCtor, mask: &BlockMask, param: usize, period: usize) -> Check {
    let (rows, cols) = (mask.rows(), mask.cols());
    let len = BlockMask::check_size(rows, cols).map_err(|e| format!("accepted mask: {e}"))?;
    ensure!(mask.count() <= len, "count {} above {len}", mask.count());
    if len == 0 {
        ensure!(
            mask.count() == 0 && mask.row_cols(0).count() == 0,
            "empty mask holds blocks"
        );
        return Ok(());
    }
    ensure!(len <= SMALL_CAP, "accepted a {rows} x {cols} mask");
    let mut bits = Vec::with_capacity(len);
    for r in 0..rows {
        let row: Vec<usize> = mask.row_cols(r).collect();
        for c in 0..cols {
            let bit = mask.get(r, c).ok_or("get in range gave None")?;
            ensure!(
                bit == row.contains(&c),
                "row_cols and get disagree at ({r}, {c})"
            );
            let want = match ctor {
                MaskCtor::Causal => {
                    Some(c <= r && r - c < if param == 0 { usize::MAX } else { param })
                }
                _ => None,
            };
            if let Some(want) = want {
                ensure!(bit == want, "causal bit ({r}, {c}) = {bit}");
            }
            bits.push(bit);
        }
        ensure!(mask.get(r, cols).is_none(), "get past the last column");
        let n = row.len();
        match ctor {
            MaskCtor::TopK | MaskCtor::RandomPerRow => {
                ensure!(n == param, "row {r} keeps {n}, not {param}")
            }
            MaskCtor::Skewed if r % period == 0 => ensure!(n == cols, "dense row {r} keeps {n}"),
            MaskCtor::Skewed => ensure!(n == param, "sparse row {r} keeps {n}"),
            _ => {}
        }
    }
    ensure!(mask.get(rows, 0).is_none(), "get past the last row");
    ensure!(
        mask.row_cols(rows).count() == 0,
        "row_cols past the last row"
    );
    let again = BlockMask::new(rows, cols, bits).map_err(|e| format!("new(bits): {e}"))?;
    ensure!(&again == mask, "new(bits of mask) differs");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Running one case.

enum Outcome {
    Accepted,
    Rejected,
}

fn run(case: &Case) -> Result<Outcome, String> {
    match case {
        Case::Parts {
            m,
            k,
            block,
            row_ptr,
            col_idx,
            values_len,
        } => {
            let (m, k, block) = (*m, *k, *block);
            let valid = parts_valid(m, k, block, row_ptr, col_idx, *values_len);
            let checked = validate_parts(m, k, block, row_ptr, col_idx, *values_len);
            ensure!(
                checked.is_ok() == valid,
                "validate_parts gave {checked:?}, the oracle says valid = {valid}"
            );
            let n = (*values_len).min(SMALL_CAP);
            let values: Vec<f32> = (0..n).map(|i| (i % 251) as f32 + 1.0).collect();
            let built =
                BsrMatrix::from_parts(m, k, block, row_ptr.clone(), col_idx.clone(), values);
            if n == *values_len {
                ensure!(
                    built.as_ref().err() == checked.as_ref().err(),
                    "from_parts gave {:?}, validate_parts {checked:?}",
                    built.as_ref().err()
                );
            }
            match built {
                Ok(a) => {
                    check_matrix(&a, true)?;
                    Ok(Outcome::Accepted)
                }
                Err(_) => Ok(Outcome::Rejected),
            }
        }
        Case::Dense { m, k, block, dense } => {
            let (m, k, block) = (*m, *k, *block);
            let valid = block_ok(block)
                && m % block.rows == 0
                && k % block.cols == 0
                && m / block.rows <= I32_MAX
                && k / block.cols <= I32_MAX
                && m as u128 * k as u128 == dense.len() as u128;
            let built = BsrMatrix::from_dense(dense, m, k, block);
            ensure!(
                built.is_ok() == valid,
                "from_dense gave {:?}, the oracle says valid = {valid}",
                built.as_ref().err()
            );
            let Ok(a) = built else {
                return Ok(Outcome::Rejected);
            };
            let back = a.to_dense().map_err(|e| format!("to_dense: {e}"))?;
            let same = back
                .iter()
                .zip(dense)
                .all(|(x, y)| x == y || (x.is_nan() && y.is_nan()));
            ensure!(
                same && back.len() == dense.len(),
                "to_dense(from_dense(d)) != d"
            );
            check_matrix(&a, false)?;
            Ok(Outcome::Accepted)
        }
        Case::Mask {
            ctor,
            rows,
            cols,
            param,
            period,
            density,
            scores,
            bits,
            block,
            seed,
        } => {
            let (rows, cols, param, period) = (*rows, *cols, *param, *period);
            let rng = &mut FuzzRng::new(*seed);
            let size_ok = mask_size_ok(rows, cols);
            let len = rows as u128 * cols as u128;
            let (built, valid) = match ctor {
                MaskCtor::New => (
                    BlockMask::new(rows, cols, bits.clone()),
                    size_ok && bits.len() as u128 == len,
                ),
                MaskCtor::FromFn => (
                    BlockMask::from_fn(rows, cols, |r, c| (r * 7 + c * 3) % 5 < 2),
                    size_ok,
                ),
                MaskCtor::Random => (
                    BlockMask::random(rows, cols, *density, rng),
                    size_ok && (0.0..=1.0).contains(density),
                ),
                MaskCtor::RandomPerRow => (
                    BlockMask::random_per_row(rows, cols, param, rng),
                    size_ok && param <= cols,
                ),
                MaskCtor::TopK => (
                    BlockMask::topk_per_row(scores, rows, cols, param),
                    size_ok && scores.len() as u128 == len && param <= cols,
                ),
                MaskCtor::Causal => (
                    BlockMask::causal(rows, (param != 0).then_some(param)),
                    mask_size_ok(rows, rows),
                ),
                MaskCtor::Skewed => (
                    BlockMask::skewed(rows, cols, period, param, rng),
                    size_ok && period != 0 && param <= cols,
                ),
            };
            ensure!(
                built.is_ok() == valid,
                "{ctor:?} gave {:?}, the oracle says valid = {valid}",
                built.as_ref().err()
            );
            if !size_ok {
                ensure!(
                    matches!(
                        built,
                        Err(BsrError::MaskTooLarge { .. } | BsrError::InvalidPattern(_))
                    ),
                    "a {rows} x {cols} grid gave {:?}",
                    built.as_ref().err()
                );
            }
            let Ok(mask) = built else {
                return Ok(Outcome::Rejected);
            };
            check_mask(*ctor, &mask, param, period)?;
            // Into a matrix and back, where the matrix is small.
            let values =
                (mask.count() as u128 * block.rows as u128).checked_mul(block.cols as u128);
            let small = values.is_some_and(|v| v <= SMALL_CAP as u128);
            if rows <= 64 && cols <= 64 && (!block_ok(*block) || small) {
                let a =
                    BsrMatrix::<f32>::from_block_mask(&mask, *block, |i, j| (i + j) as f32 + 1.0);
                ensure!(
                    a.is_ok() == block_ok(*block),
                    "from_block_mask with block {block:?} gave {:?}",
                    a.as_ref().err()
                );
                if let Ok(a) = a {
                    let back = a.mask().map_err(|e| format!("mask: {e}"))?;
                    ensure!(back == mask, "from_block_mask(mask).mask() differs");
                    check_matrix(&a, true)?;
                }
            }
            Ok(Outcome::Accepted)
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a u64")),
    )
}

#[test]
fn fuzz_format_and_patterns() {
    let seed = env_u64("SPARSEK_FUZZ_SEED").unwrap_or_else(|| rand::rng().random());
    let cases = env_u64("SPARSEK_FUZZ_CASES").unwrap_or(100_000);
    println!("fuzz: seed {seed} (replay with SPARSEK_FUZZ_SEED={seed}), {cases} cases");

    // Panics are caught per case; the hook keeps the message instead of printing it.
    static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|info| {
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(info.to_string());
    }));

    let start = Instant::now();
    let (mut accepted, mut rejected, mut panics, mut failures) = (0u64, 0u64, 0u64, 0u64);
    let mut first_failure: Option<String> = None;
    for i in 0..cases {
        CASE.store(i, Ordering::Relaxed);
        let rng = &mut FuzzRng::new(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let generated = panic::catch_unwind(AssertUnwindSafe(|| match rng.random_range(0..10) {
            0..=4 => gen_parts(rng),
            5 | 6 => gen_dense(rng),
            _ => gen_mask(rng),
        }));
        let Ok(case) = generated else {
            // A bug of the fuzz itself: put the default hook back and say so.
            drop(panic::take_hook());
            let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
            panic!("fuzz (seed {seed}): the generator panicked at case {i}: {msg:?}");
        };
        let failure = match panic::catch_unwind(AssertUnwindSafe(|| run(&case))) {
            Ok(Ok(Outcome::Accepted)) => {
                accepted += 1;
                None
            }
            Ok(Ok(Outcome::Rejected)) => {
                rejected += 1;
                None
            }
            Ok(Err(why)) => {
                failures += 1;
                Some(why)
            }
            Err(_) => {
                panics += 1;
                let msg = LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).clone();
                Some(format!("panic: {}", msg.unwrap_or_default()))
            }
        };
        if let Some(why) = failure {
            if first_failure.is_none() {
                first_failure = Some(format!("case {i}: {why}\ninput: {case:?}"));
            }
        }
    }
    CASE.store(u64::MAX, Ordering::Relaxed);
    panic::set_hook(hook);

    let refused = REFUSED.load(Ordering::Relaxed);
    println!(
        "fuzz: {cases} cases, {accepted} accepted, {rejected} rejected, {panics} panics, \
         {failures} failed checks; largest allocation {} bytes, {refused} refused; {:.2?}",
        LARGEST.load(Ordering::Relaxed),
        start.elapsed()
    );
    if let Some(first) = &first_failure {
        println!("fuzz: first failure (seed {seed}): {first}");
    }
    assert!(
        panics == 0 && failures == 0,
        "fuzz (seed {seed}): {panics} panics, {failures} failed checks; first: {}",
        first_failure.unwrap_or_default()
    );
    assert_eq!(
        refused,
        0,
        "fuzz (seed {seed}): {refused} allocations above {ALLOC_LIMIT} bytes were attempted \
         (largest {} bytes)",
        REFUSED_SIZE.load(Ordering::Relaxed)
    );
    assert!(
        accepted > cases / 10 && rejected > cases / 10,
        "the fuzz lost its mix"
    );
}
