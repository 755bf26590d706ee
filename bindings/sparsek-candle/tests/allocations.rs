//! The ops allocate their outputs and nothing else (no staging copy of an input), and a
//! refused call allocates nothing: counted by `sparsek_candle::allocations`. One test in its
//! own process, so no other test's ops run between the counts.

mod common;

use candle_core::{DType, Device, Module};
use common::{rng, tensor};
use sparsek::{Activation, BlockShape, CausalAlignment};
use sparsek_candle::{
    allocations, attention, QkvLayout, SeqLayout, SparseLinear, SparseMlp, WeightFormat,
};

#[test]
fn each_op_allocates_its_outputs_only() {
    let dev = Device::Cpu;
    let mut rng = rng("allocations");
    let block = BlockShape::new(64, 64);
    let w = tensor(&[128, 256], DType::F16, &dev, &mut rng);
    let mask = sparsek_candle::prune::by_block_norm(&w, block, 0.5).unwrap();
    let linear =
        SparseLinear::from_dense(&w, None, &mask, block, WeightFormat::Same, Activation::None)
            .unwrap();
    let g = tensor(&[256, 128], DType::F16, &dev, &mut rng);
    let d = tensor(&[128, 256], DType::F16, &dev, &mut rng);
    let mlp =
        SparseMlp::pruned(&g, &g, &d, block, 0.5, WeightFormat::Same, Activation::Silu).unwrap();
    let x = tensor(&[4, 256], DType::F16, &dev, &mut rng);
    let xm = tensor(&[4, 128], DType::F16, &dev, &mut rng);
    let q = tensor(&[1, 4, 1, 64], DType::F16, &dev, &mut rng);
    let kv = tensor(&[1, 2, 300, 64], DType::F16, &dev, &mut rng);
    let opts = sparsek::AttentionOptions::new()
        .causal(true)
        .causal_alignment(CausalAlignment::BottomRight);

    let before = allocations();
    linear.forward(&x).unwrap();
    assert_eq!(allocations() - before, 1, "SparseLinear: y only");
    let before = allocations();
    mlp.forward(&xm).unwrap();
    assert_eq!(allocations() - before, 2, "SparseMlp: h and y only");
    let before = allocations();
    attention(
        &q,
        &kv,
        &kv,
        None,
        QkvLayout::Bhsd,
        &SeqLayout::padded(),
        &opts,
    )
    .unwrap();
    assert_eq!(allocations() - before, 1, "attention: O only");
    let before = allocations();
    assert!(linear.forward(&x.t().unwrap()).is_err());
    assert!(mlp.forward(&x).is_err());
    assert_eq!(allocations(), before, "a refused call allocates nothing");
}
