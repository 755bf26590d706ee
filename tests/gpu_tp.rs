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
            let err = rel(&first[0], &want);
            assert!(
                err < 1e-5,
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
