//! `cuda`: CUDA device memory in a pool, shared with other processes through
//! legacy CUDA IPC. The pool protocol is the generic device pool's
//! (`device_pool/`); this file is the memory under it.
//!
//! * A block is one `cuMemAlloc` allocation of its size class, with one IPC
//!   event (`CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING`); their IPC
//!   handles (`cuIpcGetMemHandle`, `cuIpcGetEventHandle`, 64 bytes each) are
//!   taken once, when the block is carved, and travel in every descriptor.
//! * `export` records the event on the writer's stream
//!   ([`WritableBlock::set_write_stream`](crate::WritableBlock::set_write_stream);
//!   the legacy default stream if none was named). No host synchronisation.
//! * A reader in another process opens the block (`cuIpcOpenMemHandle`) and
//!   the event (`cuIpcOpenEventHandle`) once per allocation of the block and
//!   keeps them; `order_on_stream(s)` is `cuStreamWaitEvent(s, event)`,
//!   `copy_to_host` waits for the event on the legacy default stream and
//!   copies (`cuMemcpyDtoH`). A reader in the creating process uses the
//!   block's own pointer and event: nothing is opened.
//! * Dropping a reader's buffer hands its hold to the release thread
//!   (`release.rs`), which gives it back once the reader's work on the last
//!   stream the buffer was ordered on is done.
//! * Idle blocks are freed (`cuMemFree`) after the pool's idle time, once no
//!   reader process has them open.

use std::sync::Arc;

use freight_msg::DeviceView;

use super::device::Device;
use super::driver::{self, Raw};
use super::{release, CudaError};
use crate::device_pool::{BlockView, DevicePool, Mapping, PoolMemory, PoolOptions};
use crate::{AllocError, BackendKind};

/// Bytes of an IPC handle (`CU_IPC_HANDLE_SIZE`).
const IPC_HANDLE_LEN: usize = 64;

/// Device memory of this process's device, for the pool.
#[derive(Debug)]
pub(crate) struct CudaMemory {
    device: Arc<Device>,
}

/// One carved block: its allocation, its IPC event, and their IPC handles.
#[derive(Debug)]
pub(crate) struct CudaBlock {
    device: Arc<Device>,
    ptr: u64,
    event: Raw,
    /// The memory's IPC handle, then the event's.
    handle: [u8; 2 * IPC_HANDLE_LEN],
}

impl CudaBlock {
    fn new(device: &Arc<Device>, len: u64) -> Result<Option<CudaBlock>, CudaError> {
        device.bind()?;
        // Size classes are capped at the capacity, a `usize`.
        let ptr = match driver::mem_alloc(len as usize) {
            Ok(ptr) => ptr,
            Err(e) if e.is("OUT_OF_MEMORY") => return Ok(None),
            Err(e) => return Err(e),
        };
        // From here on, dropping the block frees what was made.
        let mut block = CudaBlock { device: device.clone(), ptr, event: 0, handle: [0; 2 * IPC_HANDLE_LEN] };
        block.event = driver::event_create_interprocess()?;
        block.handle[..IPC_HANDLE_LEN].copy_from_slice(&driver::ipc_mem_handle(ptr)?);
        block.handle[IPC_HANDLE_LEN..].copy_from_slice(&driver::ipc_event_handle(block.event)?);
        Ok(Some(block))
    }
}

impl Drop for CudaBlock {
    /// Frees the allocation and its event: the pool trims the block only when
    /// no reader process has it open, and views of this process hold the block.
    fn drop(&mut self) {
        if self.device.bind().is_err() {
            return;
        }
        if self.event != 0 {
            // SAFETY: the event was created for this block and nothing else refers to it.
            let _ = unsafe { driver::event_destroy(self.event) };
        }
        // SAFETY: the allocation is this block's; the block is dropped once,
        // after every view of this process (which hold the block) is gone.
        let _ = unsafe { driver::mem_free(self.ptr) };
    }
}

/// A block as a reader reaches it: the creator's block in its own process,
/// or the block opened through IPC in another.
pub(crate) struct CudaView {
    device: Arc<Device>,
    ptr: u64,
    event: Raw,
    /// The creator's block, in the creating process (nothing to close).
    local: Option<Arc<CudaBlock>>,
}

