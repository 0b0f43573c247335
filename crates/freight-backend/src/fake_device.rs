//! `fake-device`: a simulated device, so that the device protocol can be
//! built and tested on any machine.
//!
//! It is the generic device pool (`device_pool/`: holds per reader process,
//! generations, size classes, idle blocks given back, dead readers reclaimed,
//! devices matched by UUID, opened blocks cached per allocation) over memory
//! that needs no driver: the data area of the pool's shared-memory file
//! (`/dev/shm/freight-fakedev-<uid>-<pid>-<random>`, mode 0600). A block's
//! "device memory" is a range of that area; the descriptor's handle is the
//! range's offset, which the reader checks against the pool's record, as a
//! CUDA reader would open an IPC handle.
//!
//! The CPU does not address the memory through the buffer:
//! [`BufferStorage::host_bytes`](crate::BufferStorage::host_bytes) is `None`;
//! the bytes are reached with `copy_to_host` (the imitation of a
//! device-to-host copy) and written with
//! [`WritableBlock::write_from_host`](crate::WritableBlock::write_from_host).
//!
//! Each backend simulates one device, named by a UUID
//! ([`FakeDeviceBackend::DEFAULT_DEVICE_UUID`] unless given): a descriptor
//! from a backend of another simulated device is refused with
//! [`ImportError::Unreachable`](crate::ImportError::Unreachable), as a CUDA
//! block on another GPU is.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::device_pool::{BlockView, DevicePool, Mapping, PoolMemory, PoolOptions};
use crate::{AllocError, BackendKind};

pub use crate::device_pool::READER_SLOTS;

/// Free ranges of the data area, `(offset, len)`, sorted and coalesced.
#[derive(Debug, Default)]
struct Ranges {
    free: Vec<(u64, u64)>,
}

impl Ranges {
    fn take_range(&mut self, len: u64) -> Option<u64> {
        let i = self.free.iter().position(|&(_, l)| l >= len)?;
        let (offset, l) = self.free[i];
        if l == len {
            self.free.remove(i);
        } else {
            self.free[i] = (offset + len, l - len);
        }
        Some(offset)
    }

    fn give_range(&mut self, offset: u64, len: u64) {
        let i = self.free.partition_point(|&(o, _)| o < offset);
        self.free.insert(i, (offset, len));
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }
}

fn lock(ranges: &Mutex<Ranges>) -> MutexGuard<'_, Ranges> {
    ranges.lock().unwrap_or_else(|e| e.into_inner())
}

/// The simulated device memory: ranges of the pool file's data area.
#[derive(Debug)]
pub(crate) struct FakeMemory {
    device: [u8; 16],
    ranges: Arc<Mutex<Ranges>>,
}

impl FakeMemory {
    fn new(capacity: usize, device: [u8; 16]) -> Self {
        FakeMemory { device, ranges: Arc::new(Mutex::new(Ranges { free: vec![(0, capacity as u64)] })) }
    }
}

/// A range of the data area, given back when dropped (the block is trimmed).
#[derive(Debug)]
pub(crate) struct FakeBlock {
    offset: u64,
    len: u64,
    ranges: Arc<Mutex<Ranges>>,
}

impl Drop for FakeBlock {
    fn drop(&mut self) {
        lock(&self.ranges).give_range(self.offset, self.len);
    }
}

/// A block as a reader reaches it: its range of a mapped pool file.
pub(crate) struct FakeView {
    map: Arc<Mapping>,
    offset: u64,
}

impl BlockView for FakeView {
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String> {
        self.map.copy_out(self.offset, dst);
        Ok(())
    }
}

impl PoolMemory for FakeMemory {
    const KIND: BackendKind = BackendKind::FakeDevice;
    const NAME_PREFIX: &'static str = "freight-fakedev-";
    const MAGIC: [u8; 4] = *b"FRFD";
    /// The block's offset in the data area.
    const HANDLE_LEN: usize = 8;
    const DATA_IN_FILE: bool = true;
    /// Backends of one process open each other's pools through their files,
    /// so that tests of the file path need only one process.
    const SHARE_WITHIN_PROCESS: bool = false;

