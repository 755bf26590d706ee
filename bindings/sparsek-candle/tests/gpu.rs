//! The candle ops on candle's CUDA device (`--features cuda`): bitwise against sparsek's own
//! device API on the same inputs (outputs NaN-poisoned first), close to the CPU ops (f64
//! references there), outputs on candle's stream, one allocation per output, and the
//! device-only refusals. Without a GPU each test says SKIPPED (with SPARSEK_REQUIRE_GPU set,
//! the GPU bundle's run script, a missing GPU fails instead).
#![cfg(feature = "cuda")]

mod common;

use candle_core::{DType, Device, Module, Storage, Tensor};
use common::*;
use sparsek::cudarc::driver::CudaSlice;
use sparsek::quantize::BlockGranularity;
use sparsek::{
    bf16, f16, Activation, BlockShape, BsrMatrix, CausalAlignment, DeviceBlockPatterns, DeviceBsr,
    Heads, HeadsMut, MaskOperand, SequenceLayout, F8E4M3,
};
use sparsek_candle::{
    allocations, attention, prune, AttentionMask, CandleElement, Error, QkvLayout, SeqLayout,
    SparseLinear, SparseMlp, WeightFormat,
};

fn gpu(test: &str) -> Option<Device> {
    use std::io::Write;
    match Device::new_cuda(0) {
        Ok(d) => Some(d),
        Err(why) => {
            if std::env::var_os("SPARSEK_REQUIRE_GPU").is_some() {
                panic!("{test}: SPARSEK_REQUIRE_GPU is set but there is no GPU: {why}");
            }
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no GPU ({why})");
            None
        }
    }
}

/// A host copy of `t`'s values uploaded to a new buffer on `dev`'s stream (sparsek's inputs).
fn upload<T: CandleElement>(t: &Tensor, dev: &Device) -> CudaSlice<T> {
    let v = t
        .flatten_all()
        .unwrap()
        .to_device(&Device::Cpu)
        .unwrap()
        .to_vec1::<T>()
        .unwrap();
    dev.as_cuda_device()
        .unwrap()
        .cuda_stream()
        .clone_htod(&v)
        .unwrap()
}

/// A NaN-filled output buffer.
fn poisoned<T: CandleElement>(n: usize, dev: &Device) -> CudaSlice<T> {
    let v = vec![T::from_f64(f64::NAN); n];
    dev.as_cuda_device()
        .unwrap()
        .cuda_stream()
        .clone_htod(&v)
        .unwrap()
}

fn download<T: CandleElement>(s: &CudaSlice<T>, dev: &Device) -> Vec<T> {
    dev.as_cuda_device()
        .unwrap()
        .cuda_stream()
        .clone_dtoh(s)
        .unwrap()
}

/// The output's buffer is on candle's stream.
fn on_candle_stream(t: &Tensor, dev: &Device) {
    let (s, _) = t.storage_and_layout();
    let Storage::Cuda(c) = &*s else {
        panic!("not a CUDA tensor")
    };
    let got = match t.dtype() {
        DType::F16 => c.as_cuda_slice::<f16>().unwrap().stream().cu_stream(),
        DType::BF16 => c.as_cuda_slice::<bf16>().unwrap().stream().cu_stream(),
        d => panic!("{d:?}"),
    };
    assert_eq!(got, dev.as_cuda_device().unwrap().cuda_stream().cu_stream());
}

fn bsr<T: CandleElement>(w: &Tensor, mask: &sparsek::BlockMask, block: BlockShape) -> BsrMatrix<T> {
    let cols = w.dim(1).unwrap();
    let v = w
        .flatten_all()
        .unwrap()
        .to_device(&Device::Cpu)
        .unwrap()
        .to_vec1::<T>()
        .unwrap();
    BsrMatrix::from_block_mask(mask, block, |r, c| v[r * cols + c]).unwrap()
}

