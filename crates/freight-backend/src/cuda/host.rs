//! `cuda-host`: buffers in the frame, like `shm`, whose shared memory is
//! page-locked and mapped for the GPU (`cuMemHostRegister` with `PORTABLE |
//! DEVICEMAP`), so kernels read and write it in place through
//! `cuMemHostGetDevicePointer` (the zero-copy model of ROS-SHM-ZC, best on
//! GPUs that share the host's memory, as Jetson's do).
//!
//! Registration is per mapping, not per message: the first buffer in a
//! mapping (an iceoryx2 segment) finds the whole mapping in
//! `/proc/self/maps` and registers it once. The registration is kept for the
//! life of the mapping, since registering costs far more than a message;
//! before each use the cached mapping is checked to be the same one still
//! (`/proc/self/map_files/<range>` names the same file): a segment that was
//! unmapped and replaced at the same address is unregistered and the new one
//! registered (anonymous mappings, which have no such entry, are looked up
//! again after a second). A mapping that goes away and is never replaced stays pinned
//! until the process ends (the driver holds its pages); iceoryx2 keeps its
//! segments for the life of the publisher, so that is the common case anyway.
//!
//! Only shared mappings are registered: a frame in process-private memory
//! (intra-process delivery) is served as plain host bytes. Whenever
//! registration fails, the buffer is still host bytes, with no device view;
//! [`CudaHostBackend::last_registration_error`] says why.
//!
//! A writer that filled its block with kernels names its stream
//! ([`WritableBlock::set_write_stream`](crate::WritableBlock::set_write_stream));
//! `export` then waits for that stream (`cuStreamSynchronize`): readers of
//! host memory may be CPUs, which no stream order reaches, so the writes must
//! be complete when the message is sent.

use std::mem::MaybeUninit;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use freight_msg::DeviceView;

use super::device::Device;
use super::driver;
use super::maps::{self, MapEntry};
use crate::in_frame::{self, FrameView, InFrameBlock};
use crate::{AllocError, Backend, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor, ExportError};
use crate::{Frame, FrameSlot, ImportError, WritableBlock, WriteError};

const KIND: BackendKind = BackendKind::CudaHost;

/// How long a look at an anonymous mapping is trusted: they have no
/// `/proc/self/map_files` entry to check cheaply, so they are looked up again.
const ANONYMOUS_TRUST: Duration = Duration::from_secs(1);

/// A mapping of this process looked at for registration.
struct Registration {
    map: MapEntry,
    /// When the mapping was read from `/proc/self/maps`.
    read_at: Instant,
    /// `Ok(true)` registered by freight (and to unregister when replaced),
    /// `Ok(false)` registered by someone else before, `Err` why it cannot be.
    outcome: Result<bool, String>,
    /// Its device address, per device ordinal.
    device_bases: Vec<(i32, u64)>,
}

/// The registrations of this process: registration is process-wide.
static REGISTRY: Mutex<Vec<Registration>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<Registration>> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `r` still describes the mapping it was read from: the mapping of
/// exactly that range is the same file (anonymous mappings: within
/// [`ANONYMOUS_TRUST`] of the reading).
fn still_mapped(r: &Registration) -> bool {
    let m = &r.map;
    if m.inode == 0 {
        return r.read_at.elapsed() < ANONYMOUS_TRUST;
    }
    let link = format!("/proc/self/map_files/{:x}-{:x}", m.start, m.end);
    match std::fs::metadata(&link) {
        Ok(meta) => meta.ino() == m.inode,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        // Kernels that restrict map_files: read the maps instead.
        Err(_) => matches!(maps::find_own(m.start), Ok(Some(now)) if now == *m),
    }
}

