//! `cpp-loan` and `cpp-copy`: freight's C++ API, measured by a C++ program.
//!
//! Both ends of a row are written with `<freight/freight.hpp>` as a user would, in
//! `crates/freight-c/bench/latency.cpp`, which `make build` compiles next to this tool
//! (`target/release/freight-bench-cpp`) and `make install` installs beside it. The program
//! runs one row under this harness's protocol (the parent module's documentation): it forks,
//! its child subscribes and acks, its parent publishes, and it prints the row's outcome as
//! one JSON line. The harness only starts it, bounds it by the row's time limit and turns its
//! line into the same [`RowOutcome`] as every other row, so that the table compares the C++
//! rows with the Rust API's (`shm-loan`, `shm-copy`) measured in the same run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use super::harness::{RowOutcome, RunPlan};
use super::sys::{run_bounded, CpuPlan};
use super::transport::{Placement, RowConfig, Transport};
use super::{BenchError, MIN_SAMPLES};

/// The environment variable that names the C++ program, overriding where it is looked for.
pub const PROGRAM_ENV: &str = "FREIGHT_BENCH_CPP";
/// The program's file name.
const PROGRAM: &str = "freight-bench-cpp";

/// One of the C++ API's paths.
pub struct CppTransport {
    /// `publisher.loan(n)` and `publish(std::move(loan))` when true, else `publish_copy`.
    loan: bool,
}

/// The C++ transports, for [`super::registered_transports`].
pub fn all() -> Vec<Box<dyn Transport>> {
    vec![Box::new(CppTransport { loan: true }), Box::new(CppTransport { loan: false })]
}

impl Transport for CppTransport {
    fn name(&self) -> &'static str {
        if self.loan {
            "cpp-loan"
        } else {
            "cpp-copy"
        }
    }

    fn placement(&self) -> Placement {
        Placement::External
    }

    fn run_external(&self, row: &RowConfig, plan: &RunPlan, cpus: &CpuPlan) -> Result<RowOutcome, BenchError> {
        let program = program(std::env::var_os(PROGRAM_ENV), std::env::current_exe().ok())?;
        let mut command = Command::new(&program);
        command
            .args(["--path", if self.loan { "loan" } else { "copy" }])
            .args(["--wait", row.wait.as_str()])
            .args(["--size", &row.size.to_string()])
            .args(["--topic", &super::freight_impl::topic_of(row)])
            .args(["--iterations", &plan.iterations.to_string()])
            .args(["--warmup", &plan.warmup.to_string()])
            .args(["--warmup-max-ms", &plan.warmup_max.as_millis().to_string()])
            .args(["--max-duration-ms", &plan.max_duration.as_millis().to_string()])
            .args(["--min-samples", &MIN_SAMPLES.to_string()])
            .args(["--timeout-ms", &plan.row_timeout.as_millis().to_string()]);
        if let (Some(publisher), Some(subscriber)) = (cpus.publisher, cpus.subscriber(0)) {
            command.args(["--cpus", &format!("{publisher},{subscriber}")]);
        }
        // A few seconds past the row's limit, which the program enforces itself.
        let (stdout, success, stderr) =
            run_bounded(command, plan.row_timeout + Duration::from_secs(5)).map_err(|e| {
                BenchError::new(
                    format!("{}: {e}", program.display()),
                    "rebuild it with `make build` (a C++17 compiler is needed), or retry on a less loaded machine",
                )
            })?;
        if !success {
            let said = String::from_utf8_lossy(&stderr);
            let said = said.trim();
            return Err(BenchError::new(
                format!("{} failed: {}", program.display(), if said.is_empty() { "it said nothing" } else { said }),
                "check that /dev/shm is writable and has free space (df -h /dev/shm)",
            ));
        }
        parse_outcome(&String::from_utf8_lossy(&stdout))
    }
}

