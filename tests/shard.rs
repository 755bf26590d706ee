//! Tensor-parallel shards (`sparsek::format::shard`) on the CPU: every block lands in exactly
//! one shard with its values, the shards' products give back the layer's output
//! (column-parallel: concatenated, bit for bit; row-parallel: summed, against f64), the
//! balanced cut is the best contiguous one (and the one the dense counts give, however the
//! counts are gathered), a cut's memory follows the blocks and the shard count, not the
//! matrix's width, and bad counts or ranges are refused by type.

mod common;

// Any single allocation above 16 MiB is refused (tests/common/alloc_guard.rs): a cut that
// allocates per block-column of a wide matrix fails instead of filling gigabytes.
#[path = "common/alloc_guard.rs"]
#[allow(dead_code)]
mod alloc_guard;

#[global_allocator]
static GLOBAL: alloc_guard::Guard = alloc_guard::Guard;

use common::{random_bsr, random_vec, PatternKind};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{
    balanced_ranges, equal_ranges, spmm, Activation, Backend, BlockMask, BlockShape, BsrError,
    BsrMatrix, Dense, DenseMut, Layout, ShardAxis, SparseMlp, SpmmOptions, MAX_SHARDS,
};

const KINDS: [PatternKind; 6] = [
    PatternKind::Random(0.3),
    PatternKind::Random(0.8),
    PatternKind::Full,
    PatternKind::Empty,
    PatternKind::Single,
    PatternKind::EmptyAndFullRows,
];

/// `C (m x n) = A·B` through the CPU backend, B row-major `k x n`.
fn product(a: &BsrMatrix<f32>, b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![f32::NAN; a.m() * n];
    spmm(
        a,
        Dense::host(b, a.k(), n, Layout::RowMajor),
        DenseMut::host(&mut c, a.m(), n, Layout::RowMajor),
        &SpmmOptions::new().backend(Backend::Cpu),
    )
    .unwrap();
    c
}

/// The blocks of `a` as (block-row, block-column, values), in storage order.
fn blocks(a: &BsrMatrix<f32>) -> Vec<(usize, usize, Vec<u32>)> {
    let blk = a.block().rows * a.block().cols;
    let mut out = Vec::new();
    for (r, w) in a.row_ptr().windows(2).enumerate() {
        for j in w[0] as usize..w[1] as usize {
            let v = a.values()[j * blk..(j + 1) * blk]
                .iter()
                .map(|x| x.to_bits())
                .collect();
            out.push((r, a.col_idx()[j] as usize, v));
        }
    }
    out
}

#[test]
fn every_block_lands_in_one_shard_and_the_products_restore_the_layer() {
    let mut rng = StdRng::seed_from_u64(common::seed());
    let mut cases = 0;
    for (i, kind) in KINDS.iter().enumerate() {
        for block in [
            BlockShape::new(2, 3),
            BlockShape::new(4, 4),
            BlockShape::new(16, 8),
        ] {
            let (br, bc) = (rng.random_range(1..12), rng.random_range(1..12));
            let a: BsrMatrix<f32> = random_bsr(*kind, br, bc, block, &mut rng);
            let n = 1 + i % 3;
            let x: Vec<f32> = random_vec(a.k() * n, &mut rng);
            let full = product(&a, &x, n);
            let all = blocks(&a);
            for axis in [ShardAxis::BlockRows, ShardAxis::BlockCols] {
                let units = match axis {
                    ShardAxis::BlockRows => br,
                    ShardAxis::BlockCols => bc,
                };
                for shards in 1..=units + 2 {
                    let s = a.shard(axis, shards).unwrap();
                    assert_eq!(s.shards().len(), shards);
                    assert_eq!(s.axis(), axis);
                    // Contiguous, in order, no range empty while there are units to give.
                    let mut at = 0;
                    for (j, r) in s.ranges().iter().enumerate() {
                        assert_eq!(r.start, at);
                        assert!(!r.is_empty() || j >= units, "{:?}", s.ranges());
                        at = r.end;
                    }
                    assert_eq!(at, units);
                    assert_eq!(s.nnz_blocks().iter().sum::<usize>(), a.nnz_blocks());
                    // Every block, mapped back to the matrix's coordinates: the same list.
                    let mut back = Vec::new();
                    for (sh, r) in s.shards().iter().zip(s.ranges()) {
                        for (row, col, v) in blocks(sh) {
                            back.push(match axis {
                                ShardAxis::BlockRows => (row + r.start, col, v),
                                ShardAxis::BlockCols => (row, col + r.start, v),
                            });
                        }
                    }
                    back.sort();
                    let mut want = all.clone();
                    want.sort();
                    assert_eq!(back, want, "{kind:?} {block:?} {axis:?} {shards}");
                    match axis {
                        // Column-parallel: each shard's rows of the output, bit for bit.
                        ShardAxis::BlockRows => {
                            let mut got = Vec::new();
                            for sh in s.shards() {
                                got.extend(product(sh, &x, n));
                            }
                            let same = got.len() == full.len()
                                && got
                                    .iter()
                                    .zip(&full)
                                    .all(|(p, q)| p.to_bits() == q.to_bits());
                            assert!(same, "{kind:?} {block:?} {shards} column-parallel output");
                        }
                        // Row-parallel: the shards' outputs summed, against the f64 product.
                        ShardAxis::BlockCols => {
                            let mut sum = vec![0f64; a.m() * n];
                            for (sh, r) in s.shards().iter().zip(s.ranges()) {
                                let rows = r.start * block.cols..r.end * block.cols;
                                let part = product(sh, &x[rows.start * n..rows.end * n], n);
                                for (acc, p) in sum.iter_mut().zip(&part) {
                                    *acc += f64::from(*p);
                                }
                            }
                            let dense = a.to_dense().unwrap();
                            for (idx, got) in sum.iter().enumerate() {
                                let (row, col) = (idx / n, idx % n);
                                let want: f64 = (0..a.k())
                                    .map(|kk| {
                                        f64::from(dense[row * a.k() + kk])
                                            * f64::from(x[kk * n + col])
                                    })
                                    .sum();
                                assert!(
                                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                                    "{kind:?} {block:?} {shards} row-parallel: {got} vs {want}"
                                );
                            }
                        }
                    }
                    cases += 1;
                }
            }
        }
    }
    println!("shard: {cases} cuts checked");
}

