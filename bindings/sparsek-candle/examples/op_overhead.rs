//! What the candle ops cost over sparsek's own API on the same inputs: each op timed
//! through sparsek-candle (candle tensors in, a candle tensor out, allocated per call as
//! candle's ops do) and through sparsek's API (the same device buffers read in place, the
//! output written into a buffer allocated once), back to back on candle's stream, many
//! calls per round, the rounds alternated; and whether both paths write the same bits.
//!
//! Ops: `SparseLinear` (TinyLlama-1.1B's gate projection, 2048 -> 5632, 64 x 64 blocks at
//! 50 %, n = 1, 16, 128), `SparseMlp` (its MLP, hidden 2048, intermediate 5632, n = 1, 16)
//! and attention (16 query heads of 128 over 4 KV heads, the decoder example's window of 1024
//! keys + 1 global block of 128 over a cache of 8192: decode at batch 1 and 16, a prefill
//! chunk of 512 queries at the cache's end).
//!
//! Per call: `host` is the time until the loop has queued its calls, `wall` until the
//! device has run them (the figure compared: a loop whose host work outlasts the GPU work
//! shows it in `wall`). `op_overhead [--iters 200] [--rounds 7]`.

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[cfg(not(feature = "cuda"))]
fn main() -> Result<()> {
    println!("op_overhead measures the CUDA path: build with --features cuda");
    Ok(())
}

#[cfg(feature = "cuda")]
fn main() -> Result<()> {
    gpu::main()
}

#[cfg(feature = "cuda")]
mod gpu {
    use super::Result;
    use std::sync::Arc;
    use std::time::Instant;

    use candle_core::{DType, Device, Module, Storage, Tensor};
    use sparsek::cudarc::driver::{CudaSlice, CudaStream};
    use sparsek::{
        f16, Activation, AttentionOptions, BlockMask, BlockPatterns, BlockShape, BsrMatrix,
        CausalAlignment, DeviceBlockPatterns, DeviceBsr, Heads, HeadsMut, MaskOperand,
        SequenceLayout,
    };
    use sparsek_candle::{attention, prune, AttentionMask, QkvLayout, SeqLayout};

    /// Microseconds per call: host and wall, medians over the rounds.
    #[derive(Clone, Copy)]
    struct PerCall {
        host: f64,
        wall: f64,
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }

    /// Rounds of `iters` calls of each path, alternated in each round: sparsek's API into
    /// an output allocated once, sparsek's API into outputs allocated per call (as candle's
    /// ops allocate theirs), then the candle op.
    fn compare(
        dev: &Device,
        iters: usize,
        rounds: usize,
        mut own: impl FnMut() -> Result<()>,
        mut own_alloc: impl FnMut() -> Result<()>,
        mut via_candle: impl FnMut() -> Result<()>,
    ) -> Result<[PerCall; 3]> {
        let round = |f: &mut dyn FnMut() -> Result<()>| -> Result<(f64, f64)> {
            dev.synchronize()?;
            let t0 = Instant::now();
            for _ in 0..iters {
                f()?;
            }
            let host = t0.elapsed().as_secs_f64();
            dev.synchronize()?;
            let wall = t0.elapsed().as_secs_f64();
            Ok((host * 1e6 / iters as f64, wall * 1e6 / iters as f64))
        };
        for _ in 0..3 {
            own()?;
            own_alloc()?;
            via_candle()?;
        }
        let mut samples = [(); 3].map(|_| (vec![], vec![]));
        for _ in 0..rounds {
            let paths: [&mut dyn FnMut() -> Result<()>; 3] =
                [&mut own, &mut own_alloc, &mut via_candle];
            for (path, (host, wall)) in paths.into_iter().zip(samples.iter_mut()) {
                let (h, w) = round(path)?;
                host.push(h);
                wall.push(w);
            }
        }
        Ok(samples.map(|(host, wall)| PerCall {
            host: median(host),
            wall: median(wall),
        }))
    }

    fn report(name: &str, [own, own_alloc, via]: [PerCall; 3], same: bool) {
        println!(
            "{name:<38} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.3} {:>7.3}  {}",
            own.host,
            own.wall,
            own_alloc.host,
            own_alloc.wall,
            via.host,
            via.wall,
            via.wall / own.wall,
            via.wall / own_alloc.wall,
            if same { "bitwise equal" } else { "DIFFERENT" }
        );
    }

