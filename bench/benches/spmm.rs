//! `cargo bench --bench spmm` (CPU reference only) or, with `--features cuda` on a GPU
//! machine, the GPU backends against dense cuBLAS in the same run.
//!
//! Throughput is counted in FLOPs on nonzero blocks (2·N·nnz(A)): criterion's "elem/s"
//! are FLOP/s. GPU timings are device-side (CUDA events around back-to-back launches), on
//! operands larger than L2 (B and C are 128 MiB each at 8192²). After the GPU groups, a
//! summary table prints TFLOPS (median of criterion's samples), the ratio to dense cuBLAS
//! at the same M, N and the gathered K (nnz per block-row × bk), and the two floors:
//! FLOPs / 989 TFLOPS and bytes / 3.0 TB/s.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sparsek::{spmm, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, Layout, SpmmOptions};

fn random_bsr(
    m: usize,
    k: usize,
    block: BlockShape,
    per_row: usize,
    rng: &mut StdRng,
) -> BsrMatrix<f16> {
    let mask = BlockMask::random_per_row(m / block.rows, k / block.cols, per_row, rng)
        .expect("valid pattern");
    BsrMatrix::from_block_mask(&mask, block, |_, _| {
        f16::from_f32(rng.random_range(-1.0..1.0))
    })
    .expect("valid BSR")
}

/// The CPU reference at a size it finishes in seconds (it is the oracle, not a contender).
fn cpu(c: &mut Criterion) {
    let (m, n, k) = (1024, 256, 1024);
    let mut rng = StdRng::seed_from_u64(1);
    let mut group = c.benchmark_group("cpu_1024x256x1024");
    group.sample_size(10);
    for (bs, per_row) in [(64, 4), (32, 8)] {
        let block = BlockShape::new(bs, bs);
        let a = random_bsr(m, k, block, per_row, &mut rng);
        let b: Vec<f16> = (0..k * n)
            .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
            .collect();
        let mut out = vec![0f32; m * n];
        group.throughput(Throughput::Elements(a.flops(n) as u64));
        group.bench_function(
            BenchmarkId::new(format!("{block}"), format!("{per_row}_per_row")),
            |bench| {
                bench.iter(|| {
                    spmm(
                        &a,
                        Dense::host(&b, k, n, Layout::RowMajor),
                        DenseMut::host(&mut out, m, n, Layout::RowMajor),
                        &SpmmOptions::new(),
                    )
                    .expect("cpu spmm")
                })
            },
        );
    }
    group.finish();
}

