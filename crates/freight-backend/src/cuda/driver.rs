//! The CUDA driver calls freight makes, each a small wrapper that checks its
//! `CUresult`. The only module that calls the driver: every `unsafe` block
//! for it is here.
//!
//! The driver is loaded at run time (cudarc's `dynamic-loading`), so freight
//! builds and runs without CUDA. cudarc panics at the first call into a
//! missing library or symbol; [`init`] therefore checks that the library and
//! every function below exist before anything is called, and every wrapper
//! goes through it.

use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

use cudarc::driver::sys;

use super::CudaError;

pub(crate) type Result<T> = std::result::Result<T, CudaError>;

/// A `CUcontext`, `CUevent` or `CUstream` kept as an integer: the handles are
/// plain values that the driver lets any thread use.
pub(crate) type Raw = usize;

/// Every driver function called below (the names cudarc loads).
const FUNCTIONS: &[&str] = &[
    "cuInit",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetUuid_v2",
    "cuDeviceGetName",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemGetAddressRange_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuIpcGetMemHandle",
    "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuIpcGetEventHandle",
    "cuIpcOpenEventHandle",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemHostGetDevicePointer_v2",
];

/// What [`module_load`] and [`launch`] call besides [`FUNCTIONS`], checked
/// when a program is first loaded ([`init_kernels`]) rather than by [`init`]:
/// the memory backends do not need them.
const KERNEL_FUNCTIONS: &[&str] = &["cuModuleLoadDataEx", "cuModuleGetFunction", "cuModuleUnload", "cuLaunchKernel"];

/// Loads the driver and initialises it, once per process; the outcome is kept.
pub(crate) fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    INIT.get_or_init(|| {
        // SAFETY: only tries to dlopen the driver library by its usual names.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::DriverMissing);
        }
        has_all(FUNCTIONS)?;
        // SAFETY: cuInit takes flags (0) and may be called more than once.
        check("cuInit", unsafe { sys::cuInit(0) })
    })
    .clone()
}

/// [`init`], and the functions that load and launch kernels.
pub(crate) fn init_kernels() -> Result<()> {
    init()?;
    has_all(KERNEL_FUNCTIONS)
}

/// Whether the driver has every one of `functions`; called once the library
/// is known to be present.
fn has_all(functions: &[&'static str]) -> Result<()> {
    // SAFETY: the library is present (the callers checked), so `culib` loads
    // it rather than panicking.
    let lib = unsafe { sys::culib() };
    for &function in functions {
        // SAFETY: the symbol is only looked up, never called through this
        // type; cudarc loads it with its real signature when it is called.
        if unsafe { lib.get::<unsafe extern "C" fn()>(function.as_bytes()) }.is_err() {
            return Err(CudaError::SymbolMissing { function });
        }
    }
    Ok(())
}

/// The name and description of a `CUresult`.
fn describe(r: sys::CUresult) -> (String, String) {
    let text = |f: unsafe fn(sys::CUresult, *mut *const std::ffi::c_char) -> sys::CUresult| {
        let mut s: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: `s` is a valid out-pointer; on success the driver points it
        // at a static NUL-terminated string, which is copied at once.
        let ok = unsafe { f(r, &mut s) } == sys::CUresult::CUDA_SUCCESS && !s.is_null();
        ok.then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    };
    (
        text(sys::cuGetErrorName).unwrap_or_else(|| format!("{r:?}")),
        text(sys::cuGetErrorString).unwrap_or_else(|| "unknown error".into()),
    )
}

fn check(function: &'static str, r: sys::CUresult) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let (name, description) = describe(r);
    Err(CudaError::Call { function, code: r as u32, name, description })
}

pub(crate) fn device_count() -> Result<i32> {
    init()?;
    let mut n = 0;
    // SAFETY: `n` is a valid out-pointer.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

/// The device of `ordinal`, checked against the devices this process sees.
pub(crate) fn device(ordinal: i32) -> Result<sys::CUdevice> {
    let count = device_count()?;
    if count == 0 {
        return Err(CudaError::NoDevice);
    }
    if !(0..count).contains(&ordinal) {
        return Err(CudaError::NoSuchDevice { ordinal, count });
    }
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; the ordinal was checked.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut dev, ordinal) })?;
    Ok(dev)
}

