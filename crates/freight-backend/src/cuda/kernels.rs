//! [`Program`]: PTX kernels that the driver compiles and runs on a device's
//! primary context, and memory for them to work in: [`DeviceMemory`], and
//! [`MappedHost`] memory that both the CPU and the kernels address.
//!
//! This is what freight's own tools need to put work on a GPU (the GPU
//! workers of `freight bench pipeline`), through the same run-time-loaded
//! driver as the backends: no CUDA toolkit at build or run time. It is not a
//! compute framework; a CUDA application brings its own.

use std::alloc::Layout;
use std::ffi::{c_void, CStr};
use std::ptr::NonNull;
use std::sync::Arc;

use super::device::Device;
use super::driver::{self, Raw};
use super::CudaError;

/// Threads per block and blocks per grid, for [`Program::launch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Blocks (x only).
    pub blocks: u32,
    /// Threads per block (x only).
    pub threads: u32,
}

/// One argument of a kernel, matching its `.param` declaration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg {
    /// A `.u64` device address.
    Ptr(u64),
    /// A `.u32`.
    U32(u32),
    /// A `.f32`.
    F32(f32),
}

/// A kernel of a [`Program`], found by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    function: Raw,
    module: Raw,
}

/// A PTX program loaded on one device; unloaded when dropped.
///
/// ```no_run
/// use freight_backend::cuda::kernels::{Arg, Grid, Program};
///
/// let ptx = c"...";  // .version, .target, .entry fill(.param .u64 p, .param .u32 n)
/// let program = Program::load(0, ptx)?;
/// let fill = program.kernel(c"fill")?;
/// let memory = program.alloc(1024 * 4)?;
/// // SAFETY: `fill` takes a pointer and a count and writes that many `u32`s.
/// unsafe { program.launch(fill, Grid { blocks: 4, threads: 256 }, &[Arg::Ptr(memory.ptr()), Arg::U32(1024)])? };
/// program.synchronize()?;
/// # Ok::<(), freight_backend::CudaError>(())
/// ```
#[derive(Debug)]
pub struct Program {
    device: Arc<Device>,
    module: Raw,
}

impl Program {
    /// JIT-compiles `ptx` for device `ordinal` and loads it. A program the
    /// driver refuses fails with [`CudaError::Jit`], with the JIT's log.
    pub fn load(ordinal: i32, ptx: &CStr) -> Result<Program, CudaError> {
        driver::init_kernels()?;
        let device = Device::open(ordinal)?;
        device.bind()?;
        let module = driver::module_load(ptx)?;
        Ok(Program { device, module })
    }

    /// The kernel `.entry name`.
    pub fn kernel(&self, name: &CStr) -> Result<Kernel, CudaError> {
        Ok(Kernel { function: driver::module_function(self.module, name)?, module: self.module })
    }

    /// `len` bytes of device memory on this program's device (uninitialised).
    pub fn alloc(&self, len: usize) -> Result<DeviceMemory, CudaError> {
        self.device.bind()?;
        let ptr = driver::mem_alloc(len.max(1))?;
        Ok(DeviceMemory { device: self.device.clone(), ptr, len })
    }

    /// `len` bytes of zeroed host memory, page-locked and mapped for this
    /// program's device (`cuMemHostRegister`): the CPU writes it in place,
    /// kernels read and write it at [`MappedHost::device_ptr`] with no copy.
    pub fn alloc_mapped_host(&self, len: usize) -> Result<MappedHost, CudaError> {
        MappedHost::new(self.device.clone(), len)
    }

    /// Queues `kernel` on the legacy default stream; it runs after the work
    /// queued there before it (the copies of [`DeviceMemory`] too).
    ///
    /// # Safety
    /// `args` match the kernel's parameters in number, order and type, and
    /// every device address among them stays valid, for everything the kernel
    /// reads and writes through it, until the kernel completes
    /// ([`Program::synchronize`]).
    pub unsafe fn launch(&self, kernel: Kernel, grid: Grid, args: &[Arg]) -> Result<(), CudaError> {
        assert_eq!(kernel.module, self.module, "a kernel launched through another program");
        // Each argument in 8 bytes of its own, the driver reading its size
        // from the start (all of freight's targets are little-endian).
        let mut values: Vec<u64> = args
            .iter()
            .map(|a| match *a {
                Arg::Ptr(p) => p,
                Arg::U32(v) => u64::from(v),
                Arg::F32(v) => u64::from(v.to_bits()),
            })
            .collect();
        let mut params: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        self.device.bind()?;
        // SAFETY: `params` points at one value per argument, alive across the
        // call (the driver copies them); the caller vouches for the rest.
        unsafe { driver::launch(kernel.function, grid.blocks, grid.threads, 0, &mut params) }
    }

