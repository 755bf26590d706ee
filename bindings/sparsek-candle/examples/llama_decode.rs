//! A small Llama-style decoder on candle with sparsek inside: GQA, RoPE, RMSNorm, a KV
//! cache, its MLPs pruned to half their blocks (`SparseMlp::pruned`) and its attention on a
//! sliding-window-plus-global block mask (`sparsek_candle::attention`), beside its dense
//! twin (the same weights unpruned, candle's cuBLAS matmuls, and sparsek's causal attention
//! without a block mask: the same kernel family, the fastest dense attention this build
//! has). Random weights; the KV cache prefilled with random keys and values to the context.
//!
//! Two ways to run a layer, the same for both twins:
//! - `candle ops`: separate Q, K and V projections, candle's `rope_thd`, `slice_set` into the
//!   cache, `x + o` then `rms_norm`, and the dense MLP as `silu(gate) * up` on candle's ops;
//! - `fused` (CUDA only; the default timing): one QKV projection (`[hidden, q + 2 kv]`, as
//!   real Llama ports fuse it), and three small kernels compiled at start-up with NVRTC, each
//!   one launch where candle needs several: RoPE on Q and K with K and V written into the
//!   cache, the residual add with the RMSNorm after it, and the dense twin's `silu(gate) *
//!   up`. A decode step at batch 1 is mostly host work on candle's side (each candle op is a
//!   launch, an allocation and a free), so fewer ops is what lets the GPU work show.
//!
//! On a GPU it prints decode tokens/s of both models at each batch size and both ways, same
//! process, same GPU; `--breakdown` then times the parts of a decode step (attention, MLP,
//! projections, the LM head, the rest) for both twins: host issue time, synchronized wall
//! time and GPU time (the loop queued behind a long matmul, so the device never waits for
//! the host), with the bytes each part must move and the GB/s its GPU time reaches. It ends
//! by checking both models' logits (the sparse and the dense twin, both ways) against the
//! CPU path at a small size (a real prefill through the block mask, then decode steps).
//! Without a GPU it runs the small size on the CPU alone.
//!
//! ```text
//! llama_decode [--preset default|tinyllama|llama3.2-3b] [--context 8192] [--batches 1,16]
//!              [--steps 32] [--layers 8] [--hidden H] [--heads N] [--kv-heads N] [--head-dim D]
//!              [--inter I] [--vocab V] [--window 1024] [--density 0.5] [--block 64] [--dtype f16|bf16]
//!              [--sparse-weights same|e4m3] [--breakdown] [--small-only]
//! ```
//! Presets (the layer count is the example's, 8 unless `--layers`): `default` hidden 2048,
//! 16 heads of 128 over 4 KV heads, intermediate 5632, vocab 32000 (TinyLlama-1.1B's widths
//! with its 32 heads of 64 as 16 of 128); `tinyllama` TinyLlama-1.1B (32 heads of 64 over 4);
//! `llama3.2-3b` Llama-3.2-3B (hidden 3072, 24 heads of 128 over 8, intermediate 8192, vocab
//! 128256).

use std::collections::HashMap;
use std::time::Instant;

use candle_core::{DType, Device, IndexOp, Module, Tensor, D};
use candle_nn::ops::rms_norm;
use candle_nn::rotary_emb::rope_thd;
use sparsek::{
    Activation, AttentionOptions, BlockGranularity, BlockMask, BlockPatterns, BlockShape,
    CausalAlignment,
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
    /// The sparse twin's MLP weights: the model's dtype, or FP8 E4M3 with a scale per block
    /// (W8A16: x and h keep the model's dtype).
    sparse_weights: WeightFormat,
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
            sparse_weights: WeightFormat::Same,
            dtype,
        }
    }

    fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }
}

/// The attention mask's block size (sparsek's device kernel: 128 x 128).
const MASK_BLOCK: usize = 128;
const EPS: f64 = 1e-5;

struct Layer {
    attn_norm: Tensor,
    /// Projections as `[in, out]` (x·W): Q, K, V apart (candle ops) and side by side
    /// (`[hidden, q + 2 kv]`, the fused way).
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    wqkv: Tensor,
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

/// How a layer's elementwise work runs (the same for both twins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    CandleOps,
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Fused,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::CandleOps => "candle ops",
            Way::Fused => "fused",
        }
    }
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
    way: Way,
    #[cfg(feature = "cuda")]
    fused: Option<fused::Kernels>,
    #[cfg(feature = "cuda")]
    graph: graph::State,
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