pub(crate) fn device_uuid(dev: sys::CUdevice) -> Result<[u8; 16]> {
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: `uuid` is a valid out-pointer to a CUuuid.
    check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) })?;
    Ok(uuid.bytes.map(|b| b as u8))
}

pub(crate) fn device_name(dev: sys::CUdevice) -> Result<String> {
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: the driver writes at most `len` bytes, NUL-terminated, into `name`.
    check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev) })?;
    let bytes: Vec<u8> = name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Retains the device's primary context (released by [`primary_context_release`]).
pub(crate) fn primary_context_retain(dev: sys::CUdevice) -> Result<Raw> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
    Ok(ctx as Raw)
}

pub(crate) fn primary_context_release(dev: sys::CUdevice) -> Result<()> {
    // SAFETY: called once per successful retain of this device's primary context.
    check("cuDevicePrimaryCtxRelease_v2", unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) })
}

/// Makes `ctx` current on the calling thread.
pub(crate) fn set_current(ctx: Raw) -> Result<()> {
    // SAFETY: `ctx` is a primary context that its `Device` keeps retained.
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx as sys::CUcontext) })
}

pub(crate) fn mem_alloc(len: usize) -> Result<u64> {
    let mut ptr = 0;
    // SAFETY: `ptr` is a valid out-pointer; a context is current (callers bind one).
    check("cuMemAlloc_v2", unsafe { sys::cuMemAlloc_v2(&mut ptr, len) })?;
    Ok(ptr)
}

/// # Safety
/// `ptr` came from [`mem_alloc`], is freed once, and nothing uses it afterwards.
pub(crate) unsafe fn mem_free(ptr: u64) -> Result<()> {
    // SAFETY: as the caller guarantees.
    check("cuMemFree_v2", unsafe { sys::cuMemFree_v2(ptr) })
}

/// Bytes of the allocation that starts at `ptr` (0 when `ptr` is inside one, not at its start).
pub(crate) fn allocation_len(ptr: u64) -> Result<usize> {
    let (mut base, mut len) = (0, 0);
    // SAFETY: both are valid out-pointers; the driver only looks `ptr` up.
    check("cuMemGetAddressRange_v2", unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut len, ptr) })?;
    Ok(if base == ptr { len } else { 0 })
}

/// Copies `src` to device memory at `dst` (on the legacy default stream; it
/// returns once `src` may be reused).
///
/// # Safety
/// `dst .. dst + src.len()` lies in one live device allocation of the current context.
pub(crate) unsafe fn memcpy_htod(dst: u64, src: &[u8]) -> Result<()> {
    // SAFETY: `src` is readable for its length; the caller vouches for `dst`.
    check("cuMemcpyHtoD_v2", unsafe { sys::cuMemcpyHtoD_v2(dst, src.as_ptr().cast(), src.len()) })
}

/// Copies device memory at `src` to `dst` (on the legacy default stream; it
/// returns once the copy is complete).
///
/// # Safety
/// `src .. src + dst.len()` lies in one live device allocation reachable from the current context.
pub(crate) unsafe fn memcpy_dtoh(dst: &mut [u8], src: u64) -> Result<()> {
    // SAFETY: `dst` is writable for its length; the caller vouches for `src`.
    check("cuMemcpyDtoH_v2", unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), src, dst.len()) })
}

pub(crate) fn ipc_mem_handle(ptr: u64) -> Result<[u8; 64]> {
    let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
    // SAFETY: `h` is a valid out-pointer; the driver only looks `ptr` up.
    check("cuIpcGetMemHandle", unsafe { sys::cuIpcGetMemHandle(&mut h, ptr) })?;
    Ok(h.reserved.map(|b| b as u8))
}

