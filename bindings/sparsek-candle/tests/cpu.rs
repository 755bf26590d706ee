//! The candle ops on candle's CPU device (sparsek's CPU backend): against sparsek's own API
//! on the same inputs (bitwise) and against f64 references; the typed refusals.

mod common;

use candle_core::{DType, Device, Module, Tensor, D};
use common::*;
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, Activation, BlockMask, BlockShape, BsrMatrix, CausalAlignment, Heads, HeadsMut,
    LseMut, MaskOperand, SequenceLayout, F8E4M3,
};
use sparsek_candle::{
    attention, prune, AttentionMask, Error, QkvLayout, SeqLayout, SparseLinear, SparseMlp,
    WeightFormat,
};

const CPU: Device = Device::Cpu;

fn dense_bsr<T: sparsek::Element + candle_core::WithDType>(
    w: &Tensor,
    mask: &BlockMask,
    block: BlockShape,
) -> BsrMatrix<T> {
    let cols = w.dim(1).unwrap();
    let v = w.flatten_all().unwrap().to_vec1::<T>().unwrap();
    BsrMatrix::from_block_mask(mask, block, |r, c| v[r * cols + c]).unwrap()
}

fn linear_case<T: sparsek_candle::CandleElement>(dtype: DType, bias: bool) {
    let mut rng = rng(&format!("linear_{dtype:?}_{bias}"));
    let (out, inn, block) = (192, 256, BlockShape::new(64, 32));
    let w = tensor(&[out, inn], dtype, &CPU, &mut rng);
    let b = bias.then(|| tensor(&[out], dtype, &CPU, &mut rng));
    let mask = prune::by_block_norm(&w, block, 0.4).unwrap();
    let layer = SparseLinear::from_dense(
        &w,
        b.as_ref(),
        &mask,
        block,
        WeightFormat::Same,
        Activation::None,
    )
    .unwrap();
    let x = tensor(&[2, 3, inn], dtype, &CPU, &mut rng);
    let y = layer.forward(&x).unwrap();
    assert_eq!(y.dims(), &[2, 3, out]);
    assert_eq!(y.dtype(), dtype);

    // sparsek's own layer on the same values: the same bits.
    let own = sparsek::SparseLinear::new(
        dense_bsr::<T>(&w, &mask, block),
        b.as_ref().map(|b| b.to_vec1::<T>().unwrap()),
        Activation::None,
    )
    .unwrap();
    let xs = x.flatten_all().unwrap().to_vec1::<T>().unwrap();
    let mut ys = vec![T::from_f64(f64::NAN); 6 * out];
    own.forward(&xs, 6, &mut ys).unwrap();
    assert_eq!(bits(&y), bits_of(&ys));

    // f64.
    let want = linear_ref(
        &f64s(&x),
        &f64s(&w),
        b.as_ref().map(f64s).as_deref(),
        (out, inn),
        &mask,
        (block.rows, block.cols),
    );
    let err = rel_err(&f64s(&y), &want);
    assert!(err < tolerance(dtype), "{dtype:?}: relative error {err}");
}

#[test]
fn linear_matches_sparsek_and_f64() {
    linear_case::<f16>(DType::F16, false);
    linear_case::<f16>(DType::F16, true);
    linear_case::<bf16>(DType::BF16, true);
    linear_case::<f32>(DType::F32, true);
}