fn linear_case<T: CandleElement>(
    dev: &Device,
    dtype: DType,
    fp8: bool,
    rng: &mut rand::rngs::StdRng,
) where
    F8E4M3: sparsek::TakesB<T> + sparsek::TakesBias<T>,
{
    let (out, inn, block, batch) = (256, 512, BlockShape::new(64, 64), 24);
    let w = tensor(&[out, inn], dtype, dev, rng);
    let b = (!fp8).then(|| tensor(&[out], dtype, dev, rng));
    let mask = prune::by_block_norm(&w, block, 0.5).unwrap();
    let fmt = if fp8 {
        WeightFormat::Fp8E4M3(BlockGranularity::PerBlock)
    } else {
        WeightFormat::Same
    };
    let layer =
        SparseLinear::from_dense(&w, b.as_ref(), &mask, block, fmt, Activation::Silu).unwrap();
    let x = tensor(&[2, batch / 2, inn], dtype, dev, rng);
    let before = allocations();
    let y = layer.forward(&x).unwrap();
    assert_eq!(allocations() - before, 1);
    on_candle_stream(&y, dev);

    // sparsek's own device layer on the same values.
    let stream = dev.as_cuda_device().unwrap().cuda_stream();
    let mut ys = poisoned::<T>(batch * out, dev);
    if fp8 {
        let q = bsr::<T>(&w, &mask, block)
            .quantize_fp8::<F8E4M3>(BlockGranularity::PerBlock)
            .unwrap();
        let own = sparsek::SparseLinear::new_device(
            DeviceBsr::upload_quantized(&q, &stream).unwrap(),
            None::<CudaSlice<T>>,
            Activation::Silu,
        )
        .unwrap();
        own.forward(&upload::<T>(&x, dev), batch, &mut ys).unwrap();
    } else {
        let own = sparsek::SparseLinear::new_device(
            DeviceBsr::upload(&bsr::<T>(&w, &mask, block), &stream).unwrap(),
            b.as_ref().map(|b| upload::<T>(b, dev)),
            Activation::Silu,
        )
        .unwrap();
        own.forward(&upload::<T>(&x, dev), batch, &mut ys).unwrap();
    }
    assert_eq!(
        bits(&y),
        bits_of(&download(&ys, dev)),
        "{dtype:?} fp8={fp8}"
    );

    // The same layer on the CPU.
    let cpu = SparseLinear::from_dense(
        &w.to_device(&Device::Cpu).unwrap(),
        b.as_ref()
            .map(|b| b.to_device(&Device::Cpu).unwrap())
            .as_ref(),
        &mask,
        block,
        fmt,
        Activation::Silu,
    )
    .unwrap();
    let want = cpu.forward(&x.to_device(&Device::Cpu).unwrap()).unwrap();
    let err = rel_err(&f64s(&y), &f64s(&want));
    assert!(
        err < 2.0 * tolerance(dtype),
        "{dtype:?} fp8={fp8}: GPU vs CPU {err}"
    );
}

#[test]
fn linear_matches_sparsek_bitwise() {
    let Some(dev) = gpu("linear_matches_sparsek_bitwise") else {
        return;
    };
    let mut rng = rng("gpu_linear");
    linear_case::<f16>(&dev, DType::F16, false, &mut rng);
    linear_case::<bf16>(&dev, DType::BF16, false, &mut rng);
    linear_case::<f16>(&dev, DType::F16, true, &mut rng);
    linear_case::<bf16>(&dev, DType::BF16, true, &mut rng);
}

#[test]
fn mlp_matches_sparsek_bitwise() {
    let Some(dev) = gpu("mlp_matches_sparsek_bitwise") else {
        return;
    };
    let mut rng = rng("gpu_mlp");
    let (hidden, inter, block) = (512, 1024, BlockShape::new(64, 64));
    for batch in [1usize, 16, 300] {
        let gate = tensor(&[inter, hidden], DType::F16, &dev, &mut rng);
        let up = tensor(&[inter, hidden], DType::F16, &dev, &mut rng);
        let down = tensor(&[hidden, inter], DType::F16, &dev, &mut rng);
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
        let x = tensor(&[batch, hidden], DType::F16, &dev, &mut rng);
        let before = allocations();
        let y = mlp.forward(&x).unwrap();
        assert_eq!(allocations() - before, 2);
        on_candle_stream(&y, &dev);

        let gu = prune::by_joint_block_norm(&[&gate, &up], block, 0.5).unwrap();
        let dm = prune::by_block_norm(&down, block, 0.5).unwrap();
        let own = sparsek::SparseMlp::new(
            &bsr::<f16>(&gate, &gu, block),
            &bsr::<f16>(&up, &gu, block),
            bsr::<f16>(&down, &dm, block),
            Activation::Silu,
        )
        .unwrap()
        .upload(&dev.as_cuda_device().unwrap().cuda_stream())
        .unwrap();
        let mut h = poisoned::<f16>(batch * inter, &dev);
        let mut ys = poisoned::<f16>(batch * hidden, &dev);
        own.forward(&upload::<f16>(&x, &dev), batch, &mut h, &mut ys)
            .unwrap();
        assert_eq!(bits(&y), bits_of(&download(&ys, &dev)), "batch {batch}");

        let cpu = SparseMlp::pruned(
            &gate.to_device(&Device::Cpu).unwrap(),
            &up.to_device(&Device::Cpu).unwrap(),
            &down.to_device(&Device::Cpu).unwrap(),
            block,
            0.5,
            WeightFormat::Same,
            Activation::Silu,
        )
        .unwrap();
        let want = cpu.forward(&x.to_device(&Device::Cpu).unwrap()).unwrap();
        let err = rel_err(&f64s(&y), &f64s(&want));
        assert!(err < 2e-2, "batch {batch}: GPU vs CPU {err}");
    }
}

