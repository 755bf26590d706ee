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
