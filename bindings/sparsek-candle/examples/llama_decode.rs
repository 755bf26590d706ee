//! A small Llama-style decoder on candle with sparsek inside: GQA, RoPE, RMSNorm, a KV
//! cache, its MLPs pruned to half their blocks (`SparseMlp::pruned`) and its attention on a
//! sliding-window-plus-global block mask (`sparsek_candle::attention`), beside its dense
//! twin (the same weights unpruned, candle's cuBLAS matmuls, and sparsek's causal attention
//! without a block mask: the same kernel family, the fastest dense attention this build
//! has). Random weights; the KV cache prefilled with random keys and values to the context.
//!
//! On a GPU it prints decode tokens/s of both models at each batch size, same process, same
//! GPU, then checks the sparse model's logits against the CPU path at a small size (a real
//! prefill through the block mask, then decode steps) and prints their relative
//! difference. Without a GPU it runs the small size on the CPU alone.
//!
//! ```text
//! llama_decode [--context 8192] [--batches 1,16] [--steps 32] [--layers 8] [--hidden 2048]
//!              [--heads 16] [--kv-heads 4] [--inter 5632] [--window 1024] [--density 0.5]
//!              [--dtype f16|bf16] [--small-only]
//! ```

use std::collections::HashMap;
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Module, Tensor, D};
use candle_nn::ops::rms_norm;
use candle_nn::rotary_emb::rope_thd;
use sparsek::{
    Activation, AttentionOptions, BlockMask, BlockPatterns, BlockShape, CausalAlignment,
};
use sparsek_candle::{attention, AttentionMask, QkvLayout, SeqLayout, SparseMlp, WeightFormat};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[derive(Debug, Clone)]
struct Config {
    hidden: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    inter: usize,
    layers: usize,
    vocab: usize,
    /// Keys each query sees behind it besides the global block (tokens).
    window: usize,
    /// Leading key blocks every query sees (attention sinks).
    global_blocks: usize,
    /// Share of the MLP weights' blocks kept.
    density: f64,
    /// The MLP weights' blocks.
    block: BlockShape,
    dtype: DType,
}

impl Config {
    fn small(dtype: DType) -> Self {
        Self {
            hidden: 256,
            heads: 4,
            kv_heads: 2,
            head_dim: 64,
            inter: 512,
            layers: 2,
            vocab: 512,
            window: 128,
            global_blocks: 1,
            density: 0.5,
            block: BlockShape::new(64, 64),
            dtype,
        }
    }
}

/// The attention mask's block size (sparsek's device kernel: 128 x 128).
const MASK_BLOCK: usize = 128;

struct Layer {
    attn_norm: Tensor,
    /// Projections as `[in, out]` (x·W).
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
    mlp_norm: Tensor,
    /// Dense twin: gate and up side by side, `[hidden, 2·inter]`, and down `[inter, hidden]`.
    gate_up: Tensor,
    down: Tensor,
    sparse_mlp: SparseMlp,
    /// `[max_batch, capacity, kv_heads, head_dim]` (Bshd).
    k_cache: Tensor,
    v_cache: Tensor,
}

struct Model {
    cfg: Config,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Tensor,
    cos: Tensor,
    sin: Tensor,
    device: Device,
    masks: HashMap<(usize, usize), AttentionMask>,
}

/// Random weights: made on the CPU from `seed` (uniform, so the CPU and GPU models of the
/// small check are the same), or on the GPU (candle's normal generator) for the large model.
struct Init {
    seed: u64,
    on: Device,
}

impl Init {
    fn randn(&mut self, dims: &[usize], std: f64, dtype: DType, dev: &Device) -> Result<Tensor> {
        use rand::{Rng, SeedableRng};
        self.seed += 1;
        let t = if self.on.is_cpu() {
            let mut rng = rand::rngs::StdRng::seed_from_u64(self.seed);
            let r = (3.0f64).sqrt() * std;
            let n = dims.iter().product();
            let v: Vec<f32> = (0..n).map(|_| rng.random_range(-r..r) as f32).collect();
            Tensor::from_vec(v, dims, &Device::Cpu)?
        } else {
            self.on.set_seed(self.seed)?;
            Tensor::randn(0f32, std as f32, dims, &self.on)?
        };
        Ok(t.to_dtype(dtype)?.to_device(dev)?)
    }
}

