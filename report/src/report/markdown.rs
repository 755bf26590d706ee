//! `bench_report markdown REPORT.json OUT.md`: the table the README embeds, of a report of
//! `run` (also written by `run --markdown`).

use anyhow::{bail, Context, Result};

use super::spmm::{load, Report, Row};

/// `bench_report markdown REPORT.json OUT.md`.
pub fn command(args: &[String]) -> Result<()> {
    match (args.first(), args.get(1)) {
        (Some(r), Some(out)) => write_markdown(&load(r)?, out),
        _ => bail!("usage: bench_report markdown REPORT.json OUT.md"),
    }
}

/// `128x128` as the README writes it: `128×128`.
fn block_label(block: &str) -> String {
    block.replace('x', "×")
}

/// A density as the README writes it: `1/16` where it is one over a whole number, else
/// two decimals.
fn density_label(d: f64) -> String {
    let inv = 1.0 / d;
    if d > 0.0 && d < 1.0 && (inv - inv.round()).abs() < 1e-6 {
        format!("1/{}", inv.round())
    } else {
        format!("{d:.2}")
    }
}

/// The markdown table the README embeds: one line naming the device and the ceilings,
/// then a row per (config, backend): blocks, density, backend, TFLOPS, floor set by, E.
/// Pattern, dtype and layout get a column each only where the report has more than one.
pub fn markdown(r: &Report) -> String {
    let mut out = format!(
        "{}, M = {}, N = {}, K = {}; ceilings measured in the same run: {}.\n\n",
        r.device,
        r.m,
        r.n,
        r.k,
        r.ceilings_line(", ")
    );
    // The optional columns, each where the report has more than one value of it.
    type Field = fn(&Row) -> &str;
    let optional: [(&str, Field); 3] = [
        ("pattern", |row| &row.pattern),
        ("dtype", |row| &row.dtype),
        ("B/C layout", |row| &row.layout),
    ];
    let extra: Vec<(&str, Field)> = optional
        .into_iter()
        .filter(|(_, f)| {
            let values: std::collections::BTreeSet<&str> = r.rows.iter().map(f).collect();
            values.len() > 1
        })
        .collect();
    let mut head = String::from("| blocks | density |");
    for (name, _) in &extra {
        head += &format!(" {name} |");
    }
    head += " backend | TFLOPS | floor set by | E |\n";
    out += &head;
    out += &"|---".repeat(6 + extra.len());
    out += "|\n";
    let names = r.backend_names();
    for row in &r.rows {
        for name in &names {
            let mut line = format!(
                "| {} | {} |",
                block_label(&row.block),
                density_label(row.density)
            );
            for (_, f) in &extra {
                line += &format!(" {} |", f(row));
            }
            let bound = row
                .floor
                .map_or_else(|| "–".into(), |f| f.bound.to_string());
            line += &match row.backends.get(name) {
                Some(t) => format!(
                    " {} | {:.0} | {bound} | {} |",
                    name.to_uppercase(),
                    t.tflops,
                    row.floor.map_or_else(
                        || "–".into(),
                        |f| format!("{:.2}", f.efficiency(t.median_us))
                    )
                ),
                None => format!(" {} | refused | {bound} | – |", name.to_uppercase()),
            };
            out += &line;
            out += "\n";
        }
    }
    out
}

/// Writes the table of `r` to `path`.
pub fn write_markdown(r: &Report, path: &str) -> Result<()> {
    std::fs::write(path, markdown(r)).with_context(|| format!("writing {path}"))?;
    println!("wrote {path}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn density_labels() {
        assert_eq!(density_label(0.0625), "1/16");
        assert_eq!(density_label(0.25), "1/4");
        assert_eq!(density_label(0.09375), "0.09");
        assert_eq!(density_label(1.0), "1.00");
    }
}