/// Registers the mapping that contains `ptr` (once) and returns how
/// `device` addresses `ptr`.
fn device_pointer(device: &Device, ptr: *const u8) -> Result<u64, String> {
    let addr = ptr as usize;
    let mut registry = registry();
    let found = registry.iter().position(|r| (r.map.start..r.map.end).contains(&addr));
    if let Some(i) = found.filter(|&i| !still_mapped(&registry[i])) {
        forget(device, registry.swap_remove(i));
    }
    let i = match registry.iter().position(|r| (r.map.start..r.map.end).contains(&addr)) {
        Some(i) => i,
        None => {
            let map = maps::find_own(addr)?.ok_or_else(|| format!("no mapping of this process holds {addr:#x}"))?;
            // Registrations of earlier mappings that this one overlaps are
            // stale (live mappings never overlap), and the driver refuses to
            // register over them (HOST_MEMORY_ALREADY_REGISTERED).
            let overlaps = |r: &Registration| r.map.start < map.end && map.start < r.map.end;
            while let Some(i) = registry.iter().position(overlaps) {
                forget(device, registry.swap_remove(i));
            }
            let outcome = register(device, &map);
            registry.push(Registration { map, read_at: Instant::now(), outcome, device_bases: Vec::new() });
            registry.len() - 1
        }
    };
    let r = &mut registry[i];
    if let Err(reason) = &r.outcome {
        return Err(reason.clone());
    }
    let base = match r.device_bases.iter().find(|(o, _)| *o == device.ordinal()) {
        Some(&(_, base)) => base,
        None => {
            device.bind().map_err(|e| e.to_string())?;
            let base = driver::host_device_pointer(r.map.start as *mut std::ffi::c_void).map_err(|e| e.to_string())?;
            r.device_bases.push((device.ordinal(), base));
            base
        }
    };
    Ok(base + (addr - r.map.start) as u64)
}

/// Forgets the registration of a mapping that is gone, unregistering it if
/// freight registered it.
fn forget(device: &Device, gone: Registration) {
    if gone.outcome == Ok(true) {
        // The calling thread may have no context current yet (a subscriber's
        // first import); the driver needs one. Registrations are portable:
        // any device's context will do.
        if device.bind().is_err() {
            return;
        }
        // SAFETY: freight registered this range; the mapping it was made
        // for is gone, so no buffer of it is alive to be read by a device.
        let _ = unsafe { driver::host_unregister(gone.map.start as *mut std::ffi::c_void) };
    }
}

/// Page-locks and maps a whole shared mapping for every device.
fn register(device: &Device, map: &MapEntry) -> Result<bool, String> {
    if !map.shared {
        return Err(format!(
            "the memory at {:#x} is private to this process ({}), not a shared mapping",
            map.start,
            if map.path.is_empty() { "anonymous" } else { &map.path }
        ));
    }
    device.bind().map_err(|e| e.to_string())?;
    // SAFETY: the range is a whole mapping of this process (read from
    // /proc/self/maps just now); it is unregistered only after it was found
    // unmapped, and otherwise stays registered until the process ends.
    match unsafe { driver::host_register(map.start as *mut std::ffi::c_void, map.end - map.start) } {
        Ok(()) => Ok(true),
        Err(e) if e.is("HOST_MEMORY_ALREADY_REGISTERED") => Ok(false),
        Err(e) => Err(format!("registering {} ({:#x}..{:#x}): {e}", map.path, map.start, map.end)),
    }
}

/// A block of a frame with the device address of its bytes.
#[derive(Debug)]
struct CudaHostBlock {
    inner: InFrameBlock,
    device: Option<DeviceView>,
    write_stream: Option<u64>,
}

impl WritableBlock for CudaHostBlock {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn host_mut(&mut self) -> Option<&mut [MaybeUninit<u8>]> {
        self.inner.host_mut()
    }