/// The balanced cut's largest part is the least over every contiguous cut (brute force on
/// small cases), and it never leaves a range empty while there are weights to give.
#[test]
fn the_balanced_cut_is_the_best_contiguous_one() {
    fn best(weights: &[usize], n: usize) -> usize {
        // Least largest part over all cuts into at most n non-empty contiguous ranges.
        if weights.is_empty() {
            return 0;
        }
        if n == 1 {
            return weights.iter().sum();
        }
        (1..=weights.len())
            .map(|i| {
                let head: usize = weights[..i].iter().sum();
                head.max(best(&weights[i..], n - 1))
            })
            .min()
            .unwrap()
    }
    let mut rng = StdRng::seed_from_u64(common::seed());
    for _ in 0..2000 {
        let len = rng.random_range(0..9);
        let n = rng.random_range(1..6);
        let weights: Vec<usize> = (0..len)
            .map(|_| {
                if rng.random_bool(0.2) {
                    0
                } else {
                    rng.random_range(0..9)
                }
            })
            .collect();
        let r = balanced_ranges(&weights, n).unwrap();
        assert_eq!(r.len(), n);
        let largest = r
            .iter()
            .map(|r| weights[r.clone()].iter().sum::<usize>())
            .max()
            .unwrap();
        assert_eq!(largest, best(&weights, n), "{weights:?} into {n}: {r:?}");
        if len >= n {
            assert!(
                r.iter().all(|r| !r.is_empty()),
                "{weights:?} into {n}: {r:?}"
            );
        }
    }
}

/// On a layer whose block-rows keep more blocks the further down they are (a skew equal
/// slices cannot see), the balanced cut stays within a few percent of equal shards while
/// equal slices leave the last device far more; on a layer with every 16th block-row full it
/// is never worse.
#[test]
fn balanced_beats_equal_slices_on_skewed_layers() {
    let ramp = BlockMask::from_fn(128, 64, |r, c| c <= r / 2).unwrap();
    let a = BsrMatrix::<f32>::from_block_mask(&ramp, BlockShape::new(4, 4), |_, _| 1.0).unwrap();
    let mut rng = StdRng::seed_from_u64(common::seed());
    let skewed = BlockMask::skewed(128, 64, 16, 4, &mut rng).unwrap();
    let b = BsrMatrix::<f32>::from_block_mask(&skewed, BlockShape::new(4, 4), |_, _| 1.0).unwrap();
    // (balanced, equal slices) imbalance of a layer over `shards` block-row shards.
    let both = |w: &BsrMatrix<f32>, shards: usize| {
        let equal = equal_ranges(w.num_block_rows(), shards).unwrap();
        (
            w.shard(ShardAxis::BlockRows, shards).unwrap().imbalance(),
            w.shard_ranges(ShardAxis::BlockRows, &equal)
                .unwrap()
                .imbalance(),
        )
    };
    for shards in [2, 3, 4, 8] {
        let (bal, eq) = both(&a, shards);
        println!("ramp, {shards} shards: imbalance {bal:.3} balanced, {eq:.3} equal slices");
        assert!(bal < 1.05 && eq > 1.3, "{bal} vs {eq}");
        let (bal, eq) = both(&b, shards);
        println!("skewed, {shards} shards: imbalance {bal:.3} balanced, {eq:.3} equal slices");
        assert!(bal <= eq + 1e-12, "{bal} vs {eq}");
    }
}