#[cfg(feature = "cuda")]
mod gpu_bench {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use criterion::{BenchmarkId, Criterion, Throughput};
    use cudarc::cublas::CudaBlas;
    use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream};
    use half::f16;
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use sparsek::{
        gpu, spmm, Backend, BlockMask, BlockShape, BsrMatrix, Dense, DenseMut, DeviceBsr, Layout,
        SpmmOptions,
    };

    const PEAK_TFLOPS: f64 = 989.0;
    const PEAK_TBPS: f64 = 3.0;
    const SIZE: usize = 8192;

    /// Seconds per launch of each timed sample, by benchmark name.
    type Samples = Arc<Mutex<Vec<(String, f64)>>>;

    /// Device time of `iters` back-to-back launches, bracketed by CUDA events.
    fn time_launches(stream: &Arc<CudaStream>, iters: u64, mut launch: impl FnMut()) -> Duration {
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = stream.record_event(timing).expect("event");
        for _ in 0..iters {
            launch();
        }
        let end = stream.record_event(timing).expect("event");
        end.synchronize().expect("sync");
        Duration::from_secs_f64(start.elapsed_ms(&end).expect("elapsed") as f64 * 1e-3)
    }

    fn random_device(stream: &Arc<CudaStream>, len: usize, rng: &mut StdRng) -> CudaSlice<f16> {
        let host: Vec<f16> = (0..len)
            .map(|_| f16::from_f32(rng.random_range(-1.0..1.0)))
            .collect();
        stream.clone_htod(&host).expect("upload")
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    pub fn gpu(c: &mut Criterion) {
        let ctx = match gpu::open_device() {
            Ok(ctx) => ctx,
            Err(why) => {
                eprintln!("SKIPPED GPU benches: {why}");
                return;
            }
        };
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).expect("cuBLAS");
        let mut rng = StdRng::seed_from_u64(2024);
        let (m, n, k) = (SIZE, SIZE, SIZE);
        let b = random_device(&stream, k * n, &mut rng);
        let mut out = stream.alloc_zeros::<f16>(m * n).expect("alloc C");
        let samples: Samples = Default::default();
        let mut rows = Vec::new();

        let mut group = c.benchmark_group(format!("spmm_{SIZE}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));

        // Dense cuBLAS at the full K.
        let a_full = random_device(&stream, m * k, &mut rng);
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        let s = samples.clone();
        group.bench_function(BenchmarkId::new("cublas_dense", format!("k{k}")), |bench| {
            bench.iter_custom(|iters| {
                let t = time_launches(&stream, iters, || {
                    sparsek_bench::baseline::dense_gemm(&blas, (m, n, k), &a_full, &b, &mut out)
                        .expect("cublas")
                });
                s.lock()
                    .unwrap()
                    .push((format!("cublas_dense/k{k}"), t.as_secs_f64() / iters as f64));
                t
            })
        });
        drop(a_full);

        let mut env = Env {
            stream: &stream,
            blas: &blas,
            b: &b,
            out: &mut out,
            samples: &samples,
            rng: &mut rng,
        };
        for bs in [128usize, 64, 32] {
            let block = BlockShape::new(bs, bs);
            for denom in [16usize, 8, 4] {
                let a = super::random_bsr(m, k, block, k / bs / denom, env.rng);
                rows.push(bench_config(
                    &mut group,
                    &mut env,
                    format!("{block}_d1of{denom}"),
                    &a,
                ));
            }
        }
        // Skewed: every 16th block-row full, the others 4 blocks. Long rows must not
        // serialize the kernel: compare with the uniform 1/8 rows above (similar nnz).
        let mask = BlockMask::skewed(m / 128, k / 128, 16, 4, env.rng).expect("skewed pattern");
        let a = BsrMatrix::from_block_mask(&mask, BlockShape::new(128, 128), |_, _| {
            f16::from_f32(env.rng.random_range(-1.0..1.0))
        })
        .expect("valid BSR");
        rows.push(bench_config(
            &mut group,
            &mut env,
            "128x128_skewed".into(),
            &a,
        ));
        group.finish();
        summary(&samples.lock().unwrap(), &rows, (m, n, k));
    }

    struct Env<'a> {
        stream: &'a Arc<CudaStream>,
        blas: &'a CudaBlas,
        b: &'a CudaSlice<f16>,
        out: &'a mut CudaSlice<f16>,
        samples: &'a Samples,
        rng: &'a mut StdRng,
    }

    /// Benches one sparse matrix: cuBLAS on its gathered problem, then each GPU backend
    /// that can implement it. Returns (config, FLOPs, bytes) for the summary.
    fn bench_config(
        group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
        env: &mut Env<'_>,
        config: String,
        a: &BsrMatrix<f16>,
    ) -> (String, f64, f64) {
        let (m, k, n) = (a.m(), a.k(), SIZE);
        let stream = env.stream;
        let da = DeviceBsr::upload(a, stream).expect("upload A");
        let flops = a.flops(n);
        group.throughput(Throughput::Elements(flops as u64));

        // Dense cuBLAS on the gathered problem: same M, N, K = mean nnz per row * bk.
        let kg = (a.nnz_blocks() * a.block().cols)
            .div_ceil(a.num_block_rows())
            .next_multiple_of(8);
        let ag = random_device(stream, m * kg, env.rng);
        let bg = random_device(stream, kg * n, env.rng);
        let name = format!("cublas_gathered/{config}");
        let (blas, samples) = (env.blas, env.samples);
        let out = &mut *env.out;
        group.bench_function(BenchmarkId::new("cublas_gathered", &config), |bench| {
            bench.iter_custom(|iters| {
                let t = time_launches(stream, iters, || {
                    sparsek_bench::baseline::dense_gemm(blas, (m, n, kg), &ag, &bg, out)
                        .expect("cublas")
                });
                samples
                    .lock()
                    .unwrap()
                    .push((name.clone(), t.as_secs_f64() / iters as f64));
                t
            })
        });
        drop((ag, bg));

        for backend in [Backend::Hopper, Backend::Wmma] {
            let opts = SpmmOptions::new().backend(backend);
            let supported = gpu::can_implement(
                &da,
                &Dense::device(env.b, k, n, Layout::RowMajor),
                &DenseMut::device(out, m, n, Layout::RowMajor),
                &opts,
            );
            if let Err(e) = supported {
                eprintln!("{backend:?} {config}: not run ({e})");
                continue;
            }
            let name = format!("{backend:?}/{config}").to_lowercase();
            let b = env.b;
            group.bench_function(
                BenchmarkId::new(format!("{backend:?}").to_lowercase(), &config),
                |bench| {
                    bench.iter_custom(|iters| {
                        let t = time_launches(stream, iters, || {
                            spmm(
                                &da,
                                Dense::device(b, k, n, Layout::RowMajor),
                                DenseMut::device(out, m, n, Layout::RowMajor),
                                &opts,
                            )
                            .expect("spmm")
                        });
                        samples
                            .lock()
                            .unwrap()
                            .push((name.clone(), t.as_secs_f64() / iters as f64));
                        t
                    })
                },
            );
        }
        // Bytes: A's values and indices, B once, C written once (β = 0).
        let bytes = (a.values().len() * 2 + a.col_idx().len() * 4 + k * n * 2 + m * n * 2) as f64;
        (config, flops, bytes)
    }

    /// One table: TFLOPS per backend, ratios to cuBLAS, floors.
    fn summary(
        samples: &[(String, f64)],
        rows: &[(String, f64, f64)],
        (m, n, k): (usize, usize, usize),
    ) {
        let med = |name: &str| -> Option<f64> {
            let v: Vec<f64> = samples
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, t)| *t)
                .collect();
            (!v.is_empty()).then(|| median(v))
        };
        let dense_t = med(&format!("cublas_dense/k{k}"));
        let dense_tflops = dense_t
            .map(|t| 2.0 * (m * n * k) as f64 / t / 1e12)
            .unwrap_or(f64::NAN);
        println!("\nsparsek bench summary: M=N=K={k}, fp16 in, fp32 accumulate, f16 out, row-major B/C, top-k per row");
        println!("dense cuBLAS at full K: {dense_tflops:.0} TFLOPS");
        println!(
            "{:<16} {:>9} {:>9} {:>9} {:>9} {:>11} {:>10} {:>10} {:>9}",
            "config",
            "cutlass",
            "wmma",
            "cublas_g",
            "floor_us",
            "(bound)",
            "best_us",
            "best/cbG",
            "best/cbF"
        );
        for (config, flops, bytes) in rows {
            let tf = |name: String| med(&name).map(|t| flops / t / 1e12);
            let cut = tf(format!("cutlass/{config}"));
            let wm = tf(format!("wmma/{config}"));
            let cg = tf(format!("cublas_gathered/{config}"));
            let (fc, fm) = (
                flops / (PEAK_TFLOPS * 1e12) * 1e6,
                bytes / (PEAK_TBPS * 1e12) * 1e6,
            );
            let best = cut.unwrap_or(0.0).max(wm.unwrap_or(0.0));
            let show = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
            println!(
                "{:<16} {:>9} {:>9} {:>9} {:>9.1} {:>11} {:>10.1} {:>10.2} {:>9.2}",
                config,
                show(cut),
                show(wm),
                show(cg),
                fc.max(fm),
                if fc >= fm { "compute" } else { "memory" },
                flops / (best * 1e12) * 1e6,
                best / cg.unwrap_or(f64::NAN),
                best / dense_tflops,
            );
        }
        println!("(TFLOPS on nonzero work; floors: FLOPs/{PEAK_TFLOPS} TFLOPS vs bytes/{PEAK_TBPS} TB/s; cbG/cbF: ratio to cuBLAS gathered / full K)");
    }
}

use sparsek_bench::plot_font;

/// Criterion with its plots when a font can be registered (see plot_font.rs), else
/// without them, saying so.
fn config() -> Criterion {
    match plot_font::register() {
        Ok(_) => Criterion::default(),
        Err(why) => {
            eprintln!("criterion plots disabled: {why}");
            Criterion::default().without_plots()
        }
    }
}

#[cfg(feature = "cuda")]
criterion_group! { name = benches; config = config(); targets = gpu_bench::gpu, cpu }
#[cfg(not(feature = "cuda"))]
criterion_group! { name = benches; config = config(); targets = cpu }
criterion_main!(benches);