/// One forward's shapes and position.
struct Step<'a> {
    b: usize,
    t: usize,
    pos: usize,
    cos: Tensor,
    sin: Tensor,
    mask: Option<&'a AttentionMask>,
    opts: AttentionOptions,
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
        let (qd, kvd) = (cfg.q_dim(), cfg.kv_dim());
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
                cfg.sparse_weights,
                Activation::Silu,
            )?;
            let cache = || {
                Tensor::zeros(
                    (max_batch, capacity, cfg.kv_heads, cfg.head_dim),
                    dt,
                    device,
                )
            };
            let wq = init.randn(&[h, qd], s(h), dt, device)?;
            let wk = init.randn(&[h, kvd], s(h), dt, device)?;
            let wv = init.randn(&[h, kvd], s(h), dt, device)?;
            layers.push(Layer {
                attn_norm: (Tensor::ones(h, dt, device)? + init.randn(&[h], 0.1, dt, device)?)?,
                wqkv: Tensor::cat(&[&wq, &wk, &wv], 1)?.contiguous()?,
                wq,
                wk,
                wv,
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
            way: Way::CandleOps,
            #[cfg(feature = "cuda")]
            fused: None,
            #[cfg(feature = "cuda")]
            graph: graph::State::default(),
        })
    }

    /// Compiles the fused kernels (CUDA only) and makes them the way layers run; on failure
    /// says why and keeps candle's ops.
    fn use_fused(&mut self) -> bool {
        #[cfg(feature = "cuda")]
        if let Device::Cuda(dev) = &self.device {
            if self.fused.is_none() {
                match fused::Kernels::new(dev) {
                    Ok(k) => self.fused = Some(k),
                    Err(e) => {
                        println!("fused kernels unavailable ({e}): candle ops only");
                        return false;
                    }
                }
            }
            self.way = Way::Fused;
            return true;
        }
        false
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

    /// Whether key block `j` is in the window of query block `i` of `t` queries at `pos`.
    fn keeps(&self, t: usize, pos: usize, i: usize, j: usize) -> bool {
        let (window, global) = (self.cfg.window, self.cfg.global_blocks);
        let first = if t == 1 { pos } else { pos + i * MASK_BLOCK };
        let last = (pos + t - 1).min(first + MASK_BLOCK - 1);
        j < global
            || ((j + 1) * MASK_BLOCK > first.saturating_sub(window) && j * MASK_BLOCK <= last)
    }

    /// The sliding-window-plus-global mask of `t` queries at positions `pos..pos + t` over
    /// keys `0..pos + t` (query block `i` sees the global blocks and the key blocks that
    /// reach into the `window` keys before its first query; causal masking trims the rest).
    fn mask(&mut self, t: usize, pos: usize) -> Result<()> {
        let (q_blocks, k_blocks) = (t.div_ceil(MASK_BLOCK), (pos + t).div_ceil(MASK_BLOCK));
        let key = self.mask_key(t, pos);
        if !self.masks.contains_key(&key) {
            let mask = BlockMask::from_fn(q_blocks, k_blocks, |i, j| self.keeps(t, pos, i, j))?;
            let patterns = BlockPatterns::from_block_masks(MASK_BLOCK, MASK_BLOCK, &[mask])?;
            let mask = AttentionMask::new(patterns, &self.device)?;
            self.masks.insert(key, mask);
        }
        Ok(())
    }

    /// Decode steps within one key block share a mask when the window is whole blocks.
    fn mask_key(&self, t: usize, pos: usize) -> (usize, usize) {
        if t == 1 && self.cfg.window % MASK_BLOCK == 0 {
            (1, pos / MASK_BLOCK)
        } else {
            (t, pos)
        }
    }

    /// The keys a decode query at `pos` reads through the sparse mask (all `pos + 1` dense).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn keys_read(&self, pos: usize, sparse: bool) -> usize {
        if !sparse {
            return pos + 1;
        }
        (0..(pos + 1).div_ceil(MASK_BLOCK))
            .filter(|&j| self.keeps(1, pos, 0, j))
            .map(|j| ((j + 1) * MASK_BLOCK).min(pos + 1) - j * MASK_BLOCK)
            .sum()
    }

    /// This step's shapes, tables and mask (built by [`Self::mask`] first for the sparse
    /// model).
    fn step(&self, b: usize, t: usize, pos: usize, sparse: bool) -> Result<Step<'_>> {
        let mask = if sparse {
            self.masks.get(&self.mask_key(t, pos))
        } else {
            None
        };
        Ok(Step {
            b,
            t,
            pos,
            cos: self.cos.narrow(0, pos, t)?,
            sin: self.sin.narrow(0, pos, t)?,
            mask,
            opts: AttentionOptions::new()
                .causal(true)
                .causal_alignment(CausalAlignment::BottomRight),
        })
    }

    /// `(x + r, rms_norm(x + r) · w)`; `x` alone without `r`.
    fn add_norm(&self, x: &Tensor, r: Option<&Tensor>, w: &Tensor) -> Result<(Tensor, Tensor)> {
        #[cfg(feature = "cuda")]
        if let (Way::Fused, Some(k), Some(r)) = (self.way, &self.fused, r) {
            return k.add_rms_norm(x, r, w, EPS as f32);
        }
        let s = match r {
            Some(r) => (x + r)?,
            None => x.clone(),
        };
        let h = rms_norm(&s, w, EPS as f32)?;
        Ok((s, h))
    }

    /// The fused QKV projection: `[b·t, q + 2 kv]`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn qkv(&self, l: &Layer, h: &Tensor) -> Result<Tensor> {
        Ok(h.matmul(&l.wqkv)?)
    }

    /// The projections in and RoPE: Q (`[b, t, heads, d]`), with this step's K and V
    /// written into the layer's cache at `pos`.
    fn rope_and_cache(&self, l: &Layer, h: &Tensor, s: &Step<'_>) -> Result<Tensor> {
        let c = &self.cfg;
        let (b, t) = (s.b, s.t);
        #[cfg(feature = "cuda")]
        if let (Way::Fused, Some(k)) = (self.way, &self.fused) {
            let qkv = self.qkv(l, h)?;
            return k.rope_qkv_cache(&qkv, &self.cos, &self.sin, l, c, b, t, s.pos, None);
        }
        let q = h.matmul(&l.wq)?.reshape((b, t, c.heads, c.head_dim))?;
        let k = h.matmul(&l.wk)?.reshape((b, t, c.kv_heads, c.head_dim))?;
        let v = h.matmul(&l.wv)?.reshape((b, t, c.kv_heads, c.head_dim))?;
        let (q, k) = (rope_thd(&q, &s.cos, &s.sin)?, rope_thd(&k, &s.cos, &s.sin)?);
        let (kc, vc) = (l.k_cache.narrow(0, 0, b)?, l.v_cache.narrow(0, 0, b)?);
        kc.slice_set(&k, 1, s.pos)?;
        vc.slice_set(&v, 1, s.pos)?;
        Ok(q)
    }

    /// Attention of Q over the cache's first `pos + t` keys, read in place (strided along
    /// batch): `[b·t, heads·d]`.
    fn attend(&self, l: &Layer, q: &Tensor, s: &Step<'_>) -> Result<Tensor> {
        let c = &self.cfg;
        let (kc, vc) = (l.k_cache.narrow(0, 0, s.b)?, l.v_cache.narrow(0, 0, s.b)?);
        let (kk, vv) = (kc.narrow(1, 0, s.pos + s.t)?, vc.narrow(1, 0, s.pos + s.t)?);
        let o = attention(
            q,
            &kk,
            &vv,
            s.mask,
            QkvLayout::Bshd,
            &SeqLayout::padded(),
            &s.opts,
        )?;
        Ok(o.reshape((s.b * s.t, c.q_dim()))?)
    }

    fn mlp(&self, l: &Layer, h: &Tensor, sparse: bool) -> Result<Tensor> {
        if sparse {
            return Ok(l.sparse_mlp.forward(h)?);
        }
        let inter = self.cfg.inter;
        let gu = h.matmul(&l.gate_up)?;
        #[cfg(feature = "cuda")]
        if let (Way::Fused, Some(k)) = (self.way, &self.fused) {
            return Ok(k.silu_mul(&gu, inter)?.matmul(&l.down)?);
        }
        let g = candle_nn::ops::silu(&gu.narrow(1, 0, inter)?)?;
        Ok((g * gu.narrow(1, inter, inter)?)?.matmul(&l.down)?)
    }

    /// Logits of the last of `ids` (`[batch, t]`, at positions `pos..pos + t`), appending
    /// their keys and values to the cache.
    fn forward(&mut self, ids: &Tensor, pos: usize, sparse: bool) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let hidden = self.cfg.hidden;
        if sparse {
            self.mask(t, pos)?;
        }
        let s = self.step(b, t, pos, sparse)?;
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?; // [b·t, hidden]
        let mut pending: Option<Tensor> = None; // the last MLP's output, not yet added
        for l in &self.layers {
            let (xs, h) = self.add_norm(&x, pending.as_ref(), &l.attn_norm)?;
            let q = self.rope_and_cache(l, &h, &s)?;
            let o = self.attend(l, &q, &s)?.matmul(&l.wo)?;
            let (xs, h) = self.add_norm(&xs, Some(&o), &l.mlp_norm)?;
            pending = Some(self.mlp(l, &h, sparse)?);
            x = xs;
        }
        let (_, h) = self.add_norm(&x, pending.as_ref(), &self.norm)?;
        let last = if t == 1 {
            h
        } else {
            h.reshape((b, t, hidden))?
                .i((.., t - 1, ..))?
                .contiguous()?
        };
        Ok(last.matmul(&self.lm_head)?)
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
/// relative difference of each twin's logits, each way the GPU runs a layer.
fn small_check(gpu: Option<&Device>, dtype: DType, sparse_weights: WeightFormat) -> Result<()> {
    let cfg = Config {
        sparse_weights,
        ..Config::small(dtype)
    };
    let (batch, context, steps) = (2, 300, 4);
    // Room for the decode steps and, on a GPU, two steps replayed from CUDA graphs.
    let cap = context + steps + 2;
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
    let prompt: Vec<u32> = (0..batch * context)
        .map(|i| ((i * 7919) % cfg.vocab) as u32)
        .collect();
    let Some(gpu) = gpu else {
        // The CPU alone: the sparse and the dense twin on a prefill and a few decode steps.
        let mut cpu = build(&Device::Cpu)?;
        let t0 = Instant::now();
        let ids = Tensor::from_vec(prompt, (batch, context), &Device::Cpu)?;
        let logits = cpu.forward(&ids, 0, true)?;
        println!(
            "small model on the CPU: prefill of {context} tokens, logits {:?}",
            logits.dims()
        );
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
        println!("(the CPU runs took {:.2} s)", t0.elapsed().as_secs_f64());
        return Ok(());
    };
    let mut worst_all = 0f64;
    for way in [Way::CandleOps, Way::Fused] {
        for sparse in [true, false] {
            let mut cpu = build(&Device::Cpu)?;
            let mut g = build(gpu)?;
            if way == Way::Fused && !g.use_fused() {
                continue;
            }
            let mut ids = Tensor::from_vec(prompt.clone(), (batch, context), &Device::Cpu)?;
            let (mut pos, mut worst) = (0, 0f64);
            let mut diffs = Vec::new();
            // The prefill and decode steps, then (the fused way) two decode steps replayed
            // from CUDA graphs.
            let graphed = if way == Way::Fused { 2 } else { 0 };
            for step in 0..=steps + graphed {
                let want = cpu.forward(&ids, pos, sparse)?.to_dtype(DType::F32)?;
                let got = if step <= steps {
                    g.forward(&ids.to_device(gpu)?, pos, sparse)?
                } else {
                    graph_logits(&mut g, &ids.to_device(gpu)?, pos, sparse)?
                };
                let got = got.to_dtype(DType::F32)?.to_device(&Device::Cpu)?;
                let scale = want.abs()?.max_all()?.to_scalar::<f32>()? as f64;
                let diff = (got - &want)?.abs()?.max_all()?.to_scalar::<f32>()? as f64;
                worst = worst.max(diff / scale);
                diffs.push(format!("{:.2e}", diff / scale));
                pos += ids.dim(1)?;
                ids = want.argmax(D::Minus1)?.reshape((batch, 1))?;
            }
            worst_all = worst_all.max(worst);
            println!(
                "small model, {} twin, {}: GPU vs CPU logits, max |diff| / max |logit| {worst:.3e} (prefill of {context}, then {steps} decode steps{}: {})",
                if sparse { "sparse" } else { "dense" },
                way.name(),
                if graphed > 0 { format!(" and {graphed} from CUDA graphs") } else { String::new() },
                diffs.join(" ")
            );
        }
    }
    println!("small model, GPU vs CPU logits: worst relative difference {worst_all:.3e}");
    Ok(())
}