impl Model {
    fn new(
        cfg: Config,
        device: &Device,
        init: &mut Init,
        max_batch: usize,
        capacity: usize,
    ) -> Result<Self> {
        let (h, dt) = (cfg.hidden, cfg.dtype);
        let qd = cfg.heads * cfg.head_dim;
        let kvd = cfg.kv_heads * cfg.head_dim;
        let s = |n: usize| 1.0 / (n as f64).sqrt();
        let mut layers = Vec::new();
        for _ in 0..cfg.layers {
            let gate = init.randn(&[cfg.inter, h], s(h), dt, device)?;
            let up = init.randn(&[cfg.inter, h], s(h), dt, device)?;
            let down = init.randn(&[h, cfg.inter], s(cfg.inter), dt, device)?;
            let sparse_mlp = SparseMlp::pruned(
                &gate,
                &up,
                &down,
                cfg.block,
                cfg.density,
                WeightFormat::Same,
                Activation::Silu,
            )?;
            let cache = || {
                Tensor::zeros(
                    (max_batch, capacity, cfg.kv_heads, cfg.head_dim),
                    dt,
                    device,
                )
            };
            layers.push(Layer {
                attn_norm: (Tensor::ones(h, dt, device)? + init.randn(&[h], 0.1, dt, device)?)?,
                wq: init.randn(&[h, qd], s(h), dt, device)?,
                wk: init.randn(&[h, kvd], s(h), dt, device)?,
                wv: init.randn(&[h, kvd], s(h), dt, device)?,
                wo: init.randn(&[qd, h], s(qd), dt, device)?,
                mlp_norm: (Tensor::ones(h, dt, device)? + init.randn(&[h], 0.1, dt, device)?)?,
                gate_up: Tensor::cat(&[&gate, &up], 0)?.t()?.contiguous()?,
                down: down.t()?.contiguous()?,
                sparse_mlp,
                k_cache: cache()?,
                v_cache: cache()?,
            });
        }
        // RoPE tables for every position of the cache, [capacity, head_dim / 2].
        let half = cfg.head_dim / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| 1.0 / 10000f32.powf(2.0 * i as f32 / cfg.head_dim as f32))
            .collect();
        let inv = Tensor::from_vec(inv, (1, half), &Device::Cpu)?;
        let pos = Tensor::arange(0u32, capacity as u32, &Device::Cpu)?
            .to_dtype(DType::F32)?
            .reshape((capacity, 1))?;
        let freqs = pos.broadcast_mul(&inv)?;
        Ok(Self {
            embed: init.randn(&[cfg.vocab, h], 1.0, dt, device)?,
            norm: Tensor::ones(h, dt, device)?,
            lm_head: init.randn(&[h, cfg.vocab], s(h), dt, device)?,
            cos: freqs.cos()?.to_dtype(dt)?.to_device(device)?,
            sin: freqs.sin()?.to_dtype(dt)?.to_device(device)?,
            cfg,
            layers,
            device: device.clone(),
            masks: HashMap::new(),
        })
    }

    /// Fills every layer's cache to `len` positions with random keys and values.
    fn prefill_random(&mut self, len: usize, init: &mut Init) -> Result<()> {
        let (b, c) = (self.layers[0].k_cache.dim(0)?, &self.cfg);
        let dims = [b, len, c.kv_heads, c.head_dim];
        let dt = c.dtype;
        for l in 0..self.layers.len() {
            let (k, v) = (
                init.randn(&dims, 1.0, dt, &self.device)?,
                init.randn(&dims, 1.0, dt, &self.device)?,
            );
            self.layers[l].k_cache.slice_set(&k, 1, 0)?;
            self.layers[l].v_cache.slice_set(&v, 1, 0)?;
        }
        Ok(())
    }

    /// The sliding-window-plus-global mask of `t` queries at positions `pos..pos + t` over
    /// keys `0..pos + t` (query block `i` sees the global blocks and the key blocks that
    /// reach into the `window` keys before its first query; causal masking trims the rest).
    fn mask(&mut self, t: usize, pos: usize) -> Result<&AttentionMask> {
        let (q_blocks, k_blocks) = (t.div_ceil(MASK_BLOCK), (pos + t).div_ceil(MASK_BLOCK));
        let key = self.mask_key(t, pos);
        if !self.masks.contains_key(&key) {
            let (window, global) = (self.cfg.window, self.cfg.global_blocks);
            let mask = BlockMask::from_fn(q_blocks, k_blocks, |i, j| {
                let first = if t == 1 { pos } else { pos + i * MASK_BLOCK };
                let last = (pos + t - 1).min(first + MASK_BLOCK - 1);
                j < global
                    || ((j + 1) * MASK_BLOCK > first.saturating_sub(window)
                        && j * MASK_BLOCK <= last)
            })?;
            let patterns = BlockPatterns::from_block_masks(MASK_BLOCK, MASK_BLOCK, &[mask])?;
            self.masks
                .insert(key, AttentionMask::new(patterns, &self.device)?);
        }
        Ok(&self.masks[&key])
    }

    /// Decode steps within one key block share a mask when the window is whole blocks.
    fn mask_key(&self, t: usize, pos: usize) -> (usize, usize) {
        if t == 1 && self.cfg.window % MASK_BLOCK == 0 {
            (1, pos / MASK_BLOCK)
        } else {
            (t, pos)
        }
    }

    /// Logits of the last of `ids` (`[batch, t]`, at positions `pos..pos + t`), appending
    /// their keys and values to the cache.
    fn forward(&mut self, ids: &Tensor, pos: usize, sparse: bool) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let c = self.cfg.clone();
        let eps = 1e-5;
        let opts = AttentionOptions::new()
            .causal(true)
            .causal_alignment(CausalAlignment::BottomRight);
        if sparse {
            self.mask(t, pos)?;
        }
        let mask = if sparse {
            self.masks.get(&self.mask_key(t, pos))
        } else {
            None
        };
        let (cos, sin) = (self.cos.narrow(0, pos, t)?, self.sin.narrow(0, pos, t)?);
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?; // [b·t, hidden]
        for l in &self.layers {
            let h = rms_norm(&x, &l.attn_norm, eps)?;
            let q = h.matmul(&l.wq)?.reshape((b, t, c.heads, c.head_dim))?;
            let k = h.matmul(&l.wk)?.reshape((b, t, c.kv_heads, c.head_dim))?;
            let v = h.matmul(&l.wv)?.reshape((b, t, c.kv_heads, c.head_dim))?;
            let (q, k) = (rope_thd(&q, &cos, &sin)?, rope_thd(&k, &cos, &sin)?);
            let (kc, vc) = (l.k_cache.narrow(0, 0, b)?, l.v_cache.narrow(0, 0, b)?);
            kc.slice_set(&k, 1, pos)?;
            vc.slice_set(&v, 1, pos)?;
            // The cache's first pos + t keys, read in place (strided along batch).
            let (kk, vv) = (kc.narrow(1, 0, pos + t)?, vc.narrow(1, 0, pos + t)?);
            let o = attention(
                &q,
                &kk,
                &vv,
                mask,
                QkvLayout::Bshd,
                &SeqLayout::padded(),
                &opts,
            )?;
            x = (x + o.reshape((b * t, c.heads * c.head_dim))?.matmul(&l.wo)?)?;
            let h = rms_norm(&x, &l.mlp_norm, eps)?;
            let m = if sparse {
                l.sparse_mlp.forward(&h)?
            } else {
                let gu = h.matmul(&l.gate_up)?;
                let g = candle_nn::ops::silu(&gu.narrow(1, 0, c.inter)?)?;
                (g * gu.narrow(1, c.inter, c.inter)?)?.matmul(&l.down)?
            };
            x = (x + m)?;
        }
        let last = x
            .reshape((b, t, c.hidden))?
            .i((.., t - 1, ..))?
            .contiguous()?;
        Ok(rms_norm(&last, &self.norm, eps)?.matmul(&self.lm_head)?)
    }
}