#[test]
fn bad_counts_and_ranges_are_refused_by_type() {
    let mut rng = StdRng::seed_from_u64(common::seed());
    let a: BsrMatrix<f32> = random_bsr(PatternKind::Full, 4, 3, BlockShape::new(2, 2), &mut rng);
    for n in [0, MAX_SHARDS + 1, usize::MAX] {
        assert_eq!(
            a.shard(ShardAxis::BlockRows, n),
            Err(BsrError::ShardCount {
                got: n,
                max: MAX_SHARDS
            })
        );
        assert!(matches!(
            balanced_ranges(&[1, 2], n),
            Err(BsrError::ShardCount { .. })
        ));
        assert!(matches!(
            equal_ranges(5, n),
            Err(BsrError::ShardCount { .. })
        ));
    }
    let bad: [&[std::ops::Range<usize>]; 5] = [
        &[0..2, 3..4], // a gap
        &[0..3, 2..4], // an overlap
        &[0..2, 2..3], // stops short
        &[0..2, 2..5], // past the end
        &[1..3, 3..4], // not from 0
    ];
    for ranges in bad {
        assert!(
            matches!(
                a.shard_ranges(ShardAxis::BlockRows, ranges),
                Err(BsrError::ShardRanges { .. })
            ),
            "{ranges:?}"
        );
    }
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = [0..4, 4..2];
    assert!(matches!(
        a.shard_ranges(ShardAxis::BlockRows, &backwards),
        Err(BsrError::ShardRanges { .. })
    ));
    // Empty ranges are allowed where the rest still covers the matrix.
    let s = a
        .shard_ranges(ShardAxis::BlockCols, &[0..0, 0..3, 3..3])
        .unwrap();
    assert_eq!(s.nnz_blocks(), vec![0, 12, 0]);
}

/// The cut as it was first written, over dense weights: the reference the counting without
/// a value per block-column must reproduce exactly.
fn reference_ranges(weights: &[usize], n: usize) -> Vec<std::ops::Range<usize>> {
    let fits = |cap: usize| {
        let (mut parts, mut sum) = (1usize, 0usize);
        for &w in weights {
            if sum + w > cap {
                parts += 1;
                sum = 0;
            }
            sum += w;
        }
        parts <= n
    };
    let total: usize = weights.iter().sum();
    let (mut lo, mut hi) = (weights.iter().copied().max().unwrap_or(0), total);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let cap = lo;
    let mut ranges = Vec::new();
    let (mut start, mut sum) = (0usize, 0usize);
    for (i, &w) in weights.iter().enumerate() {
        let ranges_left = n - ranges.len();
        let must_close = i > start && weights.len() - i < ranges_left;
        if i > start && (sum + w > cap || must_close) && ranges.len() + 1 < n {
            ranges.push(start..i);
            start = i;
            sum = 0;
        }
        sum += w;
    }
    ranges.push(start..weights.len());
    while ranges.len() < n {
        ranges.push(weights.len()..weights.len());
    }
    ranges
}

/// The cut of `balanced_ranges` and of `shard` (both axes) is the reference's on dense
/// weights, on random weights with long runs of zeros (the tail where every position closes
/// a range included) and on random matrices.
#[test]
fn the_cut_is_the_dense_counts_cut() {
    let mut rng = StdRng::seed_from_u64(common::seed());
    for _ in 0..20_000 {
        let len = rng.random_range(0..40);
        let n = rng.random_range(1..48);
        let p_zero = [0.0, 0.5, 0.9, 1.0][rng.random_range(0..4)];
        let weights: Vec<usize> = (0..len)
            .map(|_| {
                if rng.random_bool(p_zero) {
                    0
                } else {
                    rng.random_range(1..20)
                }
            })
            .collect();
        assert_eq!(
            balanced_ranges(&weights, n).unwrap(),
            reference_ranges(&weights, n),
            "{weights:?} into {n}"
        );
    }
    for i in 0..3000 {
        let kind = KINDS[i % KINDS.len()];
        let block = BlockShape::new(rng.random_range(1..4), rng.random_range(1..4));
        let (br, bc) = (rng.random_range(0..12), rng.random_range(0..30));
        let a: BsrMatrix<f32> = random_bsr(kind, br, bc, block, &mut rng);
        let n = rng.random_range(1..40);
        for axis in [ShardAxis::BlockRows, ShardAxis::BlockCols] {
            let counts = a.block_counts(axis).unwrap();
            let s = a.shard(axis, n).unwrap();
            assert_eq!(
                s.ranges(),
                &reference_ranges(&counts, n)[..],
                "{axis:?} {br}x{bc} {kind:?} into {n}"
            );
        }
    }
}

