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

/// freight's transports that belong in the demo; any not in [`DEMO_TRANSPORTS`] yet are
/// named in a note so that a baselines-only table is never mistaken for the full comparison.
const FREIGHT_DEMO_TRANSPORTS: &[TransportKind] = &[TransportKind::ShmLoan, TransportKind::ShmCopy];

/// Arguments of `freight demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Time limit per row in seconds.
    #[arg(long, value_parser = parse_seconds, default_value = "2", value_name = "SECS")]
    pub duration_per_row: Duration,
}

/// Runs the demo and prints its table.
pub fn run(args: &DemoArgs) -> Result<(), BenchError> {
    let missing: Vec<&str> =
        FREIGHT_DEMO_TRANSPORTS.iter().filter(|t| !DEMO_TRANSPORTS.contains(t)).map(|t| t.as_str()).collect();
    if !missing.is_empty() {
        let verb = if missing.len() == 1 { "is" } else { "are" };
        eprintln!(
            "note: {} {verb} not in the demo yet (not registered in this build); showing the baselines only",
            missing.join(" and ")
        );
    }
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
    bench::run_latency(&job)?;
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
