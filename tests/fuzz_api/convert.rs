//! Targets: BsrMatrix::from_csr / from_coo, indices i32, i64, u64, usize.

use std::fmt::Debug;

use rand::Rng;
use sparsek::{bf16, f16, BlockShape, BsrMatrix, Element};

use crate::fuzz::{ensure, random_values, Check, FuzzRng, Outcome, ALLOC_LIMIT, I32_MAX};
use crate::inputs::{same_bits, ty, Ty, CAP};
use crate::DRIVER;

#[derive(Debug, Clone, Copy, PartialEq)]
enum IdxTy {
    I32,
    I64,
    U64,
    Usize,
}

#[derive(Debug, Clone)]
struct ConvCase {
    /// Drawn without defects (shown in the failure report).
    #[allow(dead_code)]
    clean: bool,
    ty: Ty,
    idx: IdxTy,
    m: usize,
    k: usize,
    block: BlockShape,
    /// CSR: row_ptr; COO: the rows. Cast (wrapping) to the index type.
    a: Vec<i128>,
    /// CSR and COO: the columns.
    b: Vec<i128>,
    values_len: usize,
}

fn edge_index(rng: &mut FuzzRng, small: i128) -> i128 {
    if rng.random_bool(0.3) {
        [
            -1,
            -2,
            i32::MIN as i128,
            i32::MAX as i128,
            i64::MIN as i128,
            u64::MAX as i128,
            1 << 32,
            (1 << 32) + 1,
            small,
            small + 1,
        ][rng.random_range(0..10)]
    } else {
        rng.random_range(-1..=small + 1)
    }
}

fn gen_conv(rng: &mut FuzzRng, csr: bool) -> ConvCase {
    let clean = rng.random_bool(0.5);
    let ty = ty(rng);
    let idx = [IdxTy::I32, IdxTy::I64, IdxTy::U64, IdxTy::Usize][rng.random_range(0..4)];
    let mut block = BlockShape::new(rng.random_range(1..=4), rng.random_range(1..=4));
    if rng.random_bool(0.05) {
        // Large blocks: few entries, many values; or a block accumulator the guard refuses.
        block = if rng.random_bool(0.7) {
            BlockShape::new(1 << rng.random_range(3..=7), 1 << rng.random_range(3..=7))
        } else {
            BlockShape::new(1 << 12, 1 << rng.random_range(11..=12))
        };
    }
    let (br, bc) = (rng.random_range(0..=4), rng.random_range(0..=4));
    let (mut m, mut k) = (br * block.rows, bc * block.cols);
    // The entries: any order, duplicates.
    let nnz = if m * k == 0 {
        0
    } else {
        rng.random_range(0..=12)
    };
    let mut entries: Vec<(i128, i128)> = (0..nnz)
        .map(|_| {
            (
                rng.random_range(0..m) as i128,
                rng.random_range(0..k) as i128,
            )
        })
        .collect();
    if nnz > 1 && rng.random_bool(0.3) {
        let i = rng.random_range(1..nnz);
        entries[i] = entries[i - 1];
    }
    let (mut a, mut b) = if csr {
        entries.sort_by_key(|e| e.0);
        let mut row_ptr = vec![0i128];
        for r in 0..m {
            row_ptr.push(entries.iter().filter(|e| e.0 < (r + 1) as i128).count() as i128);
        }
        (row_ptr, entries.iter().map(|e| e.1).collect::<Vec<_>>())
    } else {
        (
            entries.iter().map(|e| e.0).collect(),
            entries.iter().map(|e| e.1).collect::<Vec<_>>(),
        )
    };
    let mut values_len = b.len();
    if !clean {
        for _ in 0..rng.random_range(1..=2) {
            match rng.random_range(0..12) {
                0 => m = m.wrapping_add(1),
                1 => k = k.saturating_sub(1),
                2 => block.rows = [0, I32_MAX + 1, usize::MAX][rng.random_range(0..3)],
                3 => block.cols = [0, I32_MAX, 1 << 40][rng.random_range(0..3)],
                // A huge grid with nothing (or one entry) in it: refused or cheap.
                4 => {
                    block = BlockShape::new(
                        [1, 3, 1 << 16, I32_MAX][rng.random_range(0..4)],
                        rng.random_range(1..=4),
                    );
                    let rows = [0usize, 1, 4096, 1 << 22, I32_MAX][rng.random_range(0..5)];
                    m = rows.saturating_mul(block.rows);
                    k = block.cols * rng.random_range(1..=3);
                    if csr {
                        a.truncate(0);
                        b.truncate(0);
                    } else {
                        a = vec![rng.random_range(0..=m.min(1 << 40)) as i128];
                        b = vec![0];
                    }
                    values_len = b.len();
                }
                5 if !a.is_empty() => {
                    let i = rng.random_range(0..a.len());
                    a[i] = edge_index(rng, if csr { b.len() as i128 } else { m as i128 });
                }
                6 if !b.is_empty() => {
                    let i = rng.random_range(0..b.len());
                    b[i] = edge_index(rng, k as i128);
                }
                7 => {
                    if rng.random_bool(0.5) {
                        a.pop();
                    } else {
                        a.push(edge_index(rng, b.len() as i128));
                    }
                }
                8 => {
                    if rng.random_bool(0.5) {
                        b.pop();
                    } else {
                        b.push(edge_index(rng, k as i128));
                    }
                }
                9 if a.len() >= 2 => {
                    let i = rng.random_range(1..a.len());
                    a.swap(i - 1, i);
                }
                10 => values_len = values_len.wrapping_add(1),
                _ => values_len = values_len.saturating_sub(1),
            }
        }
    }
    ConvCase {
        clean,
        ty,
        idx,
        m,
        k,
        block,
        a,
        b,
        values_len,
    }
}

