//! `freight demo`: the headline comparison, one 4K BGRA camera frame between two processes.
//!
//! It is `freight bench latency` with fixed arguments: same harness, same table.

use std::time::Duration;

use clap::Args;

use crate::bench::{self, format_size, parse_seconds, BenchError, LatencyJob, RunPlan, TransportKind, WaitMode};

/// Frame width in pixels (4K UHD).
pub const FRAME_WIDTH: usize = 3840;
/// Frame height in pixels (4K UHD).
pub const FRAME_HEIGHT: usize = 2160;
/// BGRA: four bytes per pixel.
pub const BYTES_PER_PIXEL: usize = 4;
/// One frame: 3840 * 2160 * 4 = 33,177,600 bytes (31.6 MiB).
pub const FRAME_BYTES: usize = FRAME_WIDTH * FRAME_HEIGHT * BYTES_PER_PIXEL;

/// The transports the demo compares, in table order.
const DEMO_TRANSPORTS: &[TransportKind] =
    &[TransportKind::ShmLoan, TransportKind::ShmCopy, TransportKind::Iceoryx2, TransportKind::Memcpy];

/// Arguments of `freight demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Time limit per row in seconds.
    #[arg(long, value_parser = parse_seconds, default_value = "2", value_name = "SECS")]
    pub duration_per_row: Duration,
}

/// Runs the demo and prints its table.
pub fn run(args: &DemoArgs) -> Result<(), BenchError> {
    let job = LatencyJob {
        sizes: vec![FRAME_BYTES],
        transports: DEMO_TRANSPORTS.to_vec(),
        waits: vec![WaitMode::Spin, WaitMode::Block],
        plan: RunPlan::new(5000, args.duration_per_row)?,
        json: None,
        plot: None,
        title: Some(format!(
            "freight demo: one {FRAME_WIDTH}x{FRAME_HEIGHT} BGRA frame ({} bytes, {}) from a \
             publisher process to a subscriber process",
            group_thousands(FRAME_BYTES),
            format_size(FRAME_BYTES as u64)
        )),
    };
    let rows = bench::run_latency(&job)?;
    println!();
    for wait in [WaitMode::Spin, WaitMode::Block] {
        let p50 = |t: TransportKind| {
            rows.iter().find(|r| r.transport == t.as_str() && r.wait == wait.as_str()).map(|r| r.p50_us)
        };
        if let (Some(loan), Some(copy), Some(raw)) =
            (p50(TransportKind::ShmLoan), p50(TransportKind::ShmCopy), p50(TransportKind::Iceoryx2))
        {
            println!(
                "{:5}: loaned frame {loan:.2} µs vs copied frame {copy:.0} µs ({:.0}x lower latency); raw iceoryx2 {raw:.2} µs",
                wait.as_str(),
                copy / loan,
            );
        }
    }
    Ok(())
}

fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_33_177_600_bytes() {
        assert_eq!(FRAME_BYTES, 33_177_600);
        assert_eq!(group_thousands(FRAME_BYTES), "33,177,600");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
    }
}
