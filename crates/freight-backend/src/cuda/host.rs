//! `cuda-host`: buffers in the frame, like `shm`, whose shared memory is
//! page-locked and mapped for the GPU (`cuMemHostRegister` with `PORTABLE |
//! DEVICEMAP`), so kernels read and write it in place through
//! `cuMemHostGetDevicePointer` (the zero-copy model of ROS-SHM-ZC, best on
//! GPUs that share the host's memory, as Jetson's do).
//!
//! Registration is per mapping, not per message: the first buffer in a
//! mapping (an iceoryx2 segment) finds the whole mapping in
//! `/proc/self/maps`, maps its pages a second time and registers that
//! mapping once, since registering costs far more than a message. The second
//! mapping is freight's: the driver maps registered memory for the GPU at its
//! host address until it is unregistered, and a segment iceoryx2 unmaps
//! would give its address back to the kernel while the GPU still maps it
//! (the next CUDA allocation placed there fails). Before each use the
//! segment is checked to be the same one still (`/proc/self/map_files/<range>`
//! names the same file), and every registration at most once a second: one
//! whose segment was unmapped or replaced is unregistered, then unmapped.
//! A subscriber maps a publisher's segment read-only, and such a mapping is
//! registered read-only (`CU_MEMHOSTREGISTER_READ_ONLY`; the driver refuses
//! it otherwise).
//!
//! Only shared mappings are registered: a frame in process-private memory
//! (intra-process delivery) is served as plain host bytes, without a look at
//! the maps. Private memory is never remembered as "not registrable": it has
//! no file to tell one mapping from the next at the same address, and a
//! segment mapped where freed heap memory was must not inherit its refusal.
//! Whenever registration fails, the buffer is still host bytes, with no
//! device view; [`CudaHostBackend::last_registration_error`] says why.
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
use crate::in_frame::{self, FrameView, InFrameBlock};
use crate::maps::{self, MapEntry};
use crate::{AllocError, Backend, BackendKind, BackendStats, BlockMut, BufferStorage, Descriptor, ExportError};
use crate::{Frame, FrameSlot, ImportError, WritableBlock, WriteError};

const KIND: BackendKind = BackendKind::CudaHost;

/// A shared mapping of this process looked at for registration.
struct Registration {
    map: MapEntry,
    /// freight's registered second mapping of the same pages, or why there
    /// is none.
    outcome: Result<Pinned, String>,
    /// Its device address, per device ordinal.
    device_bases: Vec<(i32, u64)>,
}

/// A second mapping of a segment's pages, made by freight and registered
/// with the driver in place of the segment's own mapping.
///
/// The driver keeps registered memory mapped for the GPU at its host
/// address until it is unregistered, whatever the process does with that
/// address. A segment is unmapped by iceoryx2, which does not tell freight:
/// registered in place, its address went back to the kernel while the GPU
/// mapping stayed, and the next allocation placed there — torch's
/// `cudaMalloc`, freight's pool — failed with `CUDA_ERROR_ALREADY_MAPPED`
/// (seen on an H200). freight's own mapping is unmapped only after it is
/// unregistered, so no address the driver still maps is ever handed out.
struct Pinned {
    ptr: *mut std::ffi::c_void,
    len: usize,
}

// SAFETY: the mapping is owned by the registry, which serializes access.
unsafe impl Send for Pinned {}