    /// A candle CUDA tensor's buffer (it starts its buffer: made by candle, not a view).
    fn with_slice<R>(t: &Tensor, f: impl FnOnce(&CudaSlice<f16>) -> Result<R>) -> Result<R> {
        let (s, l) = t.storage_and_layout();
        let Storage::Cuda(cs) = &*s else {
            return Err("not a CUDA tensor".into());
        };
        if l.start_offset() != 0 || !l.is_contiguous() {
            return Err("not a packed tensor at its buffer's start".into());
        }
        f(cs.as_cuda_slice::<f16>()?)
    }

    fn bits_equal(t: &Tensor, y: &CudaSlice<f16>, stream: &Arc<CudaStream>) -> Result<bool> {
        let a = t.flatten_all()?.to_vec1::<f16>()?;
        let b = stream.clone_dtoh(y)?;
        Ok(a.len() <= b.len() && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()))
    }

    /// A random `rows x cols` f16 weight pruned to half its 64 x 64 blocks by block norm.
    fn pruned(rows: usize, cols: usize, seed: u64) -> Result<BsrMatrix<f16>> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let v: Vec<f32> = (0..rows * cols)
            .map(|_| rng.random_range(-0.1f32..0.1))
            .collect();
        let w = Tensor::from_vec(v, (rows, cols), &Device::Cpu)?.to_dtype(DType::F16)?;
        let block = BlockShape::new(64, 64);
        let mask = prune::by_block_norm(&w, block, 0.5)?;
        let v = w.flatten_all()?.to_vec1::<f16>()?;
        Ok(BsrMatrix::from_block_mask(&mask, block, |r, c| {
            v[r * cols + c]
        })?)
    }

    fn randn(dims: &[usize], dev: &Device) -> Result<Tensor> {
        Ok(Tensor::randn(0f32, 1.0, dims, dev)?.to_dtype(DType::F16)?)
    }

    pub fn main() -> Result<()> {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let num = |name: &str, default: usize| -> Result<usize> {
            Ok(args
                .iter()
                .position(|a| a == name)
                .and_then(|i| args.get(i + 1))
                .map(|v| v.parse())
                .transpose()?
                .unwrap_or(default))
        };
        let (iters, rounds) = (num("--iters", 200)?, num("--rounds", 7)?);
        let dev = Device::new_cuda(0)?;
        let Device::Cuda(cuda) = &dev else {
            unreachable!("new_cuda gives a CUDA device")
        };
        let stream = cuda.cuda_stream();
        println!(
            "{iters} calls a round, {rounds} rounds alternated, medians; us per call (h: host, w: wall). \
             own: sparsek's API into an output allocated once; own+a: into outputs allocated per \
             call; cdl: the sparsek-candle op; x own, x own+a: cdl's wall time over theirs"
        );
        println!(
            "{:<38} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
            "op", "own h", "own w", "own+a h", "own+a w", "cdl h", "cdl w", "x own", "x own+a"
        );

        // SparseLinear.
        let (hidden, inter) = (2048, 5632);
        let w = pruned(inter, hidden, 1)?;
        let own = sparsek::SparseLinear::new_device(
            DeviceBsr::upload(&w, &stream)?,
            None::<CudaSlice<f16>>,
            Activation::None,
        )?;
        let layer = sparsek_candle::SparseLinear::from_bsr(w, None, Activation::None, &dev)?;
        for n in [1usize, 16, 128] {
            let x = randn(&[n, hidden], &dev)?;
            let mut y = stream.alloc_zeros::<f16>(n * inter)?;
            let t = with_slice(&x, |xs| {
                compare(
                    &dev,
                    iters,
                    rounds,
                    || Ok(own.forward(xs, n, &mut y)?),
                    || {
                        // SAFETY: the product writes every element of y (beta = 0).
                        let mut y = unsafe { stream.alloc::<f16>(n * inter) }?;
                        Ok(own.forward(xs, n, &mut y)?)
                    },
                    || {
                        layer.forward(&x)?;
                        Ok(())
                    },
                )
            })?;
            with_slice(&x, |xs| Ok(own.forward(xs, n, &mut y)?))?;
            let same = bits_equal(&layer.forward(&x)?, &y, &stream)?;
            report(&format!("SparseLinear {hidden}->{inter}, n = {n}"), t, same);
        }

        // SparseMlp.
        let (g, u, d) = (
            pruned(inter, hidden, 2)?,
            pruned(inter, hidden, 3)?,
            pruned(hidden, inter, 4)?,
        );
        let host_mlp = sparsek::SparseMlp::new(&g, &u, d.clone(), Activation::Silu)?;
        let own = host_mlp.upload(&stream)?;
        let mlp = sparsek_candle::SparseMlp::from_sparsek(
            sparsek::SparseMlp::new(&g, &u, d, Activation::Silu)?,
            &dev,
        )?;
        for n in [1usize, 16] {
            let x = randn(&[n, hidden], &dev)?;
            let mut h = stream.alloc_zeros::<f16>(n * inter)?;
            let mut y = stream.alloc_zeros::<f16>(n * hidden)?;
            let t = with_slice(&x, |xs| {
                compare(
                    &dev,
                    iters,
                    rounds,
                    || Ok(own.forward(xs, n, &mut h, &mut y)?),
                    || {
                        // SAFETY: the two products write every element of h and of y.
                        let (mut h, mut y) = unsafe {
                            (
                                stream.alloc::<f16>(n * inter)?,
                                stream.alloc::<f16>(n * hidden)?,
                            )
                        };
                        Ok(own.forward(xs, n, &mut h, &mut y)?)
                    },
                    || {
                        mlp.forward(&x)?;
                        Ok(())
                    },
                )
            })?;
            with_slice(&x, |xs| Ok(own.forward(xs, n, &mut h, &mut y)?))?;
            let same = bits_equal(&mlp.forward(&x)?, &y, &stream)?;
            report(&format!("SparseMlp {hidden}/{inter}, n = {n}"), t, same);
        }

        // Attention: Bshd, GQA 16/4, d 128, window 1024 + 1 global block over 8192 keys.
        let (heads, kv_heads, d, keys, window, blk) = (16, 4, 128, 8192, 1024, 128);
        let opts = AttentionOptions::new()
            .causal(true)
            .causal_alignment(CausalAlignment::BottomRight);
        for (b, t) in [(1usize, 1usize), (16, 1), (1, 512)] {
            let pos = keys - t;
            let mask = BlockMask::from_fn(t.div_ceil(blk), keys.div_ceil(blk), |i, j| {
                let first = if t == 1 { pos } else { pos + i * blk };
                let last = (pos + t - 1).min(first + blk - 1);
                j == 0 || ((j + 1) * blk > first.saturating_sub(window) && j * blk <= last)
            })?;
            let patterns = BlockPatterns::from_block_masks(blk, blk, &[mask])?;
            let own_mask = DeviceBlockPatterns::upload(&patterns, &stream)?;
            let mask = AttentionMask::new(patterns, &dev)?;
            let q = randn(&[b, t, heads, d], &dev)?;
            let k = randn(&[b, keys, kv_heads, d], &dev)?;
            let v = randn(&[b, keys, kv_heads, d], &dev)?;
            let mut o = stream.alloc_zeros::<f16>(b * t * heads * d)?;
            fn bshd(s: &CudaSlice<f16>, [b, h, n, d]: [usize; 4]) -> Heads<'_, f16> {
                Heads::device(s, b, h, n, d).with_strides(n * h * d, d, h * d)
            }
            let r = with_slice(&q, |qs| {
                with_slice(&k, |ks| {
                    with_slice(&v, |vs| {
                        let own = |o: &mut CudaSlice<f16>| -> Result<()> {
                            Ok(sparsek::attention_with_layout(
                                bshd(qs, [b, heads, t, d]),
                                bshd(ks, [b, kv_heads, keys, d]),
                                bshd(vs, [b, kv_heads, keys, d]),
                                HeadsMut::device(o, b, heads, t, d).with_strides(
                                    t * heads * d,
                                    d,
                                    heads * d,
                                ),
                                None,
                                Some(MaskOperand::Device(&own_mask)),
                                &SequenceLayout::padded(),
                                &opts,
                            )?)
                        };
                        let r = compare(
                            &dev,
                            iters,
                            rounds,
                            || own(&mut o),
                            || {
                                // SAFETY: attention writes every element of O.
                                let mut o = unsafe { stream.alloc::<f16>(b * t * heads * d) }?;
                                own(&mut o)
                            },
                            || {
                                attention(
                                    &q,
                                    &k,
                                    &v,
                                    Some(&mask),
                                    QkvLayout::Bshd,
                                    &SeqLayout::padded(),
                                    &opts,
                                )?;
                                Ok(())
                            },
                        )?;
                        own(&mut o)?;
                        Ok(r)
                    })
                })
            })?;
            let got = attention(
                &q,
                &k,
                &v,
                Some(&mask),
                QkvLayout::Bshd,
                &SeqLayout::padded(),
                &opts,
            )?;
            let same = bits_equal(&got, &o, &stream)?;
            let what = if t == 1 { "decode" } else { "prefill chunk" };
            report(
                &format!("attention {what}, b {b}, {t} q x {keys} k"),
                r,
                same,
            );
        }
        Ok(())
    }
}