/// A matrix of i32::MAX block-columns (1x1 blocks) with three blocks, and one with none, cut
/// by block-columns: the cut counts the blocks, not the columns. A count per block-column
/// would be 16 GiB, refused by the allocation guard (and a zero-fill of that size takes
/// seconds where this takes milliseconds).
#[test]
fn a_wide_matrix_with_few_blocks_shards_by_its_blocks() {
    let wide = i32::MAX as usize;
    let block = BlockShape::new(1, 1);
    let few = BsrMatrix::from_parts(
        2,
        wide,
        block,
        vec![0, 2, 3],
        vec![0, 5, i32::MAX - 1],
        vec![1.0f32, 2.0, 3.0],
    )
    .unwrap();
    let none =
        BsrMatrix::<f32>::from_parts(3, wide, block, vec![0, 0, 0, 0], vec![], vec![]).unwrap();
    let started = std::time::Instant::now();
    for n in [1, 2, 3, 4, 64, MAX_SHARDS] {
        for a in [&few, &none] {
            let s = a
                .shard(ShardAxis::BlockCols, n)
                .unwrap_or_else(|e| panic!("{} blocks into {n}: {e}", a.nnz_blocks()));
            assert_eq!(s.ranges().len(), n);
            assert_eq!(s.ranges()[0].start, 0);
            assert_eq!(s.ranges()[n - 1].end, wide);
            assert!(s.ranges().windows(2).all(|w| w[0].end == w[1].start));
            assert_eq!(s.nnz_blocks().iter().sum::<usize>(), a.nnz_blocks());
            // The least largest shard: the blocks (one per block-column) spread evenly.
            let least = a.nnz_blocks().div_ceil(n);
            let largest = s.nnz_blocks().into_iter().max().unwrap();
            assert_eq!(
                largest,
                least,
                "{} blocks into {n}: {:?}",
                a.nnz_blocks(),
                s.ranges()
            );
            for (sh, r) in s.shards().iter().zip(s.ranges()) {
                assert_eq!((sh.m(), sh.k()), (a.m(), r.len()));
            }
        }
    }
    let s = few.shard(ShardAxis::BlockCols, 3).unwrap();
    assert_eq!(s.nnz_blocks(), vec![1, 1, 1]);
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "cutting a wide matrix took {took:?}"
    );
}

/// `SparseMlp::shard` reaches the down weight's block-columns: a gated MLP of i32::MAX
/// intermediate rows (one gate and one up block-row of i32::MAX rows, a down weight of 1x1
/// blocks, i32::MAX block-columns, two blocks) cuts by its blocks too.
#[test]
fn a_wide_mlp_with_few_blocks_shards_by_its_blocks() {
    let inter = i32::MAX as usize;
    let tall = BlockShape::new(inter, 1);
    // A gate block of i32::MAX values would be 8 GiB: gate and up hold none.
    let empty = BsrMatrix::<f32>::from_parts(inter, 1, tall, vec![0, 0], vec![], vec![]).unwrap();
    let down = BsrMatrix::from_parts(
        1,
        inter,
        BlockShape::new(1, 1),
        vec![0, 2],
        vec![3, i32::MAX - 2],
        vec![1.0f32, 2.0],
    )
    .unwrap();
    let mlp = SparseMlp::new(&empty, &empty, down, Activation::Silu).unwrap();
    let started = std::time::Instant::now();
    for n in [1, 2, 3, MAX_SHARDS] {
        let s = mlp
            .shard(n)
            .unwrap_or_else(|e| panic!("the MLP into {n}: {e}"));
        assert_eq!(s.shards().len(), n);
        // One unit of i32::MAX rows (lcm of the gate's block-rows and down's 1): shard 0 has
        // it, the others are empty.
        assert_eq!(s.ranges()[0], 0..inter);
        assert_eq!(s.work()[0], 2);
        assert!(s.ranges()[1..].iter().all(|r| r.is_empty()));
        assert_eq!(s.shards()[0].down().nnz_blocks(), 2);
    }
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "cutting a wide MLP took {took:?}"
    );
}