#[test]
fn attention_matches_sparsek_bitwise() {
    let Some(dev) = gpu("attention_matches_sparsek_bitwise") else {
        return;
    };
    let mut rng = rng("gpu_attention");
    let stream = dev.as_cuda_device().unwrap().cuda_stream();
    for (layout, causal, sq, d) in [
        (QkvLayout::Bhsd, Some(CausalAlignment::TopLeft), 700, 128),
        (QkvLayout::Bshd, Some(CausalAlignment::BottomRight), 1, 128),
        (QkvLayout::Bshd, None, 300, 64),
    ] {
        let (b, h, hk, sk) = (2, 8, 2, 700);
        let shape = |heads: usize, seq: usize| match layout {
            QkvLayout::Bhsd => vec![b, heads, seq, d],
            QkvLayout::Bshd => vec![b, seq, heads, d],
        };
        let q = tensor(&shape(h, sq), DType::F16, &dev, &mut rng);
        let k = tensor(&shape(hk, sk), DType::F16, &dev, &mut rng);
        let v = tensor(&shape(hk, sk), DType::F16, &dev, &mut rng);
        let bm = attention_mask(sq.div_ceil(128), sk.div_ceil(128), &mut rng);
        let mask = AttentionMask::new(patterns(&bm), &dev).unwrap();
        let o_opts = opts(causal);
        let before = allocations();
        let o = attention(
            &q,
            &k,
            &v,
            Some(&mask),
            layout,
            &SeqLayout::padded(),
            &o_opts,
        )
        .unwrap();
        assert_eq!(allocations() - before, 1);
        on_candle_stream(&o, &dev);

        // sparsek's API, the same strides.
        let strides = |heads: usize, seq: usize| match layout {
            QkvLayout::Bhsd => (heads * seq * d, seq * d, d),
            QkvLayout::Bshd => (seq * heads * d, d, heads * d),
        };
        let (qs, ks) = (strides(h, sq), strides(hk, sk));
        let (qd, kd, vd) = (
            upload::<f16>(&q, &dev),
            upload::<f16>(&k, &dev),
            upload::<f16>(&v, &dev),
        );
        let mut od = poisoned::<f16>(b * h * sq * d, &dev);
        let dp = DeviceBlockPatterns::upload(&patterns(&bm), &stream).unwrap();
        sparsek::attention_into(
            Heads::device(&qd, b, h, sq, d).with_strides(qs.0, qs.1, qs.2),
            Heads::device(&kd, b, hk, sk, d).with_strides(ks.0, ks.1, ks.2),
            Heads::device(&vd, b, hk, sk, d).with_strides(ks.0, ks.1, ks.2),
            HeadsMut::device(&mut od, b, h, sq, d).with_strides(qs.0, qs.1, qs.2),
            None,
            Some(MaskOperand::Device(&dp)),
            &o_opts,
        )
        .unwrap();
        assert_eq!(bits(&o), bits_of(&download(&od, &dev)), "{layout:?}");

        // The CPU op (sparsek's reference).
        let cpu = |t: &Tensor| t.to_device(&Device::Cpu).unwrap();
        let cm = AttentionMask::new(patterns(&bm), &Device::Cpu).unwrap();
        let want = attention(
            &cpu(&q),
            &cpu(&k),
            &cpu(&v),
            Some(&cm),
            layout,
            &SeqLayout::padded(),
            &o_opts,
        )
        .unwrap();
        let err = rel_err(&f64s(&o), &f64s(&want));
        assert!(err < 1e-2, "{layout:?}: GPU vs CPU {err}");
    }
}

