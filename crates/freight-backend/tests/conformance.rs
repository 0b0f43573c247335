//! The conformance suite against `cpu`, `shm` and `fake-device`, and the
//! `fake-device` pool seen from another process.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
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

const CHILD_DESCRIPTOR: &str = "FREIGHT_TEST_FAKE_DEVICE_DESCRIPTOR";
const CHILD_LEN: &str = "FREIGHT_TEST_FAKE_DEVICE_LEN";
const CHILD_SEED: &str = "FREIGHT_TEST_FAKE_DEVICE_SEED";
const CHILD_DONE: &str = "fake-device child: contents checked, buffer dropped";

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

#[test]
fn fake_device_block_read_by_another_process_returns_to_the_pool() {
    let device = fake_device();
    let (len, seed) = (300_001, 42);
    let d = export_one(&device, len, seed);
    assert_eq!(device.stats().blocks_in_use, 1);
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fake_device_child_imports_a_descriptor", "--nocapture", "--test-threads=1"])
        .env(CHILD_DESCRIPTOR, to_hex(&d))
        .env(CHILD_LEN, len.to_string())
        .env(CHILD_SEED, seed.to_string())
        .output()
        .expect("running the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {}\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains(CHILD_DONE), "the child test did not run:\n{stdout}\n{stderr}");
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

/// The child half of the test above: does nothing unless run by it.
#[test]
fn fake_device_child_imports_a_descriptor() {
    let Ok(hex) = std::env::var(CHILD_DESCRIPTOR) else {
        return;
    };
    let len: usize = std::env::var(CHILD_LEN).unwrap().parse().unwrap();
    let seed: u8 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let d = from_hex(&hex);
    let device = FakeDeviceBackend::new(1 << 16).unwrap(); // a pool of its own, unused
    let buf = device.import(&empty_frame(), &d).expect("child import");
    assert_eq!(buf.backend(), BackendKind::FakeDevice);
    assert_eq!(buf.len(), len);
    assert!(buf.host_bytes().is_none());
    let mut out = vec![0; len];
    buf.copy_to_host(&mut out).unwrap();
    assert!(out == pattern(len, seed), "the child read other bytes");
    drop(buf);
    // The hold is gone: the descriptor no longer imports here either.
    assert!(matches!(device.import(&empty_frame(), &d), Err(ImportError::Stale { .. })));
    println!("{CHILD_DONE}");
}
