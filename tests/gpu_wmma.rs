//! GPU tests of the WMMA family (`Backend::Wmma`, every GPU; `--features cuda`): every
//! block shape of sides 16 to 128 against the f64 oracle, and bitwise determinism (the
//! cases: `common::gpu_spmm`). Without a GPU each test says SKIPPED on stdout and stderr
//! and returns; with SPARSEK_REQUIRE_GPU=1 (set by the bundle's run script on the GPU
//! machine) a missing GPU is a failure instead.
#![cfg(feature = "full")]

mod common;

use common::gpu_spmm::{determinism, sweep};
use sparsek::{f16, Backend, BlockShape, Layout};

const SIDES: [usize; 4] = [16, 32, 64, 128];

fn all_blocks() -> Vec<BlockShape> {
    SIDES
        .iter()
        .flat_map(|&r| SIDES.iter().map(move |&c| BlockShape::new(r, c)))
        .collect()
}

#[test]
fn wmma_matches_reference() {
    sweep("wmma_matches_reference", Backend::Wmma, &all_blocks());
}

#[test]
fn wmma_is_deterministic() {
    determinism::<f16>(
        "wmma_is_deterministic",
        Backend::Wmma,
        BlockShape::new(64, 64),
        Layout::RowMajor,
    );
}
