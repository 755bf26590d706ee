//! `bench_report plot REPORT.json OUT.png` (and `run --png`): TFLOPS against density of a
//! report of `run`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};

use super::spmm::{load, Report};
use crate::plot_font;

/// The top of the TFLOPS axis.
const PEAK_TFLOPS: f64 = 989.0;

/// `bench_report plot REPORT.json OUT.png`.
pub fn command(args: &[String]) -> Result<()> {
    match (args.first(), args.get(1)) {
        (Some(r), Some(out)) => plot(&load(r)?, Path::new(out)),
        _ => bail!("usage: bench_report plot REPORT.json OUT.png"),
    }
}

/// TFLOPS against density, one line per (block, backend), for the `topk` rows.
pub fn plot(r: &Report, out: &Path) -> Result<()> {
    use plotters::prelude::*;
    plot_font::register().map_err(anyhow::Error::msg)?;
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for row in r.rows.iter().filter(|row| row.pattern == "topk") {
        let tag = format!("{} {}", row.dtype, row.layout);
        for (backend, t) in &row.backends {
            series
                .entry(format!("{backend} {} {tag}", row.block))
                .or_default()
                .push((row.density, t.tflops));
        }
        if let Some(t) = &row.cublas_gathered {
            series
                .entry(format!("cuBLAS gathered {} {tag}", row.block))
                .or_default()
                .push((row.density, t.tflops));
        }
    }
    if series.is_empty() {
        bail!("no top-k rows to plot");
    }
    let xmax = series.values().flatten().map(|p| p.0).fold(0.0, f64::max) * 1.1;
    let root = BitMapBackend::new(out, (1100, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "sparsek on {} (M=N=K={}): TFLOPS on nonzero work",
                r.device, r.k
            ),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xmax, 0.0..PEAK_TFLOPS)?;
    chart
        .configure_mesh()
        .x_desc("block density")
        .y_desc("TFLOPS")
        .draw()?;
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        let style =
            ShapeStyle::from(&color).stroke_width(if name.starts_with("cuBLAS") { 1 } else { 3 });
        chart
            .draw_series(LineSeries::new(pts.clone(), style))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    println!("wrote {}", out.display());
    Ok(())
}