/// Where the program is: `$FREIGHT_BENCH_CPP`, else next to this tool (a build tree), else in
/// `../libexec/freight/` from it (an installed prefix).
fn program(env: Option<OsString>, exe: Option<PathBuf>) -> Result<PathBuf, BenchError> {
    if let Some(path) = env.filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(BenchError::new(
                format!("${PROGRAM_ENV} names {}, which is not a file", path.display()),
                format!("point ${PROGRAM_ENV} at the built {PROGRAM}, or unset it"),
            ))
        };
    }
    let dir = exe.as_deref().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
    let candidates = [dir.join(PROGRAM), dir.join("../libexec/freight").join(PROGRAM)];
    candidates.iter().find(|p| p.is_file()).cloned().ok_or_else(|| {
        BenchError::new(
            format!("the C++ benchmark program is not built (looked for {})", candidates[0].display()),
            format!(
                "run `make build`, which compiles crates/freight-c/bench/latency.cpp into {PROGRAM} next to \
                 the freight tool, or set ${PROGRAM_ENV}"
            ),
        )
    })
}

/// The program's line.
#[derive(Debug, Deserialize)]
struct Line {
    samples_ns: Vec<u64>,
    publish_ns: Vec<u64>,
    round_trips: u64,
    elapsed_ns: u64,
}

/// The outcome in the program's output, checked: as many samples as round trips.
fn parse_outcome(output: &str) -> Result<RowOutcome, BenchError> {
    let bad = |why: String| {
        BenchError::new(
            format!("the C++ program's output is not a row's outcome: {why}"),
            "rebuild it with `make build`: it may be older than this tool",
        )
    };
    let line = output.lines().rev().find(|l| !l.trim().is_empty()).ok_or_else(|| bad("it printed nothing".into()))?;
    let line: Line = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
    if line.samples_ns.len() as u64 != line.round_trips || line.publish_ns.len() as u64 != line.round_trips {
        return Err(bad(format!(
            "{} round trips, {} latencies, {} publish times",
            line.round_trips,
            line.samples_ns.len(),
            line.publish_ns.len()
        )));
    }
    Ok(RowOutcome {
        samples_ns: line.samples_ns,
        publish_ns: line.publish_ns,
        round_trips: line.round_trips,
        elapsed: Duration::from_nanos(line.elapsed_ns),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outcome_line_becomes_a_row_outcome() {
        let out =
            parse_outcome("noise\n{\"samples_ns\":[5,7],\"publish_ns\":[1,2],\"round_trips\":2,\"elapsed_ns\":9}\n")
                .expect("a valid line");
        assert_eq!(out.samples_ns, [5, 7]);
        assert_eq!(out.publish_ns, [1, 2]);
        assert_eq!(out.round_trips, 2);
        assert_eq!(out.elapsed, Duration::from_nanos(9));
    }

    #[test]
    fn a_line_that_miscounts_is_rejected() {
        let e = parse_outcome("{\"samples_ns\":[5],\"publish_ns\":[1,2],\"round_trips\":2,\"elapsed_ns\":9}")
            .expect_err("1 latency for 2 round trips");
        assert!(e.what().contains("2 round trips, 1 latencies"), "{}", e.what());
        assert!(parse_outcome("").is_err());
        assert!(parse_outcome("{\"samples_ns\":\"x\"}").is_err());
    }

    #[test]
    fn the_program_is_found_by_env_then_beside_the_tool() {
        let dir = std::env::temp_dir().join(format!("freight-bench-cpp-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).expect("a temporary directory");
        let exe = dir.join("bin/freight");
        let e = program(None, Some(exe.clone())).expect_err("nothing built");
        assert!(e.fix().contains("make build"), "{}", e.fix());
        std::fs::write(dir.join("bin").join(PROGRAM), b"").expect("a file");
        assert_eq!(program(None, Some(exe.clone())).expect("beside"), dir.join("bin").join(PROGRAM));
        let e = program(Some(dir.join("nothing").into_os_string()), Some(exe)).expect_err("env names no file");
        assert!(e.what().contains("FREIGHT_BENCH_CPP"), "{}", e.what());
        std::fs::remove_dir_all(&dir).expect("removing the temporary directory");
    }
}