    type Block = FakeBlock;
    type View = FakeView;

    fn device_uuid(&self) -> [u8; 16] {
        self.device
    }

    fn carve(&self, _map: &Arc<Mapping>, slot_len: u64) -> Result<Option<(FakeBlock, u64)>, String> {
        let Some(offset) = lock(&self.ranges).take_range(slot_len) else {
            return Ok(None);
        };
        Ok(Some((FakeBlock { offset, len: slot_len, ranges: self.ranges.clone() }, offset)))
    }

    fn write(&self, map: &Mapping, block: &FakeBlock, offset: usize, src: &[u8]) -> Result<(), String> {
        map.copy_in(block.offset + offset as u64, src);
        Ok(())
    }

    fn block_device_view(&self, _block: &FakeBlock) -> Option<freight_msg::DeviceView> {
        // No device can address simulated memory.
        None
    }

    fn seal(&self, _block: &FakeBlock, _write_stream: Option<u64>) -> Result<(), String> {
        // The CPU wrote the memory: nothing to wait for.
        Ok(())
    }

    fn handle(&self, block: &FakeBlock, out: &mut [u8]) {
        out.copy_from_slice(&block.offset.to_le_bytes());
    }

    fn local_view(&self, map: &Arc<Mapping>, block: &Arc<FakeBlock>) -> FakeView {
        FakeView { map: map.clone(), offset: block.offset }
    }

    fn open(&self, map: &Arc<Mapping>, location: u64, slot_len: u64, handle: &[u8]) -> Result<FakeView, String> {
        let mut offset = [0u8; 8];
        offset.copy_from_slice(handle);
        let offset = u64::from_le_bytes(offset);
        if offset != location {
            return Err(format!("handle names offset {offset}, the block lies at {location}"));
        }
        if !map.data_holds(offset, slot_len) {
            return Err(format!("{slot_len} bytes at {offset} lie outside the pool's data area"));
        }
        Ok(FakeView { map: map.clone(), offset })
    }
}

/// The `fake-device` backend: a pool of simulated device memory.
///
/// ```
/// use std::sync::Arc;
/// use freight_backend::{Backend, FakeDeviceBackend, Frame, HeapFrame};
///
/// let device = FakeDeviceBackend::new(1 << 20).unwrap();
/// let mut block = device.allocate(5, None).unwrap();
/// assert!(block.host_mut().is_none()); // device memory: no in-place CPU writes
/// block.write_from_host(0, b"hello").unwrap();
/// let descriptor = device.export(block, &[std::process::id()]).unwrap();
///
/// // The reader's side: the frame does not carry the bytes.
/// let frame: Frame = Arc::new(HeapFrame(Vec::new()));
/// let buffer = device.import(&frame, descriptor.as_bytes()).unwrap();
/// assert!(buffer.host_bytes().is_none());
/// let mut out = [0u8; 5];
/// buffer.copy_to_host(&mut out).unwrap();
/// assert_eq!(&out, b"hello");
///
/// drop(buffer); // the last hold: the block returns to the pool
/// assert_eq!(device.stats().blocks_in_use, 0);
/// assert_eq!(device.device_uuid(), Some(FakeDeviceBackend::DEFAULT_DEVICE_UUID));
/// ```
#[derive(Debug)]
pub struct FakeDeviceBackend {
    pool: DevicePool<FakeMemory>,
}

impl FakeDeviceBackend {
    /// Block records of a pool made by [`FakeDeviceBackend::new`]: at most this
    /// many blocks are in use or idle at once.
    pub const DEFAULT_MAX_BLOCKS: u32 = PoolOptions::DEFAULT_MAX_BLOCKS;

    /// The UUID of the simulated device of [`FakeDeviceBackend::new`]:
    /// [`simulated_device_uuid`](Self::simulated_device_uuid)`("freight fake device 0")`.
    pub const DEFAULT_DEVICE_UUID: [u8; 16] = Self::simulated_device_uuid("freight fake device 0");

