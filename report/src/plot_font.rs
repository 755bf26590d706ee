//! Plotters draws text through `ab_glyph` with a TTF font registered at run time (no
//! system font lookup, so nothing to link). Used by
//! `bench_report` (src/bin/bench_report.rs).

/// Registers `$SPARSEK_FONT`, or a DejaVu Sans from the system or from matplotlib, as
/// plotters' "sans-serif". Returns which file, or why none.
pub fn register() -> Result<String, String> {
    let mut candidates: Vec<String> = std::env::var("SPARSEK_FONT").into_iter().collect();
    candidates.push("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    if let Ok(out) = std::process::Command::new("python3")
        .args([
            "-c",
            "import matplotlib, os; print(os.path.join(os.path.dirname(matplotlib.__file__), 'mpl-data/fonts/ttf/DejaVuSans.ttf'))",
        ])
        .output()
    {
        candidates.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    for path in candidates {
        if let Ok(bytes) = std::fs::read(&path) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font(
                "sans-serif",
                plotters::style::FontStyle::Normal,
                bytes,
            )
            .is_ok()
            {
                return Ok(path);
            }
        }
    }
    Err("no TTF font found: set SPARSEK_FONT to a .ttf file".into())
}
