//! `--plot`: each row's run time over the native program's (log scale), with
//! its SD, beside the paper's for the same row: one panel per workload.

use std::path::Path;

use plotters::prelude::*;

use super::{Mode, PipelineRow};
use crate::bench::plot::check_font;
use crate::bench::BenchError;

fn plot_error(path: &Path, e: impl std::fmt::Display) -> BenchError {
    BenchError::new(
        format!("cannot write the plot {}: {e}", path.display()),
        "check that the directory exists and is writable and that the name ends in .png",
    )
}

/// Marker color per mode, stable across runs.
fn color_of(mode: Mode) -> RGBColor {
    match mode {
        Mode::Copy => RGBColor(255, 127, 14),
        Mode::Intra => RGBColor(148, 103, 189),
        Mode::Shm => RGBColor(44, 160, 44),
        Mode::CudaHost => RGBColor(31, 119, 180),
        Mode::Cuda => RGBColor(214, 39, 40),
    }
}

/// A row's run time over the native one, and its SD as the same ratio.
fn ratio(r: &PipelineRow) -> (f64, f64) {
    (r.mean_ms / r.native_mean_ms, r.sd_ms / r.native_mean_ms)
}

/// Writes the PNG at `path`.
pub fn write_plot(path: &Path, rows: &[PipelineRow]) -> Result<(), BenchError> {
    check_font()?;
    if rows.is_empty() {
        return Err(BenchError::new("there are no rows to plot", "measure at least one row"));
    }
    let mut workloads = Vec::new();
    for r in rows {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload);
        }
    }
    let paper = |r: &PipelineRow| r.paper_overhead_pct.map(|p| 1.0 + p / 100.0);
    let top = rows.iter().map(|r| ratio(r).0 + ratio(r).1).chain(rows.iter().filter_map(paper)).fold(1.0, f64::max);
    let bottom = rows.iter().map(|r| ratio(r).0 - ratio(r).1).chain(rows.iter().filter_map(paper)).fold(1.0, f64::min);
    let y_range = ((bottom * 0.8).max(0.05)..top * 1.5).log_scale();

    let root = BitMapBackend::new(path, (1600, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_error(path, e))?;
    let root = root
        .titled(
            "freight bench pipeline: run time / native (log); orange copy, purple intra, green shm, \u{00d7} the paper (TX2)",
            ("sans-serif", 24),
        )
        .map_err(|e| plot_error(path, e))?;
    for (&workload, area) in workloads.iter().zip(root.split_evenly((1, workloads.len()))) {
        let cell: Vec<&PipelineRow> = rows.iter().filter(|r| r.workload == workload).collect();
        let labels: Vec<String> =
            cell.iter().map(|r| format!("{} {} {}", r.nodes, r.paradigm.name(), r.mode.name())).collect();
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("{} workload", workload.name()), ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(150)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..cell.len() as f64 - 0.5, y_range.clone())
            .map_err(|e| plot_error(path, e))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(cell.len())
            .x_label_formatter(&|x| labels.get(x.round() as usize).cloned().unwrap_or_default())
            .x_label_style(("sans-serif", 14).into_font().transform(FontTransform::Rotate90))
            .y_desc("run time / native")
            .y_label_formatter(&|v| format!("{v:.2}x"))
            .draw()
            .map_err(|e| plot_error(path, e))?;
        // The native program: 1x.
        chart
            .draw_series(LineSeries::new([(-0.5, 1.0), (cell.len() as f64 - 0.5, 1.0)], BLACK.mix(0.4)))
            .map_err(|e| plot_error(path, e))?;
        for (i, r) in cell.iter().enumerate() {
            let (x, (mean, sd)) = (i as f64, ratio(r));
            let color = color_of(r.mode);
            chart
                .draw_series([PathElement::new(
                    vec![(x, (mean - sd).max(0.05)), (x, mean + sd)],
                    color.stroke_width(2),
                )])
                .map_err(|e| plot_error(path, e))?;
            chart.draw_series([Circle::new((x, mean), 6, color.filled())]).map_err(|e| plot_error(path, e))?;
            if let Some(p) = paper(r) {
                chart.draw_series([Cross::new((x, p), 7, BLACK.stroke_width(2))]).map_err(|e| plot_error(path, e))?;
            }
        }
    }
    root.present().map_err(|e| plot_error(path, e))?;
    Ok(())
}