    /// A fixed UUID for a simulated device named `name` (two FNV-1a hashes of
    /// the name, marked as an RFC 9562 version 8 UUID), so that tests can name
    /// several devices.
    ///
    /// ```
    /// use freight_backend::FakeDeviceBackend;
    /// let other = FakeDeviceBackend::simulated_device_uuid("freight fake device 1");
    /// assert_ne!(other, FakeDeviceBackend::DEFAULT_DEVICE_UUID);
    /// ```
    pub const fn simulated_device_uuid(name: &str) -> [u8; 16] {
        const fn fnv1a(bytes: &[u8], basis: u64) -> u64 {
            let mut h = basis;
            let mut i = 0;
            while i < bytes.len() {
                h ^= bytes[i] as u64;
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
                i += 1;
            }
            h
        }
        let hi = fnv1a(name.as_bytes(), 0xcbf2_9ce4_8422_2325).to_be_bytes();
        let lo = fnv1a(name.as_bytes(), 0x6c62_272e_07bb_0142).to_be_bytes();
        let mut u = [0u8; 16];
        let mut i = 0;
        while i < 8 {
            u[i] = hi[i];
            u[8 + i] = lo[i];
            i += 1;
        }
        u[6] = (u[6] & 0x0f) | 0x80;
        u[8] = (u[8] & 0x3f) | 0x80;
        u
    }

    /// Creates a pool of `capacity` bytes of "device memory" with
    /// [`DEFAULT_MAX_BLOCKS`](Self::DEFAULT_MAX_BLOCKS) block records, on the
    /// device [`DEFAULT_DEVICE_UUID`](Self::DEFAULT_DEVICE_UUID).
    pub fn new(capacity: usize) -> Result<Self, AllocError> {
        Self::with_options(PoolOptions::new(capacity), Self::DEFAULT_DEVICE_UUID)
    }

    /// Creates a pool of `capacity` bytes with room for `max_blocks` blocks.
    pub fn with_max_blocks(capacity: usize, max_blocks: u32) -> Result<Self, AllocError> {
        Self::with_options(PoolOptions::new(capacity).max_blocks(max_blocks), Self::DEFAULT_DEVICE_UUID)
    }

    /// Creates a pool of `capacity` bytes on the simulated device `uuid`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use freight_backend::{Backend, FakeDeviceBackend, Frame, HeapFrame, ImportError};
    ///
    /// let gpu1 = FakeDeviceBackend::simulated_device_uuid("gpu 1");
    /// let writer = FakeDeviceBackend::with_device(1 << 20, gpu1).unwrap();
    /// let reader = FakeDeviceBackend::new(1 << 20).unwrap(); // another device
    /// let block = writer.allocate(16, None).unwrap();
    /// let descriptor = writer.export(block, &[std::process::id()]).unwrap();
    /// let frame: Frame = Arc::new(HeapFrame(Vec::new()));
    /// let refused = reader.import(&frame, descriptor.as_bytes());
    /// assert!(matches!(refused, Err(ImportError::Unreachable { .. })));
    /// ```
    pub fn with_device(capacity: usize, uuid: [u8; 16]) -> Result<Self, AllocError> {
        Self::with_options(PoolOptions::new(capacity), uuid)
    }

    /// Creates a pool sized and timed by `options`, on the simulated device `uuid`.
    pub fn with_options(options: PoolOptions, uuid: [u8; 16]) -> Result<Self, AllocError> {
        let memory = FakeMemory::new(options.capacity, uuid);
        Ok(FakeDeviceBackend { pool: DevicePool::new(memory, options)? })
    }

    /// Bytes of "device memory" in the pool.
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// The pool's name, as descriptors carry it.
    pub fn pool_name(&self) -> &str {
        self.pool.name()
    }

    /// The pool's shared-memory file.
    pub fn pool_path(&self) -> &Path {
        self.pool.path()
    }

    /// Blocks that keep memory while lent to nobody (ready for reuse), after
    /// giving back the memory of those idle for the pool's idle time.
    pub fn idle_blocks(&self) -> usize {
        self.pool.idle_blocks()
    }
}