#[test]
fn linear_fp8_weights_match_sparsek() {
    let mut rng = rng("linear_fp8");
    let (out, inn, block) = (128, 192, BlockShape::new(64, 64));
    for dtype in [DType::F16, DType::BF16] {
        let w = tensor(&[out, inn], dtype, &CPU, &mut rng);
        let mask = prune::by_block_norm(&w, block, 0.5).unwrap();
        let fmt = WeightFormat::Fp8E4M3(BlockGranularity::PerBlock);
        let layer =
            SparseLinear::from_dense(&w, None, &mask, block, fmt, Activation::Relu).unwrap();
        let x = tensor(&[5, inn], dtype, &CPU, &mut rng);
        let y = layer.forward(&x).unwrap();
        let want: Vec<f64> = linear_ref(&f64s(&x), &f64s(&w), None, (out, inn), &mask, (64, 64))
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        let err = rel_err(&f64s(&y), &want);
        assert!(err < 0.1, "{dtype:?}: relative error {err} of FP8 weights");
        if dtype == DType::F16 {
            let q = dense_bsr::<f16>(&w, &mask, block)
                .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
                .unwrap();
            let own = sparsek::SparseLinear::new(q, None::<Vec<f16>>, Activation::Relu).unwrap();
            let xs = x.to_vec2::<f16>().unwrap().concat();
            let mut ys = vec![f16::NAN; 5 * out];
            own.forward(&xs, 5, &mut ys).unwrap();
            assert_eq!(bits(&y), bits_of(&ys));
        }
    }
}

#[test]
fn linear_from_bsr_matches_from_dense() {
    let mut rng = rng("linear_from_bsr");
    let block = BlockShape::new(32, 32);
    let w = tensor(&[96, 128], DType::F32, &CPU, &mut rng);
    let mask = prune::by_block_norm(&w, block, 0.3).unwrap();
    let a = SparseLinear::from_dense(&w, None, &mask, block, WeightFormat::Same, Activation::Silu)
        .unwrap();
    let b = SparseLinear::from_bsr(
        dense_bsr::<f32>(&w, &mask, block),
        None,
        Activation::Silu,
        &CPU,
    )
    .unwrap();
    let x = tensor(&[7, 128], DType::F32, &CPU, &mut rng);
    assert_eq!(bits(&a.forward(&x).unwrap()), bits(&b.forward(&x).unwrap()));
    assert_eq!(
        (b.in_features(), b.out_features(), b.dtype()),
        (128, 96, DType::F32)
    );
}

#[test]
fn mlp_matches_sparsek_and_f64() {
    let mut rng = rng("mlp");
    let (hidden, inter, block) = (128, 256, BlockShape::new(64, 64));
    for dtype in [DType::F16, DType::BF16, DType::F32] {
        let gate = tensor(&[inter, hidden], dtype, &CPU, &mut rng);
        let up = tensor(&[inter, hidden], dtype, &CPU, &mut rng);
        let down = tensor(&[hidden, inter], dtype, &CPU, &mut rng);
        let mlp = SparseMlp::pruned(
            &gate,
            &up,
            &down,
            block,
            0.5,
            WeightFormat::Same,
            Activation::Silu,
        )
        .unwrap();
        assert_eq!(
            (mlp.hidden(), mlp.inter(), mlp.out_features()),
            (hidden, inter, hidden)
        );
        let x = tensor(&[3, 2, hidden], dtype, &CPU, &mut rng);
        let y = mlp.forward(&x).unwrap();
        assert_eq!(y.dims(), &[3, 2, hidden]);

        let gu = prune::by_joint_block_norm(&[&gate, &up], block, 0.5).unwrap();
        let dm = prune::by_block_norm(&down, block, 0.5).unwrap();
        // h = silu(x·Gᵀ) ⊙ x·Uᵀ (rounded to the dtype, as sparsek stores h), y = h·Dᵀ.
        let xs = f64s(&x);
        let g = linear_ref(&xs, &f64s(&gate), None, (inter, hidden), &gu, (64, 64));
        let u = linear_ref(&xs, &f64s(&up), None, (inter, hidden), &gu, (64, 64));
        let h: Vec<f64> = g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect();
        let h = f64s(
            &Tensor::from_vec(h, 6 * inter, &CPU)
                .unwrap()
                .to_dtype(dtype)
                .unwrap(),
        );
        let want = linear_ref(&h, &f64s(&down), None, (hidden, inter), &dm, (64, 64));
        let err = rel_err(&f64s(&y), &want);
        assert!(
            err < 2.0 * tolerance(dtype),
            "{dtype:?}: relative error {err}"
        );

        if dtype == DType::BF16 {
            let own = sparsek::SparseMlp::new(
                &dense_bsr::<bf16>(&gate, &gu, block),
                &dense_bsr::<bf16>(&up, &gu, block),
                dense_bsr::<bf16>(&down, &dm, block),
                Activation::Silu,
            )
            .unwrap();
            let xs = x.flatten_all().unwrap().to_vec1::<bf16>().unwrap();
            let mut hs = vec![bf16::NAN; 6 * inter];
            let mut ys = vec![bf16::NAN; 6 * hidden];
            own.forward(&xs, 6, &mut hs, &mut ys).unwrap();
            assert_eq!(bits(&y), bits_of(&ys));
        }
    }
}