impl Pinned {
    /// Maps the pages of `map` a second time (`mremap` with an old size of
    /// 0 does so for shared mappings, with no file to open), checking that
    /// they are the same file's.
    fn new(map: &MapEntry) -> Result<Pinned, String> {
        let len = map.end - map.start;
        // SAFETY: `map` is a shared mapping of this process (read from the
        // maps just now); the old size 0 leaves it as it is.
        let ptr = unsafe { libc::mremap(map.start as *mut libc::c_void, 0, len, libc::MREMAP_MAYMOVE) };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(format!("mapping {} ({:#x}..{:#x}) again: {e}", map.path, map.start, map.end));
        }
        let pinned = Pinned { ptr, len };
        // The segment may have been replaced since the maps were read.
        match maps::find_own(ptr as usize)? {
            Some(m) if (m.dev, m.inode, m.offset) == (map.dev, map.inode, map.offset) => Ok(pinned),
            _ => Err(format!("{} ({:#x}..{:#x}) was replaced while being registered", map.path, map.start, map.end)),
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: a mapping made in `new`, unregistered (or never
        // registered) by now, and read through no buffer any more.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The registrations of this process: registration is process-wide.
static REGISTRY: Mutex<Registry> = Mutex::new(Registry { entries: Vec::new(), swept: None });

struct Registry {
    entries: Vec<Registration>,
    /// When registrations of segments that are gone were last looked for.
    swept: Option<Instant>,
}

/// How often every registration is checked for a segment that is gone (its
/// pinned pages are then given back).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `r` still describes the mapping it was read from: the mapping of
/// exactly that range is the same file.
fn still_mapped(r: &Registration) -> bool {
    let m = &r.map;
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
    let registry = &mut *registry;
    if registry.swept.is_none_or(|at| at.elapsed() >= SWEEP_EVERY) {
        registry.swept = Some(Instant::now());
        forget_where(device, &mut registry.entries, |r| !still_mapped(r));
    }
    let entries = &mut registry.entries;
    let holds = |r: &Registration| (r.map.start..r.map.end).contains(&addr);
    forget_where(device, entries, |r| holds(r) && !still_mapped(r));
    let i = match entries.iter().position(holds) {
        Some(i) => i,
        None => {
            let map = maps::find_own(addr)?.ok_or_else(|| format!("no mapping of this process holds {addr:#x}"))?;
            if !map.shared || map.inode == 0 {
                return Err(format!(
                    "the memory at {:#x} is private to this process ({}), not a shared mapping",
                    map.start,
                    if map.path.is_empty() { "anonymous" } else { &map.path }
                ));
            }
            // Registrations of earlier mappings that this one overlaps are
            // stale (live mappings never overlap).
            forget_where(device, entries, |r| r.map.start < map.end && map.start < r.map.end);
            let outcome = register(device, &map);
            entries.push(Registration { map, outcome, device_bases: Vec::new() });
            entries.len() - 1
        }
    };
    let r = &mut entries[i];
    let pinned = r.outcome.as_ref().map_err(String::clone)?;
    let base = match r.device_bases.iter().find(|(o, _)| *o == device.ordinal()) {
        Some(&(_, base)) => base,
        None => {
            device.bind().map_err(|e| e.to_string())?;
            let base = driver::host_device_pointer(pinned.ptr).map_err(|e| e.to_string())?;
            r.device_bases.push((device.ordinal(), base));
            base
        }
    };
    Ok(base + (addr - r.map.start) as u64)
}

/// Forgets the registrations `gone` selects, unregistering and unmapping
/// freight's mappings of their pages.
fn forget_where(device: &Device, entries: &mut Vec<Registration>, gone: impl Fn(&Registration) -> bool) {
    let mut i = 0;
    while i < entries.len() {
        if !gone(&entries[i]) {
            i += 1;
            continue;
        }
        if let Ok(pinned) = entries.swap_remove(i).outcome {
            // The calling thread may have no context current yet (a
            // subscriber's first import); the driver needs one.
            // Registrations are portable: any device's context will do.
            // SAFETY: freight registered this mapping; the segment it was
            // made for is gone, so no buffer of it is alive to be read by a
            // device.
            let unregistered = device.bind().is_ok() && unsafe { driver::host_unregister(pinned.ptr) }.is_ok();
            if !unregistered {
                // Unmapped, its address could be handed out while the
                // driver still maps it: kept until the process ends.
                std::mem::forget(pinned);
            }
        }
    }
}

/// Maps a whole shared mapping's pages a second time and page-locks and maps
/// them for every device (read-only for the device where the mapping is
/// read-only here).
fn register(device: &Device, map: &MapEntry) -> Result<Pinned, String> {
    device.bind().map_err(|e| e.to_string())?;
    let pinned = Pinned::new(map)?;
    // SAFETY: the range is freight's own mapping, unmapped only after it is
    // unregistered.
    match unsafe { driver::host_register(pinned.ptr, pinned.len, !map.writable) } {
        Ok(()) => Ok(pinned),
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
        let device = if inner.slot().process_local { None } else { self.map(inner.slot().ptr, len) };
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