/// The grid's documented rules: `Some(block rows)` when valid.
fn grid_ok(m: usize, k: usize, block: BlockShape) -> Option<usize> {
    let side = |s: usize| (1..=I32_MAX).contains(&s);
    if !side(block.rows) || !side(block.cols) || m % block.rows != 0 || k % block.cols != 0 {
        return None;
    }
    let (br, bc) = (m / block.rows, k / block.cols);
    (br <= I32_MAX && bc <= I32_MAX).then_some(br)
}

/// The expected matrix: each block holding an entry, entries summed in f32 in input order.
/// `(row_ptr, col_idx, values)` with the values as f32 sums (rounded by the caller).
type Expected = (Vec<i32>, Vec<i32>, Vec<(usize, Vec<(usize, f32)>)>);

fn expected_bsr<T: Element>(
    entries: &[(usize, usize, usize)],
    values: &[T],
    block_rows: usize,
    block: BlockShape,
) -> Expected {
    let (bm, bk) = (block.rows, block.cols);
    // (block row, block col) -> [(offset in the block, sum)], offsets in first-seen order.
    let mut blocks: std::collections::BTreeMap<(usize, usize), Vec<(usize, f32)>> =
        Default::default();
    for &(e, r, c) in entries {
        let cell = blocks.entry((r / bm, c / bk)).or_default();
        let off = (r % bm) * bk + c % bk;
        match cell.iter_mut().find(|x| x.0 == off) {
            Some(x) => x.1 += values[e].to_f32(),
            None => cell.push((off, 0f32 + values[e].to_f32())),
        }
    }
    let (mut row_ptr, mut col_idx, mut vals) = (vec![0i32], Vec::new(), Vec::new());
    for r in 0..block_rows.min(if blocks.is_empty() { 0 } else { usize::MAX }) {
        for (&(_, c), cell) in blocks.range((r, 0)..(r + 1, 0)) {
            col_idx.push(c as i32);
            vals.push((col_idx.len() - 1, cell.clone()));
        }
        row_ptr.push(col_idx.len() as i32);
    }
    if blocks.is_empty() {
        row_ptr = vec![0; block_rows + 1];
    }
    (row_ptr, col_idx, vals)
}