impl Drop for CudaView {
    /// Closes what an IPC open opened.
    fn drop(&mut self) {
        if self.local.is_some() || self.device.bind().is_err() {
            return;
        }
        if self.event != 0 {
            // SAFETY: the event and the mapping were opened for this view
            // alone, and the view is dropped after every buffer over it.
            let _ = unsafe { driver::event_destroy(self.event) };
        }
        // SAFETY: as above.
        let _ = unsafe { driver::ipc_close_mem(self.ptr) };
    }
}

impl BlockView for CudaView {
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), String> {
        self.device.bind().map_err(|e| e.to_string())?;
        // The legacy default stream waits for the writer, then copies.
        driver::stream_wait_event(0, self.event).map_err(|e| e.to_string())?;
        // SAFETY: the block holds at least `dst.len()` bytes (the buffer's
        // length, checked against the block's record at import), and stays
        // allocated while this view lives.
        unsafe { driver::memcpy_dtoh(dst, self.ptr) }.map_err(|e| e.to_string())
    }

    fn device_view(&self) -> Option<DeviceView> {
        Some(self.device.view(self.ptr, false))
    }

    fn order_on_stream(&self, stream: u64) -> Result<(), String> {
        self.device.bind().map_err(|e| e.to_string())?;
        driver::stream_wait_event(stream, self.event).map_err(|e| e.to_string())
    }

    fn release_after(&self, stream: Option<u64>, give_back: Box<dyn FnOnce() + Send>) {
        release::after(&self.device, stream, give_back);
    }
}

impl PoolMemory for CudaMemory {
    const KIND: BackendKind = BackendKind::Cuda;
    const NAME_PREFIX: &'static str = "freight-cuda-";
    const MAGIC: [u8; 4] = *b"FRCU";
    const HANDLE_LEN: usize = 2 * IPC_HANDLE_LEN;
    const DATA_IN_FILE: bool = false;
    /// CUDA refuses to IPC-open an allocation in the process that made it.
    const SHARE_WITHIN_PROCESS: bool = true;

    type Block = CudaBlock;
    type View = CudaView;

    fn device_uuid(&self) -> [u8; 16] {
        self.device.uuid()
    }

    fn carve(&self, _map: &Arc<Mapping>, slot_len: u64) -> Result<Option<(CudaBlock, u64)>, String> {
        // The location is not needed: readers open the block by its handle.
        let block = CudaBlock::new(&self.device, slot_len).map_err(|e| e.to_string())?;
        Ok(block.map(|b| (b, 0)))
    }

    fn write(&self, _map: &Mapping, block: &CudaBlock, offset: usize, src: &[u8]) -> Result<(), String> {
        block.device.bind().map_err(|e| e.to_string())?;
        // SAFETY: the pool checked `offset + src.len()` against the block's
        // length, which is at most its allocation's.
        unsafe { driver::memcpy_htod(block.ptr + offset as u64, src) }.map_err(|e| e.to_string())
    }

    fn block_device_view(&self, block: &CudaBlock) -> Option<DeviceView> {
        Some(block.device.view(block.ptr, false))
    }

    fn seal(&self, block: &CudaBlock, write_stream: Option<u64>) -> Result<(), String> {
        block.device.bind().map_err(|e| e.to_string())?;
        driver::event_record(block.event, write_stream.unwrap_or(0)).map_err(|e| e.to_string())
    }

    fn handle(&self, block: &CudaBlock, out: &mut [u8]) {
        out.copy_from_slice(&block.handle);
    }

    fn local_view(&self, _map: &Arc<Mapping>, block: &Arc<CudaBlock>) -> CudaView {
        CudaView { device: block.device.clone(), ptr: block.ptr, event: block.event, local: Some(block.clone()) }
    }