/// Opens another process's allocation; closed with [`ipc_close_mem`].
pub(crate) fn ipc_open_mem(handle: &[u8; 64]) -> Result<u64> {
    let h = sys::CUipcMemHandle { reserved: handle.map(|b| b as std::ffi::c_char) };
    let mut ptr = 0;
    let flags = sys::CUipcMem_flags::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32;
    // SAFETY: `ptr` is a valid out-pointer; the driver validates the handle
    // bytes (which a peer sent) and fails on ones it did not issue.
    check("cuIpcOpenMemHandle_v2", unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, flags) })?;
    Ok(ptr)
}

/// # Safety
/// `ptr` came from [`ipc_open_mem`], is closed once, and nothing uses it afterwards.
pub(crate) unsafe fn ipc_close_mem(ptr: u64) -> Result<()> {
    // SAFETY: as the caller guarantees.
    check("cuIpcCloseMemHandle", unsafe { sys::cuIpcCloseMemHandle(ptr) })
}

/// Creates an event that other processes can wait on.
pub(crate) fn event_create_interprocess() -> Result<Raw> {
    let flags = sys::CUevent_flags::CU_EVENT_INTERPROCESS as u32 | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    event_create(flags)
}

/// Creates an event for this process only.
pub(crate) fn event_create_local() -> Result<Raw> {
    event_create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
}

fn event_create(flags: u32) -> Result<Raw> {
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: `e` is a valid out-pointer.
    check("cuEventCreate", unsafe { sys::cuEventCreate(&mut e, flags) })?;
    Ok(e as Raw)
}

/// # Safety
/// `event` is a live event (created or IPC-opened here), destroyed once, not used afterwards.
pub(crate) unsafe fn event_destroy(event: Raw) -> Result<()> {
    // SAFETY: as the caller guarantees.
    check("cuEventDestroy_v2", unsafe { sys::cuEventDestroy_v2(event as sys::CUevent) })
}

/// Records `event` on `stream` (a `CUstream` handle; 0 the legacy default stream).
pub(crate) fn event_record(event: Raw, stream: u64) -> Result<()> {
    // SAFETY: events are live while their owner holds them; the driver checks
    // the stream handle, which the user named.
    check("cuEventRecord", unsafe { sys::cuEventRecord(event as sys::CUevent, stream as usize as sys::CUstream) })
}

/// Blocks the calling thread until the work recorded in `event` is done.
pub(crate) fn event_synchronize(event: Raw) -> Result<()> {
    // SAFETY: the event is live while its owner holds it.
    check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(event as sys::CUevent) })
}

pub(crate) fn ipc_event_handle(event: Raw) -> Result<[u8; 64]> {
    let mut h = sys::CUipcEventHandle { reserved: [0; 64] };
    // SAFETY: `h` is a valid out-pointer; the event is live.
    check("cuIpcGetEventHandle", unsafe { sys::cuIpcGetEventHandle(&mut h, event as sys::CUevent) })?;
    Ok(h.reserved.map(|b| b as u8))
}

/// Opens another process's event; destroyed with [`event_destroy`].
pub(crate) fn ipc_open_event(handle: &[u8; 64]) -> Result<Raw> {
    let h = sys::CUipcEventHandle { reserved: handle.map(|b| b as std::ffi::c_char) };
    let mut e: sys::CUevent = std::ptr::null_mut();
    // SAFETY: `e` is a valid out-pointer; the driver validates the handle bytes.
    check("cuIpcOpenEventHandle", unsafe { sys::cuIpcOpenEventHandle(&mut e, h) })?;
    Ok(e as Raw)
}

/// Makes work later submitted to `stream` wait for `event`, without blocking the host.
pub(crate) fn stream_wait_event(stream: u64, event: Raw) -> Result<()> {
    // SAFETY: the event is live; the driver checks the stream handle.
    check("cuStreamWaitEvent", unsafe {
        sys::cuStreamWaitEvent(stream as usize as sys::CUstream, event as sys::CUevent, 0)
    })
}

/// Blocks until the work submitted to `stream` is done.
pub(crate) fn stream_synchronize(stream: u64) -> Result<()> {
    // SAFETY: the driver checks the stream handle.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream as usize as sys::CUstream) })
}