    fn write_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), WriteError> {
        self.inner.write_from_host(offset, src)
    }

    fn device_view(&self) -> Option<DeviceView> {
        self.device
    }

    fn set_write_stream(&mut self, stream: u64) {
        self.write_stream = Some(stream);
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// A reader's view of frame bytes, with their device address when mapped.
#[derive(Debug)]
struct CudaHostView {
    view: FrameView,
    device: Option<DeviceView>,
}

impl BufferStorage for CudaHostView {
    fn backend(&self) -> BackendKind {
        KIND
    }
    fn len(&self) -> usize {
        self.view.len
    }
    fn host_bytes(&self) -> Option<&[u8]> {
        self.view.host_bytes()
    }
    fn device_view(&self) -> Option<DeviceView> {
        self.device
    }
}

/// The `cuda-host` backend: in-frame buffers in shared memory that the GPU
/// of one device addresses in place. See the [module](self) docs.
///
/// ```no_run
/// use freight_backend::{cuda, Backend, CudaHostBackend};
///
/// if cuda::available().is_ok() {
///     let pinned = CudaHostBackend::new(0).unwrap();
///     assert_eq!(pinned.kind().name(), "cuda-host");
/// }
/// ```
#[derive(Debug)]
pub struct CudaHostBackend {
    device: Arc<Device>,
    max_block_len: usize,
    /// Why the last registration failed, for logs.
    last_error: Mutex<Option<String>>,
}

impl CudaHostBackend {
    /// Default limit for one buffer, as `shm`'s: 4 GiB.
    pub const DEFAULT_MAX_BLOCK_LEN: usize = 4 << 30;

    /// The backend for device `ordinal` of this process. Fails without a
    /// driver or device.
    pub fn new(ordinal: i32) -> Result<Self, AllocError> {
        let device = Device::open(ordinal)
            .map_err(|e| AllocError::System { backend: KIND, reason: format!("device {ordinal}: {e}") })?;
        Ok(CudaHostBackend { device, max_block_len: Self::DEFAULT_MAX_BLOCK_LEN, last_error: Mutex::new(None) })
    }

    /// Why the memory of the last buffer that has no device view could not
    /// be mapped for the device (`None` when every buffer so far was mapped).
    pub fn last_registration_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How the device addresses `len` bytes at `ptr`, or `None` (reason kept).
    fn map(&self, ptr: *const u8, len: usize) -> Option<DeviceView> {
        if len == 0 {
            return None;
        }
        match device_pointer(&self.device, ptr) {
            Ok(p) => Some(self.device.view(p, true)),
            Err(reason) => {
                *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
                None
            }
        }
    }
}

impl Backend for CudaHostBackend {
    fn kind(&self) -> BackendKind {
        KIND
    }

    fn in_frame(&self) -> bool {
        true
    }

    fn max_block_len(&self) -> usize {
        self.max_block_len
    }

    fn allocate(&self, len: usize, slot: Option<FrameSlot>) -> Result<BlockMut, AllocError> {
        if len > self.max_block_len {
            return Err(AllocError::TooLarge { backend: KIND, len, max: self.max_block_len });
        }
        let inner = InFrameBlock::new(KIND, len, slot)?;
        let device = self.map(inner.slot().ptr, len);
        Ok(Box::new(CudaHostBlock { inner, device, write_stream: None }))
    }

    fn export(&self, block: BlockMut, _readers: &[u32]) -> Result<Descriptor, ExportError> {
        let block = block.into_any().downcast::<CudaHostBlock>().map_err(|_| ExportError::ForeignBlock)?;
        if let Some(stream) = block.write_stream {
            // CPU readers of host memory are ordered by nothing but completion.
            self.device
                .bind()
                .and_then(|()| driver::stream_synchronize(stream))
                .map_err(|e| ExportError::Device { backend: KIND, reason: e.to_string() })?;
        }
        in_frame::describe(block.inner.slot())
    }

    fn import(&self, frame: &Frame, descriptor: &[u8]) -> Result<Arc<dyn BufferStorage>, ImportError> {
        let (offset, len) = in_frame::region(KIND, frame, descriptor)?;
        let view = FrameView { backend: KIND, frame: frame.clone(), offset, len };
        // A frame of this process's heap (intra-process delivery) is not
        // shared memory: it is served as host bytes without a look at the maps.
        let device = if frame.is_process_local() { None } else { self.map(frame.bytes()[offset..].as_ptr(), len) };
        Ok(Arc::new(CudaHostView { view, device }))
    }

    fn release_unimported(&self, _descriptor: &[u8], _reader: u32) -> Result<(), ImportError> {
        Ok(())
    }

    fn device_uuid(&self) -> Option<[u8; 16]> {
        Some(self.device.uuid())
    }

    fn stats(&self) -> BackendStats {
        BackendStats::default()
    }
}