/// The logits of one decode step of `ids` at `pos` replayed from a CUDA graph (CUDA only).
fn graph_logits(model: &mut Model, ids: &Tensor, pos: usize, sparse: bool) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    {
        graph::set_ids(model, ids)?;
        graph::step(model, ids.dim(0)?, pos, sparse)?;
        graph::logits(model, ids.dim(0)?)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (model, ids, pos, sparse);
        Err("CUDA graphs need the cuda feature".into())
    }
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
    let sparse_weights = match flag("--sparse-weights").as_deref() {
        None | Some("same") => WeightFormat::Same,
        Some("e4m3") => WeightFormat::Fp8E4M3(BlockGranularity::PerBlock),
        Some(other) => return Err(format!("--sparse-weights {other}: same or e4m3").into()),
    };
    let gpu = open_gpu()?;
    if args.iter().any(|a| a == "--small-only") || gpu.is_none() {
        return small_check(gpu.as_ref(), dtype, sparse_weights);
    }
    let gpu = gpu.expect("checked above");
    // hidden, heads, kv heads, head dim, intermediate, vocab.
    let preset = flag("--preset").unwrap_or_else(|| "default".into());
    let (hidden, heads, kv_heads, head_dim, inter, vocab) = match preset.as_str() {
        "default" => (2048, 16, 4, 128, 5632, 32000),
        "tinyllama" => (2048, 32, 4, 64, 5632, 32000),
        "llama3.2-3b" => (3072, 24, 8, 128, 8192, 128256),
        other => return Err(format!("--preset {other}: default, tinyllama or llama3.2-3b").into()),
    };
    let cfg = Config {
        hidden: num("--hidden", hidden)?,
        heads: num("--heads", heads)?,
        kv_heads: num("--kv-heads", kv_heads)?,
        head_dim: num("--head-dim", head_dim)?,
        inter: num("--inter", inter)?,
        layers: num("--layers", 8)?,
        vocab: num("--vocab", vocab)?,
        window: num("--window", 1024)?,
        global_blocks: 1,
        density: flag("--density")
            .map(|v| v.parse())
            .transpose()?
            .unwrap_or(0.5),
        block: {
            let side = num("--block", 64)?;
            BlockShape::new(side, side)
        },
        sparse_weights,
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
    println!("preset {preset}: {cfg:?}\ncontext {context}, {steps} timed decode steps, batches {batches:?}");
    println!("dense twin: cuBLAS matmuls (candle) for the MLPs, sparsek's causal attention without a block mask");
    println!(
        "sparse: MLPs at {:.0} % of their {}x{} blocks ({}), attention on the window of {} keys + {} global block(s) of {MASK_BLOCK}",
        cfg.density * 100.0,
        cfg.block.rows,
        cfg.block.cols,
        match cfg.sparse_weights {
            WeightFormat::Same => "weights of the model's dtype",
            WeightFormat::Fp8E4M3(_) => "weights FP8 E4M3, a scale per block",
        },
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
    let fused = model.use_fused();
    let ways: &[Way] = if fused {
        &[Way::CandleOps, Way::Fused]
    } else {
        &[Way::CandleOps]
    };
    for &b in &batches {
        for &way in ways {
            model.way = way;
            let dense = tokens_per_s(&mut model, b, context, steps, false)?;
            let sparse = tokens_per_s(&mut model, b, context, steps, true)?;
            println!(
                "context {context:>6} batch {b:>3} [{:>10}]: dense {dense:>9.1} tokens/s, sparse {sparse:>9.1} tokens/s, sparse/dense {:.2}x",
                way.name(),
                sparse / dense
            );
        }
        #[cfg(feature = "cuda")]
        if fused {
            let timed = (|| -> Result<(f64, f64)> {
                Ok((
                    graph::tokens_per_s(&mut model, b, context, steps, false)?,
                    graph::tokens_per_s(&mut model, b, context, steps, true)?,
                ))
            })();
            match timed {
                Ok((dense, sparse)) => println!(
                    "context {context:>6} batch {b:>3} [{:>10}]: dense {dense:>9.1} tokens/s, sparse {sparse:>9.1} tokens/s, sparse/dense {:.2}x",
                    "cuda graph",
                    sparse / dense
                ),
                Err(e) => println!("context {context:>6} batch {b:>3} [cuda graph]: failed: {e}"),
            }
        }
    }
    model.way = if fused { Way::Fused } else { Way::CandleOps };
    if args.iter().any(|a| a == "--breakdown") {
        #[cfg(feature = "cuda")]
        {
            for &b in &batches {
                for sparse in [false, true] {
                    breakdown::run(&mut model, b, context, sparse)?;
                }
            }
        }
    }
    drop(model);
    small_check(Some(&gpu), dtype, sparse_weights)
}

/// The GPU, or None (with SPARSEK_REQUIRE_GPU set, no GPU is an error).
fn open_gpu() -> Result<Option<Device>> {
    #[cfg(feature = "cuda")]
    match Device::new_cuda_with_stream(0) {
        Ok(d) => {
            // One stream (its own, so a decode step can be captured as a CUDA graph) for
            // every op: no cross-stream events needed.
            if let Device::Cuda(c) = &d {
                // SAFETY: nothing has been allocated on this device yet, and every op of this
                // program runs on its one stream.
                unsafe { c.disable_event_tracking() };
            }
            return Ok(Some(d));
        }
        Err(e) if std::env::var_os("SPARSEK_REQUIRE_GPU").is_some() => {
            return Err(format!("SPARSEK_REQUIRE_GPU is set but there is no GPU: {e}").into())
        }
        Err(e) => println!("no GPU ({e}): the small model on the CPU"),
    }
    #[cfg(not(feature = "cuda"))]
    println!("built without the `cuda` feature: the small model on the CPU");
    Ok(None)
}

/// Decode steps replayed from CUDA graphs: the step's launches captured once per batch size,
/// twin and mask, then replayed with one launch. What changes from step to step lives on
/// the device: the token ids (the graph writes the next ones), each sequence's key count
/// (attention reads the whole cache through `seqlens_k`, RoPE and the cache write take their
/// position from it); the sliding window's mask is the same for the 128 positions of a key
/// block, so a new key block is a new capture.
#[cfg(feature = "cuda")]
mod graph {
    use super::*;
    use candle_core::cuda_backend::cudarc::driver::sys::{
        CUgraphInstantiate_flags, CUstreamCaptureMode,
    };
    use candle_core::cuda_backend::cudarc::driver::CudaGraph;

    /// A batch size's buffers the graphs read and write.
    struct Statics {
        /// `[b, 1]` U32: this step's tokens in, the next ones out.
        ids: Tensor,
        /// `[b]` I32: keys per sequence with this step's (position + 1).
        lens: Tensor,
        /// `[b, vocab]`: this step's logits.
        logits: Tensor,
    }

    #[derive(Default)]
    pub struct State {
        statics: HashMap<usize, Statics>,
        /// Decode masks over the whole cache, by `Model::mask_key`.
        masks: HashMap<(usize, usize), AttentionMask>,
        graphs: HashMap<(usize, bool, (usize, usize)), CudaGraph>,
    }

    fn statics(model: &mut Model, b: usize) -> Result<&Statics> {
        if !model.graph.statics.contains_key(&b) {
            let dev = &model.device;
            let st = Statics {
                ids: Tensor::zeros((b, 1), DType::U32, dev)?,
                lens: Tensor::zeros(b, DType::I32, dev)?,
                logits: Tensor::zeros((b, model.cfg.vocab), model.cfg.dtype, dev)?,
            };
            model.graph.statics.insert(b, st);
        }
        Ok(&model.graph.statics[&b])
    }

    /// This step's tokens (`[b, 1]` U32 on the device).
    pub fn set_ids(model: &mut Model, ids: &Tensor) -> Result<()> {
        let b = ids.dim(0)?;
        statics(model, b)?.ids.slice_set(ids, 0, 0)?;
        Ok(())
    }

    pub fn logits(model: &mut Model, b: usize) -> Result<Tensor> {
        Ok(statics(model, b)?.logits.copy()?)
    }

    /// The decode mask of position `pos` over the whole cache.
    fn mask(model: &mut Model, pos: usize) -> Result<(usize, usize)> {
        let key = model.mask_key(1, pos);
        if !model.graph.masks.contains_key(&key) {
            let k_blocks = model.layers[0].k_cache.dim(1)?.div_ceil(MASK_BLOCK);
            let m = BlockMask::from_fn(1, k_blocks, |_, j| model.keeps(1, pos, 0, j))?;
            let patterns = BlockPatterns::from_block_masks(MASK_BLOCK, MASK_BLOCK, &[m])?;
            let m = AttentionMask::new(patterns, &model.device)?;
            model.graph.masks.insert(key, m);
        }
        Ok(key)
    }

    /// One decode step from the static buffers (the fused way; every launch capturable).
    fn forward(model: &Model, b: usize, sparse: bool, key: (usize, usize)) -> Result<()> {
        let k = model
            .fused
            .as_ref()
            .ok_or("CUDA graphs here need the fused kernels")?;
        let (c, st) = (&model.cfg, &model.graph.statics[&b]);
        let cap = model.layers[0].k_cache.dim(1)?;
        let mask = if sparse {
            Some(&model.graph.masks[&key])
        } else {
            None
        };
        let opts = AttentionOptions::new()
            .causal(true)
            .causal_alignment(CausalAlignment::BottomRight);
        let seq = SeqLayout::new(b).seqlens_k(&st.lens, cap);
        let mut x = model.embed.index_select(&st.ids.flatten_all()?, 0)?;
        let mut pending: Option<Tensor> = None;
        for l in &model.layers {
            let (xs, h) = model.add_norm(&x, pending.as_ref(), &l.attn_norm)?;
            let qkv = h.matmul(&l.wqkv)?;
            let q =
                k.rope_qkv_cache(&qkv, &model.cos, &model.sin, l, c, b, 1, 0, Some(&st.lens))?;
            let (kc, vc) = (l.k_cache.narrow(0, 0, b)?, l.v_cache.narrow(0, 0, b)?);
            let o = attention(&q, &kc, &vc, mask, QkvLayout::Bshd, &seq, &opts)?
                .reshape((b, c.q_dim()))?
                .matmul(&l.wo)?;
            let (xs, h) = model.add_norm(&xs, Some(&o), &l.mlp_norm)?;
            pending = Some(model.mlp(l, &h, sparse)?);
            x = xs;
        }
        let (_, h) = model.add_norm(&x, pending.as_ref(), &model.norm)?;
        let logits = h.matmul(&model.lm_head)?;
        st.logits.slice_set(&logits, 0, 0)?;
        st.ids
            .slice_set(&logits.argmax(D::Minus1)?.reshape((b, 1))?, 0, 0)?;
        Ok(())
    }

    /// The decode step at `pos` of the tokens in the static ids: replayed from its graph, or
    /// run and then captured the first time its (batch, twin, mask) comes.
    pub fn step(model: &mut Model, b: usize, pos: usize, sparse: bool) -> Result<()> {
        let Device::Cuda(cuda) = model.device.clone() else {
            return Err("CUDA graphs need a CUDA device".into());
        };
        if pos + 1 > model.layers[0].k_cache.dim(1)? {
            return Err("the cache is full".into());
        }
        let key = if sparse { mask(model, pos)? } else { (0, 0) };
        let lens = vec![(pos + 1) as i32; b];
        statics(model, b)?;
        let k = model
            .fused
            .as_ref()
            .ok_or("CUDA graphs here need the fused kernels")?;
        k.write_i32(&model.graph.statics[&b].lens, &lens)?;
        model.way = Way::Fused;
        if let Some(g) = model.graph.graphs.get(&(b, sparse, key)) {
            g.launch()?;
            return Ok(());
        }
        // The step itself, eagerly (it also fills candle's cache of launch parameters, which
        // a capture may not upload), then the same launches captured.
        let stream = cuda.cuda_stream();
        let _params = cuda.enable_cuda_graph_htod_cache();
        forward(model, b, sparse, key)?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)?;
        let recorded = forward(model, b, sparse, key);
        let g = stream.end_capture(
            CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
        )?;
        recorded?;
        let g = g.ok_or("the capture recorded no graph")?;
        model.graph.graphs.insert((b, sparse, key), g);
        Ok(())
    }

    /// Decode tokens/s of `steps` greedy steps from position `context` at batch `b`, each
    /// step one graph launch (as `super::tokens_per_s`: two steps first, untimed).
    pub fn tokens_per_s(
        model: &mut Model,
        b: usize,
        context: usize,
        steps: usize,
        sparse: bool,
    ) -> Result<f64> {
        set_ids(model, &Tensor::zeros((b, 1), DType::U32, &model.device)?)?;
        for s in 0..2 {
            step(model, b, context + s, sparse)?;
        }
        model.device.synchronize()?;
        let t0 = Instant::now();
        for s in 0..steps {
            step(model, b, context + s, sparse)?;
        }
        model.device.synchronize()?;
        Ok((b * steps) as f64 / t0.elapsed().as_secs_f64())
    }
}

