//! `bench --plot FILE.svg|FILE.png`: a bar chart of the fused-vs-unfused speedup per problem
//! (the chart MIOpen publishes for its fusions), with the 1× line. SVG with the default `plot`
//! feature (text stays SVG <text>, no font needed). PNG needs the `png` feature: a bitmap
//! must rasterize its text, so it adds plotters' bitmap backend, the ab_glyph rasterizer and
//! the DejaVu Sans font embedded by the `dejavu` crate (no system fonts or packages), plus
//! the `image` PNG encoder — heavier, hence opt-in.

use crate::bench::Row;
use crate::Res;
use std::path::Path;

#[cfg(feature = "plot")]
pub fn speedup_chart(path: &Path, rows: &[Row], title: &str) -> Res<()> {
    use plotters::prelude::*;
    let n = rows.len();
    let size = ((160 + 70 * n as u32).max(640), 520);
    match check_extension(path)? {
        Format::Svg => {
            font::register()?;
            draw(SVGBackend::new(path, size).into_drawing_area(), rows, title)
        }
        #[cfg(feature = "png")]
        Format::Png => {
            font::register()?;
            draw(BitMapBackend::new(path, size).into_drawing_area(), rows, title)
        }
    }
}

/// The chart on any plotters backend.
#[cfg(feature = "plot")]
fn draw<DB: plotters::prelude::DrawingBackend>(root: plotters::prelude::DrawingArea<DB, plotters::coord::Shift>, rows: &[Row], title: &str) -> Res<()>
where
    DB::ErrorType: 'static,
{
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let n = rows.len();
    let speedup = |r: &Row| r.unfused_ms / r.fused_ms;
    let ymax = rows.iter().map(speedup).fold(1.0, f64::max) * 1.15;
    root.fill(&WHITE)?;
    // Problem i's bar spans [i + 0.1, i + 0.9] on a plain x axis 0..n.
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(150)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..n as f64, 0.0..ymax)?;
    chart.configure_mesh().disable_x_mesh().x_labels(0).y_desc("speedup: unfused time / fused time").draw()?;
    chart.draw_series(rows.iter().enumerate().map(|(i, r)| Rectangle::new([(i as f64 + 0.1, 0.0), (i as f64 + 0.9, speedup(r))], BLUE.mix(0.7).filled())))?;
    chart.draw_series(LineSeries::new([(0.0, 1.0), (n as f64, 1.0)], RED.stroke_width(2)))?;
    // plotters centers rotated tick labels on the tick, so they would run up into the bars:
    // draw each name from just under the axis downwards instead.
    let label = TextStyle::from(("sans-serif", 11).into_font().transform(FontTransform::Rotate90)).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, r) in rows.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw_text(&r.problem, &label, (x, y + 8))?;
    }
    root.present()?;
    Ok(())
}

/// Text metrics: with `png`, plotters measures and draws text with ab_glyph, which has no
/// font until one is registered (for SVG too, whose layout measures text the same way).
#[cfg(feature = "plot")]
mod font {
    #[cfg(feature = "png")]
    pub fn register() -> crate::Res<()> {
        use std::sync::OnceLock;
        static DONE: OnceLock<bool> = OnceLock::new();
        let ok = *DONE.get_or_init(|| plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, dejavu::sans::regular()).is_ok());
        if ok { Ok(()) } else { Err("--plot: the embedded DejaVu Sans font did not load".into()) }
    }

    /// Without `png`, plotters estimates text size itself.
    #[cfg(not(feature = "png"))]
    pub fn register() -> crate::Res<()> {
        Ok(())
    }
}

#[cfg(not(feature = "plot"))]
pub fn speedup_chart(_path: &Path, _rows: &[Row], _title: &str) -> Res<()> {
    Err("--plot: conflux-driver was built without the `plot` feature".into())
}

/// The chart formats this build can write.
pub enum Format {
    Svg,
    #[cfg(feature = "png")]
    Png,
}

/// The format of a chart file name, refused when this build cannot write it (checked before
/// a long bench run).
pub fn check_extension(path: &Path) -> Res<Format> {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => Ok(Format::Svg),
        #[cfg(feature = "png")]
        Some("png") => Ok(Format::Png),
        #[cfg(not(feature = "png"))]
        Some("png") => Err("--plot: PNG needs conflux-driver built with `--features png` (a bitmap needs an embedded font, a rasterizer and a PNG encoder); write .svg, or convert it, e.g. `rsvg-convert chart.svg -o chart.png`".into()),
        _ => Err(format!("--plot {}: the file name must end in .svg{}", path.display(), if cfg!(feature = "png") { " or .png" } else { "" }).into()),
    }
}
