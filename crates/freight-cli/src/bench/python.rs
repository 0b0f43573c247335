//! `freight bench latency --lang python`: hands the run to the Python benchmark.
//!
//! The Python side is `python/freight/bench.py`, run as `<python> -m freight.bench latency`
//! in an interpreter that has freight's Python package installed. It follows the protocol at
//! the top of this module's parent, with freight's Python API on both sides and the iceoryx2
//! Python binding as the baseline. This module only validates and forwards the options,
//! then passes the child's exit status through; its output goes straight to the terminal.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus, Stdio};

use clap::{Args, FromArgMatches};

use super::args::LatencyArgs;
use super::{check_output_path, BenchError, RunPlan};

/// The environment variable naming the interpreter when `--python` is not given (the
/// Makefile sets it to the project's virtual environment).
pub const PYTHON_ENV: &str = "FREIGHT_PYTHON";
/// The interpreter when neither `--python` nor [`PYTHON_ENV`] names one.
const DEFAULT_PYTHON: &str = "python3";
/// The module that runs the benchmark.
const MODULE: &str = "freight.bench";

/// The interpreters of the Python stacks that `bench ros2` and `bench paused` compare:
/// stock ROS 2 from PyPI (installed by `scripts/install-deps.sh`) and freight's.
#[derive(Debug, Clone, Args)]
pub struct StackInterpreters {
    /// The stock ROS 2 Jazzy interpreter (rclpy, sensor_msgs, std_msgs, numpy).
    #[arg(long, value_name = "PYTHON", default_value = ".venv-ros-jazzy/bin/python")]
    pub ros_jazzy: PathBuf,

    /// The stock ROS 2 Kilted interpreter.
    #[arg(long, value_name = "PYTHON", default_value = ".venv-ros-kilted/bin/python")]
    pub ros_kilted: PathBuf,

    /// freight's Python interpreter (freight's package and numpy) [default: $FREIGHT_PYTHON,
    /// else .venv/bin/python].
    #[arg(long, value_name = "PYTHON")]
    pub python: Option<PathBuf>,
}

impl StackInterpreters {
    /// freight's interpreter: `--python`, else `$FREIGHT_PYTHON` (when set and not empty),
    /// else the project's `.venv`.
    pub fn freight(&self) -> PathBuf {
        match (&self.python, std::env::var_os(PYTHON_ENV)) {
            (Some(p), _) => p.clone(),
            (None, Some(env)) if !env.is_empty() => PathBuf::from(env),
            _ => PathBuf::from(".venv/bin/python"),
        }
    }
}

/// Runs the Python benchmark for `args` and returns its exit status.
pub fn run(args: &LatencyArgs) -> Result<ExitCode, BenchError> {
    reject_rust_only_options(args)?;
    // The same checks, with the same messages, as a Rust run: fail before starting Python.
    RunPlan::new(args.iterations, args.duration_per_row)?;
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    let python = interpreter(args.python.as_deref(), std::env::var_os(PYTHON_ENV));
    check_imports(&python, MODULE)?;
    let status = Command::new(&python)
        .args(["-m", MODULE, "latency"])
        .args(forwarded_options(args))
        .status()
        .map_err(|e| cannot_run(&python, &e))?;
    Ok(exit_code(status))
}

/// `--python`, else `$FREIGHT_PYTHON` (when set and not empty), else `python3`.
pub(crate) fn interpreter(flag: Option<&Path>, env: Option<OsString>) -> OsString {
    match (flag, env) {
        (Some(path), _) => path.as_os_str().to_owned(),
        (None, Some(env)) if !env.is_empty() => env,
        _ => OsString::from(DEFAULT_PYTHON),
    }
}

/// The options of `bench latency` that the Python benchmark understands, in its syntax.
/// Sizes go as plain byte counts, so that the two parsers never have to agree on units.
fn forwarded_options(args: &LatencyArgs) -> Vec<OsString> {
    let sizes: Vec<String> = args.sizes.iter().map(|s| s.to_string()).collect();
    let mut out: Vec<OsString> = vec![
        "--sizes".into(),
        sizes.join(",").into(),
        "--iterations".into(),
        args.iterations.to_string().into(),
        "--duration-per-row".into(),
        args.duration_per_row.as_secs_f64().to_string().into(),
    ];
    if let Some(json) = &args.json {
        out.push("--json".into());
        out.push(json.as_os_str().to_owned());
    }
    if args.user_type {
        out.push("--user-type".into());
    }
    out
}

/// The Python benchmark has no transports to choose, busy-polls only and draws no plot. A
/// user who asked for `--wait block` must get an error, not a table of something else.
fn reject_rust_only_options(args: &LatencyArgs) -> Result<(), BenchError> {
    let defaults = default_args();
    let mut given = Vec::new();
    if args.transports != defaults.transports {
        given.push("--transports");
    }
    if args.wait != defaults.wait {
        given.push("--wait");
    }
    if args.plot.is_some() {
        given.push("--plot");
    }
    if given.is_empty() {
        return Ok(());
    }
    Err(BenchError::new(
        format!(
            "--lang python does not take {}: it measures freight's Python API against the iceoryx2 \
             Python binding, busy-polling, and draws no plot",
            given.join(", ")
        ),
        "drop them, or measure the Rust transports with --lang rust",
    ))
}

