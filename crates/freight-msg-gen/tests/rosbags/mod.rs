//! Runs a Python script that uses `rosbags`, for the tests that hold freight's
//! interfaces against it. The interpreter is `$FREIGHT_PYTHON` (default
//! `python3`). Without it or without `rosbags` the test fails saying what to
//! install; `FREIGHT_SKIP_PYTHON_INTEROP=1` makes that a skip (which a strict
//! run, CI's, refuses).

use std::io::Write;
use std::process::{Command, Stdio};

use freight_testkit::{self as testkit, Lack};

/// The script's stdout, or `None` when `test` was skipped.
pub fn run(test: &str, script: &str, args: &[&str], input: &str) -> Option<String> {
    let skip = std::env::var("FREIGHT_SKIP_PYTHON_INTEROP").is_ok_and(|v| v == "1");
    let python = std::env::var("FREIGHT_PYTHON").unwrap_or_else(|_| "python3".into());
    let child = Command::new(&python)
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if skip => {
            testkit::skip(test, Lack::OptedOut, &format!("cannot run {python}: {e}"));
            return None;
        }
        Err(e) => panic!(
            "cannot run `{python}` ({e}): install Python and `pip install rosbags`, set FREIGHT_PYTHON, or set \
             FREIGHT_SKIP_PYTHON_INTEROP=1"
        ),
    };
    // A script that dies early closes its stdin: the status below says why.
    let _ = child.stdin.take().expect("piped stdin").write_all(input.as_bytes());
    let output = child.wait_with_output().expect("waiting for the Python script");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        if skip {
            testkit::skip(test, Lack::OptedOut, &format!("rosbags unavailable in {python}"));
            return None;
        }
        panic!(
            "`{python}` failed ({}): pip install rosbags (or set FREIGHT_PYTHON to an interpreter that has it, \
             or FREIGHT_SKIP_PYTHON_INTEROP=1)\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Some(stdout)
}
