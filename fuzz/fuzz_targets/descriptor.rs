//! Buffer descriptors, which come from another process inside a frame:
//! `Backend::import` (and `release_unimported`) of `cpu`, `shm` and
//! `fake-device` with arbitrary descriptor bytes.
//!
//! Input: `mode`, `param`, then the descriptor (or a mask, see below).
//!
//! | mode % 8 | what |
//! |---|---|
//! | 0 | `cpu` import over a heap frame of this process of `param` bytes |
//! | 1 | `cpu` import over a shared frame of `param` bytes (the copying path) |
//! | 2 | `shm` import over a shared frame of `param` bytes |
//! | 3 | `fake-device` import and release of the raw descriptor |
//! | 4 | `fake-device` import of a block just exported to this process, its descriptor XOR the mask |
//! | 5 | `fake-device` release of such a block: 4 bytes XOR this process id, then the mask |
//! | 6 | `fake-device` import from a hostile pool file: a valid header, records from the input |
//! | 7 | `fake-device` import from a hostile pool file that is the input, header included |
//!
//! A descriptor's pool name is an untrusted file name. The backend only opens
//! names of its own strict form (`freight-fakedev-<uid>-<pid>-<16 hex>`) in
//! its pool directory; on top of that, this target never hands over a name of
//! a pool file that exists but is not its own, so a run cannot touch the pool
//! of a live freight process of the same user (guessing its 64-bit random
//! suffix is hopeless anyway). The masked modes reach everything behind the
//! name check: staleness, block index, length, holds.
//!
//! The pool file a descriptor names is untrusted too: another process of the
//! same user wrote it. Modes 6 and 7 write one from the input (as this
//! process, mode 0600, under a pool name of this process) and import from it
//! with a fresh backend (a backend keeps every pool it opened).
//!
//! After each input every hold is given back, and the pool must have no
//! block in use: no descriptor can leak a hold or free one twice.
//!
//! With `FREIGHT_FUZZ_SEED_DIR` set, the target writes seeds there and exits.
#![no_main]

use std::sync::{Arc, OnceLock};

use freight_backend::{
    Backend, BackendStats, CpuBackend, FakeDeviceBackend, Frame, FrameMemory, HeapFrame, ShmBackend,
};
use libfuzzer_sys::fuzz_target;

/// The pool: small, created on first use, removed at exit.
const POOL_CAPACITY: usize = 64 * 1024;
const POOL_BLOCKS: u32 = 8;

/// Layout of a `fake-device` descriptor (see `encode` in `crates/freight-backend/src/device_pool/descriptor.rs`).
const FD_DESCRIPTOR_LEN: usize = 128;
const FD_NAME_AT: usize = 56;
const FD_DEVICE_AT: usize = 40;
const FD_HANDLE_AT: usize = 120;

fn device() -> &'static FakeDeviceBackend {
    static DEVICE: OnceLock<FakeDeviceBackend> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let d = FakeDeviceBackend::with_max_blocks(POOL_CAPACITY, POOL_BLOCKS).expect("creating the fuzz pool");
        extern "C" fn remove_pool() {
            if let Some(d) = DEVICE.get() {
                let _ = std::fs::remove_file(d.pool_path());
            }
        }
        // SAFETY: registers a function without arguments that only removes a file.
        unsafe { libc::atexit(remove_pool) };
        d
    })
}

#[derive(Debug)]
struct SharedFrame(Vec<u8>);

impl FrameMemory for SharedFrame {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn is_process_local(&self) -> bool {
        false
    }
}

fn frame_bytes(len: u8) -> Vec<u8> {
    (0..len).map(|i| i.wrapping_mul(31) ^ 0x5a).collect()
}