#[test]
fn mlp_fp8_weights_close_to_f64() {
    let mut rng = rng("mlp_fp8");
    let (hidden, inter, block) = (128, 128, BlockShape::new(64, 64));
    let gate = tensor(&[inter, hidden], DType::F16, &CPU, &mut rng);
    let up = tensor(&[inter, hidden], DType::F16, &CPU, &mut rng);
    let down = tensor(&[hidden, inter], DType::F16, &CPU, &mut rng);
    let fmt = WeightFormat::Fp8E4M3(BlockGranularity::PerBlock);
    let plain = SparseMlp::pruned(
        &gate,
        &up,
        &down,
        block,
        0.5,
        WeightFormat::Same,
        Activation::Silu,
    )
    .unwrap();
    let fp8 = SparseMlp::pruned(&gate, &up, &down, block, 0.5, fmt, Activation::Silu).unwrap();
    let x = tensor(&[4, hidden], DType::F16, &CPU, &mut rng);
    let err = rel_err(
        &f64s(&fp8.forward(&x).unwrap()),
        &f64s(&plain.forward(&x).unwrap()),
    );
    assert!(err < 0.1, "FP8 MLP vs f16 MLP: {err}");
}

#[test]
fn pruning_keeps_the_largest_blocks() {
    // Blocks of 2 x 2 whose norms are their index: the top half are the last ones.
    let w: Vec<f32> = (0..8 * 8)
        .map(|i| ((i / 8 / 2) * 4 + (i % 8) / 2) as f32 + 1.0)
        .collect();
    let w = Tensor::from_vec(w, (8, 8), &CPU).unwrap();
    let m = prune::by_block_norm(&w, BlockShape::new(2, 2), 0.5).unwrap();
    for r in 0..4 {
        for c in 0..4 {
            assert_eq!(m.get(r, c), Some(r >= 2), "block ({r}, {c})");
        }
    }
    // Jointly: up's large blocks outweigh gate's.
    let up = (w.clone() * -10.0)
        .unwrap()
        .t()
        .unwrap()
        .contiguous()
        .unwrap();
    let j = prune::by_joint_block_norm(&[&w, &up], BlockShape::new(2, 2), 0.25).unwrap();
    assert_eq!(j.count(), 4);
    for r in 0..4 {
        assert_eq!(
            j.get(r, 3),
            Some(true),
            "up's largest column of blocks is kept"
        );
    }
    // Every density keeps ceil(density * blocks), at least one.
    assert_eq!(
        prune::by_block_norm(&w, BlockShape::new(2, 2), 1e-9)
            .unwrap()
            .count(),
        1
    );
    assert_eq!(
        prune::by_block_norm(&w, BlockShape::new(2, 2), 1.0)
            .unwrap()
            .count(),
        16
    );
}

