//! The result table (stdout) and the JSON file.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::args::format_size;
use super::BenchError;

/// One row of results. Serialized as-is into the `--json` file, so the field names are part of
/// the file format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowStats {
    /// Transport name, e.g. `shm-loan`.
    pub transport: String,
    /// `spin` or `block`.
    pub wait: String,
    /// Requested payload size in bytes.
    pub size_bytes: u64,
    /// Median one-way latency, µs.
    pub p50_us: f64,
    /// 99th percentile one-way latency, µs.
    pub p99_us: f64,
    /// Largest one-way latency, µs.
    pub max_us: f64,
    /// Completed round trips per second.
    pub msgs_per_s: f64,
    /// Subscriber processes of the row; only present when more than one was asked for
    /// (`--subscribers`), and then the latencies are to the last subscriber.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribers: Option<usize>,
    /// Median time the publisher spent inside one publish (loan, header, send), µs; present
    /// with `subscribers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_p50_us: Option<f64>,
}

/// The transport a row is compared against, or `None` if the transport is itself a baseline.
///
/// freight's zero-copy paths (`intra`, `shm-loan`) are compared with raw iceoryx2, the best
/// that the underlying middleware can do; `shm-copy` copies the payload once, so its floor is
/// a plain `memcpy` of the same size. The C++ API's rows are compared with the Rust API's
/// paths they wrap, measured in the same run.
pub fn baseline_of(transport: &str) -> Option<&'static str> {
    match transport {
        "intra" | "shm-loan" | "iceoryx2-threadsafe" => Some("iceoryx2"),
        "shm-copy" => Some("memcpy"),
        "cpp-loan" => Some("shm-loan"),
        "cpp-copy" => Some("shm-copy"),
        _ => None,
    }
}

/// The "vs baseline" cell of a row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum VsBaseline {
    /// The row is a baseline itself.
    Baseline,
    /// The row's p50 divided by its baseline's p50 (same size, same wait).
    Ratio(f64),
    /// The baseline row was not measured in this run (or its p50 is zero).
    Missing,
}

/// Computes the "vs baseline" cell for `row` among `rows`: the baseline with the same size,
/// wait and number of subscribers.
pub fn vs_baseline(row: &RowStats, rows: &[RowStats]) -> VsBaseline {
    let Some(base_name) = baseline_of(&row.transport) else {
        return VsBaseline::Baseline;
    };
    rows.iter()
        .find(|b| {
            b.transport == base_name
                && b.size_bytes == row.size_bytes
                && b.wait == row.wait
                && b.subscribers == row.subscribers
        })
        .filter(|b| b.p50_us > 0.0)
        .map_or(VsBaseline::Missing, |b| VsBaseline::Ratio(row.p50_us / b.p50_us))
}

/// How many times faster than stock ROS 2 over DDS (`dds` row, same size and
/// wait) a row is: the cost freight avoids, as a ratio measured in one run.
pub fn speedup_over_dds(row: &RowStats, rows: &[RowStats]) -> Option<f64> {
    if row.transport == "dds" || row.p50_us <= 0.0 {
        return None;
    }
    rows.iter()
        .find(|d| d.transport == "dds" && d.size_bytes == row.size_bytes && d.wait == row.wait)
        .map(|d| d.p50_us / row.p50_us)
}

