//! The CUDA backends, and what other crates ask of CUDA.
//!
//! * [`CudaBackend`] (`cuda`): device memory in a pool, shared with other
//!   processes of this host through legacy CUDA IPC (`pool.rs`);
//! * [`CudaHostBackend`] (`cuda-host`): frames in shared memory, page-locked
//!   and mapped for the GPU (`host.rs`);
//! * [`available`], [`device_count`], [`device_uuid`], [`device_name`]: for
//!   negotiation and tools;
//! * [`kernels`]: PTX programs the driver compiles and runs, for freight's
//!   tools that put work on a GPU (the pipeline benchmark's GPU workers).
//!
//! The driver is loaded when first needed; on a machine without one every
//! function here returns [`CudaError::DriverMissing`] and nothing panics.
//! Devices are named by UUID in descriptors (ordinals differ between
//! processes with different `CUDA_VISIBLE_DEVICES`).
//!
//! # Why legacy IPC, not VMM and file descriptors
//!
//! ROS 2's CUDA backend allocates with the VMM API (`cuMemCreate`), exports
//! each block as a POSIX file descriptor and passes it over a Unix socket
//! (`SCM_RIGHTS`), so every publisher runs a socket server. It still needs
//! legacy IPC for its events: CUDA events have no VMM export. freight uses
//! legacy IPC for both memory (`cuIpcGetMemHandle` on a `cuMemAlloc`
//! allocation) and events (`cuIpcGetEventHandle`): the 64-byte handles travel
//! inside the descriptor, which is thus self-contained — a subscriber opens a
//! block from the descriptor alone, with no socket, no server thread per
//! publisher, and no file descriptors to leak. A reader opens each block once
//! per allocation and caches it; the pool (`device_pool/`) keeps a block's
//! memory until every reader process that has it open closed it, as CUDA
//! requires.
//!
//! # Stream order, no host synchronisation
//!
//! A writer names its stream ([`WritableBlock::set_write_stream`](crate::WritableBlock::set_write_stream));
//! export records the block's IPC event on it. A reader orders its own
//! stream after it ([`BufferStorage::order_on_stream`](crate::BufferStorage::order_on_stream),
//! `cuStreamWaitEvent`). Nobody waits on the host on the way. When the
//! reader drops the buffer, a per-process release thread waits for the
//! reader's work on the last stream it named and then gives the block back:
//! no fixed grace period, and the dropping thread never blocks. A GPU reader
//! therefore orders the buffer on every stream it uses it on, the last one
//! last; a buffer never ordered on a stream (read with `copy_to_host`, which
//! is synchronous) goes back at once.

mod device;
mod driver;
mod error;
mod host;
pub mod kernels;
mod pool;
mod release;

pub use error::CudaError;
pub use host::CudaHostBackend;
pub use pool::CudaBackend;

/// Whether CUDA can be used here: the driver loads, has what freight calls,
/// and reports at least one device.
///
/// ```
/// match freight_backend::cuda::available() {
///     Ok(()) => println!("{} CUDA device(s)", freight_backend::cuda::device_count().unwrap()),
///     Err(why) => println!("no CUDA: {why}"),
/// }
/// ```
pub fn available() -> Result<(), CudaError> {
    match driver::device_count()? {
        0 => Err(CudaError::NoDevice),
        _ => Ok(()),
    }
}

/// Devices this process sees (`CUDA_VISIBLE_DEVICES` applies).
pub fn device_count() -> Result<i32, CudaError> {
    driver::device_count()
}

/// The UUID of device `ordinal` of this process: how descriptors and
/// negotiation name a device.
pub fn device_uuid(ordinal: i32) -> Result<[u8; 16], CudaError> {
    driver::device_uuid(driver::device(ordinal)?)
}

/// The name of device `ordinal`, e.g. `NVIDIA H200`.
pub fn device_name(ordinal: i32) -> Result<String, CudaError> {
    driver::device_name(driver::device(ordinal)?)
}

/// Formats a device UUID as CUDA tools print it, without nvidia-smi's `GPU-` prefix.
///
/// ```
/// let u = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8];
/// assert_eq!(freight_backend::cuda::format_uuid(&u), "12345678-9abc-def0-0102-030405060708");
/// ```
pub fn format_uuid(uuid: &[u8; 16]) -> String {
    crate::device_pool::format_uuid(uuid)
}