/// Where a decode step's time goes: each part timed alone over every layer's weights and
/// cache, as the step runs it.
#[cfg(feature = "cuda")]
mod breakdown {
    use super::*;
    use candle_core::cuda_backend::cudarc::driver::sys::CUevent_flags;

    /// Microseconds per repeat: host (until the loop has queued its work), wall (until the
    /// device has finished it) and GPU (the device's time with the loop queued behind a
    /// long matmul: its work alone, no waiting for the host).
    pub struct Timing {
        pub host: f64,
        pub wall: f64,
        pub gpu: f64,
    }

    pub fn time(dev: &Device, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<Timing> {
        let Device::Cuda(cuda) = dev else {
            return Err("the breakdown needs a CUDA device".into());
        };
        let stream = cuda.cuda_stream();
        f()?;
        f()?;
        dev.synchronize()?;
        let t0 = Instant::now();
        for _ in 0..reps {
            f()?;
        }
        let host = t0.elapsed().as_secs_f64();
        dev.synchronize()?;
        let wall = t0.elapsed().as_secs_f64();
        // A blocker long enough that the whole loop is queued before the device reaches it.
        let a = Tensor::ones((8192, 8192), DType::F16, dev)?;
        let one = {
            let _ = a.matmul(&a)?;
            dev.synchronize()?;
            let e0 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
            for _ in 0..4 {
                let _ = a.matmul(&a)?;
            }
            let e1 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
            e0.elapsed_ms(&e1)? as f64 / 4.0 * 1e-3
        };
        let blockers = ((host * 1.5 + 2e-3) / one).ceil() as usize;
        for _ in 0..blockers {
            a.matmul(&a)?;
        }
        let e0 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for _ in 0..reps {
            f()?;
        }
        let e1 = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let gpu = e0.elapsed_ms(&e1)? as f64 * 1e-3;
        dev.synchronize()?;
        let us = |s: f64| s * 1e6 / reps as f64;
        Ok(Timing {
            host: us(host),
            wall: us(wall),
            gpu: us(gpu),
        })
    }

    /// Times the parts of a decode step at batch `b` from position `context` (the cache
    /// filled), for the sparse model or its dense twin, the way the model runs now.
    pub fn run(model: &mut Model, b: usize, context: usize, sparse: bool) -> Result<()> {
        const REPS: usize = 20;
        let dev = model.device.clone();
        let c = model.cfg.clone();
        let e = c.dtype.size_in_bytes();
        let layers = model.layers.len();
        let pos = context;
        // The whole step, as tokens_per_s runs it.
        let ids = Tensor::zeros((b, 1), DType::U32, &dev)?;
        let step = time(&dev, REPS, || {
            model.forward(&ids, pos, sparse)?.argmax(D::Minus1)?;
            Ok(())
        })?;
        // The same step replayed from its CUDA graph (the fused way only).
        let way = model.way;
        let replayed = if model.fused.is_some() {
            graph::set_ids(model, &ids)?;
            let t = time(&dev, REPS, || graph::step(model, b, pos, sparse));
            model.way = way;
            t.map_err(|e| println!("  (the step from a CUDA graph failed: {e})"))
                .ok()
        } else {
            None
        };
        if sparse {
            model.mask(1, pos)?;
        }
        let model = &*model;
        let s = model.step(b, 1, pos, sparse)?;
        let h = Tensor::randn(0f32, 1.0, (b, c.hidden), &dev)?.to_dtype(c.dtype)?;
        let q = model.rope_and_cache(&model.layers[0], &h, &s)?;
        let o = model.attend(&model.layers[0], &q, &s)?;
        let m = model;
        let attention = time(&dev, REPS, || {
            for l in &m.layers {
                m.attend(l, &q, &s)?;
            }
            Ok(())
        })?;
        let mlp = time(&dev, REPS, || {
            for l in &m.layers {
                m.mlp(l, &h, sparse)?;
            }
            Ok(())
        })?;
        let projections = time(&dev, REPS, || {
            for l in &m.layers {
                match m.way {
                    Way::Fused => m.qkv(l, &h)?,
                    Way::CandleOps => {
                        h.matmul(&l.wq)?;
                        h.matmul(&l.wk)?;
                        h.matmul(&l.wv)?
                    }
                };
                o.matmul(&l.wo)?;
            }
            Ok(())
        })?;
        let lm_head = time(&dev, REPS, || {
            h.matmul(&m.lm_head)?;
            Ok(())
        })?;
        // Bytes each part must move per step (weights and the cache read once, activations
        // in and out).
        let kv = c.kv_dim();
        let keys = m.keys_read(pos, sparse);
        let attn_bytes = layers * b * (2 * keys * kv + 2 * c.q_dim()) * e;
        let density = if sparse { c.density } else { 1.0 };
        // The sparse twin's FP8 weights: a byte per element (the per-block scales left out).
        let we = match (sparse, c.sparse_weights) {
            (true, WeightFormat::Fp8E4M3(_)) => 1,
            _ => e,
        };
        let mlp_bytes = layers
            * ((3.0 * (c.hidden * c.inter * we) as f64 * density) as usize
                + b * (2 * c.hidden + 3 * c.inter) * e);
        let proj_bytes = layers * (c.hidden * (c.q_dim() + 2 * kv) + c.q_dim() * c.hidden) * e;
        let head_bytes = c.hidden * c.vocab * e;
        println!(
            "breakdown, context {context}, batch {b}, {} twin ({}), per decode step, {layers} layers:",
            if sparse { "sparse" } else { "dense" },
            m.way.name()
        );
        println!(
            "  {:<22} {:>9} {:>9} {:>9} {:>10} {:>9}",
            "part", "host us", "wall us", "gpu us", "MB moved", "GB/s gpu"
        );
        let row = |name: &str, t: &Timing, bytes: Option<usize>| {
            let (mb, gbs) = match bytes {
                Some(by) => (
                    format!("{:.1}", by as f64 / 1e6),
                    format!("{:.0}", by as f64 / (t.gpu * 1e3)),
                ),
                None => ("-".into(), "-".into()),
            };
            println!(
                "  {name:<22} {:>9.1} {:>9.1} {:>9.1} {mb:>10} {gbs:>9}",
                t.host, t.wall, t.gpu
            );
        };
        row(
            &format!("attention ({keys} keys)"),
            &attention,
            Some(attn_bytes),
        );
        row("mlp", &mlp, Some(mlp_bytes));
        row("projections (qkv, o)", &projections, Some(proj_bytes));
        row("lm_head", &lm_head, Some(head_bytes));
        let parts = [&attention, &mlp, &projections, &lm_head];
        let rest = Timing {
            host: step.host - parts.iter().map(|t| t.host).sum::<f64>(),
            wall: step.wall - parts.iter().map(|t| t.wall).sum::<f64>(),
            gpu: step.gpu - parts.iter().map(|t| t.gpu).sum::<f64>(),
        };
        row("rest (step - parts)", &rest, None);
        let all = attn_bytes + mlp_bytes + proj_bytes + head_bytes;
        row("step", &step, Some(all));
        if let Some(t) = &replayed {
            row("step from a CUDA graph", t, Some(all));
        }
        Ok(())
    }
}

/// The fused kernels (NVRTC at start-up) and the candle ops over them.
#[cfg(feature = "cuda")]
mod fused {
    use super::{Config, Layer, Result};
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{
        CudaFunction, CudaSlice, CudaView, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg,
    };
    use candle_core::cuda_backend::cudarc::nvrtc;
    use candle_core::cuda_backend::CudaDType;
    use candle_core::{
        CpuStorage, CudaDevice, CudaStorage, CustomOp1, CustomOp3, DType, Layout, Shape, Storage,
        Tensor,
    };
    use sparsek::{bf16, f16};