crate::device_pool::backend_over_pool!(FakeDeviceBackend);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::device_pool::{decode, descriptor_len, encode, Handle};
    use crate::HeapFrame;
    use crate::{Backend, BackendStats, BlockMut, Descriptor, Frame, ImportError};

    fn empty_frame() -> Frame {
        Arc::new(HeapFrame(Vec::new()))
    }

    #[test]
    fn descriptors_round_trip() {
        let name = "freight-fakedev-1000-42-0123456789abcdef";
        let h = Handle {
            name,
            index: 7,
            generation: 1 << 40,
            len: 12345,
            serial: 99,
            device: FakeDeviceBackend::DEFAULT_DEVICE_UUID,
            handle: &[1, 2, 3, 4, 5, 6, 7, 8],
        };
        let d = encode::<FakeMemory>(&h);
        assert_eq!(d.len(), descriptor_len::<FakeMemory>());
        assert_eq!(decode::<FakeMemory>(&d).unwrap(), h);
    }

    #[test]
    fn free_ranges_coalesce() {
        let mut a = Ranges { free: vec![(0, 100)] };
        let x = a.take_range(10).unwrap();
        let y = a.take_range(20).unwrap();
        let z = a.take_range(30).unwrap();
        assert_eq!((x, y, z), (0, 10, 30));
        assert_eq!(a.take_range(41), None);
        a.give_range(x, 10);
        a.give_range(z, 30);
        assert_eq!(a.free, vec![(0, 10), (30, 70)]);
        a.give_range(y, 20);
        assert_eq!(a.free, vec![(0, 100)]);
    }

    #[test]
    fn the_default_device_uuid_is_fixed_and_marked_as_a_uuid() {
        let u = FakeDeviceBackend::DEFAULT_DEVICE_UUID;
        assert_eq!(u, FakeDeviceBackend::simulated_device_uuid("freight fake device 0"));
        assert_eq!(u[6] >> 4, 8, "version 8");
        assert_eq!(u[8] >> 6, 0b10, "RFC variant");
        assert_eq!(FakeDeviceBackend::new(4096).unwrap().device_uuid(), Some(u));
    }

    #[test]
    fn idle_blocks_are_trimmed_for_another_class() {
        let d = FakeDeviceBackend::new(4096).unwrap();
        let small: Vec<BlockMut> = (0..4).map(|_| d.allocate(1000, None).unwrap()).collect();
        assert!(matches!(d.allocate(1, None), Err(AllocError::Exhausted { .. })));
        drop(small);
        assert_eq!(d.stats(), BackendStats::default());
        assert_eq!(d.idle_blocks(), 4);
        // Four idle 1 KiB blocks fill the pool; a 4 KiB block needs them trimmed.
        let big = d.allocate(4096, None).unwrap();
        assert_eq!(d.stats().bytes_in_use, 4096);
        assert_eq!(d.idle_blocks(), 0);
        drop(big);
    }

    #[test]
    fn idle_blocks_are_given_back_after_the_idle_time_and_reused_before() {
        let idle = Duration::from_millis(100);
        let options = PoolOptions::new(1 << 20).idle_time(idle);
        let d = FakeDeviceBackend::with_options(options, FakeDeviceBackend::DEFAULT_DEVICE_UUID).unwrap();
        let first = d.export(d.allocate(1000, None).unwrap(), &[]).unwrap();
        assert_eq!(d.idle_blocks(), 1, "a block exported to nobody is idle");
        // Reused within the idle time: the same block, a new generation.
        let second = d.export(d.allocate(1000, None).unwrap(), &[]).unwrap();
        assert_eq!(decode::<FakeMemory>(first.as_bytes()).unwrap().index, 0);
        assert_eq!(decode::<FakeMemory>(second.as_bytes()).unwrap().index, 0);
        assert_ne!(first, second);
        assert_eq!(d.idle_blocks(), 1);
        std::thread::sleep(idle + Duration::from_millis(20));
        assert_eq!(d.idle_blocks(), 0, "the block idle for the idle time kept its memory");
        // Trimming happens in `stats` too, and a fresh allocation gets a new serial.
        let third = d.export(d.allocate(1000, None).unwrap(), &[]).unwrap();
        std::thread::sleep(idle + Duration::from_millis(20));
        assert_eq!(d.stats(), BackendStats::default());
        assert_eq!(d.idle_blocks(), 0);
        let serial = |x: &Descriptor| decode::<FakeMemory>(x.as_bytes()).unwrap().serial;
        assert_ne!(serial(&second), serial(&third), "memory given back and carved again is a new allocation");
    }

    #[test]
    fn a_block_open_in_a_reader_is_not_given_back_until_the_reader_closes_it() {
        let idle = Duration::from_millis(50);
        let options = PoolOptions::new(1 << 20).idle_time(idle);
        let owner = FakeDeviceBackend::with_options(options, FakeDeviceBackend::DEFAULT_DEVICE_UUID).unwrap();
        let reader = FakeDeviceBackend::new(4096).unwrap();
        let me = std::process::id();
        let d = owner.export(owner.allocate(100, None).unwrap(), &[me]).unwrap();
        drop(reader.import(&empty_frame(), d.as_bytes()).unwrap());
        assert_eq!(owner.idle_blocks(), 1, "the block is idle from now");
        // The reader's cache keeps the block open: idle, but not given back.
        std::thread::sleep(idle + Duration::from_millis(20));
        assert_eq!(owner.idle_blocks(), 1, "a block a reader has open was given back");
        // On its next import the reader closes the block its creator wants back.
        let d2 = owner.export(owner.allocate(5000, None).unwrap(), &[me]).unwrap();
        drop(reader.import(&empty_frame(), d2.as_bytes()).unwrap());
        assert_eq!(owner.idle_blocks(), 1, "the first block, closed by the reader, was given back");
        std::thread::sleep(idle + Duration::from_millis(20));
        assert_eq!(owner.idle_blocks(), 1, "the second block, open in the reader, was given back");
        // A reader that imports the same allocation again uses its cached opening.
        let d3 = owner.export(owner.allocate(5000, None).unwrap(), &[me]).unwrap();
        assert_eq!(
            decode::<FakeMemory>(d3.as_bytes()).unwrap().serial,
            decode::<FakeMemory>(d2.as_bytes()).unwrap().serial
        );
        drop(reader.import(&empty_frame(), d3.as_bytes()).unwrap());
        drop(reader);
        std::thread::sleep(idle + Duration::from_millis(20));
        assert_eq!(owner.idle_blocks(), 0, "the reader's openings were closed with it");
    }

    #[test]
    fn a_dropped_pool_keeps_the_memory_of_a_block_a_reader_has_open_until_the_reader_closes_it() {
        const CAPACITY: u64 = 1 << 20;
        let owner = FakeDeviceBackend::new(CAPACITY as usize).unwrap();
        let reader = FakeDeviceBackend::new(4096).unwrap();
        let me = std::process::id();
        let d = owner.export(owner.allocate(100, None).unwrap(), &[me]).unwrap();
        drop(reader.import(&empty_frame(), d.as_bytes()).unwrap());
        // The reader's cache keeps the block open; its creator drops the pool.
        let ranges = owner.pool.memory().ranges.clone();
        let all_free = || lock(&ranges).free == [(0, CAPACITY)];
        drop(owner);
        std::thread::sleep(Duration::from_millis(300));
        assert!(!all_free(), "memory a reader has open was freed with its pool");
        // The reader forgets the closed pool's blocks at its next import, and
        // the memory goes back.
        let other = FakeDeviceBackend::new(4096).unwrap();
        let d2 = other.export(other.allocate(64, None).unwrap(), &[me]).unwrap();
        drop(reader.import(&empty_frame(), d2.as_bytes()).unwrap());
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !all_free() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(all_free(), "the block's memory was not given back after its reader closed it");
    }

    #[test]
    fn a_descriptor_of_another_device_is_unreachable_and_names_both() {
        let other = FakeDeviceBackend::simulated_device_uuid("freight fake device 1");
        let writer = FakeDeviceBackend::with_device(1 << 20, other).unwrap();
        let reader = FakeDeviceBackend::new(1 << 20).unwrap();
        let me = std::process::id();
        let d = writer.export(writer.allocate(64, None).unwrap(), &[me]).unwrap();
        match reader.import(&empty_frame(), d.as_bytes()) {
            Err(ImportError::Unreachable { backend: BackendKind::FakeDevice, reason }) => {
                let fmt = crate::device_pool::format_uuid;
                assert!(reason.contains(&fmt(&other)), "{reason}");
                assert!(reason.contains(&fmt(&FakeDeviceBackend::DEFAULT_DEVICE_UUID)), "{reason}");
            }
            other => panic!("import of another device's block gave {other:?}"),
        }
        // The hold is untouched: a reader on the right device still imports it.
        let same = FakeDeviceBackend::with_device(1 << 20, other).unwrap();
        drop(same.import(&empty_frame(), d.as_bytes()).unwrap());
        assert_eq!(writer.stats(), BackendStats::default());
    }

    #[test]
    fn a_descriptor_whose_device_differs_from_its_pool_is_refused() {
        let writer = FakeDeviceBackend::new(1 << 20).unwrap();
        let other = FakeDeviceBackend::simulated_device_uuid("freight fake device 1");
        let reader = FakeDeviceBackend::with_device(1 << 20, other).unwrap();
        let d = writer.export(writer.allocate(64, None).unwrap(), &[std::process::id()]).unwrap();
        let mut forged = d.as_bytes().to_vec();
        forged[40..56].copy_from_slice(&other);
        assert!(matches!(reader.import(&empty_frame(), &forged), Err(ImportError::Malformed { .. })));
        writer.release_unimported(d.as_bytes(), std::process::id()).unwrap();
    }

    #[test]
    fn a_dropping_reader_and_the_reclaiming_creator_release_a_hold_once() {
        let d = FakeDeviceBackend::new(1 << 20).unwrap();
        let dead = crate::conformance::dead_pid();
        for _ in 0..300 {
            let desc = d.export(d.allocate(64, None).unwrap(), &[dead, std::process::id()]).unwrap();
            // A buffer of the dead reader: as if imported before it died, or by
            // a process the creator takes for dead.
            let theirs = d.pool.import_as(desc.as_bytes(), dead).unwrap();
            let mine = d.import(&empty_frame(), desc.as_bytes()).unwrap();
            let start = std::sync::Barrier::new(2);
            let reclaimed = std::thread::scope(|s| {
                let creator = s.spawn(|| {
                    start.wait();
                    d.reclaim_dead_readers()
                });
                start.wait();
                drop(theirs);
                creator.join().unwrap()
            });
            assert!(reclaimed <= 1, "{reclaimed} holds reclaimed of one");
            assert_eq!(d.stats().blocks_in_use, 1, "the block was freed while this process holds it");
            drop(mine);
            assert_eq!(d.stats(), BackendStats::default());
        }
    }

    #[test]
    fn size_classes_are_powers_of_two_capped_at_capacity() {
        let d = FakeDeviceBackend::new(3000).unwrap();
        for (len, class) in [(0, 64), (65, 128), (2048, 2048), (2049, 3000), (3000, 3000)] {
            let before = d.stats().bytes_in_use;
            let block = d.allocate(len, None).unwrap();
            assert_eq!(d.stats().bytes_in_use - before, class, "size class of {len} bytes");
            drop(block);
        }
    }

    #[test]
    fn record_table_exhaustion_is_reported() {
        let d = FakeDeviceBackend::with_max_blocks(1 << 20, 2).unwrap();
        let _a = d.allocate(1, None).unwrap();
        let _b = d.allocate(1, None).unwrap();
        assert!(matches!(d.allocate(1, None), Err(AllocError::Exhausted { .. })));
    }
}
