//! `--plot`: p50 latency against message size, log-log, one line per (transport, wait).

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::combinators::BindKeyPoints;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use super::args::format_size;
use super::report::RowStats;
use super::BenchError;

/// The TTF font the plot text is rendered with (Debian/Ubuntu package `fonts-dejavu-core`).
/// It is loaded at run time rather than compiled in, so that no font file is part of the
/// repository or the binary.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Loads and registers [`FONT_PATH`] as plotters' "sans-serif" font, once per process.
/// Called before the benchmark starts so that a missing font fails fast.
pub fn check_font() -> Result<(), BenchError> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT_PATH).map_err(|e| format!("cannot read {FONT_PATH}: {e}"))?;
            // plotters keeps registered fonts for the life of the process and wants 'static
            // bytes; leaking one font file once is exactly that.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT_PATH} is not a valid TrueType font"))
        })
        .clone()
        .map_err(|what| {
            BenchError::new(
                format!("--plot needs a font: {what}"),
                "install it with `apt-get install fonts-dejavu-core`, or run without --plot",
            )
        })
}

fn plot_error(path: &Path, e: impl std::fmt::Display) -> BenchError {
    BenchError::new(
        format!("cannot write the plot {}: {e}", path.display()),
        "check that the directory exists and is writable and that the name ends in .png",
    )
}

/// Line color per transport: stable across runs so plots can be compared side by side.
fn color_of(transport: &str) -> RGBColor {
    match transport {
        "iceoryx2" => RGBColor(31, 119, 180),
        "iceoryx2-threadsafe" => RGBColor(23, 190, 207),
        "memcpy" => RGBColor(80, 80, 80),
        "shm-loan" => RGBColor(44, 160, 44),
        "shm-copy" => RGBColor(255, 127, 14),
        "intra" => RGBColor(148, 103, 189),
        _ => RGBColor(214, 39, 40),
    }
}

fn format_us(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One plotted line.
struct Series {
    transport: String,
    /// `None` for transports without a wait mode (memcpy): their rows are the same numbers
    /// under every wait, so they are drawn once.
    wait: Option<String>,
    points: Vec<(f64, f64)>,
}

fn collect_series(rows: &[RowStats], inline: &[&str]) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for row in rows {
        let wait = (!inline.contains(&row.transport.as_str())).then(|| row.wait.clone());
        let point = (row.size_bytes as f64, row.p50_us.max(1e-3));
        match series.iter_mut().find(|s| s.transport == row.transport && s.wait == wait) {
            Some(s) => {
                if !s.points.iter().any(|p| p.0 == point.0) {
                    s.points.push(point);
                }
            }
            None => series.push(Series { transport: row.transport.clone(), wait, points: vec![point] }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// Writes the PNG. `inline` names the transports without a wait mode.
pub fn write_plot(path: &Path, rows: &[RowStats], inline: &[&str]) -> Result<(), BenchError> {
    check_font()?;
    if rows.is_empty() {
        return Err(BenchError::new("there are no rows to plot", "measure at least one row"));
    }
    let series = collect_series(rows, inline);
    let mut sizes: Vec<f64> = rows.iter().map(|r| r.size_bytes as f64).collect();
    sizes.sort_by(f64::total_cmp);
    sizes.dedup();
    let (x_min, x_max) = (sizes[0] / 1.6, sizes[sizes.len() - 1] * 1.6);
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let y_min = ys.clone().fold(f64::INFINITY, f64::min) / 2.0;
    let y_top = ys.fold(0.0, f64::max) * 2.0;
    // Headroom above the highest line for the legend (upper left). The legend needs about
    // 24 px per series of a ~620 px tall plot area; on a log axis, reserving a fraction `f`
    // of the height means extending the range by `span * f / (1 - f)` decades.
    let decades = (y_top / y_min).log10().max(1.0);
    let legend = ((24.0 * series.len() as f64 + 24.0) / 620.0).min(0.5);
    let y_max = y_top * 10f64.powf(decades * legend / (1.0 - legend));

    let root = BitMapBackend::new(path, (1280, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("freight bench latency: p50 one-way latency vs message size", ("sans-serif", 28))
        .margin(24)
        .x_label_area_size(70)
        .y_label_area_size(90)
        .build_cartesian_2d(
            // Ticks at the measured sizes: round powers of ten mean nothing for message sizes.
            (x_min..x_max).log_scale().with_key_points(sizes.clone()),
            (y_min..y_max).log_scale(),
        )
        .map_err(|e| plot_error(path, e))?;
    chart
        .configure_mesh()
        .x_desc("message size (log scale)")
        .y_desc("p50 one-way latency, µs (log scale)")
        .x_label_formatter(&|v| format_size(v.round() as u64))
        .y_label_formatter(&|v| format_us(*v))
        .axis_desc_style(("sans-serif", 20))
        .label_style(("sans-serif", 16))
        .draw()
        .map_err(|e| plot_error(path, e))?;

    for s in &series {
        let color = color_of(&s.transport);
        let line = color.stroke_width(2);
        let label = match &s.wait {
            Some(w) => format!("{} {w}", s.transport),
            None => s.transport.clone(),
        };
        // Blocking waits dashed, so spin and block of one transport share a color but stay
        // distinguishable in black-and-white print too.
        let dashed = s.wait.as_deref() == Some("block");
        let drawn = if dashed {
            chart.draw_series(DashedLineSeries::new(s.points.clone(), 10, 6, line))
        } else {
            chart.draw_series(LineSeries::new(s.points.clone(), line))
        };
        drawn.map_err(|e| plot_error(path, e))?.label(label).legend(move |(x, y)| {
            // Two strokes relative to (x, y): a gap between them makes the dashed sample.
            let (first, second) = if dashed { ((0, 8), (12, 20)) } else { ((0, 10), (10, 20)) };
            EmptyElement::at((x, y))
                + PathElement::new(vec![(first.0, 0), (first.1, 0)], line)
                + PathElement::new(vec![(second.0, 0), (second.1, 0)], line)
        });
        let marker = if dashed { line } else { color.filled() };
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, marker))).map_err(|e| plot_error(path, e))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_error(path, e))?;
    root.present().map_err(|e| plot_error(path, e))?;
    Ok(())
}