    const SOURCE: &str = r#"
typedef unsigned short u16;
template <bool BF> __device__ __forceinline__ float ld(u16 v) {
  if (BF) return __uint_as_float(((unsigned)v) << 16);
  float f;
  asm("{ .reg .b16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(v));
  return f;
}
template <bool BF> __device__ __forceinline__ u16 st(float f) {
  if (BF) {
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (u16)(u >> 16);
  }
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
// qkv [b*t, (heads + 2 kv_heads) * d]: Q heads, K heads, V heads. q_out [b*t, heads * d];
// the caches [batch, capacity, kv_heads, d]; cos and sin [capacity, d / 2]. RoPE as
// candle's rope_thd (halves rotated), in f32, rounded once. Sequence bi's t tokens sit at
// positions pos.., or with lens (device keys per sequence, these tokens' included) at
// lens[bi] - t.. (a step replayed from a CUDA graph reads its position from the device).
template <bool BF> __device__ void rope_qkv_cache(const u16* qkv, const u16* cos,
    const u16* sin, u16* q_out, u16* k_cache, u16* v_cache, const int* lens, int b, int t,
    int heads, int kv_heads, int d, int capacity, int pos_all) {
  const int half = d / 2, all = heads + 2 * kv_heads;
  const long n = (long)b * t * all * half;
  for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
       idx += (long)gridDim.x * blockDim.x) {
    const int i = (int)(idx % half);
    const long rh = idx / half;
    const int h = (int)(rh % all);
    const long row = rh / all;
    const int ti = (int)(row % t);
    const long bi = row / t;
    const int pos = lens ? lens[bi] - t : pos_all;
    const u16* src = qkv + row * all * d + (long)h * d;
    const long slot = (bi * capacity + pos + ti) * kv_heads;
    if (h >= heads + kv_heads) {
      u16* dst = v_cache + (slot + (h - heads - kv_heads)) * d;
      dst[i] = src[i];
      dst[i + half] = src[i + half];
      continue;
    }
    const float x1 = ld<BF>(src[i]), x2 = ld<BF>(src[i + half]);
    const float c = ld<BF>(cos[(long)(pos + ti) * half + i]);
    const float s = ld<BF>(sin[(long)(pos + ti) * half + i]);
    u16* dst = h < heads ? q_out + (row * heads + h) * d : k_cache + (slot + (h - heads)) * d;
    dst[i] = st<BF>(x1 * c - x2 * s);
    dst[i + half] = st<BF>(x1 * s + x2 * c);
  }
}
// One block per row: s = x + r rounded to the element type; out [2, rows, cols] holds
// rmsnorm(s) * w, then s. blockDim a multiple of 32, at most 1024.
template <bool BF> __device__ void add_rms_norm(const u16* x, const u16* r, const u16* w,
    u16* out, int rows, int cols, float eps) {
  // The next kernel may launch now (programmatic dependent launch): sparsek's products then
  // stream their settled weights while this one runs, and read its output only after it
  // has completed. Kernels launched without the attribute (candle's) wait as before.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  __shared__ float part[32];
  const long row = blockIdx.x;
  u16* h = out + row * cols;
  u16* s = out + (long)rows * cols + row * cols;
  float acc = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const u16 sv = st<BF>(ld<BF>(x[row * cols + c]) + ld<BF>(r[row * cols + c]));
    s[c] = sv;
    const float v = ld<BF>(sv);
    acc += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) part[0] = acc;
  }
  __syncthreads();
  const float scale = rsqrtf(part[0] / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    h[c] = st<BF>(scale * ld<BF>(s[c]) * ld<BF>(w[c]));
}
// gu [rows, 2 inter] (gate, then up): out [rows, inter] = silu(gate) * up, rounded to the
// element type after the silu and after the product, as candle's two ops round.
template <bool BF> __device__ void silu_mul(const u16* gu, u16* out, int rows, int inter) {
  const long n = (long)rows * inter;
  for (long idx = (long)blockIdx.x * blockDim.x + threadIdx.x; idx < n;
       idx += (long)gridDim.x * blockDim.x) {
    const long row = idx / inter;
    const int j = (int)(idx % inter);
    const float g = ld<BF>(gu[row * 2 * inter + j]);
    const float a = ld<BF>(st<BF>(g / (1.f + __expf(-g))));
    out[idx] = st<BF>(a * ld<BF>(gu[row * 2 * inter + inter + j]));
  }
}
#define FUSED(SUFFIX, BF)                                                                   \
  extern "C" __global__ void rope_qkv_cache_##SUFFIX(const u16* qkv, const u16* cos,        \
      const u16* sin, u16* q_out, u16* k_cache, u16* v_cache, const int* lens, int b,       \
      int t, int heads, int kv_heads, int d, int capacity, int pos) {                       \
    rope_qkv_cache<BF>(qkv, cos, sin, q_out, k_cache, v_cache, lens, b, t, heads, kv_heads, \
                       d, capacity, pos);                                                   \
  }                                                                                         \
  extern "C" __global__ void add_rms_norm_##SUFFIX(const u16* x, const u16* r,              \
      const u16* w, u16* out, int rows, int cols, float eps) {                              \
    add_rms_norm<BF>(x, r, w, out, rows, cols, eps);                                        \
  }                                                                                         \
  extern "C" __global__ void silu_mul_##SUFFIX(const u16* gu, u16* out, int rows,           \
      int inter) {                                                                          \
    silu_mul<BF>(gu, out, rows, inter);                                                     \
  }
