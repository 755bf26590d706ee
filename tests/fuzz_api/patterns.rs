//! Targets: BlockPatterns (from_parts, from_block_masks, with_heads, check_dims,
//! check_dims_grouped, pattern_of, row).

use std::fmt::Debug;
use std::io::Write;
use std::time::{Duration, Instant};

use rand::Rng;
use sparsek::{BlockMask, BlockPatterns};

use crate::fuzz::{ensure, Check, FuzzRng, Outcome, ALLOC_LIMIT, I32_MAX};
use crate::inputs::{dim, huge, CAP};
use crate::operands::gen_block;
use crate::DRIVER;

/// What the child writes once `fixed` has returned: a child whose filter matched no test
/// also exits with success.
const CHILD_DONE: &str = "in_child: fixed input done";

/// Runs this module's test `test` again in a child process of this binary, where `fixed`
/// runs alone: an abort or a hang (past `limit`, then the child is killed) fails the test
/// that asks, not the whole binary. In the child, runs `fixed` and returns `None`.
fn in_child(test: &str, limit: Duration, fixed: impl FnOnce()) -> Option<Result<(), String>> {
    // libtest names a test by its path below the crate.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let test = format!("{module}::{test}");
    if std::env::var("SPARSEK_FUZZ_CHILD").as_deref() == Ok(test.as_str()) {
        fixed();
        // Straight to stderr: libtest captures `eprintln!`.
        let _ = writeln!(std::io::stderr(), "{CHILD_DONE}");
        return None;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = std::process::Command::new(exe)
        .args([
            test.as_str(),
            "--exact",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env("SPARSEK_FUZZ_CHILD", &test)
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("a child process");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    let tail: String = stderr
        .lines()
        .filter(|l| l.contains("asked for") || l.contains("alloc") || l.contains("panicked"))
        .take(4)
        .collect::<Vec<_>>()
        .join(" | ");
    Some(match status {
        None => Err(format!("no answer within {limit:?} (a hang)")),
        Some(s) if !s.success() => Err(format!("the child died: {s} ({tail})")),
        Some(_) if stderr.lines().any(|l| l == CHILD_DONE) => Ok(()),
        Some(_) => Err(format!("the child ran no test named {test}")),
    })
}

/// How a case builds its patterns.
#[derive(Debug, Clone)]
enum PatternsBuild {
    /// `from_parts` with these arrays.
    Parts {
        q_blocks: usize,
        k_blocks: usize,
        patterns: usize,
        row_ptr: Vec<i32>,
        col_idx: Vec<i32>,
    },
    /// `from_block_masks` of masks `rows x cols`, bits drawn with density `p`.
    Masks { shapes: Vec<(usize, usize)>, p: f64 },
}

#[derive(Debug, Clone)]
struct PatternsCase {
    block_q: usize,
    block_k: usize,
    build: PatternsBuild,
    /// `with_heads(batch, heads)`, if called.
    with_heads: Option<(usize, usize)>,
    /// `check_dims(batch, heads, seq_q, seq_k)`.
    dims: (usize, usize, usize, usize),
    /// `check_dims_grouped(batch, q_heads, kv_heads, seq_q, seq_k)`: the heads of Q and K
    /// (batch and seqs as `dims`).
    grouped: (usize, usize),
    /// `row(p, i)` queries.
    rows: Vec<(usize, usize)>,
}

/// A few edge values of i32 and small ones.
fn edge_i32(rng: &mut FuzzRng, small: i32) -> i32 {
    if rng.random_bool(0.3) {
        [i32::MIN, -2, -1, 0, 1, i32::MAX - 1, i32::MAX][rng.random_range(0..7)]
    } else {
        rng.random_range(-1..=small)
    }
}

/// Valid stacked arrays of `rows` rows over `k_blocks` columns, then mutated.
fn gen_pattern_arrays(
    rng: &mut FuzzRng,
    rows: usize,
    k_blocks: usize,
    clean: bool,
) -> (Vec<i32>, Vec<i32>) {
    let p: f64 = rng.random();
    let (mut row_ptr, mut col_idx) = (vec![0i32], Vec::new());
    for _ in 0..rows {
        for c in 0..k_blocks.min(64) {
            if rng.random_bool(p) {
                col_idx.push(c as i32);
            }
        }
        row_ptr.push(col_idx.len() as i32);
    }
    let mutations = if clean { 0 } else { rng.random_range(1..=3) };
    for _ in 0..mutations {
        let n = col_idx.len() as i32;
        match rng.random_range(0..10) {
            0 if !row_ptr.is_empty() => {
                let i = rng.random_range(0..row_ptr.len());
                row_ptr[i] = edge_i32(rng, n + 1);
            }
            1 => {
                if rng.random_bool(0.5) {
                    row_ptr.push(edge_i32(rng, n + 1));
                } else {
                    row_ptr.pop();
                }
            }
            2 if row_ptr.len() >= 2 => {
                let (i, j) = (
                    rng.random_range(0..row_ptr.len()),
                    rng.random_range(0..row_ptr.len()),
                );
                row_ptr.swap(i, j);
            }
            3 if !col_idx.is_empty() => {
                let i = rng.random_range(0..col_idx.len());
                col_idx[i] = edge_i32(rng, k_blocks.min(64) as i32 + 1);
            }
            4 if col_idx.len() >= 2 => {
                let i = rng.random_range(1..col_idx.len());
                if rng.random_bool(0.5) {
                    col_idx[i] = col_idx[i - 1];
                } else {
                    col_idx.swap(i - 1, i);
                }
            }
            5 => {
                if rng.random_bool(0.5) {
                    col_idx.push(edge_i32(rng, k_blocks.min(64) as i32));
                } else {
                    col_idx.pop();
                }
            }
            6 => {
                let n = rng.random_range(0..=6);
                row_ptr = (0..n).map(|_| edge_i32(rng, 6)).collect();
                let n = rng.random_range(0..=6);
                col_idx = (0..n).map(|_| edge_i32(rng, 6)).collect();
            }
            _ => {}
        }
    }
    (row_ptr, col_idx)
}

fn gen_patterns(rng: &mut FuzzRng, masks: bool) -> PatternsCase {
    let clean = rng.random_bool(0.5);
    let (block_q, block_k) = (gen_block(rng, clean), gen_block(rng, clean));
    let count = if rng.random_bool(0.6) {
        1
    } else {
        rng.random_range(0..=6)
    };
    let (q_blocks, k_blocks) = (rng.random_range(0..=4), rng.random_range(0..=5));
    let build = if masks {
        let mut shapes = vec![(q_blocks, k_blocks); count];
        if !clean && !shapes.is_empty() {
            let i = rng.random_range(0..shapes.len());
            match rng.random_range(0..6) {
                0 | 1 => shapes[i].0 ^= 1,
                2 | 3 => shapes[i].1 ^= 1,
                // Many rows of no column: nothing to store, cheap to ask for.
                4 => {
                    let rows = [1 << 10, 1 << 22, 1 << 28, I32_MAX][rng.random_range(0..4)];
                    shapes.iter_mut().for_each(|s| *s = (rows, 0));
                }
                _ => {}
            }
        }
        PatternsBuild::Masks {
            shapes,
            p: rng.random(),
        }
    } else {
        let (mut q, mut k, mut n) = (q_blocks, k_blocks, count);
        let (row_ptr, col_idx) = gen_pattern_arrays(rng, n * q, k, clean);
        if !clean {
            match rng.random_range(0..8) {
                0 => q = huge(rng),
                1 => k = huge(rng),
                2 => n = huge(rng),
                3 => k = k.saturating_sub(1),
                4 => q ^= 1,
                _ => {}
            }
        }
        PatternsBuild::Parts {
            q_blocks: q,
            k_blocks: k,
            patterns: n,
            row_ptr,
            col_idx,
        }
    };
    // with_heads and check_dims: the right problem mostly.
    let (batch, heads) = match count {
        1 => (rng.random_range(0..=3), rng.random_range(0..=3)),
        n => [(1, n), (n, 1), (n, 1)][rng.random_range(0..3)],
    };
    let with_heads = match rng.random_range(0..8) {
        0 => None,
        1 => Some((dim(rng, 3, 0.3), dim(rng, 3, 0.3))),
        2 => Some((heads, batch)),
        _ => Some((batch, heads)),
    };
    let seq = |rng: &mut FuzzRng, blocks: usize, block: usize| {
        let s = blocks.saturating_mul(block);
        match rng.random_range(0..8) {
            0 => dim(rng, 40, 0.5),
            1 => s.saturating_add(1),
            _ => s.saturating_sub(rng.random_range(0..block.clamp(1, 8))),
        }
    };
    let mut dims = (
        batch,
        heads,
        seq(rng, q_blocks, block_q),
        seq(rng, k_blocks, block_k),
    );
    match rng.random_range(0..8) {
        0 => dims.0 = dim(rng, 3, 0.5),
        1 => dims.1 = dim(rng, 3, 0.5),
        _ => {}
    }
    let rows = (0..rng.random_range(0..=4))
        .map(|_| (dim(rng, count + 1, 0.1), dim(rng, q_blocks + 1, 0.1)))
        .collect();
    // Grouped-query heads: the set's heads as Q's (K's a divisor of them) or as K's (Q's a
    // multiple), else any.
    let h = dims.1;
    let grouped = match rng.random_range(0..6) {
        0 => (h, h),
        1 => {
            let divisors: Vec<usize> = (1..=h.min(8)).filter(|x| h % x == 0).collect();
            (
                h,
                divisors
                    .get(rng.random_range(0..divisors.len().max(1)))
                    .copied()
                    .unwrap_or(0),
            )
        }
        2 | 3 => (h.saturating_mul(rng.random_range(1..=3)), h),
        _ => (dim(rng, 6, 0.2), dim(rng, 4, 0.2)),
    };
    PatternsCase {
        block_q,
        block_k,
        build,
        with_heads,
        dims,
        grouped,
        rows,
    }
}

/// The documented rules of `from_parts`, independently: `Some((rows, ...))` when valid.
fn parts_valid(
    (block_q, block_k): (usize, usize),
    (q_blocks, k_blocks, patterns): (usize, usize, usize),
    row_ptr: &[i32],
    col_idx: &[i32],
) -> bool {
    if block_q == 0 || block_k == 0 {
        return false;
    }
    let rows = patterns as u128 * q_blocks as u128;
    if rows >= I32_MAX as u128 || k_blocks > I32_MAX || col_idx.len() > I32_MAX {
        return false;
    }
    let rows = rows as usize;
    if row_ptr.len() != rows + 1 || row_ptr[0] != 0 || row_ptr[rows] as i64 != col_idx.len() as i64
    {
        return false;
    }
    if row_ptr.windows(2).any(|w| w[1] < w[0]) {
        return false;
    }
    row_ptr.windows(2).all(|w| {
        let cols = &col_idx[w[0] as usize..w[1] as usize];
        cols.iter().all(|&c| c >= 0 && (c as usize) < k_blocks)
            && cols.windows(2).all(|p| p[0] < p[1])
    })
}

/// The documented rule of `check_dims_grouped` for patterns of these dims: the blocks of
/// `check_dims`, K's heads dividing Q's (both 0 allowed), and one pattern or a set made for
/// (batch, Q's heads) or (batch, K's heads).
fn grouped_dims_valid(
    (block_q, block_k, q_blocks, k_blocks, patterns): (usize, usize, usize, usize, usize),
    recorded: Option<(usize, usize)>,
    (batch, q_heads, kv_heads, seq_q, seq_k): (usize, usize, usize, usize, usize),
) -> bool {
    let divides = if kv_heads == 0 {
        q_heads == 0
    } else {
        q_heads % kv_heads == 0
    };
    q_blocks == seq_q.div_ceil(block_q)
        && k_blocks == seq_k.div_ceil(block_k)
        && q_blocks <= I32_MAX
        && k_blocks <= I32_MAX
        && divides
        && batch.checked_mul(q_heads).is_some()
        && (patterns == 1
            || [q_heads, kv_heads]
                .iter()
                .any(|&h| recorded == Some((batch, h)) && batch.checked_mul(h) == Some(patterns)))
}

/// The documented rule of `check_dims` for patterns of these dims (the blocks' counts within
/// int32, as every attention mask's: rules/attention.toml).
fn dims_valid(
    (block_q, block_k, q_blocks, k_blocks, patterns): (usize, usize, usize, usize, usize),
    recorded: Option<(usize, usize)>,
    (batch, heads, seq_q, seq_k): (usize, usize, usize, usize),
) -> bool {
    let pairs = batch.checked_mul(heads);
    q_blocks == seq_q.div_ceil(block_q)
        && k_blocks == seq_k.div_ceil(block_k)
        && q_blocks <= I32_MAX
        && k_blocks <= I32_MAX
        && pairs.is_some()
        && (patterns == 1 || (Some(patterns) == pairs && recorded == Some((batch, heads))))
}

fn run_patterns(c: &PatternsCase, rng: &mut FuzzRng) -> Check {
    // Build, against the oracle; keep the arrays the result must hold.
    let (built, q_blocks, k_blocks, patterns, row_ptr, col_idx) = match &c.build {
        PatternsBuild::Parts {
            q_blocks,
            k_blocks,
            patterns,
            row_ptr,
            col_idx,
        } => {
            let valid = parts_valid(
                (c.block_q, c.block_k),
                (*q_blocks, *k_blocks, *patterns),
                row_ptr,
                col_idx,
            );
            let r = BlockPatterns::from_parts(
                c.block_q,
                c.block_k,
                *q_blocks,
                *k_blocks,
                *patterns,
                row_ptr.clone(),
                col_idx.clone(),
            );
            ensure!(
                r.is_ok() == valid,
                "from_parts gave {:?}, the oracle says valid = {valid}",
                r.as_ref().err()
            );
            (
                r,
                *q_blocks,
                *k_blocks,
                *patterns,
                row_ptr.clone(),
                col_idx.clone(),
            )
        }
        PatternsBuild::Masks { shapes, p } => {
            let masks: Vec<BlockMask> = shapes
                .iter()
                .map(|&(r, k)| {
                    BlockMask::from_fn(r, k, |_, _| rng.random_bool(*p)).expect("a small mask")
                })
                .collect();
            let (q_blocks, k_blocks) = shapes.first().copied().unwrap_or((0, 0));
            let rows = q_blocks as u128 * shapes.len() as u128;
            let valid = c.block_q >= 1
                && c.block_k >= 1
                && shapes.iter().all(|&s| s == (q_blocks, k_blocks))
                && rows < I32_MAX as u128;
            // The stacked arrays, from the masks' bits.
            let (mut row_ptr, mut col_idx) = (vec![0i32], Vec::new());
            if valid && rows <= CAP as u128 {
                for m in &masks {
                    for r in 0..q_blocks {
                        for k in 0..k_blocks {
                            if m.get(r, k) == Some(true) {
                                col_idx.push(k as i32);
                            }
                        }
                        row_ptr.push(col_idx.len() as i32);
                    }
                }
            }
            let r = BlockPatterns::from_block_masks(c.block_q, c.block_k, &masks);
            // The row offsets take (rows + 1) i32: beyond the guard's limit, an error.
            let small = (rows + 1) * 4 <= ALLOC_LIMIT as u128;
            ensure!(
                r.is_ok() == (valid && small),
                "from_block_masks gave {:?}, the oracle says valid = {valid}",
                r.as_ref().err()
            );
            if r.is_ok() && rows > CAP as u128 {
                return Ok(Outcome::Accepted);
            }
            (r, q_blocks, k_blocks, shapes.len(), row_ptr, col_idx)
        }
    };
    let Ok(set) = built else {
        return Ok(Outcome::Rejected);
    };
    ensure!(
        (
            set.block_q(),
            set.block_k(),
            set.q_blocks(),
            set.k_blocks(),
            set.patterns()
        ) == (c.block_q, c.block_k, q_blocks, k_blocks, patterns)
            && set.heads().is_none(),
        "dims of the set"
    );
    ensure!(
        set.row_ptr() == row_ptr.as_slice() && set.col_idx() == col_idx.as_slice(),
        "arrays ({:?}, {:?}), given ({row_ptr:?}, {col_idx:?})",
        set.row_ptr(),
        set.col_idx()
    );
    ensure!(set.nnzb() == col_idx.len(), "nnzb");
    // row(p, i): the listed slice in range, empty outside.
    let mut queries = c.rows.clone();
    queries.push((patterns.saturating_sub(1), q_blocks.saturating_sub(1)));
    for (p, i) in queries {
        let want: &[i32] = if p < patterns && i < q_blocks {
            let r = p * q_blocks + i;
            &col_idx[row_ptr[r] as usize..row_ptr[r + 1] as usize]
        } else {
            &[]
        };
        ensure!(set.row(p, i) == want, "row({p}, {i}) = {:?}", set.row(p, i));
    }
    // with_heads, then check_dims.
    let shape = (c.block_q, c.block_k, q_blocks, k_blocks, patterns);
    let (set, recorded) = match c.with_heads {
        None => (set, None),
        Some((b, h)) => {
            let r = set.clone().with_heads(b, h);
            let valid = b.checked_mul(h) == Some(patterns);
            ensure!(
                r.is_ok() == valid,
                "with_heads({b}, {h}) of {patterns} patterns gave {:?}",
                r.as_ref().err()
            );
            match r {
                Ok(s) => {
                    ensure!(s.heads() == Some((b, h)), "heads() = {:?}", s.heads());
                    (s, Some((b, h)))
                }
                Err(_) => (set, None),
            }
        }
    };
    let (b, h, sq, sk) = c.dims;
    let r = set.check_dims(b, h, sq, sk);
    let valid = dims_valid(shape, recorded, c.dims);
    ensure!(
        r.is_ok() == valid,
        "check_dims{:?} gave {:?}, the oracle says valid = {valid}",
        c.dims,
        r.as_ref().err()
    );
    // Grouped-query heads; then the pattern each (sequence, query head) reads:
    // `b·heads + h / (q_heads / heads)` of a set made for (batch, heads), else 0.
    let (qh, kvh) = c.grouped;
    let r = set.check_dims_grouped(b, qh, kvh, sq, sk);
    let valid = grouped_dims_valid(shape, recorded, (b, qh, kvh, sq, sk));
    ensure!(
        r.is_ok() == valid,
        "check_dims_grouped{:?} gave {:?}, the oracle says valid = {valid}",
        (b, qh, kvh, sq, sk),
        r.as_ref().err()
    );
    if valid && b <= 8 && qh <= 8 {
        for bi in 0..b {
            for h in 0..qh {
                let want = match recorded {
                    Some((_, mh)) if patterns != 1 => bi * mh + h / (qh / mh),
                    _ => 0,
                };
                let got = set.pattern_of(bi, h, qh);
                ensure!(
                    got == want && got < patterns,
                    "pattern_of({bi}, {h}, {qh}) = {got}, not {want} (of {patterns})"
                );
            }
        }
    }
    Ok(Outcome::Accepted)
}

#[test]
fn fuzz_patterns_from_parts() {
    DRIVER.run(
        "BlockPatterns::from_parts",
        6,
        |rng| gen_patterns(rng, false),
        run_patterns,
    );
}

/// From 2^31 - 1 rows of no column (a mask that costs nothing), `from_block_masks` grows
/// its row offsets with an infallible push to 8 GiB before `from_parts` refuses the count.
fn from_block_masks_of_empty_rows() {
    let mask = BlockMask::new(I32_MAX, 0, Vec::new()).expect("an empty mask");
    let r = BlockPatterns::from_block_masks(1, 1, &[mask]);
    assert!(r.is_err(), "{r:?}");
}

// `from_block_masks` (src/attention/patterns.rs) must refuse masks of up to i32::MAX rows
// and no column (they cost nothing) before it sizes the row offsets: offsets grown by an
// infallible `push` would take up to 8 GiB per mask (the allocation guard refuses that past
// 16 MiB, and the process aborts), though `from_parts` refuses more than i32::MAX - 1 rows.
// The fixed input runs in a child process (`from_block_masks_of_empty_rows`), so an abort
// fails this test alone; the fuzz draws such masks too.
#[test]
fn fuzz_patterns_from_block_masks() {
    let test = "fuzz_patterns_from_block_masks";
    let Some(r) = in_child(
        test,
        Duration::from_secs(20),
        from_block_masks_of_empty_rows,
    ) else {
        return;
    };
    assert_eq!(r, Ok(()), "from_block_masks of a {} x 0 mask", I32_MAX);
    DRIVER.run(
        "BlockPatterns::from_block_masks",
        7,
        |rng| gen_patterns(rng, true),
        run_patterns,
    );
}