/// Formats microseconds with three significant digits or so.
pub fn fmt_us(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Renders the table: one line per row, columns aligned, numbers right-aligned. With
/// fan-out rows it gains the number of subscribers and the publisher's cost per publish.
pub fn render_table(rows: &[RowStats], title: Option<&str>) -> String {
    let with_dds = rows.iter().any(|r| r.transport == "dds");
    let with_fanout = rows.iter().any(|r| r.subscribers.is_some());
    let mut header = vec!["transport", "wait"];
    if with_fanout {
        header.push("subs");
    }
    header.extend(["size", "p50 µs", "p99 µs", "max µs"]);
    if with_fanout {
        header.push("publish p50 µs");
    }
    header.extend(["msgs/s", "vs baseline"]);
    if with_dds {
        header.push("faster than dds");
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![r.transport.clone(), r.wait.clone()];
            if with_fanout {
                cells.push(r.subscribers.map_or_else(|| "-".to_string(), |n| n.to_string()));
            }
            cells.extend([format_size(r.size_bytes), fmt_us(r.p50_us), fmt_us(r.p99_us), fmt_us(r.max_us)]);
            if with_fanout {
                cells.push(r.publish_p50_us.map_or_else(|| "-".to_string(), fmt_us));
            }
            cells.push(format!("{:.0}", r.msgs_per_s));
            cells.push(match vs_baseline(r, rows) {
                VsBaseline::Baseline => "baseline".to_string(),
                VsBaseline::Ratio(x) => format!("{x:.2}x"),
                VsBaseline::Missing => "-".to_string(),
            });
            if with_dds {
                cells.push(speedup_over_dds(r, rows).map_or_else(|| "-".to_string(), |x| format!("{x:.1}x")));
            }
            cells
        })
        .collect();
    render_grid(&header, &body, 2, title)
}

/// Renders a table with `header` over `body`: columns aligned, the first `text_columns`
/// left-aligned and the numbers after them right-aligned, an optional title above.
pub fn render_grid(header: &[&str], body: &[Vec<String>], text_columns: usize, title: Option<&str>) -> String {
    // Width in characters, not bytes: "µ" is two bytes.
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for line in body {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(width(cell));
        }
    }
    let fmt_line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                let pad = " ".repeat(w - width(c));
                if i < text_columns {
                    format!("{c}{pad}")
                } else {
                    format!("{pad}{c}")
                }
            })
            .collect();
        format!("{}\n", parts.join(" | ").trim_end())
    };
    let mut out = String::new();
    if let Some(title) = title {
        out.push_str(title);
        out.push_str("\n\n");
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    out.push_str(&fmt_line(&header));
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    out.push_str(&format!("{}\n", rule.join("-|-")));
    for line in body {
        out.push_str(&fmt_line(line));
    }
    out
}