/// Decode tokens/s of `steps` greedy steps from position `context` at batch `b`.
fn tokens_per_s(
    model: &mut Model,
    b: usize,
    context: usize,
    steps: usize,
    sparse: bool,
) -> Result<f64> {
    let mut ids = Tensor::zeros((b, 1), DType::U32, &model.device)?;
    for s in 0..2 {
        ids = model
            .forward(&ids, context + s, sparse)?
            .argmax(D::Minus1)?
            .reshape((b, 1))?;
    }
    model.device.synchronize()?;
    let t0 = Instant::now();
    for s in 0..steps {
        ids = model
            .forward(&ids, context + s, sparse)?
            .argmax(D::Minus1)?
            .reshape((b, 1))?;
    }
    model.device.synchronize()?;
    Ok((b * steps) as f64 / t0.elapsed().as_secs_f64())
}

/// The small model on `cpu` and on `gpu` (if any), the same weights: a prefill of random
/// tokens through the block mask, then decode steps on the CPU's greedy tokens; the largest
/// relative difference of the sparse model's logits.
fn small_check(gpu: Option<&Device>, dtype: DType) -> Result<()> {
    let cfg = Config::small(dtype);
    let (batch, context, steps) = (2, 300, 4);
    let cap = context + steps;
    let build = |dev: &Device| {
        Model::new(
            cfg.clone(),
            dev,
            &mut Init {
                seed: 7,
                on: Device::Cpu,
            },
            batch,
            cap,
        )
    };
    let mut cpu = build(&Device::Cpu)?;
    let mut gpu = gpu.map(build).transpose()?;
    let prompt: Vec<u32> = (0..batch * context)
        .map(|i| ((i * 7919) % cfg.vocab) as u32)
        .collect();
    let mut ids = Tensor::from_vec(prompt, (batch, context), &Device::Cpu)?;
    let mut pos = 0;
    let mut worst = 0f64;
    let t0 = Instant::now();
    for step in 0..=steps {
        let want = cpu.forward(&ids, pos, true)?.to_dtype(DType::F32)?;
        if let Some(g) = gpu.as_mut() {
            let got = g
                .forward(&ids.to_device(&g.device)?, pos, true)?
                .to_dtype(DType::F32)?
                .to_device(&Device::Cpu)?;
            let scale = want.abs()?.max_all()?.to_scalar::<f32>()? as f64;
            let diff = (got - &want)?.abs()?.max_all()?.to_scalar::<f32>()? as f64;
            worst = worst.max(diff / scale);
            println!(
                "  {} logits, GPU vs CPU: max |diff| / max |logit| = {:.3e}",
                if step == 0 {
                    format!("prefill ({context} tokens)")
                } else {
                    format!("decode step {step}")
                },
                diff / scale
            );
        }
        pos += ids.dim(1)?;
        ids = want.argmax(D::Minus1)?.reshape((batch, 1))?;
    }
    let cpu_secs = t0.elapsed().as_secs_f64();
    match gpu {
        Some(_) => println!(
            "small model, sparse, GPU vs CPU logits: worst relative difference {worst:.3e}"
        ),
        None => {
            // The CPU alone: the sparse and the dense twin on a few decode steps.
            for sparse in [false, true] {
                cpu.prefill_random(
                    context,
                    &mut Init {
                        seed: 11,
                        on: Device::Cpu,
                    },
                )?;
                let tps = tokens_per_s(&mut cpu, batch, context, steps, sparse)?;
                println!(
                    "small model on the CPU, {}: {tps:.1} tokens/s",
                    if sparse { "sparse" } else { "dense" }
                );
            }
            println!("(prefill and {steps} decode steps on the CPU took {cpu_secs:.2} s)");
        }
    }
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let num = |name: &str, default: usize| -> Result<usize> {
        Ok(flag(name)
            .map(|v| v.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let dtype = match flag("--dtype").as_deref() {
        None | Some("f16") => DType::F16,
        Some("bf16") => DType::BF16,
        Some(other) => return Err(format!("--dtype {other}: f16 or bf16").into()),
    };
    let gpu = open_gpu()?;
    if args.iter().any(|a| a == "--small-only") || gpu.is_none() {
        return small_check(gpu.as_ref(), dtype);
    }
    let gpu = gpu.expect("checked above");
    let cfg = Config {
        hidden: num("--hidden", 2048)?,
        heads: num("--heads", 16)?,
        kv_heads: num("--kv-heads", 4)?,
        head_dim: 128,
        inter: num("--inter", 5632)?,
        layers: num("--layers", 8)?,
        vocab: 32000,
        window: num("--window", 1024)?,
        global_blocks: 1,
        density: flag("--density")
            .map(|v| v.parse())
            .transpose()?
            .unwrap_or(0.5),
        block: BlockShape::new(64, 64),
        dtype,
    };
    let context = num("--context", 8192)?;
    let steps = num("--steps", 32)?;
    let batches: Vec<usize> = flag("--batches")
        .unwrap_or_else(|| "1,16".into())
        .split(',')
        .map(|b| b.parse())
        .collect::<std::result::Result<_, _>>()?;
    let max_batch = batches.iter().copied().max().unwrap_or(1);
    println!("{cfg:?}\ncontext {context}, {steps} timed decode steps, batches {batches:?}");
    println!("dense twin: cuBLAS matmuls (candle) for the MLPs, sparsek's causal attention without a block mask");
    println!(
        "sparse: MLPs at {:.0} % of their {}x{} blocks, attention on the window of {} keys + {} global block(s) of {MASK_BLOCK}",
        cfg.density * 100.0,
        cfg.block.rows,
        cfg.block.cols,
        cfg.window,
        cfg.global_blocks
    );
    let mut init = Init {
        seed: 1,
        on: gpu.clone(),
    };
    let t0 = Instant::now();
    let mut model = Model::new(cfg, &gpu, &mut init, max_batch, context + steps + 2)?;
    model.prefill_random(context, &mut init)?;
    gpu.synchronize()?;
    println!("built and prefilled in {:.1} s", t0.elapsed().as_secs_f64());
    for &b in &batches {
        let dense = tokens_per_s(&mut model, b, context, steps, false)?;
        let sparse = tokens_per_s(&mut model, b, context, steps, true)?;
        println!(
            "context {context:>6} batch {b:>3}: dense {dense:>9.1} tokens/s, sparse {sparse:>9.1} tokens/s, sparse/dense {:.2}x",
            sparse / dense
        );
    }
    drop(model);
    small_check(Some(&gpu), dtype)
}

/// The GPU, or None (with SPARSEK_REQUIRE_GPU set, no GPU is an error).
fn open_gpu() -> Result<Option<Device>> {
    #[cfg(feature = "cuda")]
    match Device::new_cuda(0) {
        Ok(d) => return Ok(Some(d)),
        Err(e) if std::env::var_os("SPARSEK_REQUIRE_GPU").is_some() => {
            return Err(format!("SPARSEK_REQUIRE_GPU is set but there is no GPU: {e}").into())
        }
        Err(e) => println!("no GPU ({e}): the small model on the CPU"),
    }
    #[cfg(not(feature = "cuda"))]
    println!("built without the `cuda` feature: the small model on the CPU");
    Ok(None)
}
