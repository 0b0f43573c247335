//! The conformance suite against `cpu`, `shm`, `fake-device`, and `cuda` and
//! `cuda-host` where a GPU is present; the `fake-device` pool (and the `cuda`
//! one, with a GPU) seen from another process.
//!
//! The GPU-gated tests (`gpu_or_skip`) skip without a driver; on every
//! machine with a C compiler, `gpu_tests_run_on_the_simulated_cuda_driver`
//! runs them again in a child against a simulated driver (`sim_cuda/`, a
//! test double), which exercises the backends' logic but not real stream
//! order or memory placement: the run on a real GPU remains the final check.

mod sim_cuda;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use freight_backend::conformance::{pattern, FrameKind, StandardHarness, CHECKS};
use freight_backend::{cuda, Backend, BackendKind, BackendStats, CpuBackend, CudaBackend, CudaHostBackend};
use freight_backend::{FakeDeviceBackend, Frame, HeapFrame, ImportError, PoolOptions, ShmBackend};

/// Pool of the fake-device harnesses: room for the 1 MiB + 3 round trip.
const POOL_CAPACITY: usize = 4 << 20;

fn fake_device() -> FakeDeviceBackend {
    FakeDeviceBackend::new(POOL_CAPACITY).expect("creating a fake-device pool")
}

fn empty_frame() -> Frame {
    Arc::new(HeapFrame(Vec::new()))
}

freight_backend::conformance_tests!(cpu_over_heap_frames, StandardHarness::new(CpuBackend, FrameKind::Heap));
freight_backend::conformance_tests!(cpu_over_shared_frames, StandardHarness::new(CpuBackend, FrameKind::Shared));
freight_backend::conformance_tests!(
    shm_over_shared_frames,
    StandardHarness::new(ShmBackend::default(), FrameKind::Shared)
);
freight_backend::conformance_tests!(
    shm_with_a_small_block_limit,
    StandardHarness::new(ShmBackend::with_max_block_len(1 << 21), FrameKind::Shared)
);
freight_backend::conformance_tests!(fake_device_over_heap_frames, StandardHarness::new(fake_device(), FrameKind::Heap));
freight_backend::conformance_tests!(
    fake_device_over_shared_frames,
    StandardHarness::new(fake_device(), FrameKind::Shared),
    after |h: &StandardHarness<FakeDeviceBackend>| assert_eq!(h.inner().stats(), BackendStats::default())
);

/// Whether a GPU is here; if not, says so where every run's log shows it
/// ([`freight_testkit::skip`]), naming the test.
fn gpu_or_skip(what: &str) -> bool {
    match cuda::available() {
        Ok(()) if std::env::var_os(sim_cuda::EXPECTED).is_some() => {
            // Run against the simulation: it, not a real driver, must be what loaded.
            assert_eq!(cuda::device_name(0).unwrap(), sim_cuda::DEVICE_NAME, "{what}: the driver that loaded");
            true
        }
        Ok(()) => true,
        Err(why) => {
            // Once per kind of test: a conformance module asks once per check.
            static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
            let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
            if !said.iter().any(|w| w == what) {
                said.push(what.to_owned());
                freight_testkit::skip(what, freight_testkit::Lack::Gpu, &why.to_string());
            }
            false
        }
    }
}

freight_backend::conformance_tests!(
    cuda_over_shared_frames,
    StandardHarness::new(CudaBackend::new(0, POOL_CAPACITY).unwrap(), FrameKind::Shared),
    if gpu_or_skip("cuda conformance"),
    after |h: &StandardHarness<CudaBackend>| assert_eq!(h.inner().stats(), BackendStats::default())
);
freight_backend::conformance_tests!(
    cuda_host_over_shared_frames,
    StandardHarness::new(CudaHostBackend::new(0).unwrap(), FrameKind::Shared),
    if gpu_or_skip("cuda-host conformance")
);