/// Writes `value` (a benchmark's rows, or its whole result) as pretty-printed JSON:
/// what every `--json` of `freight bench` writes.
pub fn write_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        BenchError::new(format!("could not encode the results as JSON: {e}"), "this is a bug; please report it")
    })?;
    std::fs::write(path, text + "\n").map_err(|e| {
        BenchError::new(
            format!("could not write {}: {e}", path.display()),
            "check that the directory exists and is writable, or pass another --json path",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(transport: &str, wait: &str, size: u64, p50: f64) -> RowStats {
        RowStats {
            transport: transport.into(),
            wait: wait.into(),
            size_bytes: size,
            p50_us: p50,
            p99_us: p50 * 2.0,
            max_us: p50 * 3.0,
            msgs_per_s: 1000.0,
            subscribers: None,
            publish_p50_us: None,
        }
    }

    #[test]
    fn baselines_per_transport() {
        assert_eq!(baseline_of("intra"), Some("iceoryx2"));
        assert_eq!(baseline_of("shm-loan"), Some("iceoryx2"));
        assert_eq!(baseline_of("iceoryx2-threadsafe"), Some("iceoryx2"));
        assert_eq!(baseline_of("shm-copy"), Some("memcpy"));
        assert_eq!(baseline_of("iceoryx2"), None);
        assert_eq!(baseline_of("memcpy"), None);
    }

    #[test]
    fn ratio_uses_same_size_and_wait() {
        let rows = vec![
            row("iceoryx2", "spin", 8, 2.0),
            row("iceoryx2", "block", 8, 10.0),
            row("iceoryx2", "spin", 1024, 4.0),
            row("memcpy", "spin", 8, 0.5),
            row("memcpy", "block", 8, 0.5),
            row("shm-loan", "spin", 8, 3.0),
            row("shm-loan", "block", 8, 15.0),
            row("shm-loan", "spin", 1024, 4.0),
            row("shm-copy", "block", 8, 1.0),
            row("intra", "spin", 2048, 1.0),
        ];
        let cell = |i: usize| vs_baseline(&rows[i], &rows);
        assert_eq!(cell(0), VsBaseline::Baseline);
        assert_eq!(cell(3), VsBaseline::Baseline);
        assert_eq!(cell(5), VsBaseline::Ratio(1.5));
        assert_eq!(cell(6), VsBaseline::Ratio(1.5));
        assert_eq!(cell(7), VsBaseline::Ratio(1.0));
        assert_eq!(cell(8), VsBaseline::Ratio(2.0));
        assert_eq!(cell(9), VsBaseline::Missing);
    }

    #[test]
    fn json_field_names_are_stable() {
        let value = serde_json::to_value(vec![row("shm-loan", "spin", 64, 1.25)]).unwrap();
        let obj = value[0].as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["max_us", "msgs_per_s", "p50_us", "p99_us", "size_bytes", "transport", "wait"]);
        assert_eq!(obj["transport"], "shm-loan");
        assert_eq!(obj["wait"], "spin");
        assert_eq!(obj["size_bytes"], 64);
        assert_eq!(obj["p50_us"], 1.25);
    }

    #[test]
    fn table_has_all_columns_and_marks_baselines() {
        let rows = vec![row("iceoryx2", "spin", 8, 2.0), row("shm-loan", "spin", 8, 3.0)];
        let table = render_table(&rows, Some("title"));
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "title");
        assert!(lines[2].starts_with("transport | wait | size"));
        assert!(lines[2].ends_with("msgs/s | vs baseline"));
        assert!(lines[4].contains("baseline"));
        assert!(lines[5].ends_with("1.50x"));
        assert!(lines[5].contains("8 B"));
    }

    #[test]
    fn fanout_rows_compare_with_the_baseline_of_the_same_subscriber_count() {
        let fan = |transport: &str, n: usize, p50: f64| RowStats {
            subscribers: Some(n),
            publish_p50_us: Some(0.5),
            ..row(transport, "block", 8 << 20, p50)
        };
        let rows =
            vec![fan("iceoryx2", 1, 2.0), fan("iceoryx2", 8, 10.0), fan("shm-loan", 1, 3.0), fan("shm-loan", 8, 12.0)];
        assert_eq!(vs_baseline(&rows[2], &rows), VsBaseline::Ratio(1.5));
        assert_eq!(vs_baseline(&rows[3], &rows), VsBaseline::Ratio(1.2));
        let table = render_table(&rows, None);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("transport | wait  | subs |  size |"), "{table}");
        assert!(lines[0].contains("max µs | publish p50 µs | msgs/s"), "{table}");
        assert!(lines[5].contains("|    8 | 8 MiB |") && lines[5].ends_with("1.20x"), "{table}");
        let value = serde_json::to_value(&rows[3]).unwrap();
        assert_eq!(value["subscribers"], 8);
        assert_eq!(value["publish_p50_us"], 0.5);
    }

    #[test]
    fn a_run_with_dds_rows_gets_the_speedup_over_dds() {
        let rows = vec![row("dds", "spin", 8, 30.0), row("shm-loan", "spin", 8, 3.0), row("shm-loan", "block", 8, 3.0)];
        assert_eq!(speedup_over_dds(&rows[1], &rows), Some(10.0));
        assert_eq!(speedup_over_dds(&rows[0], &rows), None);
        assert_eq!(speedup_over_dds(&rows[2], &rows), None, "no dds row with that wait");
        let table = render_table(&rows, None);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].ends_with("vs baseline | faster than dds"), "{table}");
        assert!(lines[3].ends_with("10.0x"), "{table}");
        assert!(!render_table(&rows[1..], None).contains("dds"));
    }
}
