//! `bench --plot FILE.svg`: a bar chart of the fused-vs-unfused speedup per problem (the
//! chart MIOpen publishes for its fusions), with the 1× line. SVG only: a bitmap needs a font
//! rasterizer and image encoder, which would make every build heavier.

use crate::bench::Row;
use crate::Res;
use std::path::Path;

#[cfg(feature = "plot")]
pub fn speedup_chart(path: &Path, rows: &[Row], title: &str) -> Res<()> {
    use plotters::prelude::*;
    check_extension(path)?;
    let n = rows.len();
    let speedup = |r: &Row| r.unfused_ms / r.fused_ms;
    let ymax = rows.iter().map(speedup).fold(1.0, f64::max) * 1.15;
    let width = (160 + 70 * n as u32).max(640);
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(150)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n).into_segmented(), 0.0..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => rows.get(*i).map(|r| r.problem.clone()).unwrap_or_default(),
            _ => String::new(),
        })
        .x_label_style(("sans-serif", 11).into_font().transform(FontTransform::Rotate90))
        .y_desc("speedup: unfused time / fused time")
        .draw()?;
    chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
        let mut bar = Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), speedup(r))], BLUE.mix(0.7).filled());
        bar.set_margin(0, 0, 6, 6);
        bar
    }))?;
    chart.draw_series(LineSeries::new([(SegmentValue::Exact(0), 1.0), (SegmentValue::Exact(n), 1.0)], RED.stroke_width(2)))?;
    root.present()?;
    Ok(())
}

#[cfg(not(feature = "plot"))]
pub fn speedup_chart(_path: &Path, _rows: &[Row], _title: &str) -> Res<()> {
    Err("--plot: conflux-driver was built without the `plot` feature".into())
}

/// Refuse a file name the chart cannot be written as (checked before a long bench run).
pub fn check_extension(path: &Path) -> Res<()> {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg") => Ok(()),
        Some("png") => Err("--plot: PNG is not supported (it needs a font rasterizer and image encoder); write .svg and convert it, e.g. `rsvg-convert chart.svg -o chart.png`".into()),
        _ => Err(format!("--plot {}: the file name must end in .svg", path.display()).into()),
    }
}