#[test]
fn cuda_helpers_agree_with_the_backend() {
    if !gpu_or_skip("cuda helpers") {
        return;
    }
    let backend = CudaBackend::new(0, 1 << 20).unwrap();
    assert_eq!(backend.device_uuid(), Some(cuda::device_uuid(0).unwrap()));
    assert!(cuda::device_count().unwrap() >= 1);
    assert!(!cuda::device_name(0).unwrap().is_empty());
    assert!(matches!(cuda::device_uuid(cuda::device_count().unwrap()), Err(cuda::CudaError::NoSuchDevice { .. })));
}

#[test]
fn cuda_backends_without_a_driver_fail_with_the_reason() {
    let Err(why) = cuda::available() else {
        return; // a GPU is here: nothing to check
    };
    let reason = |e: freight_backend::AllocError| e.to_string();
    let pool = CudaBackend::new(0, 1 << 20).map(|_| ()).map_err(reason);
    let host = CudaHostBackend::new(0).map(|_| ()).map_err(reason);
    for outcome in [pool, host] {
        let e = outcome.expect_err("a CUDA backend without CUDA");
        assert!(e.contains(&why.to_string()), "{e}");
    }
    if matches!(why, cuda::CudaError::DriverMissing) {
        assert!(why.to_string().contains("libcuda.so.1"), "{why}");
    }
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
/// Which backend the child imports with: `fake-device` (default) or `cuda`.
const CHILD_BACKEND: &str = "FREIGHT_TEST_CHILD_BACKEND";
const CHILD_DONE: &str = "fake-device child: contents checked, buffer dropped";
const CHILD_HOLDS: &str = "fake-device child: contents checked, buffer held";
const CHILD_REFUSED: &str = "fake-device child: refused as another device";

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
        Self::spawn_with(mode, len, seed, "fake-device")
    }

    fn spawn_with(mode: &str, len: usize, seed: u8, backend: &str) -> Child {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "fake_device_child_imports_a_descriptor", "--nocapture", "--test-threads=1"])
            .env(CHILD_MODE, mode)
            .env(CHILD_LEN, len.to_string())
            .env(CHILD_SEED, seed.to_string())
            .env(CHILD_BACKEND, backend)
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