    /// Waits until the work queued on the legacy default stream is done; a
    /// kernel's fault surfaces here.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.device.bind()?;
        driver::stream_synchronize(0)
    }

    /// The device's name, e.g. `NVIDIA H200`.
    pub fn device_name(&self) -> Result<String, CudaError> {
        super::device_name(self.device.ordinal())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // Queued kernels finish first (cuModuleUnload would fail them).
        // Nothing to do on failure: the module goes with the context.
        let _ = self.synchronize();
        // SAFETY: loaded in `load`, unloaded once here; the synchronise above
        // let every launched kernel complete, and `Kernel`s are only launched
        // through this program.
        let _ = unsafe { driver::module_unload(self.module) };
    }
}

/// Device memory from [`Program::alloc`]; freed when dropped.
#[derive(Debug)]
pub struct DeviceMemory {
    device: Arc<Device>,
    ptr: u64,
    len: usize,
}

impl DeviceMemory {
    /// The device address, for [`Arg::Ptr`].
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Copies `src` to the start of this memory, after the work queued on the
    /// legacy default stream.
    ///
    /// # Panics
    /// If `src` is longer than this memory.
    pub fn copy_from_host(&mut self, src: &[u8]) -> Result<(), CudaError> {
        assert!(src.len() <= self.len, "{} bytes into {} of device memory", src.len(), self.len);
        self.device.bind()?;
        // SAFETY: the allocation is live and `src` fits in it (checked above).
        unsafe { driver::memcpy_htod(self.ptr, src) }
    }

    /// Copies the start of this memory to `dst`, after the work queued on the
    /// legacy default stream (so after the kernels launched before).
    ///
    /// # Panics
    /// If `dst` is longer than this memory.
    pub fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), CudaError> {
        assert!(dst.len() <= self.len, "{} bytes from {} of device memory", dst.len(), self.len);
        self.device.bind()?;
        // SAFETY: the allocation is live and `dst` fits in it (checked above).
        unsafe { driver::memcpy_dtoh(dst, self.ptr) }
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // Kernels still queued on it finish first; on failure the memory goes
        // with the context.
        if self.device.bind().is_ok() && driver::stream_synchronize(0).is_ok() {
            // SAFETY: allocated in `Program::alloc`, freed once here, after
            // the work queued on it completed.
            let _ = unsafe { driver::mem_free(self.ptr) };
        }
    }
}

/// Host memory mapped for a device, from [`Program::alloc_mapped_host`];
/// unregistered and freed when dropped.
#[derive(Debug)]
pub struct MappedHost {
    device: Arc<Device>,
    ptr: NonNull<u8>,
    layout: Layout,
    device_ptr: u64,
}

// SAFETY: the memory is owned by this value alone (no aliases outside the
// borrows its methods hand out), and the driver handles are plain values any
// thread may use.
unsafe impl Send for MappedHost {}

/// Page alignment: registration pins whole pages, and none is shared with
/// another allocation.
const PAGE: usize = 4096;

impl MappedHost {
    fn new(device: Arc<Device>, len: usize) -> Result<MappedHost, CudaError> {
        let layout = Layout::from_size_align(len.max(1).next_multiple_of(PAGE), PAGE)
            .map_err(|_| CudaError::HostAllocation { len })?;
        // SAFETY: the layout's size is not zero.
        let ptr = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or(CudaError::HostAllocation { len })?;
        let free = |ptr: NonNull<u8>| {
            // SAFETY: allocated just above with this layout, not registered.
            unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
        };
        let registered = device.bind().and_then(|()| {
            // SAFETY: the allocation is this value's and stays mapped until
            // `drop` unregisters it.
            unsafe { driver::host_register(ptr.as_ptr().cast(), layout.size(), false) }
        });
        if let Err(e) = registered {
            free(ptr);
            return Err(e);
        }
        match driver::host_device_pointer(ptr.as_ptr().cast()) {
            Ok(device_ptr) => Ok(MappedHost { device, ptr, layout, device_ptr }),
            Err(e) => {
                // SAFETY: registered above, used by no kernel yet.
                let _ = unsafe { driver::host_unregister(ptr.as_ptr().cast()) };
                free(ptr);
                Err(e)
            }
        }
    }

    /// The device's address of the memory, for [`Arg::Ptr`].
    pub fn device_ptr(&self) -> u64 {
        self.device_ptr
    }

    /// The memory, for the CPU (`len` bytes and the page's rest, zeroed at
    /// first). Read it after the kernels that write it completed
    /// ([`Program::synchronize`]).
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `layout.size()` bytes, initialised
        // (zeroed), and borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for MappedHost {
    fn drop(&mut self) {
        // Kernels still queued on it finish first. Unregistered, the memory
        // goes back to the allocator; if that fails it is kept (the driver
        // may still map it) until the process ends.
        let done = self.device.bind().is_ok() && driver::stream_synchronize(0).is_ok();
        // SAFETY: registered in `new`, unregistered once here, after the
        // work queued on it completed.
        if done && unsafe { driver::host_unregister(self.ptr.as_ptr().cast()) }.is_ok() {
            // SAFETY: allocated in `new` with this layout, no longer registered.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
        }
    }
}
