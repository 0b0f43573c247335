//! Builds the simulated CUDA driver (`libcuda_sim.c`, a test double, not a
//! driver) and runs test binaries against it. See that file for what the
//! simulation models and what it cannot check: a run on a real GPU remains
//! the final check.

use std::path::Path;
use std::process::{Command, Output};

use freight_testkit::{skip, Lack, PrivateDir};

/// Set in the processes run against the simulation: the driver that loads
/// must be it (checked by name), and tests that run the simulation do not
/// run it again.
pub const EXPECTED: &str = "FREIGHT_SIM_CUDA_EXPECTED";

/// The simulated device's name (`cuDeviceGetName`).
pub const DEVICE_NAME: &str = "freight simulated CUDA device";

/// The source of the simulated driver. Named from the workspace's crates
/// directory, so that other crates' tests can include this module too
/// (`#[path = "../../freight-backend/tests/sim_cuda/mod.rs"]`).
const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../freight-backend/tests/sim_cuda/libcuda_sim.c");

/// A private directory holding the built simulated driver, removed on drop.
pub struct SimDriver {
    dir: PrivateDir,
}

impl SimDriver {
    /// Builds the driver with the system C compiler into a directory of its
    /// own, as `libcuda.so.1` with a `libcuda.so` link (cudarc tries
    /// `libcuda.so` first). `None` (after a `SKIPPED` line on stderr) when
    /// there is no `cc`; a compile error panics.
    pub fn build() -> Option<SimDriver> {
        // Test processes load a library from here: a directory nobody else can have made.
        let sim = SimDriver { dir: PrivateDir::new("freight-sim-cuda") };
        let lib = sim.dir.path().join("libcuda.so.1");
        let built = Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
            .args(["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", "-o"])
            .arg(&lib)
            .arg(SOURCE)
            .arg("-lpthread")
            .output();
        let built = match built {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                skip("the simulated CUDA driver", Lack::Setup, &format!("no C compiler (cc): {e}"));
                return None;
            }
            Err(e) => panic!("running cc: {e}"),
        };
        assert!(built.status.success(), "building {SOURCE} failed:\n{}", String::from_utf8_lossy(&built.stderr));
        std::os::unix::fs::symlink("libcuda.so.1", sim.dir.path().join("libcuda.so")).expect("linking libcuda.so");
        Some(sim)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `LD_LIBRARY_PATH` for a process that must load the simulated driver:
    /// its directory first, then the current value.
    pub fn library_path(&self) -> std::ffi::OsString {
        let mut path = self.dir.path().as_os_str().to_owned();
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        path
    }

    /// `exe` with `args`, set up to run against the simulated driver: its
    /// directory first on `LD_LIBRARY_PATH` (read by the loader at process
    /// start, so children inherit it), failed driver calls traced to stderr.
    pub fn command(&self, exe: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .env("LD_LIBRARY_PATH", self.library_path())
            .env(EXPECTED, "1")
            .env("FREIGHT_SIM_CUDA_TRACE", "1")
            .env_remove("CUDA_VISIBLE_DEVICES");
        cmd
    }

    /// Runs [`SimDriver::command`] to its end.
    pub fn run(&self, exe: &Path, args: &[&str]) -> Output {
        self.command(exe, args).output().expect("running a test binary against the simulated driver")
    }
}