#[test]
fn attention_kv_cache_views_and_serving_layouts() {
    let Some(dev) = gpu("attention_kv_cache_views_and_serving_layouts") else {
        return;
    };
    let mut rng = rng("gpu_attention_layouts");
    let (b, h, hk, d, cap) = (3, 16, 4, 128, 1024);
    let dec = opts(Some(CausalAlignment::BottomRight));
    // A KV cache [b, cap, hk, d] read to 700 keys in place (strided along batch).
    let k_cache = tensor(&[b, cap, hk, d], DType::BF16, &dev, &mut rng);
    let v_cache = tensor(&[b, cap, hk, d], DType::BF16, &dev, &mut rng);
    let q = tensor(&[b, 1, h, d], DType::BF16, &dev, &mut rng);
    let (kk, vv) = (
        k_cache.narrow(1, 0, 700).unwrap(),
        v_cache.narrow(1, 0, 700).unwrap(),
    );
    let seq = SeqLayout::padded();
    let viewed = attention(&q, &kk, &vv, None, QkvLayout::Bshd, &seq, &dec).unwrap();
    let (kc, vc) = (kk.contiguous().unwrap(), vv.contiguous().unwrap());
    let copied = attention(&q, &kc, &vc, None, QkvLayout::Bshd, &seq, &dec).unwrap();
    assert_eq!(bits(&viewed), bits(&copied));
    // The same cache with per-sequence lengths (seqlens_k) against each sequence alone.
    let lens = [700i32, 129, 1000];
    let lens_t = Tensor::new(&lens, &dev).unwrap();
    let by_len = attention(
        &q,
        &k_cache,
        &v_cache,
        None,
        QkvLayout::Bshd,
        &SeqLayout::new(b).seqlens_k(&lens_t, cap),
        &dec,
    )
    .unwrap();
    for (s, &n) in lens.iter().enumerate() {
        let one = |t: &Tensor| {
            t.narrow(0, s, 1)
                .unwrap()
                .narrow(1, 0, n as usize)
                .unwrap()
                .force_contiguous()
                .unwrap()
        };
        let alone = attention(
            // A view at an offset is refused: a buffer of its own (copy() would keep the
            // offset layout over a cloned storage).
            &q.narrow(0, s, 1).unwrap().force_contiguous().unwrap(),
            &one(&k_cache),
            &one(&v_cache),
            None,
            QkvLayout::Bshd,
            &seq,
            &dec,
        )
        .unwrap();
        // Not bitwise: the split-KV decode family chooses its key split from the whole
        // batch's work, so a sequence alone is reduced over other splits than in the batch
        // (each deterministic); the two agree to bf16 rounding.
        let f32s = |t: &Tensor| -> Vec<f32> {
            t.contiguous()
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        };
        let (a, e) = (f32s(&alone), f32s(&by_len.narrow(0, s, 1).unwrap()));
        let scale = e.iter().fold(1f32, |m, v| m.max(v.abs()));
        let worst = a
            .iter()
            .zip(&e)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            a.len() == e.len() && worst <= 1e-2 * scale,
            "sequence {s}: alone and in the batch differ by {worst} (scale {scale})"
        );
    }
    // Paged: the cache as pages of 64 keys, each sequence's pages through a table, against
    // sparsek's API on the same buffers' values.
    let (pages, page, max_pages) = (3 * 16, 64usize, 16usize);
    let pool_k = k_cache.reshape((pages, page, hk, d)).unwrap();
    let pool_v = v_cache.reshape((pages, page, hk, d)).unwrap();
    let table: Vec<i32> = (0..b * max_pages)
        .map(|i| ((i * 7) % pages) as i32)
        .collect();
    let table_t = Tensor::from_vec(table.clone(), (b, max_pages), &dev).unwrap();
    let paged = SeqLayout::new(b)
        .seqlens_k(&lens_t, cap)
        .page_table(&table_t, max_pages, page);
    let o = attention(&q, &pool_k, &pool_v, None, QkvLayout::Bshd, &paged, &dec).unwrap();
    let stream = dev.as_cuda_device().unwrap().cuda_stream();
    let (qd, kd, vd) = (
        upload::<bf16>(&q, &dev),
        upload::<bf16>(&pool_k, &dev),
        upload::<bf16>(&pool_v, &dev),
    );
    let (td, ld) = (
        stream.clone_htod(&table).unwrap(),
        stream.clone_htod(&lens).unwrap(),
    );
    let mut od = poisoned::<bf16>(b * h * d, &dev);
    let (qs, ks) = ((h * d, d, h * d), (page * hk * d, d, hk * d));
    sparsek::attention_with_layout(
        Heads::device(&qd, b, h, 1, d).with_strides(qs.0, qs.1, qs.2),
        Heads::device(&kd, pages, hk, page, d).with_strides(ks.0, ks.1, ks.2),
        Heads::device(&vd, pages, hk, page, d).with_strides(ks.0, ks.1, ks.2),
        HeadsMut::device(&mut od, b, h, 1, d).with_strides(qs.0, qs.1, qs.2),
        None,
        None,
        &SequenceLayout::new(b)
            .seqlens_k(&ld, cap)
            .page_table(sparsek::PageTable::new(&td, max_pages, page)),
        &dec,
    )
    .unwrap();
    assert_eq!(bits(&o), bits_of(&download(&od, &dev)));
    // Varlen prefill: two sequences packed along seq.
    let lens_q = [300usize, 200];
    let cu = SequenceLayout::offsets(&lens_q).unwrap();
    let cu_t = Tensor::new(cu.as_slice(), &dev).unwrap();
    let qp = tensor(&[1, 500, h, d], DType::BF16, &dev, &mut rng);
    let kp = tensor(&[1, 500, hk, d], DType::BF16, &dev, &mut rng);
    let vp = tensor(&[1, 500, hk, d], DType::BF16, &dev, &mut rng);
    let causal = opts(Some(CausalAlignment::TopLeft));
    let varlen = SeqLayout::new(2)
        .cu_seqlens_q(&cu_t, 300)
        .cu_seqlens_k(&cu_t, 300);
    let o = attention(&qp, &kp, &vp, None, QkvLayout::Bshd, &varlen, &causal).unwrap();
    for (s, &n) in lens_q.iter().enumerate() {
        let part = |t: &Tensor| {
            // A buffer of its own: a packed view at an offset is refused, and contiguous()
            // keeps it as it is.
            t.narrow(1, cu[s] as usize, n)
                .unwrap()
                .force_contiguous()
                .unwrap()
        };
        let alone = attention(
            &part(&qp),
            &part(&kp),
            &part(&vp),
            None,
            QkvLayout::Bshd,
            &seq,
            &causal,
        )
        .unwrap();
        assert_eq!(bits(&alone), bits(&part(&o)), "sequence {s}");
    }
}