/// `cpu` / `shm`: what imports is exactly the region the descriptor names.
fn in_frame(backend: &dyn Backend, frame: Frame, d: &[u8]) {
    let bytes = frame.bytes();
    let expected = (d.len() == 16)
        .then(|| {
            let offset = u64::from_le_bytes(d[..8].try_into().unwrap());
            let len = u64::from_le_bytes(d[8..].try_into().unwrap());
            let end = offset.checked_add(len).filter(|e| *e <= bytes.len() as u64)?;
            Some(offset as usize..end as usize)
        })
        .flatten();
    match backend.import(&frame, d) {
        Ok(storage) => {
            let want = expected.expect("an import of a region outside the frame succeeded");
            assert_eq!(storage.backend(), backend.kind());
            assert_eq!(storage.host_bytes(), Some(&bytes[want]));
        }
        Err(e) => assert!(expected.is_none(), "a region inside the frame was refused: {e}"),
    }
    assert!(backend.release_unimported(d, 1).is_ok());
}

/// The pool a descriptor names, if it has the form of one.
fn named_pool(d: &[u8]) -> Option<&[u8]> {
    let n = usize::from(*d.get(5)?);
    (d.len() == FD_DESCRIPTOR_LEN && n <= FD_DESCRIPTOR_LEN - FD_NAME_AT).then(|| &d[FD_NAME_AT..FD_NAME_AT + n])
}

/// Whether the descriptor names an existing pool file that is not ours.
fn names_a_foreign_pool(dev: &FakeDeviceBackend, d: &[u8]) -> bool {
    let Some(name) = named_pool(d).and_then(|n| std::str::from_utf8(n).ok()) else {
        return false;
    };
    // Only a name with the pool prefix can pass the backend's check; others
    // are left to it (they are refused without touching the file system).
    if name == dev.pool_name() || !name.starts_with("freight-fakedev-") || name.contains(['/', '\0']) {
        return false;
    }
    let dir = dev.pool_path().parent().expect("the pool lives in a directory");
    std::fs::symlink_metadata(dir.join(name)).is_ok()
}

/// Imports `d` as this process; what imports must carry `content`.
fn device_import(dev: &FakeDeviceBackend, d: &[u8], content: Option<&[u8]>) {
    let frame: Frame = Arc::new(HeapFrame(Vec::new()));
    if let Ok(storage) = dev.import(&frame, d) {
        let content = content.expect("a descriptor of no exported block imported");
        assert!(storage.host_bytes().is_none(), "device memory has no host bytes");
        assert_eq!(storage.len(), content.len());
        let mut out = vec![0u8; storage.len()];
        storage.copy_to_host(&mut out).expect("copying an imported block");
        assert_eq!(out, content, "the imported block holds other bytes than were written");
    }
}

fn assert_pool_empty(dev: &FakeDeviceBackend) {
    assert_eq!(dev.stats(), BackendStats::default(), "a hold leaked or a block is still lent");
}

/// Exports a block to this process (`readers` holds), runs `f` with its
/// descriptor and content, then gives back every hold left.
fn with_exported_block(dev: &FakeDeviceBackend, len: usize, readers: usize, f: impl FnOnce(&[u8], &[u8])) {
    let content: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(13) ^ 0xa5).collect();
    let mut block = dev.allocate(len, None).expect("allocating in the fuzz pool");
    block.write_from_host(0, &content).expect("writing the block");
    let me = std::process::id();
    let descriptor = dev.export(block, &vec![me; readers]).expect("exporting the block");
    f(descriptor.as_bytes(), &content);
    for _ in 0..readers {
        let _ = dev.release_unimported(descriptor.as_bytes(), me);
    }
    assert_pool_empty(dev);
}

fn masked(descriptor: &[u8], mask: &[u8]) -> Vec<u8> {
    let mut d = descriptor.to_vec();
    for (i, m) in mask.iter().enumerate() {
        match d.get_mut(i) {
            Some(b) => *b ^= m,
            None => d.push(*m),
        }
    }
    d
}

/// Layout of a pool file (see `crates/freight-backend/src/device_pool/layout.rs`):
/// version 4, the device's UUID at 40 of the header, 8 bytes of handle per
/// block (`fake-device`: the block's offset), so records of 248 + 8 bytes.
const POOL_VERSION: u32 = 4;
const POOL_HEADER_LEN: usize = 64;
const POOL_DEVICE_AT: usize = 40;
const POOL_HANDLE_LEN_AT: usize = 56;
const HANDLE_LEN: usize = 8;
const RECORD_LEN: usize = 248 + HANDLE_LEN;
const RECORD_SERIAL_AT: usize = 40;
const RECORD_READERS_AT: usize = 56;
const RECORD_HANDLE_AT: usize = 248;
const READER_SLOTS: usize = 16;