    fn open(&self, _map: &Arc<Mapping>, _location: u64, slot_len: u64, handle: &[u8]) -> Result<CudaView, String> {
        let (mem, event) = split_handle(handle).ok_or_else(|| format!("a handle of {} bytes", handle.len()))?;
        self.device.bind().map_err(|e| e.to_string())?;
        let ptr = driver::ipc_open_mem(&mem).map_err(|e| e.to_string())?;
        // From here on, dropping the view closes what was opened.
        let mut view = CudaView { device: self.device.clone(), ptr, event: 0, local: None };
        let len = driver::allocation_len(ptr).map_err(|e| e.to_string())?;
        if (len as u64) < slot_len {
            return Err(format!("the opened allocation holds {len} bytes, the block {slot_len}"));
        }
        view.event = driver::ipc_open_event(&event).map_err(|e| e.to_string())?;
        Ok(view)
    }
}

/// The memory and event IPC handles of a block's handle bytes.
fn split_handle(handle: &[u8]) -> Option<([u8; IPC_HANDLE_LEN], [u8; IPC_HANDLE_LEN])> {
    let (mem, event) = handle.split_at_checked(IPC_HANDLE_LEN)?;
    Some((mem.try_into().ok()?, event.try_into().ok()?))
}

/// The `cuda` backend: a pool of device memory of one GPU, shared with other
/// processes of this host through CUDA IPC. See the [module](super) docs.
///
/// ```no_run
/// use std::sync::Arc;
/// use freight_backend::{cuda, Backend, CudaBackend, Frame, HeapFrame};
///
/// if cuda::available().is_ok() {
///     let gpu = CudaBackend::new(0, 256 << 20).unwrap();
///     let mut block = gpu.allocate(4, None).unwrap();
///     let ptr = block.device_view().unwrap().ptr; // kernels may write here ...
///     block.set_write_stream(0);                  // ... on this stream
///     block.write_from_host(0, b"data").unwrap();
///     let descriptor = gpu.export(block, &[std::process::id()]).unwrap();
///
///     let frame: Frame = Arc::new(HeapFrame(Vec::new()));
///     let buffer = gpu.import(&frame, descriptor.as_bytes()).unwrap();
///     buffer.order_on_stream(0).unwrap(); // the reader's stream waits for the writer's
///     let mut out = [0u8; 4];
///     buffer.copy_to_host(&mut out).unwrap();
///     assert_eq!(&out, b"data");
///     # let _ = ptr;
/// }
/// ```
#[derive(Debug)]
pub struct CudaBackend {
    pool: DevicePool<CudaMemory>,
}

impl CudaBackend {
    /// A pool of `capacity` bytes on device `ordinal` of this process, with
    /// the default [`PoolOptions`]. Fails without a driver or device.
    pub fn new(ordinal: i32, capacity: usize) -> Result<Self, AllocError> {
        Self::with_options(ordinal, PoolOptions::new(capacity))
    }

    /// A pool on device `ordinal`, sized and timed by `options`.
    pub fn with_options(ordinal: i32, options: PoolOptions) -> Result<Self, AllocError> {
        let device = Device::open(ordinal)
            .map_err(|e| AllocError::System { backend: BackendKind::Cuda, reason: format!("device {ordinal}: {e}") })?;
        Ok(CudaBackend { pool: DevicePool::new(CudaMemory { device }, options)? })
    }

    /// The device's ordinal in this process.
    pub fn ordinal(&self) -> i32 {
        self.pool.memory().device.ordinal()
    }

    /// Bytes the pool may have allocated at once.
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// The pool's name, as descriptors carry it.
    pub fn pool_name(&self) -> &str {
        self.pool.name()
    }

    /// Blocks that keep device memory while lent to nobody (ready for reuse),
    /// after freeing those idle for the pool's idle time.
    pub fn idle_blocks(&self) -> usize {
        self.pool.idle_blocks()
    }
}

