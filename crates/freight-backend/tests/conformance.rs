//! The conformance suite against `cpu`, `shm` and `fake-device`, and the
//! `fake-device` pool seen from another process.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::sync::Arc;

use freight_backend::conformance::{pattern, run_all, FrameKind, StandardHarness};
use freight_backend::{Backend, BackendKind, BackendStats, CpuBackend, FakeDeviceBackend, Frame, HeapFrame};
use freight_backend::{ImportError, ShmBackend};

/// Pool of the fake-device harnesses: room for the 1 MiB + 3 round trip.
const POOL_CAPACITY: usize = 4 << 20;

fn fake_device() -> FakeDeviceBackend {
    FakeDeviceBackend::new(POOL_CAPACITY).expect("creating a fake-device pool")
}

fn empty_frame() -> Frame {
    Arc::new(HeapFrame(Vec::new()))
}

#[test]
fn cpu_conforms_over_heap_frames() {
    run_all(&StandardHarness::new(CpuBackend, FrameKind::Heap));
}

#[test]
fn cpu_conforms_over_shared_frames() {
    run_all(&StandardHarness::new(CpuBackend, FrameKind::Shared));
}

#[test]
fn shm_conforms_over_shared_frames() {
    run_all(&StandardHarness::new(ShmBackend::default(), FrameKind::Shared));
}

#[test]
fn shm_conforms_with_a_small_block_limit() {
    run_all(&StandardHarness::new(ShmBackend::with_max_block_len(1 << 21), FrameKind::Shared));
}

#[test]
fn fake_device_conforms_over_heap_frames() {
    run_all(&StandardHarness::new(fake_device(), FrameKind::Heap));
}

#[test]
fn fake_device_conforms_over_shared_frames() {
    let harness = StandardHarness::new(fake_device(), FrameKind::Shared);
    run_all(&harness);
    assert_eq!(harness.inner().stats(), BackendStats::default());
}

#[test]
fn fake_device_pool_file_is_owner_only_and_removed_on_drop() {
    let device = fake_device();
    let path = device.pool_path().to_path_buf();
    let meta = std::fs::symlink_metadata(&path).expect("the pool file exists");
    assert!(meta.file_type().is_file());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600, "mode of {}", path.display());
    // SAFETY: geteuid has no preconditions.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(device.pool_name()));
    drop(device);
    assert!(!path.exists(), "{} outlived its backend", path.display());
}

/// Exports one block of `device` for one reader; returns the descriptor bytes.
fn export_one(device: &FakeDeviceBackend, len: usize, seed: u8) -> Vec<u8> {
    let mut block = device.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    device.export(block, &[std::process::id()]).unwrap().as_bytes().to_vec()
}