/// The fields of a `fake-device` descriptor that name a block.
struct Names {
    index: u32,
    generation: u64,
    len: u64,
    serial: u64,
    handle: u64,
}

/// A `fake-device` descriptor of a block of pool `name` on `device`.
fn fake_descriptor(name: &str, device: [u8; 16], n: &Names) -> Vec<u8> {
    let mut d = vec![0u8; FD_DESCRIPTOR_LEN];
    d[..4].copy_from_slice(b"FRFD");
    d[4] = 2;
    d[5] = name.len() as u8;
    d[6..8].copy_from_slice(&(HANDLE_LEN as u16).to_le_bytes());
    d[8..12].copy_from_slice(&n.index.to_le_bytes());
    d[16..24].copy_from_slice(&n.generation.to_le_bytes());
    d[24..32].copy_from_slice(&n.len.to_le_bytes());
    d[32..40].copy_from_slice(&n.serial.to_le_bytes());
    d[FD_DEVICE_AT..FD_DEVICE_AT + 16].copy_from_slice(&device);
    d[FD_NAME_AT..FD_NAME_AT + name.len()].copy_from_slice(name.as_bytes());
    d[FD_HANDLE_AT..].copy_from_slice(&n.handle.to_le_bytes());
    d
}

/// A pool file header with `records` records and `capacity` bytes of data at 4096.
fn pool_header(f: &mut [u8], records: u32, capacity: u64, next_generation: u64, device: [u8; 16]) {
    f[0..8].copy_from_slice(b"FRFDPOOL");
    f[8..12].copy_from_slice(&POOL_VERSION.to_le_bytes());
    f[12..16].copy_from_slice(&records.to_le_bytes());
    f[16..24].copy_from_slice(&capacity.to_le_bytes());
    f[24..32].copy_from_slice(&4096u64.to_le_bytes()); // data offset
    f[32..40].copy_from_slice(&next_generation.to_le_bytes());
    f[POOL_DEVICE_AT..POOL_DEVICE_AT + 16].copy_from_slice(&device);
    f[POOL_HANDLE_LEN_AT..POOL_HANDLE_LEN_AT + 4].copy_from_slice(&(HANDLE_LEN as u32).to_le_bytes());
}

