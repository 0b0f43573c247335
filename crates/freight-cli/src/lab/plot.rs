//! `--plot`: the figure of large data over a lossy link. Top row: reception rate against
//! payload size, one panel per condition; bottom row: samples per second around the outage.
//! Drawn like `bench latency --plot` (src/bench/plot.rs): same backend, font and palette.

use std::fmt::Display;
use std::path::Path;

use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use super::result::{OutageResult, RunResult};

/// The rate the lab publishes at; the reference line is drawn when the runs published at it.
const PUBLISH_HZ: f64 = 30.0;
const WIDTH: u32 = 1800;
/// Title plus the per-condition row; the outage timeline adds `BOTTOM_H` below it.
const TOP_H: u32 = 560;
const BOTTOM_H: u32 = 440;
/// Panel order and titles, as in the paper; other conditions follow under their own names.
const CONDITIONS: [(&str, &str); 4] =
    [("ideal", "ideal"), ("loss1", "1 % loss"), ("loss20", "20 % loss"), ("outage", "20 s outage")];
const REFERENCE: RGBColor = RGBColor(40, 40, 40);

fn fail(path: &Path, e: impl Display) -> String {
    format!("cannot write the lab plot {}: {e}", path.display())
}

/// 32768 bytes -> "32": payloads are powers of two, so KB means 1024 bytes here.
fn fmt_num(v: f64) -> String {
    let decimals = if (v - v.round()).abs() < 0.05 { 0 } else { 1 };
    format!("{v:.decimals$}")
}

/// Hue says the peer (as `color_of` in the bench plot), strength the profile: the tuned lines
/// are what the figure is about, so they stand out and the defaults stay in the background.
/// The peer is also told by dashes and marker shape, which survive black-and-white print.
fn look(profile: &str, peer: &str) -> (ShapeStyle, bool) {
    let RGBColor(r, g, b) = match peer {
        "freight" => RGBColor(31, 119, 180),
        "cyclonedds-py" => RGBColor(255, 127, 14),
        _ => RGBColor(214, 39, 40),
    };
    let tuned = profile == "tuned";
    // Muted: 55 % of the way to light grey, still readable on white unlike a mix with white.
    let mute = |c: u8| if tuned { c } else { (c as f64 + (200.0 - c as f64) * 0.55) as u8 };
    (RGBColor(mute(r), mute(g), mute(b)).stroke_width(if tuned { 3 } else { 2 }), peer != "freight")
}

/// One plotted line: a (profile, peer) pair.
struct Series<'a> {
    profile: &'a str,
    peer: &'a str,
    points: Vec<(f64, f64)>,
}

/// Groups `(run, point)` pairs into series, in a fixed legend order (default before tuned,
/// freight before cyclonedds-py) so that plots of different runs compare side by side.
fn group<'a>(items: impl Iterator<Item = (&'a RunResult, (f64, f64))>) -> Vec<Series<'a>> {
    let mut series: Vec<Series<'a>> = Vec::new();
    for (r, p) in items {
        match series.iter_mut().find(|s| s.profile == r.profile && s.peer == r.peer) {
            // A repeated cell keeps its first measurement rather than zig-zagging.
            Some(s) if s.points.iter().any(|q| q.0 == p.0) => {}
            Some(s) => s.points.push(p),
            None => series.push(Series { profile: &r.profile, peer: &r.peer, points: vec![p] }),
        }
    }
    let rank = |s: &Series| {
        let profile = ["default", "tuned"].iter().position(|&n| n == s.profile).unwrap_or(2);
        let peer = ["freight", "cyclonedds-py"].iter().position(|&n| n == s.peer).unwrap_or(2);
        (profile, peer, s.profile.to_string(), s.peer.to_string())
    };
    series.sort_by_key(|s| rank(s));
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// Draws one series (and, when `legend`, its legend entry) on either kind of chart.
fn draw_series<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    s: &Series,
    markers: bool,
    legend: bool,
) -> Result<(), String> {
    let (line, dashed) = look(s.profile, s.peer);
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let drawn = if dashed {
        chart.draw_series(DashedLineSeries::new(s.points.clone(), 10, 6, line)).map_err(err)?
    } else {
        chart.draw_series(LineSeries::new(s.points.clone(), line)).map_err(err)?
    };
    if legend {
        drawn.label(format!("{} · {}", s.profile, s.peer)).legend(move |(x, y)| {
            // Two strokes with a gap make the dashed sample, as in the bench plot.
            let (a, b) = if dashed { ((0, 8), (12, 20)) } else { ((0, 10), (10, 20)) };
            EmptyElement::at((x, y))
                + PathElement::new(vec![(a.0, 0), (a.1, 0)], line)
                + PathElement::new(vec![(b.0, 0), (b.1, 0)], line)
        });
    }
    if markers && dashed {
        chart.draw_series(s.points.iter().map(|&p| TriangleMarker::new(p, 6, line.color.filled()))).map_err(err)?;
    } else if markers {
        chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, line.color.filled()))).map_err(err)?;
    }
    Ok(())
}