/// Page-locks `len` bytes at `ptr` and maps them for every device, for
/// reading only when `read_only` (as pages this process maps read-only must be).
///
/// # Safety
/// `ptr .. ptr + len` is a mapping of this process that stays mapped until
/// [`host_unregister`] (or the process ends).
pub(crate) unsafe fn host_register(ptr: *mut c_void, len: usize, read_only: bool) -> Result<()> {
    let mut flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
    if read_only {
        // Required for pages mapped read-only (else CUDA_ERROR_INVALID_VALUE).
        flags |= sys::CU_MEMHOSTREGISTER_READ_ONLY;
    }
    // SAFETY: as the caller guarantees.
    check("cuMemHostRegister_v2", unsafe { sys::cuMemHostRegister_v2(ptr, len, flags) })
}

/// # Safety
/// `ptr` was registered with [`host_register`] and no device work uses it any more.
pub(crate) unsafe fn host_unregister(ptr: *mut c_void) -> Result<()> {
    // SAFETY: as the caller guarantees.
    check("cuMemHostUnregister", unsafe { sys::cuMemHostUnregister(ptr) })
}

/// The device address of registered host memory at `ptr`, in the current context.
pub(crate) fn host_device_pointer(ptr: *mut c_void) -> Result<u64> {
    let mut d = 0;
    // SAFETY: `d` is a valid out-pointer; the driver only looks `ptr` up.
    check("cuMemHostGetDevicePointer_v2", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, ptr, 0) })?;
    Ok(d)
}

/// JIT-compiles `ptx` (NUL-terminated PTX text) for the current context's
/// device and loads it; unloaded with [`module_unload`]. A program the
/// driver refuses fails with [`CudaError::Jit`], the JIT's log included.
pub(crate) fn module_load(ptx: &CStr) -> Result<Raw> {
    let mut log = vec![0u8; 8192];
    let mut options =
        [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    // The size option's value is the number itself, passed as a pointer.
    let mut values = [log.as_mut_ptr().cast::<c_void>(), log.len() as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `module` is a valid out-pointer, `ptx` is NUL-terminated, and
    // the two options name a log buffer that lives across the call, with its
    // length; the driver writes at most that many bytes into it.
    let r = unsafe {
        sys::cuModuleLoadDataEx(&mut module, ptx.as_ptr().cast(), 2, options.as_mut_ptr(), values.as_mut_ptr())
    };
    if r != sys::CUresult::CUDA_SUCCESS {
        let (name, description) = describe(r);
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let log = String::from_utf8_lossy(&log[..end]).trim().to_owned();
        return Err(CudaError::Jit { name, description, log });
    }
    Ok(module as Raw)
}

/// # Safety
/// `module` came from [`module_load`], is unloaded once, and none of its
/// functions runs or is launched afterwards.
pub(crate) unsafe fn module_unload(module: Raw) -> Result<()> {
    // SAFETY: as the caller guarantees.
    check("cuModuleUnload", unsafe { sys::cuModuleUnload(module as sys::CUmodule) })
}

/// The kernel `name` of a loaded module (valid while the module is loaded).
pub(crate) fn module_function(module: Raw, name: &CStr) -> Result<Raw> {
    let mut f: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: `f` is a valid out-pointer, `name` is NUL-terminated, the module is loaded.
    check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, module as sys::CUmodule, name.as_ptr()) })?;
    Ok(f as Raw)
}

/// Launches `function` on `stream` with `grid` × `block` threads.
///
/// # Safety
/// `params` holds one pointer per kernel parameter, in order, each to a
/// value of the parameter's type and size; device pointers among them are
/// valid for what the kernel does with them until it completes.
pub(crate) unsafe fn launch(
    function: Raw,
    grid: u32,
    block: u32,
    stream: u64,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: as the caller guarantees; no dynamic shared memory, no `extra`.
    check("cuLaunchKernel", unsafe {
        sys::cuLaunchKernel(
            function as sys::CUfunction,
            grid,
            1,
            1,
            block,
            1,
            1,
            0,
            stream as usize as sys::CUstream,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    })
}