/// Makes the reader slots of a pool file name this process where the input
/// has process id 0, so that an input means the same in every run.
fn mark_readers(file: &mut [u8], records: usize, me: u32) {
    for r in 0..records {
        let record = POOL_HEADER_LEN + r * RECORD_LEN;
        if record >= file.len() {
            return;
        }
        for slot in 0..READER_SLOTS {
            let at = record + RECORD_READERS_AT + 8 * slot;
            if let Some(pid) = file.get_mut(at..at + 4) {
                pid.iter_mut().zip(me.to_le_bytes()).for_each(|(b, p)| *b ^= p);
            }
        }
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// XORs `v` into the little-endian integer of `N` bytes at `at`.
fn xor_at<const N: usize>(b: &mut [u8], at: usize, v: [u8; N]) {
    b[at..at + N].iter_mut().zip(v).for_each(|(b, v)| *b ^= v);
}

/// Modes 6 and 7: a pool file written by a hostile process, and a descriptor
/// naming it. `rest`: block index u32, generation u64, length u64, then the
/// whole file (mode 7), or (mode 6) the number of records and their bytes
/// under a valid header.
///
/// Mode 6 reads the input relative to a block exported to this process: the
/// record's state, holds and reader slots, and the descriptor's generation
/// and length, are XORed with the values that make the import succeed, so
/// that an input of zeros imports and the fuzzer spends its time on the
/// bounds (length, offset, size class, index) rather than on matching them.
/// In both modes the descriptor carries the allocation serial and handle of
/// the record it names (when the file has it) and the reader's device, so
/// that those checks pass where the file is consistent.
fn hostile_pool(assisted: bool, rest: &[u8]) {
    let Some((fields, body)) = rest.split_first_chunk::<20>() else { return };
    let index = u32::from_le_bytes(fields[..4].try_into().unwrap());
    let mut generation = u64_at(fields, 4);
    let mut len = u64_at(fields, 12);
    let me = std::process::id();
    let reader = FakeDeviceBackend::with_max_blocks(64, 1).expect("creating a reader's pool");
    let device = reader.device_uuid().expect("a fake device has a UUID");
    let file = if assisted {
        let Some((&records, body)) = body.split_first() else { return };
        let records = usize::from(records % 9);
        let mut f = vec![0u8; 8192];
        pool_header(&mut f, records as u32, 4096, 1, device);
        let area = &mut f[POOL_HEADER_LEN..POOL_HEADER_LEN + records * RECORD_LEN];
        let n = area.len().min(body.len());
        area[..n].copy_from_slice(&body[..n]);
        for r in 0..records {
            let at = POOL_HEADER_LEN + r * RECORD_LEN;
            xor_at(&mut f, at, 3u32.to_le_bytes()); // exported
            xor_at(&mut f, at + 4, 1u32.to_le_bytes()); // one hold
            let held = u64::from(me) | (1 << 32) | (u64_at(&f, at + 8) << 34);
            xor_at(&mut f, at + RECORD_READERS_AT, held.to_le_bytes());
        }
        if (index as usize) < records {
            let at = POOL_HEADER_LEN + index as usize * RECORD_LEN;
            generation ^= u64_at(&f, at + 8);
            len ^= u64_at(&f, at + 16);
        }
        for (i, b) in f[4096..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    } else {
        let mut f = body.to_vec();
        let records = f.get(12..16).map_or(0, |r| u32::from_le_bytes(r.try_into().unwrap()));
        mark_readers(&mut f, records as usize, me);
        f
    };
    // SAFETY: geteuid has no preconditions and touches no memory of ours.
    let uid = unsafe { libc::geteuid() };
    let name = format!("freight-fakedev-{uid}-{me}-00000000f022f022");
    let path = reader.pool_path().with_file_name(&name);
    let written = {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| {
                f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
                f.write_all(&file)
            })
    };
    written.expect("writing the hostile pool file");
    let record = POOL_HEADER_LEN + index as usize * RECORD_LEN;
    let field = |at: usize| file.get(record + at..record + at + 8).map_or(0, |b| u64_at(b, 0));
    let names = Names { index, generation, len, serial: field(RECORD_SERIAL_AT), handle: field(RECORD_HANDLE_AT) };
    let d = fake_descriptor(&name, device, &names);
    let frame: Frame = Arc::new(HeapFrame(Vec::new()));
    if let Ok(storage) = reader.import(&frame, &d) {
        assert_eq!(storage.len() as u64, len);
        let mut out = vec![0u8; storage.len()];
        storage.copy_to_host(&mut out).expect("copying a block of a hostile pool");
    }
    let _ = reader.release_unimported(&d, me);
    drop(reader);
    let _ = std::fs::remove_file(&path);
}

fn run(mode: u8, param: u8, rest: &[u8]) {
    match mode % 8 {
        0 => in_frame(&CpuBackend, Arc::new(HeapFrame(frame_bytes(param))), rest),
        1 => in_frame(&CpuBackend, Arc::new(SharedFrame(frame_bytes(param))), rest),
        2 => in_frame(&ShmBackend::default(), Arc::new(SharedFrame(frame_bytes(param))), rest),
        3 => {
            let dev = device();
            if names_a_foreign_pool(dev, rest) {
                return;
            }
            device_import(dev, rest, None);
            let _ = dev.release_unimported(rest, std::process::id());
            assert_pool_empty(dev);
        }
        4 => {
            let dev = device();
            let len = usize::from(param) * 97 % 4096;
            with_exported_block(dev, len, 1 + usize::from(param & 1), |descriptor, content| {
                let d = masked(descriptor, rest);
                if !names_a_foreign_pool(dev, &d) {
                    device_import(dev, &d, (d == descriptor).then_some(content));
                }
            });
        }
        5 => {
            let dev = device();
            let Some((pid_mask, mask)) = rest.split_first_chunk::<4>() else { return };
            let reader = std::process::id() ^ u32::from_le_bytes(*pid_mask);
            let len = usize::from(param) * 97 % 4096;
            with_exported_block(dev, len, 1 + usize::from(param & 1), |descriptor, _| {
                let d = masked(descriptor, mask);
                if !names_a_foreign_pool(dev, &d) {
                    let released = dev.release_unimported(&d, reader);
                    if released.is_ok() {
                        assert!(d == descriptor && reader == std::process::id(), "a hold released for another");
                    }
                }
            });
        }
        m => hostile_pool(m == 6, rest),
    }
}

/// A hostile pool whose block 0 (generation 5, 100 bytes at offset 0 in a
/// size class of 128) is exported to this process, and its descriptor: the
/// import succeeds.
fn hostile_seed(assisted: bool) -> Vec<u8> {
    let mut input = vec![if assisted { 6 } else { 7 }, 0];
    input.extend_from_slice(&0u32.to_le_bytes());
    let mut record = vec![0u8; RECORD_LEN];
    record[8..16].copy_from_slice(&5u64.to_le_bytes());
    record[16..24].copy_from_slice(&100u64.to_le_bytes());
    record[32..40].copy_from_slice(&128u64.to_le_bytes());
    if assisted {
        // Everything else is relative to a valid export (see `hostile_pool`).
        input.extend_from_slice(&[0; 16]);
        input.push(1); // one record
        input.extend_from_slice(&record);
    } else {
        input.extend_from_slice(&5u64.to_le_bytes());
        input.extend_from_slice(&100u64.to_le_bytes());
        record[0..4].copy_from_slice(&3u32.to_le_bytes()); // exported
        record[4..8].copy_from_slice(&1u32.to_le_bytes()); // one hold
                                                           // A hold of process 0 (this process, see `mark_readers`) at generation 5.
        let slot = (1u64 << 32) | (5u64 << 34);
        record[RECORD_READERS_AT..RECORD_READERS_AT + 8].copy_from_slice(&slot.to_le_bytes());
        let mut f = vec![0u8; 4096 + 256];
        let device = FakeDeviceBackend::DEFAULT_DEVICE_UUID;
        pool_header(&mut f, 1, 256, 6, device);
        f[POOL_HEADER_LEN..POOL_HEADER_LEN + RECORD_LEN].copy_from_slice(&record);
        input.extend_from_slice(&f);
    }
    input
}

fn write_seeds(dir: &std::path::Path) {
    let in_frame = |offset: u64, len: u64| [offset.to_le_bytes(), len.to_le_bytes()].concat();
    let names = Names { index: 3, generation: 9, len: 100, serial: 8, handle: 0 };
    let fake =
        fake_descriptor("freight-fakedev-1000-4242-0123456789abcdef", FakeDeviceBackend::DEFAULT_DEVICE_UUID, &names);
    let seeds: Vec<Vec<u8>> = vec![
        [&[0u8, 64][..], &in_frame(8, 16)].concat(),
        [&[1u8, 200][..], &in_frame(64, 136)].concat(),
        [&[2u8, 32][..], &in_frame(32, 0)].concat(),
        [&[3u8, 0][..], &fake].concat(),
        vec![4, 10],
        vec![4, 11, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        vec![5, 3, 0, 0, 0, 0],
        [&[5u8, 4, 0, 0, 0, 0][..], &[0; 16], &[1]].concat(),
        hostile_seed(true),
        hostile_seed(false),
    ];
    for (i, seed) in seeds.into_iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), seed).expect("writing a seed");
    }
}

fuzz_target!(
    init: {
        if let Some(dir) = std::env::var_os("FREIGHT_FUZZ_SEED_DIR") {
            std::fs::create_dir_all(&dir).expect("creating the seed directory");
            write_seeds(std::path::Path::new(&dir));
            std::process::exit(0);
        }
    },
    |data: &[u8]| {
        if let [mode, param, rest @ ..] = data {
            run(*mode, *param, rest);
        }
    }
);