#[test]
fn fake_device_reader_killed_holding_a_block_is_reclaimed_within_a_second_and_its_memory_given_back() {
    let idle = Duration::from_millis(200);
    let options = PoolOptions::new(POOL_CAPACITY).idle_time(idle);
    let device = FakeDeviceBackend::with_options(options, FakeDeviceBackend::DEFAULT_DEVICE_UUID).unwrap();
    let (len, seed) = (70_000, 3);
    let mut child = Child::spawn("hold", len, seed);
    let mut block = device.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let d = device.export(block, &[child.pid()]).unwrap().as_bytes().to_vec();
    child.send(&d);
    child.expect(CHILD_HOLDS);
    child.kill();
    // No explicit reclaim: the housekeeping of `stats` (as of `allocate`) finds the dead reader.
    let killed = Instant::now();
    while device.stats() != BackendStats::default() {
        assert!(killed.elapsed() < Duration::from_secs(1), "the killed reader's hold outlived a second");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The block is idle; the dead reader had it open, which does not keep its memory.
    assert_eq!(device.idle_blocks(), 1);
    std::thread::sleep(idle + Duration::from_millis(50));
    assert_eq!(device.idle_blocks(), 0, "the idle block of a dead reader kept its memory");
    match device.import(&empty_frame(), &d) {
        Err(ImportError::Stale { .. }) => {}
        other => panic!("import after the reader's hold was reclaimed gave {other:?}"),
    }
}

#[test]
fn fake_device_block_open_in_a_living_reader_keeps_its_memory_until_the_reader_is_done() {
    let idle = Duration::from_millis(100);
    let options = PoolOptions::new(POOL_CAPACITY).idle_time(idle);
    let device = FakeDeviceBackend::with_options(options, FakeDeviceBackend::DEFAULT_DEVICE_UUID).unwrap();
    let (len, seed) = (1000, 8);
    let mut child = Child::spawn("drop-and-wait", len, seed);
    let mut block = device.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let d = device.export(block, &[child.pid()]).unwrap().as_bytes().to_vec();
    child.send(&d);
    child.expect(CHILD_DONE);
    // The child dropped its buffer but keeps the block open in its cache.
    assert_eq!(device.idle_blocks(), 1);
    std::thread::sleep(idle + Duration::from_millis(50));
    assert_eq!(device.idle_blocks(), 1, "the memory of a block open in a living reader was given back");
    child.finish(); // the child drops its backend, closing the block, and exits
    assert_eq!(device.idle_blocks(), 0, "the block the reader closed kept its memory");
}

#[test]
fn fake_device_reader_of_another_device_is_refused_and_keeps_its_hold_to_give_back() {
    let device = fake_device();
    let (len, seed) = (100, 5);
    let mut child = Child::spawn("other-device", len, seed);
    let mut block = device.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let pid = child.pid();
    let d = device.export(block, &[pid]).unwrap().as_bytes().to_vec();
    child.send(&d);
    child.expect(CHILD_REFUSED);
    assert_eq!(device.stats().blocks_in_use, 1, "the refused import took the hold away");
    // The subscriber falls back to host bytes and gives the hold back.
    device.release_unimported(&d, pid).unwrap();
    assert_eq!(device.stats(), BackendStats::default());
    child.finish();
}

#[test]
fn cuda_block_read_by_another_process_returns_to_the_pool() {
    if !gpu_or_skip("cuda between processes") {
        return;
    }
    let gpu = CudaBackend::new(0, POOL_CAPACITY).unwrap();
    let (len, seed) = (300_001, 42);
    let mut child = Child::spawn_with("drop", len, seed, "cuda");
    let mut block = gpu.allocate(len, None).unwrap();
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let d = gpu.export(block, &[child.pid()]).unwrap().as_bytes().to_vec();
    child.send(&d);
    child.expect(CHILD_DONE);
    child.finish();
    // The child's release thread gives the hold back after its work is done.
    let start = Instant::now();
    while gpu.stats() != BackendStats::default() {
        assert!(start.elapsed() < Duration::from_secs(5), "the child's hold was not given back");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The stream a child of mode `order-drop` orders its buffer on:
/// `CU_STREAM_PER_THREAD`, valid in every context.
const CHILD_STREAM: u64 = 2;

#[test]
fn cuda_block_ordered_on_a_stream_by_another_process_returns_after_its_work() {
    if !gpu_or_skip("cuda stream order between processes") {
        return;
    }
    let gpu = CudaBackend::new(0, POOL_CAPACITY).unwrap();
    let (len, seed) = (1 << 20, 23);
    for round in 0..2 {
        // The second round reuses the block (its allocation, with a new reader).
        let mut child = Child::spawn_with("order-drop", len, seed, "cuda");
        let mut block = gpu.allocate(len, None).unwrap();
        block.set_write_stream(0);
        block.write_from_host(0, &pattern(len, seed)).unwrap();
        let d = gpu.export(block, &[child.pid()]).unwrap().as_bytes().to_vec();
        child.send(&d);
        child.expect(CHILD_DONE);
        // The child's release thread gives the hold back once the work it
        // ordered on its stream is done; the child is still alive.
        let start = Instant::now();
        while gpu.stats() != BackendStats::default() {
            assert!(start.elapsed() < Duration::from_secs(5), "round {round}: the child's hold was not given back");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.finish();
    }
}

#[test]
fn cuda_block_imported_in_its_own_process_is_not_ipc_opened() {
    if !gpu_or_skip("cuda within a process") {
        return;
    }
    let writer = CudaBackend::new(0, POOL_CAPACITY).unwrap();
    let other = CudaBackend::new(0, POOL_CAPACITY).unwrap();
    let (len, seed) = (70_001, 11);
    let mut block = writer.allocate(len, None).unwrap();
    let ptr = block.device_view().expect("device memory has a device view").ptr;
    block.set_write_stream(0);
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    let me = std::process::id();
    let d = writer.export(block, &[me, me]).unwrap().as_bytes().to_vec();
    // CUDA refuses to IPC-open an allocation in the process that made it (and
    // so does the simulated driver): every backend of this process must reach
    // the block through its own pointer.
    for (who, backend) in [("the writer", &writer), ("another backend of this process", &other)] {
        let buf = backend.import(&empty_frame(), &d).unwrap_or_else(|e| panic!("{who}: import: {e}"));
        assert_eq!(buf.device_view().unwrap().ptr, ptr, "{who}: the block's own pointer");
        buf.order_on_stream(0).unwrap();
        let mut out = vec![0; len];
        buf.copy_to_host(&mut out).unwrap();
        assert!(out == pattern(len, seed), "{who}: read other bytes");
        drop(buf);
    }
    let start = Instant::now();
    while writer.stats() != BackendStats::default() {
        assert!(start.elapsed() < Duration::from_secs(5), "the holds were not given back");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `len` bytes of a fresh memfd, mapped shared (as iceoryx2's segments are),
/// at `at` (replacing what is mapped there) or anywhere.
fn map_shared(len: usize, at: Option<*mut u8>) -> *mut u8 {
    // SAFETY: plain system calls on a descriptor of our own; a fixed address
    // is only ever one of our own mappings, of this length, being replaced.
    unsafe {
        let fd = libc::memfd_create(c"freight-test-frame".as_ptr(), libc::MFD_CLOEXEC);
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0);
        let (hint, fixed) = at.map_or((std::ptr::null_mut(), 0), |p| (p.cast(), libc::MAP_FIXED));
        let p = libc::mmap(hint, len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | fixed, fd, 0);
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        libc::close(fd);
        p.cast()
    }
}

/// `len` bytes of a fresh memfd mapped twice: writable, as a publisher maps
/// its segment, and read-only, as iceoryx2's subscribers map it.
fn map_writer_and_reader(len: usize) -> (MappedFrame, MappedFrame) {
    let writer = map_shared(len, None);
    let path = format!("/proc/self/map_files/{:x}-{:x}", writer as usize, writer as usize + len);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // SAFETY: a new read-only mapping of a file of `len` bytes.
    let reader = unsafe {
        use std::os::fd::AsRawFd;
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    assert_ne!(reader, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
    (MappedFrame { ptr: writer, len, owned: true }, MappedFrame { ptr: reader.cast(), len, owned: true })
}

/// A frame in a shared mapping; unmapped on drop when it owns the mapping.
#[derive(Debug)]
struct MappedFrame {
    ptr: *mut u8,
    len: usize,
    owned: bool,
}

// SAFETY: the frame's bytes are only read through `bytes` once built.
unsafe impl Send for MappedFrame {}
unsafe impl Sync for MappedFrame {}

impl MappedFrame {
    fn new(len: usize) -> MappedFrame {
        MappedFrame { ptr: map_shared(len.max(1), None), len, owned: true }
    }
}

impl freight_backend::FrameMemory for MappedFrame {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping holds `len` bytes and outlives the frame.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn is_process_local(&self) -> bool {
        false
    }
}

impl Drop for MappedFrame {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the frame owns the mapping and nothing reads it any more.
            unsafe { libc::munmap(self.ptr.cast(), self.len.max(1)) };
        }
    }
}

struct MappedFrameBuilder(Option<MappedFrame>);

// SAFETY: the mapping is made once, exclusively the builder's until
// `finish`, which hands over the same mapping.
unsafe impl freight_backend::conformance::FrameBuilder for MappedFrameBuilder {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.as_ref().unwrap().ptr
    }
    fn finish(mut self: Box<Self>) -> Frame {
        Arc::new(self.0.take().unwrap())
    }
    fn is_process_local(&self) -> bool {
        false
    }
}

/// `cuda-host` with frames in shared mappings, which it registers.
struct MappedHarness(CudaHostBackend);

impl freight_backend::conformance::Harness for MappedHarness {
    fn backend(&self) -> &dyn Backend {
        &self.0
    }
    fn frame_builder(&self, len: usize) -> Box<dyn freight_backend::conformance::FrameBuilder> {
        Box::new(MappedFrameBuilder(Some(MappedFrame::new(len))))
    }
    fn label(&self) -> String {
        "cuda-host over shared mappings".into()
    }
}

/// Publishes `len` bytes of the pattern of `seed` at the start of `frame`'s
/// bytes with `backend`, imports them, and checks the buffer.
fn cuda_host_round_trip(backend: &CudaHostBackend, frame: MappedFrame, seed: u8) {
    let len = frame.len;
    let slot = freight_backend::FrameSlot { offset: 0, ptr: frame.ptr, len, process_local: false };
    let mut block = backend.allocate(len, Some(slot)).unwrap();
    assert!(block.device_view().is_some(), "no device view: {:?}", backend.last_registration_error());
    block.write_from_host(0, &pattern(len, seed)).unwrap();
    block.set_write_stream(0);
    let d = backend.export(block, &[std::process::id()]).unwrap();
    let frame: Frame = Arc::new(frame);
    let buf = backend.import(&frame, d.as_bytes()).unwrap();
    let view = buf.device_view().unwrap_or_else(|| panic!("no device view: {:?}", backend.last_registration_error()));
    assert!(view.host_mapped);
    assert!(buf.host_bytes().unwrap() == pattern(len, seed));
}

freight_backend::conformance_tests!(
    cuda_host_over_shared_mappings,
    MappedHarness(CudaHostBackend::new(0).unwrap()),
    if gpu_or_skip("cuda-host over shared mappings"),
    after |h: &MappedHarness| assert_eq!(h.0.last_registration_error(), None)
);

#[test]
fn cuda_host_maps_a_shared_mapping_for_the_device() {
    if !gpu_or_skip("cuda-host over shared mappings") {
        return;
    }
    let backend = CudaHostBackend::new(0).unwrap();
    cuda_host_round_trip(&backend, MappedFrame::new(4096), 3);
    assert_eq!(backend.last_registration_error(), None);
}

/// A subscriber's mapping of the publisher's segment is read-only, which the
/// driver registers only when told so (else CUDA_ERROR_INVALID_VALUE, seen
/// on an H200): the reader still gets a device view of the bytes.
#[test]
fn cuda_host_maps_a_read_only_mapping_as_a_subscriber_has() {
    if !gpu_or_skip("cuda-host read-only mapping") {
        return;
    }
    let backend = CudaHostBackend::new(0).unwrap();
    let len = 1 << 16;
    let (writer, reader) = map_writer_and_reader(len);
    let slot = freight_backend::FrameSlot { offset: 0, ptr: writer.ptr, len, process_local: false };
    let mut block = backend.allocate(len, Some(slot)).unwrap();
    block.write_from_host(0, &pattern(len, 4)).unwrap();
    let d = backend.export(block, &[std::process::id()]).unwrap();
    let frame: Frame = Arc::new(reader);
    let buf = backend.import(&frame, d.as_bytes()).unwrap();
    let view = buf.device_view().unwrap_or_else(|| panic!("no device view: {:?}", backend.last_registration_error()));
    assert!(view.host_mapped);
    assert!(buf.host_bytes().unwrap() == pattern(len, 4));
    assert_eq!(backend.last_registration_error(), None);
    drop((buf, writer));
}

/// Private memory is refused for registration each time it is looked at, not
/// remembered: a segment mapped where freed heap memory was (a large frame
/// freed, then iceoryx2 mapping a segment) must not inherit its refusal. Seen
/// on an H200 with the conformance tests in parallel threads.
#[test]
fn cuda_host_segment_mapped_where_private_memory_was_is_registered() {
    if !gpu_or_skip("cuda-host segment over freed private memory") {
        return;
    }
    let backend = CudaHostBackend::new(0).unwrap();
    let len = 1 << 20;
    // SAFETY: a new private anonymous mapping of our own.
    let private = unsafe {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)
    };
    assert_ne!(private, libc::MAP_FAILED);
    let slot = freight_backend::FrameSlot { offset: 0, ptr: private.cast(), len, process_local: false };
    assert!(backend.allocate(len, Some(slot)).unwrap().device_view().is_none(), "private memory has no device view");
    // The segment replaces the private mapping in one fixed mmap. Unmapping it
    // first would free the range for another test thread's next mapping, which
    // the fixed mmap would then overwrite (a SIGSEGV in CI).
    let segment = MappedFrame { ptr: map_shared(len, Some(private.cast())), len, owned: true };
    cuda_host_round_trip(&backend, segment, 5);
}

/// The driver maps registered memory for the GPU until it is unregistered:
/// a segment registered in place and then unmapped (by iceoryx2, which does
/// not tell freight) gave its address back to the kernel, and the next CUDA
/// allocation placed there failed with CUDA_ERROR_ALREADY_MAPPED (seen on an
/// H200, in torch's allocator).
#[test]
fn cuda_allocations_succeed_after_a_registered_segment_is_unmapped() {
    if !gpu_or_skip("cuda allocation after a registered segment went away") {
        return;
    }
    let host = CudaHostBackend::new(0).unwrap();
    // Registers the frame's mapping, then drops (unmaps) the frame.
    cuda_host_round_trip(&host, MappedFrame::new(1 << 20), 6);
    let pool = CudaBackend::new(0, 4 << 20).unwrap();
    let block = pool.allocate(1 << 20, None);
    assert!(block.is_ok(), "allocating device memory: {:?}", block.err());
}

#[test]
fn cuda_host_mapping_replaced_at_its_address_is_registered_again_from_any_thread() {
    if !gpu_or_skip("cuda-host mapping replaced") {
        return;
    }
    let backend = CudaHostBackend::new(0).unwrap();
    let len = 1 << 16;
    let at = map_shared(len, None);
    let frame = |owned| MappedFrame { ptr: at, len, owned };
    cuda_host_round_trip(&backend, frame(false), 1);
    // Another segment replaces the registered one at the same address; the
    // first thread to see it, here one with no CUDA context current yet,
    // unregisters the old one and registers the new one.
    map_shared(len, Some(at));
    let replaced = frame(false);
    std::thread::scope(|s| s.spawn(|| cuda_host_round_trip(&backend, replaced, 2)).join().unwrap());
    map_shared(len, Some(at));
    cuda_host_round_trip(&backend, frame(true), 3);
}

/// The GPU-gated conformance modules and tests, run again by
/// `gpu_tests_run_on_the_simulated_cuda_driver`.
const GPU_MODULES: &[&str] =
    &["cuda_over_shared_frames", "cuda_host_over_shared_frames", "cuda_host_over_shared_mappings"];
const GPU_TESTS: &[&str] = &[
    "cuda_helpers_agree_with_the_backend",
    "cuda_block_read_by_another_process_returns_to_the_pool",
    "cuda_block_ordered_on_a_stream_by_another_process_returns_after_its_work",
    "cuda_block_imported_in_its_own_process_is_not_ipc_opened",
    "cuda_host_maps_a_shared_mapping_for_the_device",
    "cuda_host_maps_a_read_only_mapping_as_a_subscriber_has",
    "cuda_host_segment_mapped_where_private_memory_was_is_registered",
    "cuda_allocations_succeed_after_a_registered_segment_is_unmapped",
    "cuda_host_mapping_replaced_at_its_address_is_registered_again_from_any_thread",
];

/// Runs the GPU-gated tests in a child of this test binary against the
/// simulated CUDA driver, and checks that each ran (was not skipped) and
/// passed, and that no driver call failed for want of a current context.
/// The simulation checks the backends' logic across processes; it cannot
/// check stream order or memory placement, which only a real GPU run does.
#[test]
fn gpu_tests_run_on_the_simulated_cuda_driver() {
    if std::env::var_os(sim_cuda::EXPECTED).is_some() {
        return; // the child run itself
    }
    let Some(sim) = sim_cuda::SimDriver::build() else {
        return;
    };
    // Filters by name: a module's name selects all its tests.
    let modules = GPU_MODULES.iter().map(|m| format!("{m}::"));
    let args: Vec<String> = modules.chain(GPU_TESTS.iter().map(|t| t.to_string())).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sim.run(&std::env::current_exe().unwrap(), &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!("driver in {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}", sim.dir().display());
    assert!(out.status.success(), "the GPU tests failed on the simulated driver: {}\n{report}", out.status);
    assert!(!stderr.contains("SKIPPED"), "a GPU test skipped on the simulated driver\n{report}");
    let checks = CHECKS.iter().map(|(check, _)| *check);
    let in_modules = GPU_MODULES.iter().flat_map(|m| checks.clone().map(move |c| format!("{m}::{c}")));
    for name in in_modules.chain(GPU_TESTS.iter().map(|t| t.to_string())) {
        assert!(stdout.contains(&format!("test {name} ... ok")), "{name} did not run and pass\n{report}");
    }
    assert!(
        !stderr.contains("CUDA_ERROR_INVALID_CONTEXT"),
        "a driver call was made without a current context (or IPC-opened a block of its own process)\n{report}"
    );
}

/// The child half of the tests above: does nothing unless run by them. Reads
/// one descriptor from stdin, imports it, checks the contents; then drops the
/// buffer (and checks that the descriptor no longer imports), drops it and
/// waits for stdin to close, or holds it until stdin closes (`order-drop`:
/// orders it on [`CHILD_STREAM`] first, drops it and waits for stdin to
/// close). In mode
/// `other-device` its backend is on another simulated device and the import
/// must be refused.
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
    // A pool of its own, unused.
    let device: Box<dyn Backend> = match (std::env::var(CHILD_BACKEND).as_deref(), mode.as_str()) {
        (Ok("cuda"), _) => Box::new(CudaBackend::new(0, 1 << 16).unwrap()),
        (_, "other-device") => {
            let other = FakeDeviceBackend::simulated_device_uuid("freight fake device 1");
            Box::new(FakeDeviceBackend::with_device(1 << 16, other).unwrap())
        }
        _ => Box::new(FakeDeviceBackend::new(1 << 16).unwrap()),
    };
    if mode == "other-device" {
        match device.import(&empty_frame(), &d) {
            Err(ImportError::Unreachable { reason, .. }) if reason.contains("device") => println!("{CHILD_REFUSED}"),
            other => panic!("import from another device gave {other:?}"),
        }
        std::io::stdin().read_to_string(&mut String::new()).expect("waiting for stdin to close");
        return;
    }
    let buf = device.import(&empty_frame(), &d).expect("child import");
    assert_eq!(buf.backend(), device.kind());
    assert_eq!(buf.len(), len);
    assert!(buf.host_bytes().is_none());
    let mut out = vec![0; len];
    buf.copy_to_host(&mut out).unwrap();
    assert!(out == pattern(len, seed), "the child read other bytes");
    if mode == "order-drop" {
        // The child's stream waits for the writer; the release thread waits
        // for the child's work on it before giving the hold back.
        assert_ne!(buf.device_view().expect("a device view").ptr, 0);
        buf.order_on_stream(CHILD_STREAM).expect("ordering on a stream");
    }
    if mode == "hold" {
        println!("{CHILD_HOLDS}");
        std::io::stdin().read_to_string(&mut String::new()).expect("waiting for stdin to close");
        return;
    }
    drop(buf);
    if device.kind() == BackendKind::FakeDevice {
        // The hold is gone: the descriptor no longer imports here either.
        // (A `cuda` hold goes back on the release thread, a moment later.)
        assert!(matches!(device.import(&empty_frame(), &d), Err(ImportError::Stale { .. })));
    }
    println!("{CHILD_DONE}");
    // `order-drop`: the hold goes back on the release thread, which must get
    // to it while this process lives (the writer then sees it given back,
    // not reclaimed from a dead reader).
    if mode == "drop-and-wait" || mode == "order-drop" {
        std::io::stdin().read_to_string(&mut String::new()).expect("waiting for stdin to close");
    }
}
