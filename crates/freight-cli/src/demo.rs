//! `freight demo`: the headline comparison, one 4K BGRA camera frame between two processes.
//!
//! It is `freight bench latency` with fixed arguments: same harness, same table.
//! `freight demo robot-arm` runs the GPU demo instead: a renderer process and a
//! display process in Python (`python -m freight.demos.robot_arm`), comparing
//! the `cuda`, `cuda-host` and `cpu` transports (numpy and `shm`/`cpu` where
//! there is no GPU), end to end and transport only (frames drawn before
//! measuring and replayed), and ends with the headline in one sentence.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::bench::python::{cannot_run, check_imports, exit_code, interpreter, PYTHON_ENV};
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
#[command(args_conflicts_with_subcommands = true)]
pub struct DemoArgs {
    /// Another demo than the 4K frame comparison.
    #[command(subcommand)]
    pub scene: Option<Scene>,
    /// Time limit per row in seconds.
    #[arg(long, value_parser = parse_seconds, default_value = "2", value_name = "SECS")]
    pub duration_per_row: Duration,
}

/// The demos besides the default one.
#[derive(Debug, Clone, Subcommand)]
pub enum Scene {
    /// GPU frames between a renderer and a display process: `cuda` vs
    /// `cuda-host` vs `cpu` at 1080p, 1440p and 4K (with torch on a CUDA
    /// GPU; numpy and `shm` vs `cpu` elsewhere), end to end and transport
    /// only, with CPU time per frame. Arguments after `--` go to
    /// `python -m freight.demos.robot_arm` (e.g. `-- compare --seconds 5`).
    RobotArm {
        /// Python interpreter with freight's package (and torch, for the GPU)
        /// [default: $FREIGHT_PYTHON, else python3]
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
        /// Arguments for the Python demo.
        #[arg(last = true, value_name = "ARGS")]
        args: Vec<OsString>,
    },
}

/// The Python module of `freight demo robot-arm`.
const ROBOT_ARM_MODULE: &str = "freight.demos.robot_arm";

/// Runs the demo `args` asks for and returns the exit status.
pub fn run(args: &DemoArgs) -> Result<ExitCode, BenchError> {
    match &args.scene {
        None => frame_comparison(args).map(|()| ExitCode::SUCCESS),
        Some(Scene::RobotArm { python, args }) => {
            let python = interpreter(python.as_deref(), std::env::var_os(PYTHON_ENV));
            check_imports(&python, ROBOT_ARM_MODULE)?;
            let status = Command::new(&python)
                .args(["-m", ROBOT_ARM_MODULE])
                .args(args)
                .status()
                .map_err(|e| cannot_run(&python, &e))?;
            Ok(exit_code(status))
        }
    }
}

/// The 4K frame between two processes: loan vs copy vs raw iceoryx2.
fn frame_comparison(args: &DemoArgs) -> Result<(), BenchError> {
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

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        demo: DemoArgs,
    }

    fn parse(argv: &[&str]) -> DemoArgs {
        use clap::Parser;
        Cli::try_parse_from(std::iter::once("demo").chain(argv.iter().copied())).expect("valid arguments").demo
    }

    #[test]
    fn robot_arm_forwards_what_follows_the_double_dash() {
        let Some(Scene::RobotArm { python, args }) =
            parse(&["robot-arm", "--python", "py3", "--", "compare", "--seconds", "1"]).scene
        else {
            panic!("robot-arm was not parsed as its scene");
        };
        assert_eq!(python, Some(PathBuf::from("py3")));
        assert_eq!(args, ["compare", "--seconds", "1"].map(OsString::from));
        assert!(parse(&[]).scene.is_none(), "no scene: the 4K frame comparison");
    }

    #[test]
    fn robot_arm_without_the_python_package_says_how_to_get_it() {
        let args = DemoArgs {
            scene: Some(Scene::RobotArm { python: Some("/nonexistent/python3".into()), args: Vec::new() }),
            duration_per_row: Duration::from_secs(1),
        };
        let err = run(&args).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/python3"), "{err}");
    }

    #[test]
    fn frame_is_33_177_600_bytes() {
        assert_eq!(FRAME_BYTES, 33_177_600);
        assert_eq!(group_thousands(FRAME_BYTES), "33,177,600");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
    }
}