#[test]
fn fake_device_refuses_a_pool_file_with_a_loose_mode() {
    let owner = fake_device();
    let d = export_one(&owner, 100, 1);
    std::fs::set_permissions(owner.pool_path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let reader = fake_device(); // has not opened the owner's pool yet
    match reader.import(&empty_frame(), &d) {
        Err(ImportError::Unreachable { .. }) => {}
        other => panic!("import from a pool of mode 644 gave {other:?}"),
    }
    std::fs::set_permissions(owner.pool_path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let buf = reader.import(&empty_frame(), &d).expect("import once the mode is 600 again");
    drop(buf);
    assert_eq!(owner.stats(), BackendStats::default());
}

#[test]
fn fake_device_refuses_a_pool_file_of_another_user() {
    let owner = fake_device();
    let d = export_one(&owner, 100, 1);
    // Only root may give a file away; elsewhere there is nothing to test.
    if std::os::unix::fs::chown(owner.pool_path(), Some(65534), None).is_err() {
        return;
    }
    match fake_device().import(&empty_frame(), &d) {
        Err(ImportError::Unreachable { .. }) => {}
        other => panic!("import from a pool of another user gave {other:?}"),
    }
}

#[test]
fn fake_device_refuses_a_missing_pool() {
    let owner = fake_device();
    let d = export_one(&owner, 100, 1);
    drop(owner); // removes the pool file
    match fake_device().import(&empty_frame(), &d) {
        Err(ImportError::Unreachable { .. }) => {}
        other => panic!("import from a removed pool gave {other:?}"),
    }
}

#[test]
fn fake_device_reader_keeps_its_cached_mapping_after_the_file_is_removed() {
    let owner = fake_device();
    let reader = fake_device();
    let d1 = export_one(&owner, 100, 1);
    let d2 = export_one(&owner, 200, 2);
    let first = reader.import(&empty_frame(), &d1).unwrap();
    std::fs::remove_file(owner.pool_path()).unwrap();
    let second = reader.import(&empty_frame(), &d2).expect("the mapping is cached");
    let mut out = vec![0; 200];
    second.copy_to_host(&mut out).unwrap();
    assert_eq!(out, pattern(200, 2));
    drop((first, second));
    assert_eq!(owner.stats(), BackendStats::default());
}

#[test]
fn fake_device_blocks_outlive_their_backend() {
    let device = fake_device();
    let d = export_one(&device, 100, 4);
    let buf = device.import(&empty_frame(), &d).unwrap();
    drop(device);
    let mut out = vec![0; 100];
    buf.copy_to_host(&mut out).unwrap();
    assert_eq!(out, pattern(100, 4));
}

/// Set in a child run by the tests below: what it does with the descriptor
/// it reads from stdin (`drop` or `hold`).
const CHILD_MODE: &str = "FREIGHT_TEST_FAKE_DEVICE_CHILD";
const CHILD_LEN: &str = "FREIGHT_TEST_FAKE_DEVICE_LEN";
const CHILD_SEED: &str = "FREIGHT_TEST_FAKE_DEVICE_SEED";
const CHILD_DONE: &str = "fake-device child: contents checked, buffer dropped";
const CHILD_HOLDS: &str = "fake-device child: contents checked, buffer held";

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// A child process (this test binary, running `fake_device_child_imports_a_descriptor`)
/// that reads a descriptor of `len` bytes of the pattern of `seed` from its stdin.
struct Child {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Child {
    fn spawn(mode: &str, len: usize, seed: u8) -> Child {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "fake_device_child_imports_a_descriptor", "--nocapture", "--test-threads=1"])
            .env(CHILD_MODE, mode)
            .env(CHILD_LEN, len.to_string())
            .env(CHILD_SEED, seed.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("running the child");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Child { child, stdin, stdout }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn send(&mut self, descriptor: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{}", to_hex(descriptor)).and_then(|()| stdin.flush()).expect("writing to the child");
    }

    /// Reads the child's stdout until a line containing `what`; panics at its end.
    fn expect(&mut self, what: &str) {
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).expect("reading the child") == 0 {
                let status = self.child.wait();
                panic!("the child ended ({status:?}) without saying {what:?}:\n{seen}");
            }
            if line.contains(what) {
                return;
            }
            seen.push_str(&line);
        }
    }

    /// Closes the child's stdin and waits for its success.
    fn finish(mut self) {
        self.stdin = None;
        let mut rest = String::new();
        let _ = self.stdout.read_to_string(&mut rest);
        let status = self.child.wait().expect("reaping the child");
        assert!(status.success(), "child failed: {status}\n{rest}");
    }

    /// Kills the child and reaps it.
    fn kill(mut self) {
        self.child.kill().expect("killing the child");
        self.child.wait().expect("reaping the child");
    }
}

#[test]
fn fake_device_block_read_by_another_process_returns_to_the_pool() {
    let device = fake_device();
    let (len, seed) = (300_001, 42);
    let mut child = Child::spawn("drop", len, seed);
    let mut block = device.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let d = device.export(block, &[child.pid()]).unwrap().as_bytes().to_vec();
    assert_eq!(device.stats().blocks_in_use, 1);
    match device.import(&empty_frame(), &d) {
        Err(ImportError::NotAReader { .. }) => {}
        other => panic!("import of the child's block by its parent gave {other:?}"),
    }
    child.send(&d);
    child.expect(CHILD_DONE);
    child.finish();
    assert_eq!(device.stats(), BackendStats::default(), "the child's drop did not return the block");
    match device.import(&empty_frame(), &d) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("import after the child released the block gave {other:?}"),
    }
    // The block is reused.
    let d2 = export_one(&device, len, 7);
    drop(device.import(&empty_frame(), &d2).unwrap());
    assert_eq!(device.stats(), BackendStats::default());
}

#[test]
fn fake_device_block_imported_by_a_killed_process_is_reclaimed() {
    let device = fake_device();
    let (len, seed) = (5000, 9);
    let mut child = Child::spawn("hold", len, seed);
    let mut block = device.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let d = device.export(block, &[child.pid(), std::process::id()]).unwrap().as_bytes().to_vec();
    child.send(&d);
    child.expect(CHILD_HOLDS);
    let pid = child.pid();
    assert_eq!(device.reclaim_dead_readers(), 0, "the holds of a living child were reclaimed");
    let mine = device.import(&empty_frame(), &d).unwrap();
    drop(mine);
    assert_eq!(device.stats().blocks_in_use, 1, "the living child's imported hold was released");
    child.kill();
    assert_eq!(device.reclaim_dead_readers(), 1, "holds reclaimed of the child {pid}, killed holding one");
    assert_eq!(device.stats(), BackendStats::default());
    match device.import(&empty_frame(), &d) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("import after the child's hold was reclaimed gave {other:?}"),
    }
}

/// The child half of the tests above: does nothing unless run by them. Reads
/// one descriptor from stdin, imports it, checks the contents; then drops the
/// buffer (and checks that the descriptor no longer imports) or holds it
/// until stdin closes.
#[test]
fn fake_device_child_imports_a_descriptor() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    let len: usize = std::env::var(CHILD_LEN).unwrap().parse().unwrap();
    let seed: u8 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("reading the descriptor");
    let d = from_hex(line.trim());
    let device = FakeDeviceBackend::new(1 << 16).unwrap(); // a pool of its own, unused
    let buf = device.import(&empty_frame(), &d).expect("child import");
    assert_eq!(buf.backend(), BackendKind::FakeDevice);
    assert_eq!(buf.len(), len);
    assert!(buf.host_bytes().is_none());
    let mut out = vec![0; len];
    buf.copy_to_host(&mut out).unwrap();
    assert!(out == pattern(len, seed), "the child read other bytes");
    if mode == "hold" {
        println!("{CHILD_HOLDS}");
        std::io::stdin().read_to_string(&mut String::new()).expect("waiting for stdin to close");
        return;
    }
    drop(buf);
    // The hold is gone: the descriptor no longer imports here either.
    assert!(matches!(device.import(&empty_frame(), &d), Err(ImportError::Stale { .. })));
    println!("{CHILD_DONE}");
}
