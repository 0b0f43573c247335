//! What the tests that compile C and C++ programs share.
// Each test file is a crate of its own and uses part of this module.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `target/release` (or `debug`), where cargo puts `libfreight_c.so`: two
/// levels above the test's executable (`deps/<test>-<hash>`).
pub fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf();
    assert!(
        dir.join("libfreight_c.so").is_file(),
        "{} has no libfreight_c.so: build the crate first (cargo build -p freight-c)",
        dir.display()
    );
    dir
}

/// Compiles `source` (under `tests/`) with `compiler` and `flags` against
/// `include/` and `libfreight_c.so`, warnings as errors, into a folder of
/// its own; returns the program. Fails the test with the compiler's output.
pub fn compile(compiler: &str, flags: &[&str], source: &str) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = library_dir();
    let name = source.replace(['/', '.'], "_");
    // One folder per compilation: tests run in parallel, several may compile
    // the same program.
    static COMPILED: AtomicUsize = AtomicUsize::new(0);
    let n = COMPILED.fetch_add(1, Ordering::Relaxed);
    let out_dir = std::env::temp_dir().join(format!("freight-c-{}-{n}-{name}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(&name);
    let compiled = Command::new(compiler)
        .args(flags)
        .args(["-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests").join(source))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&lib)
        .arg("-lfreight_c")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .unwrap_or_else(|e| panic!("running {compiler}: {e}"));
    assert!(compiled.status.success(), "{compiler} {source}:\n{}", String::from_utf8_lossy(&compiled.stderr));
    exe
}

/// Removes what [`compile`] made for `exe`.
pub fn remove(exe: &Path) {
    if let Some(dir) = exe.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The text of a command's stdout and stderr; fails the test, showing them,
/// unless it succeeded.
pub fn ok(what: &str, out: Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{text}");
    text
}

/// Installs the built library, headers and tool under `prefix` as `make
/// install` does (`scripts/install.sh`).
pub fn install(prefix: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install.sh");
    ok("install.sh", Command::new("sh").arg(&script).arg(prefix).arg(library_dir()).output().unwrap());
}

/// Configures and builds the CMake project in `source` against the package
/// installed under `prefix`, in `build`.
pub fn cmake_build(source: &Path, build: &Path, prefix: &Path) {
    let configured = Command::new("cmake")
        .arg("-S")
        .arg(source)
        .arg("-B")
        .arg(build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
        .output()
        .expect("running cmake");
    ok("cmake (configure)", configured);
    ok("cmake --build", Command::new("cmake").arg("--build").arg(build).output().unwrap());
}

/// A program a test runs, its stdout read line by line; killed if the test
/// ends first (a failed assert).
pub struct Program {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Program {
    /// Starts `exe` with `args`, its stdin and stdout piped.
    pub fn start(exe: &Path, args: &[&str]) -> Program {
        let mut command = Command::new(exe);
        command.args(args);
        Program::spawn(command)
    }

    /// Starts `command`, its stdin and stdout piped.
    pub fn spawn(mut command: Command) -> Program {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        let out = BufReader::new(child.stdout.take().expect("piped"));
        Program { child, out }
    }

    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its next line of output.
    pub fn line(&mut self) -> String {
        let mut l = String::new();
        self.out.read_line(&mut l).expect("reading the program's output");
        l
    }

    /// Closes its stdin (a program that waits for that exits), waits for it
    /// to exit with success and returns the rest of its output.
    pub fn finish(mut self, what: &str) -> String {
        drop(self.child.stdin.take());
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).expect("reading the program's output");
        assert!(self.child.wait().unwrap().success(), "{what} failed:\n{rest}");
        rest
    }

    /// How it ended, if it has: for a failure message.
    pub fn status(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => format!("it ended: {status}"),
            Ok(None) => "it is still running".into(),
            Err(e) => format!("its state is unknown: {e}"),
        }
    }

    /// Kills it and waits for it to end.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
