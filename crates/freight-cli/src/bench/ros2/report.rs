//! The table and the JSON of `freight bench ros2`.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::{BenchError, MessageKind, Plan, Stack};

/// What a row measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Median one-way latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile (nearest rank), milliseconds.
    pub p99_ms: f64,
    /// Largest, milliseconds.
    pub max_ms: f64,
    /// Measured round trips per second of their wall time.
    pub frames_per_s: f64,
    /// Measured round trips.
    pub round_trips: u64,
    /// Their wall time, nanoseconds.
    pub elapsed_ns: u64,
    /// Bytes that crossed the namespace's loopback during the row (DDS discovery, and data
    /// sent over UDP rather than shared memory); `None` if unreadable.
    pub loopback_bytes: Option<u64>,
    /// Every measured one-way latency, nanoseconds, in order.
    pub latency_ns: Vec<u64>,
}

/// How a row ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Measured.
    Measured(Measured),
    /// Not started, and why (an interpreter missing, Ctrl-C).
    NotRun(String),
    /// A peer did not answer in time and was killed.
    TimedOut(String),
    /// A peer failed.
    Failed(String),
}

impl Outcome {
    /// One line for the progress output.
    pub fn brief(&self) -> String {
        match self {
            Outcome::Measured(m) => {
                format!("p50 {} ms, p99 {} ms, {:.1} frames/s", ms(m.p50_ms), ms(m.p99_ms), m.frames_per_s)
            }
            other => other.why(),
        }
    }

    /// "not run: ...", "timed out: ...", "failed: ..."; empty when measured.
    pub fn why(&self) -> String {
        match self {
            Outcome::Measured(_) => String::new(),
            Outcome::NotRun(why) => format!("not run: {why}"),
            Outcome::TimedOut(why) => format!("timed out: {}", why.trim_start_matches("timed out: ")),
            Outcome::Failed(why) => format!("failed: {why}"),
        }
    }