/// `bench latency`'s arguments as they are when none is given, straight from their clap
/// definition, so that the defaults are written in one place only.
fn default_args() -> LatencyArgs {
    let command = LatencyArgs::augment_args(clap::Command::new("latency"));
    let matches = command.get_matches_from(["latency"]);
    LatencyArgs::from_arg_matches(&matches).expect("every option of `bench latency` has a valid default")
}

/// Checks that `python` runs and can import `module`, so that a missing package is
/// reported with the fix rather than as a Python traceback.
pub(crate) fn check_imports(python: &OsStr, module: &str) -> Result<(), BenchError> {
    let out = Command::new(python)
        .args(["-c", &format!("import {module}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| cannot_run(python, &e))?;
    if out.status.success() {
        return Ok(());
    }
    // The last line of a traceback is the exception, e.g. "ModuleNotFoundError: ...".
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").trim();
    Err(BenchError::new(
        format!("the Python interpreter `{}` cannot import {module} ({reason})", python.to_string_lossy()),
        format!(
            "install freight's Python package into it (`pip install .` in the repository, or `make \
             wheel` and install the wheel), or name an interpreter that has it with --python PATH \
             or {PYTHON_ENV}"
        ),
    ))
}

pub(crate) fn cannot_run(python: &OsStr, e: &std::io::Error) -> BenchError {
    BenchError::new(
        format!("cannot run the Python interpreter `{}`: {e}", python.to_string_lossy()),
        format!("install Python 3, or name the interpreter with --python PATH or {PYTHON_ENV}"),
    )
}

/// The child's exit status as ours; death by a signal becomes 128 + the signal number, as a
/// shell reports it.
pub(crate) fn exit_code(status: ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        latency: LatencyArgs,
    }

    fn parse(argv: &[&str]) -> LatencyArgs {
        let mut full = vec!["latency"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).expect("valid arguments").latency
    }

    fn strings(options: Vec<OsString>) -> Vec<String> {
        options.into_iter().map(|o| o.into_string().unwrap()).collect()
    }

    #[test]
    fn interpreter_is_the_flag_then_the_environment_then_python3() {
        let flag = Path::new("/opt/py/bin/python");
        assert_eq!(interpreter(Some(flag), Some("/env/python".into())), "/opt/py/bin/python");
        assert_eq!(interpreter(None, Some("/env/python".into())), "/env/python");
        assert_eq!(interpreter(None, Some("".into())), "python3");
        assert_eq!(interpreter(None, None), "python3");
    }

    #[test]
    fn applicable_options_are_forwarded_with_sizes_in_bytes() {
        let args = parse(&[
            "--lang",
            "python",
            "--sizes",
            "8B,64KiB,1MB",
            "--iterations",
            "300",
            "--duration-per-row",
            "0.5",
            "--json",
            "out.json",
        ]);
        assert_eq!(
            strings(forwarded_options(&args)),
            ["--sizes", "8,65536,1000000", "--iterations", "300", "--duration-per-row", "0.5", "--json", "out.json"]
        );
        let user = strings(forwarded_options(&parse(&["--lang", "python", "--user-type"])));
        assert_eq!(user.last().map(String::as_str), Some("--user-type"));
        let defaults = strings(forwarded_options(&parse(&["--lang", "python"])));
        assert_eq!(defaults[1], "8,65536,1048576,8388608,33554432,134217728");
        assert_eq!(defaults[5], "2");
    }

    #[test]
    fn rust_only_options_are_rejected_by_name() {
        assert!(reject_rust_only_options(&parse(&["--lang", "python"])).is_ok());
        let err =
            reject_rust_only_options(&parse(&["--lang", "python", "--wait", "block", "--plot", "x.png"])).unwrap_err();
        assert!(err.what().starts_with("--lang python does not take --wait, --plot:"), "{err}");
        let err = reject_rust_only_options(&parse(&["--lang", "python", "--transports", "iceoryx2"])).unwrap_err();
        assert!(err.what().starts_with("--lang python does not take --transports:"), "{err}");
    }

    #[test]
    fn a_missing_interpreter_says_how_to_name_one() {
        let err = check_imports(OsStr::new("/nonexistent/python3"), MODULE).unwrap_err();
        assert!(err.what().contains("cannot run the Python interpreter `/nonexistent/python3`"), "{err}");
        assert!(err.fix().contains("--python PATH"), "{err}");
    }

    #[test]
    fn an_interpreter_without_freight_says_how_to_install_it() {
        // `false` stands in for a Python that fails the import: it runs, and exits 1.
        let err = check_imports(OsStr::new("false"), MODULE).unwrap_err();
        assert!(err.what().contains("`false` cannot import freight.bench"), "{err}");
        assert!(err.fix().contains("pip install ."), "{err}");
    }
}