#[test]
fn device_refusals_are_typed() {
    let Some(dev) = gpu("device_refusals_are_typed") else {
        return;
    };
    let mut rng = rng("gpu_refusals");
    let block = BlockShape::new(64, 64);
    let w = tensor(&[128, 128], DType::F16, &dev, &mut rng);
    let mask = prune::by_block_norm(&w, block, 0.5).unwrap();
    let layer =
        SparseLinear::from_dense(&w, None, &mask, block, WeightFormat::Same, Activation::None)
            .unwrap();
    // A view that starts inside its buffer cannot be handed to sparsek in place.
    let x = tensor(&[10, 128], DType::F16, &dev, &mut rng);
    let err = layer.try_forward(&x.narrow(0, 2, 4).unwrap()).unwrap_err();
    assert!(matches!(err, Error::NotContiguous { .. }), "{err}");
    assert!(err.to_string().contains(".contiguous()"));
    assert_eq!(
        layer.forward(&x.narrow(0, 0, 4).unwrap()).unwrap().dims(),
        &[4, 128]
    );
    // Weights on the CPU, x on the GPU, and the other way round.
    let cpu_layer = SparseLinear::from_dense(
        &w.to_device(&Device::Cpu).unwrap(),
        None,
        &mask,
        block,
        WeightFormat::Same,
        Activation::None,
    )
    .unwrap();
    assert!(matches!(
        cpu_layer.try_forward(&x),
        Err(Error::Device { .. })
    ));
    assert!(matches!(
        layer.try_forward(&x.to_device(&Device::Cpu).unwrap()),
        Err(Error::Device { .. })
    ));
    // Attention: a mask built for the CPU, Q starting inside its buffer.
    let q = tensor(&[1, 4, 256, 64], DType::F16, &dev, &mut rng);
    let cpu_mask =
        AttentionMask::new(patterns(&attention_mask(2, 2, &mut rng)), &Device::Cpu).unwrap();
    let o = sparsek::AttentionOptions::new();
    let seq = SeqLayout::padded();
    assert!(matches!(
        attention(&q, &q, &q, Some(&cpu_mask), QkvLayout::Bhsd, &seq, &o),
        Err(Error::Device { .. })
    ));
    let inner = q.narrow(1, 1, 2).unwrap();
    assert!(matches!(
        attention(&inner, &inner, &inner, None, QkvLayout::Bhsd, &seq, &o),
        Err(Error::NotContiguous { .. })
    ));
}
