//! Tensor parallelism over NCCL (`sparsek::tp`, feature `nccl`) on two GPUs: the
//! tensor-parallel MLP against the one-GPU MLP (f32 reduction-order tolerance), identical
//! on every rank, bitwise repeatable over 100 runs, the balanced and the equal cut agreeing,
//! and operands on the wrong GPU refused before anything runs. Needs two GPUs and a
//! loadable libnccl: without them each test says SKIPPED; with SPARSEK_REQUIRE_GPUS=2 (the
//! two-GPU run) either missing is a failure.
#![cfg(all(feature = "full", feature = "nccl"))]

mod common;

use std::sync::Arc;

use common::{nonzero, random_vec, seed};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::tp::{TpGroup, TpSparseMlp};
use sparsek::{f16, Activation, BlockMask, BlockShape, BsrMatrix, Error, SparseMlp};

/// Two GPUs' streams and their group, or None (SKIPPED) without them.
fn two_gpus(test: &str) -> Option<(Vec<Arc<CudaStream>>, TpGroup)> {
    let require = std::env::var_os("SPARSEK_REQUIRE_GPUS").is_some();
    // open_device first: cudarc panics where no libcuda can be loaded at all.
    if let Err(why) = sparsek::gpu::open_device() {
        assert!(!require, "{test}: SPARSEK_REQUIRE_GPUS is set but: {why}");
        eprintln!("SKIPPED {test}: no GPU ({why})");
        return None;
    }
    let count = CudaContext::device_count().unwrap_or(0);
    if count < 2 {
        assert!(
            !require,
            "{test}: SPARSEK_REQUIRE_GPUS is set but {count} GPU(s) found"
        );
        eprintln!("SKIPPED {test}: {count} GPU(s), two needed");
        return None;
    }
    let streams: Vec<_> = (0..2)
        .map(|i| CudaContext::new(i).unwrap().default_stream())
        .collect();
    match TpGroup::new(streams.clone()) {
        Ok(g) => Some((streams, g)),
        Err(e) => {
            assert!(!require, "{test}: SPARSEK_REQUIRE_GPUS is set but: {e}");
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

/// A skewed weight: later block-rows denser (pruned layers are not uniform).
fn skewed(rows: usize, cols: usize, block: BlockShape, rng: &mut StdRng) -> BsrMatrix<f16> {
    let mask = BlockMask::from_fn(rows, cols, |r, _| {
        rng.random_bool(0.15 + 0.8 * r as f64 / rows as f64)
    })
    .unwrap();
    BsrMatrix::from_block_mask(&mask, block, |_, _| nonzero::<f16>(rng)).unwrap()
}

fn rel(a: &[f32], b: &[f32]) -> f64 {
    let (n, d) = a.iter().zip(b).fold((0f64, 0f64), |(n, d), (&x, &y)| {
        (n + (x as f64 - y as f64).powi(2), d + (y as f64).powi(2))
    });
    (n / d.max(1e-30)).sqrt()
}

#[test]
fn tp_mlp_matches_one_gpu_and_repeats_bitwise() {
    let Some((streams, group)) = two_gpus("tp_mlp_matches_one_gpu_and_repeats_bitwise") else {
        return;
    };
    for ctx in streams.iter().map(|s| s.context()) {
        // SAFETY: every buffer here lives and is used on its GPU's one stream.
        unsafe { ctx.disable_event_tracking() };
    }
    let mut rng = StdRng::seed_from_u64(seed());
    let (hidden, inter) = (1024, 3072);
    let (gb, db) = (BlockShape::new(128, 128), BlockShape::new(64, 64));
    let gate = skewed(inter / gb.rows, hidden / gb.cols, gb, &mut rng);
    let up = skewed(inter / gb.rows, hidden / gb.cols, gb, &mut rng);
    let down = skewed(hidden / db.rows, inter / db.cols, db, &mut rng);
    let mlp = SparseMlp::new(&gate, &up, down, Activation::Silu).unwrap();
    let tp = TpSparseMlp::new(&mlp, &group).unwrap();
    let naive = TpSparseMlp::from_shards(mlp.shard_equal(2).unwrap(), &group, &mlp).unwrap();
    println!(
        "imbalance: balanced {:.3} (work {:?}), equal slices {:.3} (work {:?})",
        tp.imbalance(),
        tp.work(),
        naive.imbalance(),
        naive.work()
    );
    assert!(tp.imbalance() <= naive.imbalance());
    let one = mlp.upload(&streams[0]).unwrap();
    for batch in [1usize, 7, 16, 64] {
        let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
        // One GPU.
        let s0 = &streams[0];
        let dx = s0.clone_htod(&x).unwrap();
        let mut dh = s0.alloc_zeros::<f16>(batch * inter).unwrap();
        let mut dy = s0.clone_htod(&vec![f32::NAN; batch * hidden]).unwrap();
        one.forward(&dx, batch, &mut dh, &mut dy).unwrap();
        let want = s0.clone_dtoh(&dy).unwrap();
        // Two GPUs, balanced and equal cuts.
        for (name, model) in [("balanced", &tp), ("equal", &naive)] {
            let xs: Vec<CudaSlice<f16>> =
                streams.iter().map(|s| s.clone_htod(&x).unwrap()).collect();
            let mut hs: Vec<CudaSlice<f16>> = streams
                .iter()
                .zip(model.inter())
                .map(|(s, &i)| s.alloc_zeros::<f16>((batch * i).max(1)).unwrap())
                .collect();
            let mut ys: Vec<CudaSlice<f32>> = streams
                .iter()
                .map(|s| s.clone_htod(&vec![f32::NAN; batch * hidden]).unwrap())
                .collect();
            model.forward(&group, &xs, batch, &mut hs, &mut ys).unwrap();
            let first: Vec<Vec<f32>> = streams
                .iter()
                .zip(&ys)
                .map(|(s, y)| s.clone_dtoh(y).unwrap())
                .collect();
            assert!(
                first[0].iter().all(|v| v.is_finite()),
                "{name} batch {batch}: y not written"
            );
            // h is f16: another split of the gate and up reduction (each GPU has its own
            // grid) can round an h value to the neighbouring f16 (2^-11 relative), which the
            // down product carries into y; the f32 partial sums alone agree to ~1e-6.
            let err = rel(&first[0], &want);
            assert!(
                err < 5e-4,
                "{name} batch {batch}: TP vs one GPU rel err {err:.3e}"
            );
            assert!(
                first[0]
                    .iter()
                    .zip(&first[1])
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{name} batch {batch}: the ranks' y differ"
            );
            for rep in 0..100 {
                for (s, y) in streams.iter().zip(ys.iter_mut()) {
                    s.memcpy_htod(&vec![f32::NAN; batch * hidden], y).unwrap();
                }
                model.forward(&group, &xs, batch, &mut hs, &mut ys).unwrap();
                for (r, (s, y)) in streams.iter().zip(&ys).enumerate() {
                    let got = s.clone_dtoh(y).unwrap();
                    assert!(
                        got.iter()
                            .zip(&first[r])
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{name} batch {batch}: run {rep} rank {r} differs"
                    );
                }
            }
            println!("{name} batch {batch}: rel err {err:.2e} vs one GPU, 100 runs bitwise on both ranks");
        }
    }
}

#[test]
fn tp_refuses_buffers_on_the_wrong_gpu() {
    let Some((streams, group)) = two_gpus("tp_refuses_buffers_on_the_wrong_gpu") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let b = BlockShape::new(64, 64);
    let mlp = SparseMlp::new(
        &skewed(4, 4, b, &mut rng),
        &skewed(4, 4, b, &mut rng),
        skewed(4, 4, b, &mut rng),
        Activation::Silu,
    )
    .unwrap();
    let tp = TpSparseMlp::new(&mlp, &group).unwrap();
    let batch = 2;
    let xs: Vec<CudaSlice<f16>> = streams
        .iter()
        .map(|s| s.alloc_zeros(batch * 256).unwrap())
        .collect();
    let mut hs: Vec<CudaSlice<f16>> = streams
        .iter()
        .map(|s| s.alloc_zeros(batch * 256).unwrap())
        .collect();
    let sentinel = vec![7.0f32; batch * 256];
    let mut ys: Vec<CudaSlice<f32>> = streams
        .iter()
        .map(|s| s.clone_htod(&sentinel).unwrap())
        .collect();
    // Rank 0's x on GPU 1.
    let swapped = [xs[1].clone(), xs[0].clone()];
    let e = tp
        .forward(&group, &swapped, batch, &mut hs, &mut ys)
        .unwrap_err();
    assert!(matches!(e, Error::ContextMismatch { .. }), "{e}");
    // y too short on rank 1.
    let mut short: Vec<CudaSlice<f32>> = vec![
        streams[0].clone_htod(&sentinel).unwrap(),
        streams[1].clone_htod(&sentinel[1..]).unwrap(),
    ];
    assert!(tp.forward(&group, &xs, batch, &mut hs, &mut short).is_err());
    for (s, y) in streams.iter().zip(&ys) {
        assert_eq!(
            s.clone_dtoh(y).unwrap(),
            sentinel,
            "y written by a refused call"
        );
    }
    // A group over one GPU twice is refused.
    let e = TpGroup::new(vec![streams[0].clone(), streams[0].clone()])
        .err()
        .unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

/// `TpSparseLinear`, column-parallel (bias and SiLU per rank, each rank its features of y)
/// and row-parallel (each rank its features of x, one all-reduce, the bias once) against the
/// one-GPU layer; row-parallel ranks identical and 100 runs bitwise; a row-parallel layer
/// with an activation refused.
#[test]
fn tp_linear_matches_one_gpu() {
    use sparsek::tp::{TpSparseLinear, TpSplit};
    use sparsek::SparseLinear;
    let Some((streams, group)) = two_gpus("tp_linear_matches_one_gpu") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let (out, inp) = (3072, 2048);
    let block = BlockShape::new(64, 64);
    let w = skewed(out / 64, inp / 64, block, &mut rng);
    let bias: Vec<f16> = random_vec(out, &mut rng);
    for (split, act) in [
        (TpSplit::Column, Activation::Silu),
        (TpSplit::Row, Activation::None),
    ] {
        let layer = SparseLinear::new(w.clone(), Some(bias.clone()), act).unwrap();
        let tp = TpSparseLinear::new(&layer, split, &group).unwrap();
        let one = SparseLinear::new_device(
            sparsek::DeviceBsr::upload(&w, &streams[0]).unwrap(),
            Some(streams[0].clone_htod(&bias).unwrap()),
            act,
        )
        .unwrap();
        println!(
            "{split:?}: ranges {:?}, imbalance {:.3}",
            tp.ranges(),
            tp.imbalance()
        );
        for batch in [1usize, 9, 32] {
            let x: Vec<f16> = random_vec(batch * inp, &mut rng);
            let dx = streams[0].clone_htod(&x).unwrap();
            let mut dy = streams[0].alloc_zeros::<f32>(batch * out).unwrap();
            one.forward(&dx, batch, &mut dy).unwrap();
            let want = streams[0].clone_dtoh(&dy).unwrap();
            let ranges = tp.ranges().to_vec();
            let xs: Vec<CudaSlice<f16>> = streams
                .iter()
                .zip(&ranges)
                .map(|(s, r)| {
                    let xr: Vec<f16> = match split {
                        TpSplit::Column => x.clone(),
                        TpSplit::Row => (0..batch)
                            .flat_map(|b| x[b * inp + r.start..b * inp + r.end].to_vec())
                            .collect(),
                    };
                    s.clone_htod(&xr).unwrap()
                })
                .collect();
            let y_len = |r: &std::ops::Range<usize>| {
                batch
                    * if split == TpSplit::Column {
                        r.len()
                    } else {
                        out
                    }
            };
            let mut ys: Vec<CudaSlice<f32>> = streams
                .iter()
                .zip(&ranges)
                .map(|(s, r)| s.clone_htod(&vec![f32::NAN; y_len(r).max(1)]).unwrap())
                .collect();
            tp.forward(&group, &xs, batch, &mut ys).unwrap();
            let got: Vec<Vec<f32>> = streams
                .iter()
                .zip(&ys)
                .map(|(s, y)| s.clone_dtoh(y).unwrap())
                .collect();
            match split {
                TpSplit::Column => {
                    // Reassemble y (batch x out) from the ranks' feature slices.
                    let mut y = vec![f32::NAN; batch * out];
                    for (g, r) in got.iter().zip(&ranges) {
                        for b in 0..batch {
                            y[b * out + r.start..b * out + r.end]
                                .copy_from_slice(&g[b * r.len()..(b + 1) * r.len()]);
                        }
                    }
                    let err = rel(&y, &want);
                    assert!(err < 1e-5, "column batch {batch}: rel err {err:.3e}");
                }
                TpSplit::Row => {
                    let err = rel(&got[0], &want);
                    assert!(err < 1e-5, "row batch {batch}: rel err {err:.3e}");
                    assert!(
                        got[0]
                            .iter()
                            .zip(&got[1])
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "the ranks' y differ"
                    );
                    for rep in 0..100 {
                        tp.forward(&group, &xs, batch, &mut ys).unwrap();
                        let again = streams[1].clone_dtoh(&ys[1]).unwrap();
                        assert!(
                            again
                                .iter()
                                .zip(&got[1])
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "row batch {batch}: run {rep} differs"
                        );
                    }
                }
            }
            println!("{split:?} batch {batch}: matches one GPU");
        }
    }
    let layer = SparseLinear::new(w, None, Activation::Relu).unwrap();
    assert!(matches!(
        TpSparseLinear::new(&layer, TpSplit::Row, &group),
        Err(Error::InvalidArgument(_))
    ));
}

// ---------------------------------------------------------------------------------------
// Issue 45: every rank's full check before rank 0 is enqueued (TpSparseMlp::forward,
// TpSparseLinear::forward). A refusal that only rank 1's check finds leaves rank 0's
// outputs, poisoned, unchanged after synchronizing: nothing was enqueued there.

/// Every stream synchronized, then `buf` read back on `stream`.
fn settled<T: cudarc::driver::DeviceRepr + Default + Clone>(
    streams: &[Arc<CudaStream>],
    stream: &Arc<CudaStream>,
    buf: &CudaSlice<T>,
) -> Vec<T> {
    for s in streams {
        s.synchronize().unwrap();
    }
    stream.clone_dtoh(buf).unwrap()
}

fn bits_f16(v: &[f16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn bits_f32(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A group whose rank 1 is a stream of a second (non-primary) context of GPU 1: what it
/// uploads is foreign to the primary group's rank 1.
fn foreign_rank1_group(streams: &[Arc<CudaStream>]) -> (Arc<CudaStream>, TpGroup) {
    let second = CudaContext::new_non_primary(streams[1].context().ordinal(), 0).unwrap();
    assert_ne!(second.cu_ctx(), streams[1].context().cu_ctx());
    let foreign = second.default_stream();
    let group = TpGroup::new(vec![streams[0].clone(), foreign.clone()]).unwrap();
    (foreign, group)
}

#[test]
fn tp_mlp_refusal_on_rank_1_enqueues_nothing_on_rank_0() {
    let Some((streams, group)) = two_gpus("tp_mlp_refusal_on_rank_1_enqueues_nothing_on_rank_0")
    else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let b = BlockShape::new(64, 64);
    let (hidden, inter) = (256, 512);
    let mlp = SparseMlp::new(
        &skewed(inter / 64, hidden / 64, b, &mut rng),
        &skewed(inter / 64, hidden / 64, b, &mut rng),
        skewed(hidden / 64, inter / 64, b, &mut rng),
        Activation::Silu,
    )
    .unwrap();
    let tp = TpSparseMlp::new(&mlp, &group).unwrap();
    let batch = 3;
    let x: Vec<f16> = random_vec(batch * hidden, &mut rng);
    let xs: Vec<CudaSlice<f16>> = streams.iter().map(|s| s.clone_htod(&x).unwrap()).collect();
    let h_poison = |r: usize| vec![f16::NAN; (batch * tp.inter()[r]).max(1)];
    let y_poison = vec![7.0f32; batch * hidden];
    let fresh = |streams: &[Arc<CudaStream>]| -> (Vec<CudaSlice<f16>>, Vec<CudaSlice<f32>>) {
        (
            streams
                .iter()
                .enumerate()
                .map(|(r, s)| s.clone_htod(&h_poison(r)).unwrap())
                .collect(),
            streams
                .iter()
                .map(|s| s.clone_htod(&y_poison).unwrap())
                .collect(),
        )
    };
    let rank0_untouched = |what: &str, hs: &[CudaSlice<f16>], ys: &[CudaSlice<f32>]| {
        let h0 = settled(&streams, &streams[0], &hs[0]);
        let y0 = settled(&streams, &streams[0], &ys[0]);
        assert_eq!(
            bits_f16(&h0),
            bits_f16(&h_poison(0)),
            "{what}: rank 0's h written"
        );
        assert_eq!(
            bits_f32(&y0),
            bits_f32(&y_poison),
            "{what}: rank 0's y written"
        );
    };

    // Rank 1's h on a second stream of GPU 1 (its y on the rank's stream).
    let (mut hs, mut ys) = fresh(&streams);
    let side = streams[1].context().new_stream().unwrap();
    hs[1] = side.clone_htod(&h_poison(1)).unwrap();
    let e = tp
        .forward(&group, &xs, batch, &mut hs, &mut ys)
        .expect_err("rank 1's h on another stream accepted");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    side.synchronize().unwrap();
    rank0_untouched("h[1] on a second stream", &hs, &ys);

    // Rank 1's weights in a second context of GPU 1 (the model uploaded over a group whose
    // rank 1 is that context), run over the primary group.
    let (_foreign, foreign_group) = foreign_rank1_group(&streams);
    let tp_foreign = TpSparseMlp::new(&mlp, &foreign_group).unwrap();
    let (mut hs, mut ys) = fresh(&streams);
    let e = tp_foreign
        .forward(&group, &xs, batch, &mut hs, &mut ys)
        .expect_err("rank 1's weights of another context accepted");
    assert!(matches!(e, Error::ContextMismatch { .. }), "{e}");
    rank0_untouched("rank 1's weights foreign", &hs, &ys);

    // The same buffers, all on their ranks: accepted, every y written.
    let (mut hs, mut ys) = fresh(&streams);
    tp.forward(&group, &xs, batch, &mut hs, &mut ys).unwrap();
    for (s, y) in streams.iter().zip(&ys) {
        assert!(settled(&streams, s, y)
            .iter()
            .all(|v| v.is_finite() && *v != 7.0));
    }
}

#[test]
fn tp_linear_refusal_on_rank_1_enqueues_nothing_on_rank_0() {
    use sparsek::tp::{TpSparseLinear, TpSplit};
    use sparsek::SparseLinear;
    let Some((streams, group)) = two_gpus("tp_linear_refusal_on_rank_1_enqueues_nothing_on_rank_0")
    else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let (out, inp) = (512, 256);
    let w = skewed(out / 64, inp / 64, BlockShape::new(64, 64), &mut rng);
    let bias: Vec<f16> = random_vec(out, &mut rng);
    let layer = SparseLinear::new(w, Some(bias), Activation::Silu).unwrap();
    let (_foreign, foreign_group) = foreign_rank1_group(&streams);
    // Column-parallel: rank r writes its features of y from the whole x.
    let tp_foreign = TpSparseLinear::new(&layer, TpSplit::Column, &foreign_group).unwrap();
    let tp = TpSparseLinear::new(&layer, TpSplit::Column, &group).unwrap();
    assert_eq!(tp.ranges(), tp_foreign.ranges());
    let batch = 4;
    let x: Vec<f16> = random_vec(batch * inp, &mut rng);
    let xs: Vec<CudaSlice<f16>> = streams.iter().map(|s| s.clone_htod(&x).unwrap()).collect();
    let poison: Vec<Vec<f32>> = tp
        .ranges()
        .iter()
        .map(|r| vec![7.0f32; (batch * r.len()).max(1)])
        .collect();
    let fresh = || -> Vec<CudaSlice<f32>> {
        streams
            .iter()
            .zip(&poison)
            .map(|(s, p)| s.clone_htod(p).unwrap())
            .collect()
    };
    let mut ys = fresh();
    let e = tp_foreign
        .forward(&group, &xs, batch, &mut ys)
        .expect_err("rank 1's weight of another context accepted");
    assert!(matches!(e, Error::ContextMismatch { .. }), "{e}");
    let y0 = settled(&streams, &streams[0], &ys[0]);
    assert_eq!(bits_f32(&y0), bits_f32(&poison[0]), "rank 0's y written");
    // The primary group's layer on the same buffers: accepted, rank 0's y written.
    let mut ys = fresh();
    tp.forward(&group, &xs, batch, &mut ys).unwrap();
    let y0 = settled(&streams, &streams[0], &ys[0]);
    assert!(y0.iter().all(|v| v.is_finite() && *v != 7.0));
}
// ---------------------------------------------------------------------------------------
// Issue 45, the TP constructors: a TpSparseLinear carries the layer's options (α, β, the
// backend) on every rank; a column split with a bias over more ranks than block-rows (and a
// row split over more ranks than block-columns) uploads nothing for the empty ranks and
// works; NCCL missing a function is a typed error and a group drops without panicking.

/// `act(α·W·x + bias + β·y_old)` in f64 for row-major `x` (`batch x in`) and `y_old`
/// (`batch x out`).
fn linear_reference(
    w: &BsrMatrix<f16>,
    bias: Option<&[f16]>,
    act: Activation,
    (alpha, beta): (f32, f32),
    x: &[f16],
    y_old: &[f32],
    batch: usize,
) -> Vec<f64> {
    let (out, inp) = (w.m(), w.k());
    let dense: Vec<f64> = w.to_dense().unwrap().iter().map(|v| v.to_f64()).collect();
    let mut y = vec![0f64; batch * out];
    for b in 0..batch {
        for i in 0..out {
            let wx: f64 = (0..inp)
                .map(|k| dense[i * inp + k] * x[b * inp + k].to_f64())
                .sum();
            let v = alpha as f64 * wx
                + bias.map_or(0.0, |v| v[i].to_f64())
                + beta as f64 * y_old[b * out + i] as f64;
            y[b * out + i] = common::act64(act, v);
        }
    }
    y
}

fn rel64(got: &[f32], want: &[f64]) -> f64 {
    let (n, d) = got.iter().zip(want).fold((0f64, 0f64), |(n, d), (&g, &w)| {
        (n + (g as f64 - w).powi(2), d + w * w)
    });
    (n / d.max(1e-30)).sqrt()
}

/// The TP layer's forward over `group` from the whole `x` and old `y` (host, row-major):
/// column-parallel, rank r's y starts as its features of `y_old`; row-parallel, rank r reads
/// its features of x, rank 0's y starts as `y_old` and rank 1's as NaN (β applies on rank 0
/// alone, so it is never read). Returns each rank's y (a rank without features keeps its
/// one-value placeholder, poisoned with 7).
fn tp_linear_forward(
    tp: &sparsek::tp::TpSparseLinear<f16>,
    streams: &[Arc<CudaStream>],
    group: &TpGroup,
    (x, y_old): (&[f16], &[f32]),
    (batch, inp, out): (usize, usize, usize),
) -> Vec<Vec<f32>> {
    use sparsek::tp::TpSplit;
    let ranges = tp.ranges().to_vec();
    let features = |v: &[f16], width: usize, r: &std::ops::Range<usize>| -> Vec<f16> {
        (0..batch)
            .flat_map(|b| v[b * width + r.start..b * width + r.end].to_vec())
            .collect()
    };
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for (rank, (s, r)) in streams.iter().zip(&ranges).enumerate() {
        let (xr, yr): (Vec<f16>, Vec<f32>) = match tp.split() {
            TpSplit::Column => (
                x.to_vec(),
                (0..batch)
                    .flat_map(|b| y_old[b * out + r.start..b * out + r.end].to_vec())
                    .collect(),
            ),
            TpSplit::Row if rank == 0 => (features(x, inp, r), y_old.to_vec()),
            TpSplit::Row => (features(x, inp, r), vec![f32::NAN; batch * out]),
        };
        // CUDA has no empty allocations: a rank without features gets one placeholder.
        let xr = if xr.is_empty() { vec![f16::NAN] } else { xr };
        let yr = if yr.is_empty() { vec![7.0] } else { yr };
        xs.push(s.clone_htod(&xr).unwrap());
        ys.push(s.clone_htod(&yr).unwrap());
    }
    tp.forward(group, &xs, batch, &mut ys).unwrap();
    streams
        .iter()
        .zip(&ys)
        .map(|(s, y)| s.clone_dtoh(y).unwrap())
        .collect()
}

/// The ranks' ys as the layer's y: column-parallel side by side (a rank without features
/// must have left its placeholder alone), row-parallel rank 0's (rank 1's bitwise equal).
fn tp_linear_output(
    tp: &sparsek::tp::TpSparseLinear<f16>,
    got: &[Vec<f32>],
    batch: usize,
    out: usize,
) -> Vec<f32> {
    use sparsek::tp::TpSplit;
    match tp.split() {
        TpSplit::Column => {
            let mut y = vec![f32::NAN; batch * out];
            for (g, r) in got.iter().zip(tp.ranges()) {
                if r.is_empty() {
                    assert_eq!(g, &[7.0], "an empty rank's y written");
                    continue;
                }
                for b in 0..batch {
                    y[b * out + r.start..b * out + r.end]
                        .copy_from_slice(&g[b * r.len()..(b + 1) * r.len()]);
                }
            }
            y
        }
        TpSplit::Row => {
            assert!(
                got[0]
                    .iter()
                    .zip(&got[1])
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "the ranks' y differ"
            );
            got[0].clone()
        }
    }
}

/// α = 0.5 or −1.5, β = 0.75 or 1 (y accumulates), the backend Auto or Wmma: both splits
/// match the one-GPU layer with the same options and the f64 reference (the old constructor
/// dropped the options: y came out with α = 1 and no β·y). A layer on the CPU backend is
/// refused: its ranks run on GPUs.
#[test]
fn tp_linear_carries_the_layers_options() {
    use sparsek::tp::{TpSparseLinear, TpSplit};
    use sparsek::{Backend, DeviceBsr, SparseLinear, SpmmOptions};
    let Some((streams, group)) = two_gpus("tp_linear_carries_the_layers_options") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let (out, inp, batch) = (512, 384, 5);
    let w = skewed(out / 64, inp / 64, BlockShape::new(64, 64), &mut rng);
    let bias: Vec<f16> = random_vec(out, &mut rng);
    let options = [
        SpmmOptions::new().alpha(0.5).beta(0.75),
        SpmmOptions::new()
            .alpha(-1.5)
            .beta(1.0)
            .backend(Backend::Wmma),
    ];
    for (split, act) in [
        (TpSplit::Column, Activation::Silu),
        (TpSplit::Row, Activation::None),
    ] {
        for opts in options {
            let layer = SparseLinear::new(w.clone(), Some(bias.clone()), act)
                .unwrap()
                .with_options(opts);
            let tp = TpSparseLinear::new(&layer, split, &group).unwrap();
            let x: Vec<f16> = random_vec(batch * inp, &mut rng);
            let y_old: Vec<f32> = random_vec(batch * out, &mut rng);
            let want = linear_reference(
                &w,
                Some(&bias),
                act,
                (opts.get_alpha(), opts.get_beta()),
                &x,
                &y_old,
                batch,
            );
            let s0 = &streams[0];
            let one = SparseLinear::new_device(
                DeviceBsr::upload(&w, s0).unwrap(),
                Some(s0.clone_htod(&bias).unwrap()),
                act,
            )
            .unwrap()
            .with_options(opts);
            let dx = s0.clone_htod(&x).unwrap();
            let mut dy = s0.clone_htod(&y_old).unwrap();
            one.forward(&dx, batch, &mut dy).unwrap();
            let one_y = s0.clone_dtoh(&dy).unwrap();
            let got = tp_linear_forward(&tp, &streams, &group, (&x, &y_old), (batch, inp, out));
            let y = tp_linear_output(&tp, &got, batch, out);
            let (err_ref, err_one) = (rel64(&y, &want), rel(&y, &one_y));
            println!("{split:?} {opts:?}: rel err {err_ref:.2e} vs f64, {err_one:.2e} vs one GPU");
            assert!(
                err_ref < 1e-4,
                "{split:?} {opts:?}: rel err {err_ref:.3e} vs f64"
            );
            assert!(
                err_one < 1e-5,
                "{split:?} {opts:?}: rel err {err_one:.3e} vs one GPU"
            );
        }
    }
    let cpu = SparseLinear::new(w, Some(bias), Activation::None)
        .unwrap()
        .with_options(SpmmOptions::new().backend(Backend::Cpu));
    for split in [TpSplit::Column, TpSplit::Row] {
        let e = TpSparseLinear::new(&cpu, split, &group).err().unwrap();
        assert!(
            matches!(
                e,
                Error::BackendUnavailable {
                    backend: Backend::Cpu,
                    ..
                }
            ),
            "{e}"
        );
    }
}

/// One block-row (column split) or one block-column (row split) over two GPUs: rank 1 has
/// no features. With a bias, the old column-parallel constructor uploaded rank 1's empty
/// slice of it (CUDA_ERROR_INVALID_VALUE); now rank 1 uploads no bias and runs as a no-op
/// (column: its placeholder y untouched; row: a zero partial), and y matches the f64
/// reference, with α and β.
#[test]
fn tp_linear_more_ranks_than_blocks_with_a_bias() {
    use sparsek::tp::{TpSparseLinear, TpSplit};
    use sparsek::{SparseLinear, SpmmOptions};
    let Some((streams, group)) = two_gpus("tp_linear_more_ranks_than_blocks_with_a_bias") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(seed());
    let block = BlockShape::new(64, 64);
    let batch = 3;
    let opts = SpmmOptions::new().alpha(0.5).beta(0.25);
    for (split, act, (out, inp)) in [
        (TpSplit::Column, Activation::Silu, (64, 256)),
        (TpSplit::Row, Activation::None, (256, 64)),
    ] {
        let mask = BlockMask::from_fn(out / 64, inp / 64, |_, _| true).unwrap();
        let w = BsrMatrix::from_block_mask(&mask, block, |_, _| nonzero::<f16>(&mut rng)).unwrap();
        let bias: Vec<f16> = random_vec(out, &mut rng);
        let layer = SparseLinear::new(w.clone(), Some(bias.clone()), act)
            .unwrap()
            .with_options(opts);
        let tp = TpSparseLinear::new(&layer, split, &group)
            .unwrap_or_else(|e| panic!("{split:?} over more ranks than blocks: {e}"));
        assert!(
            tp.ranges()[1].is_empty(),
            "{split:?}: ranges {:?}",
            tp.ranges()
        );
        let x: Vec<f16> = random_vec(batch * inp, &mut rng);
        let y_old: Vec<f32> = random_vec(batch * out, &mut rng);
        let want = linear_reference(&w, Some(&bias), act, (0.5, 0.25), &x, &y_old, batch);
        let got = tp_linear_forward(&tp, &streams, &group, (&x, &y_old), (batch, inp, out));
        let y = tp_linear_output(&tp, &got, batch, out);
        let err = rel64(&y, &want);
        println!("{split:?}, rank 1 empty: rel err {err:.2e} vs f64");
        assert!(err < 1e-4, "{split:?}: rel err {err:.3e} vs f64");
    }
}

/// Set in a child process of the NCCL stub tests: which check it runs.
const STUB_CHILD: &str = "SPARSEK_TEST_NCCL_STUB_CHILD";
/// The NCCL function the child's stub lacks.
const STUB_MISSING: &str = "SPARSEK_TEST_NCCL_STUB_MISSING";
/// What a child prints once its check held.
const STUB_CHILD_OK: &str = "nccl-stub-child-ok";

/// A stand-in `libnccl.so`, built with the C compiler (`CC`, else `cc`) in a fresh
/// directory: `ncclCommInitAll` (made-up handles), `ncclGroupStart`, `ncclGroupEnd` and
/// `ncclAllReduce` succeed; `ncclCommAbort` fails, or is left out. None where no C
/// compiler runs.
fn stub_nccl(name: &str, with_abort: bool) -> Option<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("sparsek-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let src = dir.join("stub.c");
    std::fs::write(
        &src,
        "typedef void *comm_t;\n\
         int ncclCommInitAll(comm_t *c, int n, const int *d) {\n\
           for (int i = 0; i < n; i++) c[i] = (comm_t)(0x1000L + 16L * i);\n\
           return 0;\n\
         }\n\
         int ncclGroupStart(void) { return 0; }\n\
         int ncclGroupEnd(void) { return 0; }\n\
         int ncclAllReduce(const void *s, void *r, unsigned long n, int t, int op, comm_t c,\n\
                           void *st) { return 0; }\n\
         #ifdef WITH_ABORT\n\
         int ncclCommAbort(comm_t c) { return 1; /* ncclUnhandledCudaError */ }\n\
         #endif\n",
    )
    .ok()?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = std::process::Command::new(cc);
    cmd.args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libnccl.so"))
        .arg(&src);
    if with_abort {
        cmd.arg("-DWITH_ABORT");
    }
    match cmd.output() {
        Ok(o) if o.status.success() => Some(dir),
        _ => {
            let _ = std::fs::remove_dir_all(&dir);
            None
        }
    }
}

/// A directory whose `libnccl.so` is this process's libc (it loads, and has no NCCL
/// function): the stand-in where no C compiler runs.
fn libc_as_nccl(name: &str) -> std::path::PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libc.so.6"))
        .expect("libc.so.6 mapped in this process");
    let dir = std::env::temp_dir().join(format!("sparsek-{name}-libc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("libnccl.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(libc, &link).unwrap();
    dir
}

/// Runs `test` of this binary alone in a child process whose loader finds `stub`'s
/// libnccl.so first; asserts it succeeded and printed [`STUB_CHILD_OK`].
fn run_with_stub(test: &str, stub: &std::path::Path, check: &str, missing: &str) {
    let mut path = std::ffi::OsString::from(stub);
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        path.push(":");
        path.push(old);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("LD_LIBRARY_PATH", path)
        .env(STUB_CHILD, check)
        .env(STUB_MISSING, missing)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(STUB_CHILD_OK),
        "{test} over a stand-in libnccl ({check}): {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    println!(
        "{test} ({check}): {}",
        stdout
            .lines()
            .find(|l| l.contains(STUB_CHILD_OK))
            .unwrap_or("")
    );
    let _ = std::fs::remove_dir_all(stub);
}

/// A libnccl that loads but lacks a function sparsek calls (`ncclCommAbort`, or every one
/// where no C compiler builds the stand-in) is [`Error::Nccl`] naming it, from the check
/// `TpGroup::new` runs first; no GPU needed. (cudarc's lazy loader panics on the first call
/// of a missing function.)
#[test]
fn nccl_lacking_a_function_is_refused_by_type() {
    const TEST: &str = "nccl_lacking_a_function_is_refused_by_type";
    if std::env::var_os(STUB_CHILD).is_some() {
        let missing = std::env::var(STUB_MISSING).unwrap();
        match sparsek::tp::check_nccl() {
            Err(Error::Nccl(msg)) if msg.contains(&missing) => println!("{STUB_CHILD_OK}: {msg}"),
            other => panic!("a libnccl without {missing}: {other:?}"),
        }
        return;
    }
    match stub_nccl(TEST, false) {
        Some(stub) => run_with_stub(TEST, &stub, "check", "ncclCommAbort"),
        None => {
            println!("{TEST}: no C compiler; libc stands in for libnccl");
            run_with_stub(TEST, &libc_as_nccl(TEST), "check", "ncclCommInitAll")
        }
    }
}

/// On one GPU, over a stand-in libnccl: without `ncclCommAbort` (or, where no C compiler
/// builds the stand-in, libc, without any NCCL function), `TpGroup::new` is [`Error::Nccl`]
/// naming it (the old one built the group, or panicked in cudarc's loader); with an
/// `ncclCommAbort` that fails (built with the C compiler, else SKIPPED), the group drops
/// without panicking (cudarc's `Comm` panicked on that status).
#[test]
fn tp_group_over_a_broken_nccl_refuses_or_drops_quietly() {
    const TEST: &str = "tp_group_over_a_broken_nccl_refuses_or_drops_quietly";
    if let Ok(check) = std::env::var(STUB_CHILD) {
        let missing = std::env::var(STUB_MISSING).unwrap();
        let stream = CudaContext::new(0).unwrap().default_stream();
        let group = TpGroup::new(vec![stream]);
        match (check.as_str(), group) {
            ("missing", Err(Error::Nccl(msg))) if msg.contains(&missing) => {
                println!("{STUB_CHILD_OK}: {msg}")
            }
            ("failing-abort", Ok(group)) => {
                assert_eq!(group.size(), 1);
                drop(group);
                println!("{STUB_CHILD_OK}: dropped");
            }
            (check, group) => panic!("{check}: TpGroup::new gave {:?}", group.err()),
        }
        return;
    }
    if common::device(TEST).is_none() {
        return;
    }
    match stub_nccl(&format!("{TEST}-missing"), false) {
        Some(stub) => run_with_stub(TEST, &stub, "missing", "ncclCommAbort"),
        None => {
            println!("{TEST}: no C compiler; libc stands in for libnccl");
            let stub = libc_as_nccl(TEST);
            run_with_stub(TEST, &stub, "missing", "ncclCommInitAll")
        }
    }
    match stub_nccl(&format!("{TEST}-failing"), true) {
        Some(stub) => run_with_stub(TEST, &stub, "failing-abort", ""),
        None => eprintln!(
            "SKIPPED {TEST} (the failing ncclCommAbort half): no C compiler (cc or CC) to \
             build a stand-in libnccl"
        ),
    }
}