crate::device_pool::backend_over_pool!(CudaBackend);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_pool::{decode, descriptor_len, encode, Handle};
    use crate::MAX_DESCRIPTOR_LEN;
    use crate::{Descriptor, ImportError};

    const NAME: &str = "freight-cuda-1000-4242-00112233445566aa";
    const GPU: [u8; 16] =
        [0x9e, 0x1f, 0x2a, 0x3b, 0x4c, 0x5d, 0x6e, 0x7f, 0x80, 0x91, 0xa2, 0xb3, 0xc4, 0xd5, 0xe6, 0xf7];

    fn handle_bytes() -> Vec<u8> {
        (0..2 * IPC_HANDLE_LEN).map(|i| (i * 37 % 251) as u8).collect()
    }

    fn valid() -> Vec<u8> {
        let handle = handle_bytes();
        encode::<CudaMemory>(&Handle {
            name: NAME,
            index: 3,
            generation: 77,
            len: 3840 * 2160 * 4,
            serial: 12,
            device: GPU,
            handle: &handle,
        })
    }

    #[test]
    fn cuda_descriptors_round_trip_every_field() {
        let d = valid();
        assert_eq!(d.len(), descriptor_len::<CudaMemory>());
        assert!(d.len() <= MAX_DESCRIPTOR_LEN);
        let h = decode::<CudaMemory>(&d).unwrap();
        assert_eq!((h.name, h.index, h.generation, h.len, h.serial), (NAME, 3, 77, 3840 * 2160 * 4, 12));
        assert_eq!(h.device, GPU);
        assert_eq!(h.handle, handle_bytes().as_slice());
        let (mem, event) = split_handle(h.handle).unwrap();
        assert_eq!((&mem[..], &event[..]), handle_bytes().split_at(IPC_HANDLE_LEN));
        assert!(Descriptor::from_slice(&d).is_ok(), "fits a descriptor");
    }

    fn refused(d: &[u8], what: &str) {
        match decode::<CudaMemory>(d) {
            Err(ImportError::Malformed { backend: BackendKind::Cuda, .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }

    #[test]
    fn hostile_cuda_descriptors_are_refused_without_a_panic() {
        let d = valid();
        for cut in 0..d.len() {
            refused(&d[..cut], &format!("truncated to {cut} bytes"));
        }
        let mut longer = d.clone();
        longer.push(0);
        refused(&longer, "one byte appended");
        let mut magic = d.clone();
        magic[..4].copy_from_slice(b"FRFD");
        refused(&magic, "fake-device magic");
        let mut version = d.clone();
        version[4] = 1;
        refused(&version, "version 1");
        let mut name_len = d.clone();
        name_len[5] = 65;
        refused(&name_len, "a 65-byte pool name");
        let mut oversize = d.clone();
        oversize[5] = 64;
        oversize[56..120].fill(b'7');
        refused(&oversize, "a pool name that fills its field");
        let mut handle_len = d.clone();
        handle_len[6] = 64;
        refused(&handle_len, "a 64-byte handle length");
        let mut path = d.clone();
        path[56..56 + 3].copy_from_slice(b"../");
        refused(&path, "a path in the pool name");
        let fake_name = b"freight-fakedev-1000-42-0123456789abcdef";
        let mut other = d.clone();
        other[5] = fake_name.len() as u8;
        other[56..120].fill(0);
        other[56..56 + fake_name.len()].copy_from_slice(fake_name);
        refused(&other, "a pool of another kind");
        // Bytes every field check reaches: header, reserved, name and padding.
        for i in (0..16).chain(56..120) {
            let mut flipped = d.clone();
            flipped[i] ^= 0xFF;
            if i == 5 || (8..12).contains(&i) {
                // The name length and the block index: other values may be valid.
                let _ = decode::<CudaMemory>(&flipped);
                continue;
            }
            refused(&flipped, &format!("byte {i} flipped"));
        }
        refused(&[0xFF; 248], "all ones");
        refused(&[0; 248], "all zeros");
        refused(&vec![0xA5; MAX_DESCRIPTOR_LEN + 1], "4097 bytes");
    }

    #[test]
    fn fields_a_pool_checks_decode_as_written() {
        // Device UUID, handle, generation, length and allocation are only
        // checkable against the pool (by a backend on the GPU); a flip in
        // them decodes to a different value, never to the original.
        let d = valid();
        let original = decode::<CudaMemory>(&d).unwrap();
        for i in (16..56).chain(120..248) {
            let mut flipped = d.clone();
            flipped[i] ^= 0x01;
            let h = decode::<CudaMemory>(&flipped).unwrap();
            assert_ne!(h, original, "byte {i} flipped decoded as the original");
        }
    }
}