fn run_conv<T: Element, I: Copy + TryInto<i128> + Debug>(
    c: &ConvCase,
    csr: bool,
    cast: impl Fn(i128) -> I,
    rng: &mut FuzzRng,
) -> Check {
    let (a, b): (Vec<I>, Vec<I>) = (
        c.a.iter().map(|&x| cast(x)).collect(),
        c.b.iter().map(|&x| cast(x)).collect(),
    );
    // The indices as the library sees them.
    let wide = |v: &[I]| -> Vec<i128> {
        v.iter()
            .map(|&x| x.try_into().unwrap_or(i128::MAX))
            .collect()
    };
    let (wa, wb) = (wide(&a), wide(&b));
    let values: Vec<T> = random_values(rng, c.values_len.min(CAP));
    let (m, k, block) = (c.m, c.k, c.block);
    let r = if csr {
        BsrMatrix::from_csr(m, k, block, &a, &b, &values)
    } else {
        BsrMatrix::from_coo(m, k, block, &a, &b, &values)
    };
    // The oracle: the grid, the arrays, the indices; entries as (input index, row, col).
    let in_range = |v: i128, bound: usize| v >= 0 && v < bound as i128;
    let mut entries: Vec<(usize, usize, usize)> = Vec::new();
    let valid = grid_ok(m, k, block).is_some_and(|_| {
        if csr {
            let nnz = wb.len() as i128;
            let ptr_ok = m.checked_add(1) == Some(wa.len())
                && values.len() == wb.len()
                && wa[0] == 0
                && wa[m] == nnz
                && wa.iter().all(|&p| (0..=nnz).contains(&p))
                && wa.windows(2).all(|w| w[0] <= w[1]);
            ptr_ok && wb.iter().all(|&cl| in_range(cl, k)) && {
                for r in 0..m {
                    let (first, end) = (wa[r] as usize, wa[r + 1] as usize);
                    for (e, &cl) in wb.iter().enumerate().take(end).skip(first) {
                        entries.push((e, r, cl as usize));
                    }
                }
                true
            }
        } else {
            wa.len() == wb.len()
                && values.len() == wa.len()
                && wa.iter().all(|&r| in_range(r, m))
                && wb.iter().all(|&cl| in_range(cl, k))
                && {
                    entries = (0..wa.len())
                        .map(|e| (e, wa[e] as usize, wb[e] as usize))
                        .collect();
                    // Each block-row's entries in input order.
                    entries.sort_by_key(|&(e, r, _)| (r / block.rows, e));
                    true
                }
        }
    });
    let block_rows = grid_ok(m, k, block).unwrap_or(0);
    // Allocations: row offsets (i32; COO's counts and cursors usize), a block accumulator
    // (f32) and the values (amortized growth, up to twice what they need).
    let blocks_stored = {
        let mut seen: Vec<(usize, usize)> = entries
            .iter()
            .map(|&(_, r, c)| (r / block.rows, c / block.cols))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len() as u128
    };
    let blk = block.rows as u128 * block.cols as u128;
    let lim = ALLOC_LIMIT as u128;
    let per_row: u128 = if csr { 4 } else { 8 };
    let rows_bytes = (block_rows as u128 + 1) * per_row;
    let acc_bytes = if entries.is_empty() { 0 } else { blk * 4 };
    let values_bytes = blocks_stored * blk * std::mem::size_of::<T>() as u128;
    let fits = rows_bytes <= lim && acc_bytes <= lim && values_bytes <= lim / 2;
    let too_big = rows_bytes > lim || acc_bytes > lim || values_bytes > lim;
    let name = if csr { "from_csr" } else { "from_coo" };
    if valid && !fits && !too_big {
        // Between half the limit and the limit: the values' growth decides.
        return Ok(if r.is_ok() {
            Outcome::Accepted
        } else {
            Outcome::Rejected
        });
    }
    ensure!(
        r.is_ok() == (valid && fits),
        "{name} gave {:?}, the oracle says valid = {valid}, fits = {fits}",
        r.as_ref().err()
    );
    let Ok(got) = r else {
        return Ok(Outcome::Rejected);
    };
    let (row_ptr, col_idx, vals) = expected_bsr(&entries, &values, block_rows, block);
    ensure!(
        (got.m(), got.k(), got.block()) == (m, k, block),
        "dims {:?}",
        (got.m(), got.k(), got.block())
    );
    ensure!(
        got.row_ptr() == row_ptr.as_slice() && got.col_idx() == col_idx.as_slice(),
        "pattern ({:?}, {:?}), expected ({row_ptr:?}, {col_idx:?})",
        got.row_ptr(),
        got.col_idx()
    );
    let len = block.rows * block.cols;
    ensure!(got.values().len() == col_idx.len() * len, "values length");
    for (id, cell) in vals {
        let stored = &got.values()[id * len..(id + 1) * len];
        let mut want = vec![T::from_f32(0.0); len];
        for (off, sum) in cell {
            want[off] = T::from_f32(sum);
        }
        ensure!(
            stored.iter().zip(&want).all(|(&x, &y)| same_bits(x, y)),
            "block {id}: values differ from the f32 sums in input order"
        );
    }
    Ok(Outcome::Accepted)
}

fn run_conv_typed<T: Element>(c: &ConvCase, csr: bool, rng: &mut FuzzRng) -> Check {
    match c.idx {
        IdxTy::I32 => run_conv::<T, i32>(c, csr, |x| x as i32, rng),
        IdxTy::I64 => run_conv::<T, i64>(c, csr, |x| x as i64, rng),
        IdxTy::U64 => run_conv::<T, u64>(c, csr, |x| x as u64, rng),
        IdxTy::Usize => run_conv::<T, usize>(c, csr, |x| x as usize, rng),
    }
}

fn fuzz_conv(name: &str, salt: u64, csr: bool) {
    DRIVER.run(
        name,
        salt,
        |rng| gen_conv(rng, csr),
        |c, rng| match c.ty {
            Ty::F32 => run_conv_typed::<f32>(c, csr, rng),
            Ty::Bf16 => run_conv_typed::<bf16>(c, csr, rng),
            Ty::F16 => run_conv_typed::<f16>(c, csr, rng),
        },
    );
}

#[test]
fn fuzz_from_csr() {
    fuzz_conv("BsrMatrix::from_csr", 12, true);
}

#[test]
fn fuzz_from_coo() {
    fuzz_conv("BsrMatrix::from_coo", 13, false);
}