    fn status(&self) -> &'static str {
        match self {
            Outcome::Measured(_) => "measured",
            Outcome::NotRun(_) => "not run",
            Outcome::TimedOut(_) => "timed out",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// One row: a stack carrying a message.
#[derive(Debug, Clone)]
pub struct Row {
    /// Who publishes and subscribes.
    pub stack: Stack,
    /// What.
    pub message: MessageKind,
    /// What the stack's interpreter runs (middleware and version), when it could run.
    pub detail: Option<String>,
    /// The result.
    pub outcome: Outcome,
}

/// Milliseconds with three significant digits or more, as in the table.
fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// How many times lower `p50` is than stock Jazzy's p50 for the same message, in this run.
fn versus_jazzy(rows: &[Row], row: &Row) -> Option<f64> {
    let Outcome::Measured(m) = &row.outcome else { return None };
    let jazzy = rows.iter().find(|r| r.stack == Stack::Jazzy && r.message == row.message)?;
    let Outcome::Measured(j) = &jazzy.outcome else { return None };
    (m.p50_ms > 0.0).then(|| j.p50_ms / m.p50_ms)
}

fn ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

/// The result table: one line per row, those not measured saying why.
pub fn table(rows: &[Row]) -> String {
    let header = ["stack", "message", "size", "p50 ms", "p99 ms", "frames/s", "x vs stock Jazzy", "samples"];
    let mut cells: Vec<Vec<String>> = Vec::new();
    let mut notes: Vec<Option<String>> = Vec::new();
    for row in rows {
        let size = format!("{:.1} MB", row.message.bytes() as f64 / 1e6);
        let mut line = vec![row.stack.label().to_string(), row.message.label().to_string(), size];
        match &row.outcome {
            Outcome::Measured(m) => {
                line.extend([
                    ms(m.p50_ms),
                    ms(m.p99_ms),
                    format!("{:.1}", m.frames_per_s),
                    versus_jazzy(rows, row).map_or("-".into(), ratio),
                    m.round_trips.to_string(),
                ]);
                notes.push(None);
            }
            other => notes.push(Some(other.why())),
        }
        cells.push(line);
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for line in &cells {
        for (w, c) in widths.iter_mut().zip(line) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let render = |out: &mut String, line: &[String], note: Option<&str>| {
        let mut text = String::new();
        for (i, c) in line.iter().enumerate() {
            // Text left, numbers right.
            if i < 2 {
                let _ = write!(text, "{c:<w$}  ", w = widths[i]);
            } else {
                let _ = write!(text, "{c:>w$}  ", w = widths[i]);
            }
        }
        if let Some(note) = note {
            text.push_str(note);
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    render(&mut out, &header.map(String::from), None);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    render(&mut out, &rule, None);
    for (line, note) in cells.iter().zip(&notes) {
        render(&mut out, line, note.as_deref());
    }
    out
}

#[derive(Serialize)]
struct JsonRow<'a> {
    stack: Stack,
    stack_label: &'static str,
    runs_on: Option<&'a str>,
    message: &'static str,
    message_label: &'static str,
    bytes: u64,
    status: &'static str,
    why: Option<String>,
    x_vs_stock_jazzy: Option<f64>,
    #[serde(flatten)]
    measured: Option<&'a Measured>,
}

#[derive(Serialize)]
struct JsonRun<'a> {
    warmup: u32,
    count: u32,
    duration_s: f64,
    qos: &'static str,
    rows: Vec<JsonRow<'a>>,
}

/// Writes the run and every row, raw latencies included, to `path`.
pub fn write_json(path: &Path, plan: &Plan, rows: &[Row]) -> Result<(), BenchError> {
    let run = JsonRun {
        warmup: plan.warmup,
        count: plan.count,
        duration_s: plan.duration.as_secs_f64(),
        qos: "reliable, volatile, keep last 10 (rclpy's default profile), data and acks",
        rows: rows
            .iter()
            .map(|r| JsonRow {
                stack: r.stack,
                stack_label: r.stack.label(),
                runs_on: r.detail.as_deref(),
                message: r.message.as_str(),
                message_label: r.message.label(),
                bytes: r.message.bytes(),
                status: r.outcome.status(),
                why: match &r.outcome {
                    Outcome::Measured(_) => None,
                    other => Some(other.why()),
                },
                x_vs_stock_jazzy: versus_jazzy(rows, r),
                measured: match &r.outcome {
                    Outcome::Measured(m) => Some(m),
                    _ => None,
                },
            })
            .collect(),
    };
    crate::bench::report::write_json(path, &run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(p50_ms: f64) -> Outcome {
        Outcome::Measured(Measured {
            p50_ms,
            p99_ms: p50_ms * 2.0,
            max_ms: p50_ms * 3.0,
            frames_per_s: 10.0,
            round_trips: 20,
            elapsed_ns: 2_000_000_000,
            loopback_bytes: None,
            latency_ns: vec![],
        })
    }

    #[test]
    fn the_table_compares_with_jazzy_and_says_why_a_row_is_missing() {
        let rows = vec![
            Row { stack: Stack::Jazzy, message: MessageKind::Image4k, detail: None, outcome: measured(125.0) },
            Row {
                stack: Stack::Kilted,
                message: MessageKind::Image4k,
                detail: None,
                outcome: Outcome::NotRun("x does not exist".into()),
            },
            Row { stack: Stack::FreightRs, message: MessageKind::Image4k, detail: None, outcome: measured(0.05) },
        ];
        let table = table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("stack") && lines[0].contains("x vs stock Jazzy"), "{table}");
        assert!(lines[2].contains("stock rclpy Jazzy") && lines[2].contains("1.0x"), "{table}");
        assert!(lines[3].ends_with("not run: x does not exist"), "{table}");
        assert!(lines[4].contains("2500x") && lines[4].contains("33.2 MB"), "{table}");
    }

    #[test]
    fn milliseconds_keep_three_digits() {
        assert_eq!(ms(125.4), "125");
        assert_eq!(ms(42.17), "42.2");
        assert_eq!(ms(1.234), "1.23");
        assert_eq!(ms(0.0712), "0.071");
    }
}
