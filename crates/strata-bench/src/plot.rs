//! Line charts as PNG files: panels stacked vertically, each with its own y axis and a
//! legend, series over a shared x axis. Text uses a font compiled into the binary
//! (Hack, from `epaint_default_fonts`), so no system font or fontconfig is needed.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::BenchResult;

/// One line.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Index into the palette (stable colors for the same engine across panels).
    pub color: usize,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
}

/// One chart of the figure.
pub struct Panel {
    /// Caption above the chart.
    pub title: String,
    /// Y axis description.
    pub y_label: String,
    /// Lines (a panel without any is skipped).
    pub series: Vec<Series>,
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for family in ["sans-serif", "serif", "monospace"] {
            // The bytes are a valid TrueType font; a failure would only lose the text.
            let _ = plotters::style::register_font(family, FontStyle::Normal, epaint_default_fonts::HACK_REGULAR);
        }
    });
}

/// `123456.0` as `123k`, `1.5e6` as `1.5M`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Draws `panels` (the first one twice as tall) into a PNG at `path`.
pub fn line_chart(path: &Path, x_label: &str, panels: &[Panel]) -> BenchResult<()> {
    register_fonts();
    let panels: Vec<&Panel> = panels.iter().filter(|p| !p.series.is_empty()).collect();
    if panels.is_empty() {
        return Err("nothing to plot".into());
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let unit = 300u32;
    let height = unit * (panels.len() as u32 + 1);
    let root = BitMapBackend::new(path, (1200, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut weights: Vec<u32> = panels.iter().map(|_| unit).collect();
    weights[0] = 2 * unit;
    let mut areas = Vec::new();
    let mut rest = root.clone();
    for w in &weights[..weights.len() - 1] {
        let (top, bottom) = rest.split_vertically(*w);
        areas.push(top);
        rest = bottom;
    }
    areas.push(rest);
    for (panel, area) in panels.iter().zip(&areas) {
        draw_panel(area, x_label, panel)?;
    }
    root.present()?;
    Ok(())
}

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    x_label: &str,
    p: &Panel,
) -> BenchResult<()> {
    let pts = p.series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max) = (1.0f64, 1.0f64);
    for (x, y) in pts {
        x_max = x_max.max(*x);
        y_max = y_max.max(*y);
    }
    // Small integer counters (flushes) get whole-number ticks.
    let y_top = if y_max < 10.0 { y_max.ceil() + 1.0 } else { y_max * 1.08 };
    let y_ticks = if y_max < 10.0 { y_top as usize + 1 } else { 10 };
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max, 0.0..y_top)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(p.y_label.as_str())
        .y_labels(y_ticks)
        .y_label_formatter(&|v| si(*v))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    for s in &p.series {
        let color = PALETTE[s.color % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::si;

    #[test]
    fn si_suffixes() {
        assert_eq!(si(950.0), "950");
        assert_eq!(si(0.5), "0.5");
        assert_eq!(si(112_343.0), "112k");
        assert_eq!(si(2_500_000.0), "2.5M");
    }
}