/// The thin "publish rate" line across the chart from `x0` to `x1`.
fn draw_reference<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    (x0, x1): (f64, f64),
    legend: bool,
) -> Result<(), String> {
    let style = REFERENCE.stroke_width(1);
    let drawn =
        chart.draw_series(LineSeries::new([(x0, PUBLISH_HZ), (x1, PUBLISH_HZ)], style)).map_err(|e| e.to_string())?;
    if legend {
        drawn.label("publish rate").legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], style));
    }
    Ok(())
}

/// The legend, lower left, styled as the benchmark plot's.
fn draw_legend<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// The outage runs the timeline shows: those with per-second data at the largest payload,
/// where the stale burst and the recovery time are the largest.
fn timeline<'a>(runs: &[&'a RunResult]) -> Vec<(&'a RunResult, &'a OutageResult)> {
    let with_data = runs.iter().filter_map(|&r| Some((r, r.outage.as_ref()?)));
    let largest = with_data.clone().map(|(r, _)| r.payload_bytes).max();
    with_data.filter(|(r, _)| Some(r.payload_bytes) == largest).collect()
}

/// Writes the figure as a PNG at `path`: one panel per condition present (ideal, 1 % loss,
/// 20 % loss, outage) with the reception rate in Hz against the payload in KB, a line per
/// (profile, peer), and below it the samples received per second of the largest-payload outage
/// runs with the link-down interval shaded (omitted without outage data: 1800x560 instead of
/// 1800x1000). Runs with an error or without a rate are left out.
///
/// Fails with a message naming `path` if the font is missing, no run has a measurement, or
/// the file cannot be written.
pub fn write_plot(path: &Path, runs: &[RunResult]) -> Result<(), String> {
    crate::bench::plot::check_font().map_err(|e| fail(path, e))?;
    // A NaN or infinite rate would make every axis range NaN, so such runs are left out too.
    let runs: Vec<&RunResult> = runs.iter().filter(|r| r.error.is_none() && r.rx_hz.is_finite()).collect();
    if runs.is_empty() {
        return Err(fail(path, "no run produced a measurement"));
    }
    let rank = |c: &str| CONDITIONS.iter().position(|k| k.0 == c).unwrap_or(CONDITIONS.len());
    let mut conditions: Vec<&str> = runs.iter().map(|r| r.condition.as_str()).collect();
    conditions.sort_by_key(|&c| (rank(c), c));
    conditions.dedup();
    let mut payloads: Vec<f64> = runs.iter().map(|r| r.payload_bytes as f64).collect();
    payloads.sort_by(f64::total_cmp);
    payloads.dedup();
    // Half an octave either side, so the outermost markers do not sit on the frame.
    let x_range = (payloads[0] / 1.4, payloads[payloads.len() - 1] * 1.4);
    let y_max = (runs.iter().map(|r| r.rx_hz).fold(0.0, f64::max) * 1.05).max(32.0);
    let publish_line = runs.iter().any(|r| r.seconds > 0.0 && (r.sent as f64 / r.seconds - PUBLISH_HZ).abs() < 1.5);
    let outage = timeline(&runs);

    let height = if outage.is_empty() { TOP_H } else { TOP_H + BOTTOM_H };
    let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(path, e))?;
    let (top, bottom) = root.split_vertically(TOP_H);
    let top = top
        .titled("freight lab: large data over a lossy link, reception rate vs payload", ("sans-serif", 28))
        .map_err(|e| fail(path, e))?;
    for (i, (&condition, area)) in conditions.iter().zip(top.split_evenly((1, conditions.len()))).enumerate() {
        let cell: Vec<&RunResult> = runs.iter().copied().filter(|r| r.condition == condition).collect();
        let title = match cell.iter().find_map(|r| r.outage.as_ref()) {
            // The measured outage length rather than the usual one.
            Some(o) if condition == "outage" => format!("{} s outage", fmt_num(o.outage_s)),
            _ => CONDITIONS.iter().find(|k| k.0 == condition).map_or(condition, |k| k.1).to_string(),
        };
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(64)
            // Ticks at the measured payloads only: they are the categories of the table.
            .build_cartesian_2d((x_range.0..x_range.1).log_scale().with_key_points(payloads.clone()), 0.0..y_max)
            .map_err(|e| fail(path, e))?;
        chart
            .configure_mesh()
            .x_desc("payload, KB (log2 scale)")
            .y_desc("reception rate, Hz")
            .x_label_formatter(&|v| fmt_num(v / 1024.0))
            .y_label_formatter(&|v| fmt_num(*v))
            // No minor grid: at one line per Hz it would hide the publish-rate line.
            .light_line_style(TRANSPARENT)
            .axis_desc_style(("sans-serif", 18))
            .label_style(("sans-serif", 16))
            .draw()
            .map_err(|e| fail(path, e))?;
        if publish_line {
            draw_reference(&mut chart, x_range, i == 0).map_err(|e| fail(path, e))?;
        }
        let series = group(cell.iter().map(|&r| (r, (r.payload_bytes as f64, r.rx_hz))));
        for s in &series {
            draw_series(&mut chart, s, true, i == 0).map_err(|e| fail(path, e))?;
        }
        if i == 0 {
            // Lower left: at the small payloads every line is near the publish rate, at the top.
            draw_legend(&mut chart).map_err(|e| fail(path, e))?;
        }
    }

    if let Some(&(first, o)) = outage.first() {
        let series = group(outage.iter().flat_map(|&(r, o)| {
            // per_second[i] counts the samples of second [i, i+1), so it is drawn mid-second.
            o.per_second.iter().enumerate().map(move |(i, &n)| (r, (i as f64 + 0.5, n as f64)))
        }));
        let seconds = outage.iter().map(|(_, o)| o.per_second.len()).max().unwrap_or(0) as f64;
        let x_max = seconds.max(o.cut_at_s + o.outage_s + 1.0);
        let peak = outage.iter().flat_map(|(_, o)| o.per_second.iter().copied()).max().unwrap_or(0) as f64;
        let y_top = peak.max(if publish_line { PUBLISH_HZ } else { 1.0 }) * 1.15;
        let caption = format!(
            "{} s outage at {} KB: samples received per second",
            fmt_num(o.outage_s),
            fmt_num(first.payload_bytes as f64 / 1024.0)
        );
        let mut chart = ChartBuilder::on(&bottom)
            .caption(caption, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_max, 0.0..y_top)
            .map_err(|e| fail(path, e))?;
        chart
            .configure_mesh()
            .x_desc("seconds since publishing started")
            .y_desc("samples/s")
            .x_label_formatter(&|v| fmt_num(*v))
            .y_label_formatter(&|v| fmt_num(*v))
            .light_line_style(TRANSPARENT)
            .axis_desc_style(("sans-serif", 18))
            .label_style(("sans-serif", 16))
            .draw()
            .map_err(|e| fail(path, e))?;
        // All outage runs share one cut schedule, so the first run's interval stands for all.
        let (down, up) = (o.cut_at_s, o.cut_at_s + o.outage_s);
        let band = Rectangle::new([(down, 0.0), (up, y_top)], RGBColor(214, 39, 40).mix(0.12).filled());
        chart.draw_series([band]).map_err(|e| fail(path, e))?;
        let label = EmptyElement::at((down, y_top)) + Text::new("link down", (8, 8), ("sans-serif", 18));
        chart.draw_series([label]).map_err(|e| fail(path, e))?;
        if publish_line {
            draw_reference(&mut chart, (0.0, x_max), true).map_err(|e| fail(path, e))?;
        }
        for s in &series {
            draw_series(&mut chart, s, false, true).map_err(|e| fail(path, e))?;
        }
        // Lower left: before the cut the lines run near the publish rate, well above it.
        draw_legend(&mut chart).map_err(|e| fail(path, e))?;
    }
    root.present().map_err(|e| fail(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(profile: &str, peer: &str, condition: &str, kb: u64, rx_hz: f64) -> RunResult {
        RunResult {
            profile: profile.into(),
            peer: peer.into(),
            condition: condition.into(),
            payload_bytes: kb * 1024,
            rx_hz,
            mean_ms: Some(5.0),
            p99_ms: Some(20.0),
            lost: 0,
            ip_fragments: 0,
            sent: 300,
            write_errors: 0,
            skipped: 0,
            seconds: 10.0,
            outage: None,
            error: None,
        }
    }

    /// (width, height) from the IHDR chunk, which the PNG format puts first.
    fn png_size(bytes: &[u8]) -> (u32, u32) {
        let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        (be(16), be(20))
    }

    #[test]
    fn writes_the_figure_with_and_without_the_outage_row() {
        if let Err(e) = crate::bench::plot::check_font() {
            eprintln!("skipped: {e}");
            return;
        }
        let mut runs = Vec::new();
        for condition in ["ideal", "loss1", "loss20", "outage"] {
            for (profile, keep) in [("default", 0.5f64), ("tuned", 0.9)] {
                for (peer, slower) in [("freight", 1.0), ("cyclonedds-py", 0.9)] {
                    for kb in [32, 64, 128, 256, 512] {
                        let lossy = if condition == "ideal" { 1.0 } else { keep.powf(kb as f64 / 128.0) };
                        runs.push(run(profile, peer, condition, kb, 30.0 * lossy * slower));
                    }
                }
            }
        }
        for r in runs.iter_mut().filter(|r| r.condition == "outage" && r.payload_bytes == 512 * 1024) {
            let back = if r.profile == "tuned" { 30 } else { 4 };
            let per_second = (0..40)
                .map(|s| match s {
                    0..=9 => 30,
                    10..=29 => 0,
                    _ => back,
                })
                .collect();
            r.outage = Some(OutageResult {
                cut_at_s: 10.0,
                outage_s: 20.0,
                recovery_ms: Some(150.0),
                stale: 3,
                stale_max_age_ms: Some(20_000.0),
                per_second,
            });
        }
        // Left out of the figure, and must not break it.
        runs.push(RunResult {
            error: Some("peer did not start".into()),
            ..run("tuned", "freight", "ideal", 1024, 0.0)
        });
        runs.push(run("default", "freight", "loss20", 64, f64::NAN));

        let dir = crate::private_dir::PrivateDir::new("freight-lab-plot").unwrap();
        let path = dir.path().join("plot.png");
        write_plot(&path, &runs).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is not a PNG", path.display());
        assert_eq!(png_size(&bytes), (WIDTH, TOP_H + BOTTOM_H));

        runs.retain(|r| r.condition != "outage");
        write_plot(&path, &runs).unwrap();
        assert_eq!(png_size(&std::fs::read(&path).unwrap()), (WIDTH, TOP_H));
        std::fs::remove_file(&path).unwrap();
    }
}