FUSED(f16, false)
FUSED(bf16, true)
"#;

    /// The kernels of each element type: `[rope_qkv_cache, add_rms_norm, silu_mul]`.
    pub struct Kernels {
        f16: [CudaFunction; 3],
        bf16: [CudaFunction; 3],
        device: CudaDevice,
    }

    const ROPE: usize = 0;
    const NORM: usize = 1;
    const SILU: usize = 2;

    fn err(e: impl std::fmt::Display) -> candle_core::Error {
        candle_core::Error::Msg(e.to_string())
    }

    /// A 1-D grid over `n` items, 256 threads a block (the kernels stride over the rest).
    fn grid(n: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (n.div_ceil(256).clamp(1, 132 * 16) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// A contiguous tensor's elements from its offset.
    fn view<'a, T: CudaDType + DeviceRepr>(
        s: &'a CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<CudaView<'a, T>> {
        let (start, end) = l
            .contiguous_offsets()
            .ok_or_else(|| err("fused kernels take contiguous tensors"))?;
        Ok(s.as_cuda_slice::<T>()?.slice(start..end))
    }

    fn int(v: usize) -> candle_core::Result<i32> {
        i32::try_from(v).map_err(err)
    }

    impl Kernels {
        pub fn new(dev: &CudaDevice) -> Result<Self> {
            let ptx = nvrtc::compile_ptx_with_opts(
                SOURCE,
                nvrtc::CompileOptions {
                    arch: Some("compute_90"),
                    ..Default::default()
                },
            )?;
            let module = dev.cuda_stream().context().load_module(ptx)?;
            let load = |suffix: &str| -> Result<[CudaFunction; 3]> {
                Ok([
                    module.load_function(&format!("rope_qkv_cache_{suffix}"))?,
                    module.load_function(&format!("add_rms_norm_{suffix}"))?,
                    module.load_function(&format!("silu_mul_{suffix}"))?,
                ])
            };
            Ok(Self {
                f16: load("f16")?,
                bf16: load("bf16")?,
                device: dev.clone(),
            })
        }

        fn func(&self, dtype: DType, which: usize) -> candle_core::Result<&CudaFunction> {
            match dtype {
                DType::F16 => Ok(&self.f16[which]),
                DType::BF16 => Ok(&self.bf16[which]),
                other => Err(err(format!("fused kernels: f16 or bf16, not {other:?}"))),
            }
        }

        /// A device tensor's address (its first element).
        fn dev_ptr(&self, t: &Tensor) -> Result<u64> {
            let (s, l) = t.storage_and_layout();
            let Storage::Cuda(cs) = &*s else {
                return Err("a fused kernel's operand is not on the CUDA device".into());
            };
            let stream = self.device.cuda_stream();
            let base = match cs.dtype() {
                DType::F16 => cs.as_cuda_slice::<f16>()?.device_ptr(&stream).0,
                DType::BF16 => cs.as_cuda_slice::<bf16>()?.device_ptr(&stream).0,
                DType::I32 => cs.as_cuda_slice::<i32>()?.device_ptr(&stream).0,
                other => return Err(format!("fused kernels: not {other:?}").into()),
            };
            Ok(base + (l.start_offset() * t.dtype().size_in_bytes()) as u64)
        }

        /// Copies `vals` into the packed I32 device tensor `t` in place, on its stream (candle
        /// has no in-place write of I32 tensors: its copy kernels stop at U32 and I64).
        pub fn write_i32(&self, t: &Tensor, vals: &[i32]) -> Result<()> {
            if t.dtype() != DType::I32 || t.elem_count() != vals.len() || !t.is_contiguous() {
                return Err("write_i32: a packed I32 tensor of vals.len() elements".into());
            }
            let dst = self.dev_ptr(t)?;
            let stream = self.device.cuda_stream();
            // SAFETY: dst addresses t's vals.len() elements (checked above), a live buffer
            // held by t; the copy is ordered on the stream every kernel reading t runs on, and
            // a pageable source is staged before the call returns.
            unsafe {
                candle_core::cuda_backend::cudarc::driver::result::memcpy_htod_async(
                    dst,
                    vals,
                    stream.cu_stream(),
                )
            }?;
            Ok(())
        }

        /// Q with RoPE (`[b, t, heads, d]`) from the QKV projection's output `[b·t, q + 2
        /// kv]`, K (with RoPE) and V written into the layer's cache at `pos`, or with `lens`
        /// (I32 `[b]` on the device, each sequence's keys with these tokens') at `lens[i] -
        /// t`: one launch.
        #[allow(clippy::too_many_arguments)]
        pub fn rope_qkv_cache(
            &self,
            qkv: &Tensor,
            cos: &Tensor,
            sin: &Tensor,
            l: &Layer,
            c: &Config,
            b: usize,
            t: usize,
            pos: usize,
            lens: Option<&Tensor>,
        ) -> Result<Tensor> {
            let capacity = l.k_cache.dim(1)?;
            if pos + t > capacity || b > l.k_cache.dim(0)? {
                return Err(format!("the cache holds {capacity} positions").into());
            }
            if let Some(lens) = lens {
                if lens.dims() != [b] || lens.dtype() != DType::I32 {
                    return Err("lens: I32 [b]".into());
                }
            }
            let op = RopeCache {
                k: self,
                k_cache: self.dev_ptr(&l.k_cache)?,
                v_cache: self.dev_ptr(&l.v_cache)?,
                lens: lens.map(|t| self.dev_ptr(t)).transpose()?.unwrap_or(0),
                b,
                t,
                heads: c.heads,
                kv_heads: c.kv_heads,
                d: c.head_dim,
                capacity,
                pos,
            };
            Ok(qkv.apply_op3_no_bwd(cos, sin, &op)?)
        }

        /// `(x + r, rms_norm(x + r) · w)` of `[rows, cols]` tensors: one launch.
        pub fn add_rms_norm(
            &self,
            x: &Tensor,
            r: &Tensor,
            w: &Tensor,
            eps: f32,
        ) -> Result<(Tensor, Tensor)> {
            let both = x.apply_op3_no_bwd(r, w, &AddNorm { k: self, eps })?;
            Ok((both.get(1)?, both.get(0)?))
        }

        /// `silu(gate) · up` of `gu` (`[rows, 2·inter]`): one launch.
        pub fn silu_mul(&self, gu: &Tensor, inter: usize) -> Result<Tensor> {
            Ok(gu.apply_op1_no_bwd(&SiluMul { k: self, inter })?)
        }
    }

    struct RopeCache<'a> {
        k: &'a Kernels,
        k_cache: u64,
        v_cache: u64,
        /// Keys per sequence on the device, or 0 (positions from `pos`).
        lens: u64,
        b: usize,
        t: usize,
        heads: usize,
        kv_heads: usize,
        d: usize,
        capacity: usize,
        pos: usize,
    }

    impl RopeCache<'_> {
        fn launch<T: CudaDType + DeviceRepr>(
            &self,
            (s1, l1): (&CudaStorage, &Layout),
            (s2, l2): (&CudaStorage, &Layout),
            (s3, l3): (&CudaStorage, &Layout),
        ) -> candle_core::Result<CudaStorage> {
            let all = self.heads + 2 * self.kv_heads;
            // cos and sin: the whole tables, [capacity, d / 2] (the kernel reads rows pos..).
            let table = [self.capacity, self.d / 2];
            if l1.dims() != [self.b * self.t, all * self.d]
                || l2.dims() != table
                || l3.dims() != table
            {
                return Err(err("rope_qkv_cache: unexpected shapes"));
            }
            let (qkv, cos, sin) = (view::<T>(s1, l1)?, view::<T>(s2, l2)?, view::<T>(s3, l3)?);
            let dev = &s1.device;
            // SAFETY: every element of the output is written by the launch below (each
            // (row, Q head, i) once) before candle reads it.
            let mut q = unsafe { dev.alloc::<T>(self.b * self.t * self.heads * self.d)? };
            let stream = dev.cuda_stream();
            let func = self.k.func(s1.dtype(), ROPE)?;
            let mut args = stream.launch_builder(func);
            let ints = [
                int(self.b)?,
                int(self.t)?,
                int(self.heads)?,
                int(self.kv_heads)?,
                int(self.d)?,
                int(self.capacity)?,
                int(self.pos)?,
            ];
            args.arg(&qkv)
                .arg(&cos)
                .arg(&sin)
                .arg(&mut q)
                .arg(&self.k_cache)
                .arg(&self.v_cache)
                .arg(&self.lens);
            for v in &ints {
                args.arg(v);
            }
            // SAFETY: the arguments match the kernel's signature (seven pointers, then seven
            // ints); qkv holds b·t rows of (heads + 2 kv_heads)·d, the tables capacity
            // rows of d/2, the caches batch >= b rows of capacity >= pos + t positions
            // (checked by rope_qkv_cache; with lens, the caller keeps each lens[i] in [t,
            // capacity]); the cache writes go to positions no view read by a queued kernel
            // is changing.
            unsafe { args.launch(grid(self.b * self.t * all * self.d / 2)) }.map_err(err)?;
            Ok(CudaStorage::wrap_cuda_slice(q, dev.clone()))
        }
    }

    impl CustomOp3 for RopeCache<'_> {
        fn name(&self) -> &'static str {
            "rope_qkv_cache"
        }

        fn cpu_fwd(
            &self,
            _: &CpuStorage,
            _: &Layout,
            _: &CpuStorage,
            _: &Layout,
            _: &CpuStorage,
            _: &Layout,
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            Err(err("rope_qkv_cache runs on CUDA only"))
        }

        fn cuda_fwd(
            &self,
            s1: &CudaStorage,
            l1: &Layout,
            s2: &CudaStorage,
            l2: &Layout,
            s3: &CudaStorage,
            l3: &Layout,
        ) -> candle_core::Result<(CudaStorage, Shape)> {
            let ops = ((s1, l1), (s2, l2), (s3, l3));
            let q = match s1.dtype() {
                DType::F16 => self.launch::<f16>(ops.0, ops.1, ops.2)?,
                DType::BF16 => self.launch::<bf16>(ops.0, ops.1, ops.2)?,
                other => return Err(err(format!("rope_qkv_cache: {other:?}"))),
            };
            Ok((q, Shape::from((self.b, self.t, self.heads, self.d))))
        }
    }

    struct AddNorm<'a> {
        k: &'a Kernels,
        eps: f32,
    }

    impl AddNorm<'_> {
        fn launch<T: CudaDType + DeviceRepr>(
            &self,
            (s1, l1): (&CudaStorage, &Layout),
            (s2, l2): (&CudaStorage, &Layout),
            (s3, l3): (&CudaStorage, &Layout),
        ) -> candle_core::Result<(CudaStorage, Shape)> {
            let [rows, cols] = *l1.dims() else {
                return Err(err("add_rms_norm: x is [rows, cols]"));
            };
            if l2.dims() != [rows, cols] || l3.dims() != [cols] {
                return Err(err("add_rms_norm: unexpected shapes"));
            }
            let (x, r, w) = (view::<T>(s1, l1)?, view::<T>(s2, l2)?, view::<T>(s3, l3)?);
            let dev = &s1.device;
            // SAFETY: the launch writes both halves of every row before candle reads them.
            let mut out: CudaSlice<T> = unsafe { dev.alloc::<T>(2 * rows * cols)? };
            let stream = dev.cuda_stream();
            let mut args = stream.launch_builder(self.k.func(s1.dtype(), NORM)?);
            let (rows_i, cols_i) = (int(rows)?, int(cols)?);
            args.arg(&x)
                .arg(&r)
                .arg(&w)
                .arg(&mut out)
                .arg(&rows_i)
                .arg(&cols_i)
                .arg(&self.eps);
            let cfg = LaunchConfig {
                grid_dim: (rows.max(1) as u32, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments match the kernel's signature; x and r hold rows·cols
            // elements, w cols, out 2·rows·cols; one block of 256 threads per row.
            unsafe { args.launch(cfg) }.map_err(err)?;
            Ok((
                CudaStorage::wrap_cuda_slice(out, dev.clone()),
                Shape::from((2, rows, cols)),
            ))
        }
    }

    impl CustomOp3 for AddNorm<'_> {
        fn name(&self) -> &'static str {
            "add_rms_norm"
        }

        fn cpu_fwd(
            &self,
            _: &CpuStorage,
            _: &Layout,
            _: &CpuStorage,
            _: &Layout,
            _: &CpuStorage,
            _: &Layout,
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            Err(err("add_rms_norm runs on CUDA only"))
        }

        fn cuda_fwd(
            &self,
            s1: &CudaStorage,
            l1: &Layout,
            s2: &CudaStorage,
            l2: &Layout,
            s3: &CudaStorage,
            l3: &Layout,
        ) -> candle_core::Result<(CudaStorage, Shape)> {
            let ops = ((s1, l1), (s2, l2), (s3, l3));
            match s1.dtype() {
                DType::F16 => self.launch::<f16>(ops.0, ops.1, ops.2),
                DType::BF16 => self.launch::<bf16>(ops.0, ops.1, ops.2),
                other => Err(err(format!("add_rms_norm: {other:?}"))),
            }
        }
    }

    struct SiluMul<'a> {
        k: &'a Kernels,
        inter: usize,
    }

    impl SiluMul<'_> {
        fn launch<T: CudaDType + DeviceRepr>(
            &self,
            s: &CudaStorage,
            l: &Layout,
        ) -> candle_core::Result<(CudaStorage, Shape)> {
            let [rows, two_inter] = *l.dims() else {
                return Err(err("silu_mul: gu is [rows, 2 inter]"));
            };
            if two_inter != 2 * self.inter {
                return Err(err("silu_mul: unexpected shape"));
            }
            let gu = view::<T>(s, l)?;
            let dev = &s.device;
            // SAFETY: the launch writes every element before candle reads it.
            let mut out: CudaSlice<T> = unsafe { dev.alloc::<T>(rows * self.inter)? };
            let stream = dev.cuda_stream();
            let mut args = stream.launch_builder(self.k.func(s.dtype(), SILU)?);
            let (rows_i, inter_i) = (int(rows)?, int(self.inter)?);
            args.arg(&gu).arg(&mut out).arg(&rows_i).arg(&inter_i);
            // SAFETY: the arguments match the kernel's signature; gu holds rows·2·inter
            // elements, out rows·inter.
            unsafe { args.launch(grid(rows * self.inter)) }.map_err(err)?;
            Ok((
                CudaStorage::wrap_cuda_slice(out, dev.clone()),
                Shape::from((rows, self.inter)),
            ))
        }
    }

    impl CustomOp1 for SiluMul<'_> {
        fn name(&self) -> &'static str {
            "silu_mul"
        }

        fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
            Err(err("silu_mul runs on CUDA only"))
        }

        fn cuda_fwd(
            &self,
            s: &CudaStorage,
            l: &Layout,
        ) -> candle_core::Result<(CudaStorage, Shape)> {
            match s.dtype() {
                DType::F16 => self.launch::<f16>(s, l),
                DType::BF16 => self.launch::<bf16>(s, l),
                other => Err(err(format!("silu_mul: {other:?}"))),
            }
        }
    }
}