#[test]
fn pruning_refusals_are_typed() {
    let w = Tensor::ones((8, 8), DType::F32, &CPU).unwrap();
    for d in [0.0, -0.5, 1.5, f64::NAN] {
        assert!(matches!(
            prune::by_block_norm(&w, BlockShape::new(2, 2), d),
            Err(Error::InvalidArgument { .. })
        ));
    }
    assert!(matches!(
        prune::by_block_norm(&w, BlockShape::new(3, 2), 0.5),
        Err(Error::Shape { .. })
    ));
    let other = Tensor::ones((8, 4), DType::F32, &CPU).unwrap();
    assert!(matches!(
        prune::by_joint_block_norm(&[&w, &other], BlockShape::new(2, 2), 0.5),
        Err(Error::Shape { .. })
    ));
    let nan = (Tensor::ones((8, 8), DType::F32, &CPU).unwrap() * f64::NAN).unwrap();
    assert!(matches!(
        prune::by_block_norm(&nan, BlockShape::new(2, 2), 0.5),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn layer_refusals_are_typed_and_name_contiguous() {
    let mut rng = rng("refusals");
    let block = BlockShape::new(32, 32);
    let w = tensor(&[64, 64], DType::F16, &CPU, &mut rng);
    let mask = prune::by_block_norm(&w, block, 0.5).unwrap();
    let layer =
        SparseLinear::from_dense(&w, None, &mask, block, WeightFormat::Same, Activation::None)
            .unwrap();
    let x = tensor(&[64, 8], DType::F16, &CPU, &mut rng);
    // A transposed x: refused, not copied, with `.contiguous()` in the message.
    let xt = x.t().unwrap();
    let err = layer.try_forward(&xt).unwrap_err();
    assert!(
        matches!(err, Error::NotContiguous { operand: "x", .. }),
        "{err}"
    );
    assert!(err.to_string().contains(".contiguous()"), "{err}");
    let err = layer.forward(&xt).unwrap_err();
    assert!(err.to_string().contains(".contiguous()"), "{err}");
    // Made contiguous it runs.
    assert_eq!(
        layer.forward(&xt.contiguous().unwrap()).unwrap().dims(),
        &[8, 64]
    );
    // Wrong in features, dtype.
    let bad = tensor(&[8, 32], DType::F16, &CPU, &mut rng);
    assert!(matches!(layer.try_forward(&bad), Err(Error::Shape { .. })));
    let bad = tensor(&[8, 64], DType::F32, &CPU, &mut rng);
    assert!(matches!(layer.try_forward(&bad), Err(Error::DType { .. })));
    let scalar = Tensor::new(1f32, &CPU).unwrap();
    assert!(matches!(
        layer.try_forward(&scalar),
        Err(Error::Shape { .. })
    ));
    // Build refusals: a mask of another grid, a bias of another length, a U32 weight,
    // FP8 of f32 activations.
    let small = BlockMask::from_fn(1, 2, |_, _| true).unwrap();
    assert!(matches!(
        SparseLinear::from_dense(
            &w,
            None,
            &small,
            block,
            WeightFormat::Same,
            Activation::None
        ),
        Err(Error::Shape { .. })
    ));
    let b = tensor(&[63], DType::F16, &CPU, &mut rng);
    assert!(matches!(
        SparseLinear::from_dense(
            &w,
            Some(&b),
            &mask,
            block,
            WeightFormat::Same,
            Activation::None
        ),
        Err(Error::Shape {
            operand: "bias",
            ..
        })
    ));
    let wu = Tensor::zeros((64, 64), DType::U32, &CPU).unwrap();
    assert!(matches!(
        SparseLinear::from_dense(
            &wu,
            None,
            &mask,
            block,
            WeightFormat::Same,
            Activation::None
        ),
        Err(Error::DType { .. })
    ));
    let w32 = w.to_dtype(DType::F32).unwrap();
    assert!(matches!(
        SparseLinear::from_dense(
            &w32,
            None,
            &mask,
            block,
            WeightFormat::Fp8E4M3(BlockGranularity::PerTensor),
            Activation::None
        ),
        Err(Error::DType { .. })
    ));
    // The MLP: non-contiguous x, mismatched shapes.
    let g = tensor(&[128, 64], DType::F16, &CPU, &mut rng);
    let d = tensor(&[64, 128], DType::F16, &CPU, &mut rng);
    let mlp =
        SparseMlp::pruned(&g, &g, &d, block, 0.5, WeightFormat::Same, Activation::Silu).unwrap();
    let xt = tensor(&[64, 4], DType::F16, &CPU, &mut rng).t().unwrap();
    assert!(matches!(
        mlp.try_forward(&xt),
        Err(Error::NotContiguous { .. })
    ));
    assert!(matches!(
        SparseMlp::pruned(&g, &d, &d, block, 0.5, WeightFormat::Same, Activation::Silu),
        Err(Error::Shape { .. })
    ));
    // A narrow along rows of a contiguous tensor is still row-major: taken in place.
    let x = tensor(&[10, 64], DType::F16, &CPU, &mut rng);
    let part = x.narrow(0, 3, 4).unwrap();
    let want = layer.forward(&part.contiguous().unwrap()).unwrap();
    assert_eq!(bits(&layer.forward(&part).unwrap()), bits(&want));
}

/// Attention through the candle op and through sparsek's API on the same host values.
struct AttnCase {
    b: usize,
    h: usize,
    hk: usize,
    sq: usize,
    sk: usize,
    d: usize,
    causal: Option<CausalAlignment>,
    masked: bool,
    layout: QkvLayout,
    dtype: DType,
}

fn attention_case(c: &AttnCase, rng: &mut rand::rngs::StdRng) {
    let shape = |heads: usize, seq: usize| match c.layout {
        QkvLayout::Bhsd => vec![c.b, heads, seq, c.d],
        QkvLayout::Bshd => vec![c.b, seq, heads, c.d],
    };
    let q = tensor(&shape(c.h, c.sq), c.dtype, &CPU, rng);
    let k = tensor(&shape(c.hk, c.sk), c.dtype, &CPU, rng);
    let v = tensor(&shape(c.hk, c.sk), c.dtype, &CPU, rng);
    let bm = attention_mask(c.sq.div_ceil(128), c.sk.div_ceil(128), rng);
    let mask = c
        .masked
        .then(|| AttentionMask::new(patterns(&bm), &CPU).unwrap());
    let opts = opts(c.causal);
    let o = attention(
        &q,
        &k,
        &v,
        mask.as_ref(),
        c.layout,
        &SeqLayout::padded(),
        &opts,
    )
    .unwrap();
    assert_eq!(o.dims(), q.dims());

    // In [b, h, s, d] order for the references.
    let bhsd = |t: &Tensor| match c.layout {
        QkvLayout::Bhsd => t.clone(),
        QkvLayout::Bshd => t.transpose(1, 2).unwrap().contiguous().unwrap(),
    };
    let want = attention_ref(
        &f64s(&bhsd(&q)),
        &f64s(&bhsd(&k)),
        &f64s(&bhsd(&v)),
        (c.b, c.h, c.hk, c.sq, c.sk, c.d),
        c.masked.then_some(&bm),
        c.causal,
        1.0 / (c.d as f64).sqrt(),
    );
    let err = rel_err(&f64s(&bhsd(&o)), &want);
    assert!(
        err < 2.0 * tolerance(c.dtype),
        "{:?} {:?}: relative error {err}",
        c.layout,
        c.dtype
    );

    // sparsek's API on the same values, packed [b, h, s, d].
    if c.dtype == DType::F16 {
        let host = |t: &Tensor| bhsd(t).flatten_all().unwrap().to_vec1::<f16>().unwrap();
        let (qh, kh, vh) = (host(&q), host(&k), host(&v));
        let mut oh = vec![f16::NAN; qh.len()];
        let mut lse = vec![f32::NAN; c.b * c.h * c.sq];
        let p = patterns(&bm);
        sparsek::attention_into(
            Heads::host(&qh, c.b, c.h, c.sq, c.d),
            Heads::host(&kh, c.b, c.hk, c.sk, c.d),
            Heads::host(&vh, c.b, c.hk, c.sk, c.d),
            HeadsMut::host(&mut oh, c.b, c.h, c.sq, c.d),
            Some(LseMut::Host(&mut lse)),
            c.masked.then_some(MaskOperand::Host(&p)),
            &opts,
        )
        .unwrap();
        assert_eq!(bits(&bhsd(&o)), bits_of(&oh), "{:?}", c.layout);
    }
}

#[test]
fn attention_matches_sparsek_and_f64() {
    let mut rng = rng("attention");
    for layout in [QkvLayout::Bhsd, QkvLayout::Bshd] {
        for (causal, masked, dtype) in [
            (None, true, DType::F16),
            (Some(CausalAlignment::TopLeft), true, DType::BF16),
            (Some(CausalAlignment::BottomRight), false, DType::F16),
        ] {
            attention_case(
                &AttnCase {
                    b: 1,
                    h: 4,
                    hk: 2,
                    sq: 150,
                    sk: 260,
                    d: 64,
                    causal,
                    masked,
                    layout,
                    dtype,
                },
                &mut rng,
            );
        }
    }
    // Decode: one query against a cache, bottom-right causal, GQA 4:1.
    attention_case(
        &AttnCase {
            b: 2,
            h: 8,
            hk: 2,
            sq: 1,
            sk: 300,
            d: 128,
            causal: Some(CausalAlignment::BottomRight),
            masked: true,
            layout: QkvLayout::Bshd,
            dtype: DType::F16,
        },
        &mut rng,
    );
}

#[test]
fn attention_reads_strided_views_in_place() {
    let mut rng = rng("attention_views");
    let (b, h, s, d) = (2, 4, 200, 64);
    // Q, K, V as [b, s, h, d] tensors, viewed as [b, h, s, d] by a transpose (no copy).
    let q = tensor(&[b, s, h, d], DType::F16, &CPU, &mut rng);
    let k = tensor(&[b, s, h, d], DType::F16, &CPU, &mut rng);
    let v = tensor(&[b, s, h, d], DType::F16, &CPU, &mut rng);
    let opts = opts(Some(CausalAlignment::TopLeft));
    let seq = SeqLayout::padded();
    let t = |x: &Tensor| x.transpose(1, 2).unwrap();
    let viewed = attention(&t(&q), &t(&k), &t(&v), None, QkvLayout::Bhsd, &seq, &opts).unwrap();
    let copied = attention(
        &t(&q).contiguous().unwrap(),
        &t(&k).contiguous().unwrap(),
        &t(&v).contiguous().unwrap(),
        None,
        QkvLayout::Bhsd,
        &seq,
        &opts,
    )
    .unwrap();
    assert_eq!(bits(&viewed), bits(&copied));
    // A KV cache of capacity 300 narrowed to its 200 filled keys (strided along seq).
    let cache = tensor(&[b, h, 300, d], DType::F16, &CPU, &mut rng);
    let filled = cache.narrow(2, 0, 200).unwrap();
    let qd = tensor(&[b, h, 1, d], DType::F16, &CPU, &mut rng);
    let dec = opts_bottom_right();
    let a = attention(&qd, &filled, &filled, None, QkvLayout::Bhsd, &seq, &dec).unwrap();
    let c = filled.contiguous().unwrap();
    let bb = attention(&qd, &c, &c, None, QkvLayout::Bhsd, &seq, &dec).unwrap();
    assert_eq!(bits(&a), bits(&bb));
}

fn opts_bottom_right() -> sparsek::AttentionOptions {
    opts(Some(CausalAlignment::BottomRight))
}

#[test]
fn attention_serving_layouts_match_sparsek() {
    let mut rng = rng("attention_layouts");
    let (h, hk, d) = (4, 2, 64);
    // Varlen: three sequences packed along seq, [1, h, total, d].
    let lens = [70usize, 0, 190];
    let total: usize = lens.iter().sum();
    let cu = SequenceLayout::offsets(&lens).unwrap();
    let cu_t = Tensor::new(cu.as_slice(), &CPU).unwrap();
    let q = tensor(&[1, h, total, d], DType::F16, &CPU, &mut rng);
    let k = tensor(&[1, hk, total, d], DType::F16, &CPU, &mut rng);
    let v = tensor(&[1, hk, total, d], DType::F16, &CPU, &mut rng);
    let opts = opts(Some(CausalAlignment::TopLeft));
    let seq = SeqLayout::new(3)
        .cu_seqlens_q(&cu_t, 190)
        .cu_seqlens_k(&cu_t, 190);
    let o = attention(&q, &k, &v, None, QkvLayout::Bhsd, &seq, &opts).unwrap();
    let host = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f16>().unwrap();
    let (qh, kh, vh) = (host(&q), host(&k), host(&v));
    let mut oh = vec![f16::NAN; qh.len()];
    sparsek::attention_with_layout(
        Heads::host(&qh, 1, h, total, d),
        Heads::host(&kh, 1, hk, total, d),
        Heads::host(&vh, 1, hk, total, d),
        HeadsMut::host(&mut oh, 1, h, total, d),
        None,
        None,
        &SequenceLayout::new(3)
            .cu_seqlens_q(&cu, 190)
            .cu_seqlens_k(&cu, 190),
        &opts,
    )
    .unwrap();
    assert_eq!(bits(&o), bits_of(&oh));
    // Each sequence against the padded op alone.
    for (s, &n) in lens.iter().enumerate() {
        if n == 0 {
            continue;
        }
        let part = |t: &Tensor| {
            t.narrow(2, cu[s] as usize, n)
                .unwrap()
                .contiguous()
                .unwrap()
        };
        let alone = attention(
            &part(&q),
            &part(&k),
            &part(&v),
            None,
            QkvLayout::Bhsd,
            &SeqLayout::padded(),
            &opts,
        )
        .unwrap();
        assert_eq!(bits(&alone), bits(&part(&o)), "sequence {s}");
    }

    // Paged decode: a pool of 12 pages of 64 keys, [pages, page, hk, d] (Bshd), two
    // sequences of 150 and 260 keys through a page table.
    let (pages, page) = (12usize, 64usize);
    let pool_k = tensor(&[pages, page, hk, d], DType::F16, &CPU, &mut rng);
    let pool_v = tensor(&[pages, page, hk, d], DType::F16, &CPU, &mut rng);
    let table: Vec<i32> = vec![3, 7, 1, 0, 0, 11, 2, 5, 9, 4];
    let table_t = Tensor::from_vec(table.clone(), (2, 5), &CPU).unwrap();
    let seqlens = vec![150i32, 260];
    // Taken from inside a longer tensor: an index array is read at its offset.
    let seqlens_t = Tensor::new(&[7i32, 150, 260, 9], &CPU)
        .unwrap()
        .narrow(0, 1, 2)
        .unwrap();
    let qd = tensor(&[2, 1, h, d], DType::F16, &CPU, &mut rng);
    let dec = opts_bottom_right();
    let seq = SeqLayout::new(2)
        .seqlens_k(&seqlens_t, 320)
        .page_table(&table_t, 5, page);
    let o = attention(&qd, &pool_k, &pool_v, None, QkvLayout::Bshd, &seq, &dec).unwrap();
    let (qh, kh, vh) = (host(&qd), host(&pool_k), host(&pool_v));
    let mut oh = vec![f16::NAN; qh.len()];
    let bshd = |n: usize, s: usize, hh: usize| (s * hh * d, d, hh * d, n);
    let (qb, qhs, qs, _) = bshd(2, 1, h);
    let (kb, khs, ks, _) = bshd(pages, page, hk);
    sparsek::attention_with_layout(
        Heads::host(&qh, 2, h, 1, d).with_strides(qb, qhs, qs),
        Heads::host(&kh, pages, hk, page, d).with_strides(kb, khs, ks),
        Heads::host(&vh, pages, hk, page, d).with_strides(kb, khs, ks),
        HeadsMut::host(&mut oh, 2, h, 1, d).with_strides(qb, qhs, qs),
        None,
        None,
        &SequenceLayout::new(2)
            .seqlens_k(seqlens.as_slice(), 320)
            .page_table(sparsek::PageTable::new(table.as_slice(), 5, page)),
        &dec,
    )
    .unwrap();
    assert_eq!(bits(&o), bits_of(&oh));
    // Against the keys gathered densely.
    for s in 0..2 {
        let n = seqlens[s] as usize;
        let gather = |pool: &Tensor| {
            let rows: Vec<Tensor> = (0..n)
                .map(|j| {
                    pool.get(table[s * 5 + j / page] as usize)
                        .unwrap()
                        .get(j % page)
                        .unwrap()
                })
                .collect();
            Tensor::stack(&rows, 0).unwrap().unsqueeze(0).unwrap()
        };
        let alone = attention(
            &qd.narrow(0, s, 1).unwrap(),
            &gather(&pool_k),
            &gather(&pool_v),
            None,
            QkvLayout::Bshd,
            &SeqLayout::padded(),
            &dec,
        )
        .unwrap();
        assert_eq!(
            bits(&alone),
            bits(&o.narrow(0, s, 1).unwrap()),
            "sequence {s}"
        );
    }
}

#[test]
fn attention_refusals_are_typed() {
    let mut rng = rng("attention_refusals");
    let q = tensor(&[1, 2, 64, 64], DType::F16, &CPU, &mut rng);
    let seq = SeqLayout::padded();
    let o = sparsek::AttentionOptions::new();
    // head_dim strided: refused naming .contiguous().
    let qt = q.transpose(2, 3).unwrap();
    let err = attention(&qt, &qt, &qt, None, QkvLayout::Bhsd, &seq, &o).unwrap_err();
    assert!(matches!(err, Error::NotContiguous { .. }), "{err}");
    assert!(err.to_string().contains(".contiguous()"));
    // Mixed dtypes, 3-D tensors, GQA that does not divide (sparsek's own error).
    let k32 = q.to_dtype(DType::F32).unwrap();
    assert!(matches!(
        attention(&q, &k32, &q, None, QkvLayout::Bhsd, &seq, &o),
        Err(Error::DType { .. })
    ));
    let q3 = q.squeeze(0).unwrap();
    assert!(matches!(
        attention(&q3, &q3, &q3, None, QkvLayout::Bhsd, &seq, &o),
        Err(Error::Shape { .. })
    ));
    let q3h = tensor(&[1, 3, 64, 64], DType::F16, &CPU, &mut rng);
    assert!(matches!(
        attention(&q3h, &q, &q, None, QkvLayout::Bhsd, &seq, &o),
        Err(Error::Sparsek(sparsek::Error::HeadGroups { .. }))
    ));
    // Index arrays: I32 only.
    let lens = Tensor::new(&[64u32], &CPU).unwrap();
    let bad = SeqLayout::new(1).seqlens_k(&lens, 64);
    assert!(matches!(
        attention(&q, &q, &q, None, QkvLayout::Bhsd, &bad, &o),
        Err(Error::DType { .. })
    ));
    // A mask of the wrong block grid: sparsek's typed error.
    let m = AttentionMask::new(
        patterns(&BlockMask::from_fn(3, 3, |_, _| true).unwrap()),
        &CPU,
    )
    .unwrap();
    assert!(matches!(
        attention(&q, &q, &q, Some(&m), QkvLayout::Bhsd, &seq, &o),
        Err(Error::Sparsek(_))
    ));
    let _ = q.sum(D::Minus1);
}
