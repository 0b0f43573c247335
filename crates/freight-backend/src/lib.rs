//! Memory backends: where the large fields of a message live, and how a reader
//! in another process (or on a device) reaches them.
//!
//! Every message travels as one **frame** ([`FrameMemory`]): its small fields,
//! a table of buffer descriptors, and the bytes of buffers whose backend keeps
//! them *in the frame*. The frame is heap memory inside one process and an
//! iceoryx2 shared-memory sample between processes.
//!
//! A [`Backend`] owns the memory of buffer fields:
//!
//! | backend | memory | descriptor | import |
//! |---|---|---|---|
//! | `cpu` | in the frame | offset and length | a private copy, or a view when the frame is in-process heap |
//! | `shm` | in the frame (shared memory) | offset and length | a view that keeps the sample alive |
//! | `fake-device` | a simulated device: a pool in a shared-memory file | pool, block, generation, allocation, device UUID | a hold on the block; stale blocks and other devices refused |
//! | `cuda` | CUDA device memory (`cuMemAlloc`) in a pool | as `fake-device`, plus the block's IPC memory and event handles | the block opened once per allocation (`cuIpcOpenMemHandle`), read in stream order |
//! | `cuda-host` | in the frame (shared memory), page-locked and mapped for the GPU | offset and length | a view of the frame with a device pointer |
//!
//! `fake-device` and `cuda` share one pool protocol (`device_pool/`: holds
//! per reader process, generations, size classes, idle blocks given back after
//! [`DEFAULT_IDLE_TIME`], dead readers reclaimed), so everything but the CUDA
//! calls themselves is tested on machines without a GPU. [`cuda::available`]
//! says whether this machine can use the CUDA backends.
//!
//! Each backend passes the same [`conformance`] suite.
#![deny(missing_docs)]

use std::fmt;
use std::mem::MaybeUninit;
use std::sync::Arc;

pub use freight_msg::{BackendKind, BackendSet, BufferStorage, DeviceView};

pub mod conformance;
mod cpu;
pub mod cuda;
mod device_pool;
pub mod fake_device;
mod in_frame;
pub mod maps;
pub mod os;
mod shm;

pub use cpu::CpuBackend;
pub use cuda::{CudaBackend, CudaError, CudaHostBackend};
pub use device_pool::{PoolOptions, DEFAULT_IDLE_TIME};
pub use fake_device::FakeDeviceBackend;
pub use in_frame::{frame_view, DESCRIPTOR_LEN as IN_FRAME_DESCRIPTOR_LEN};
pub use shm::ShmBackend;

/// Longest descriptor a backend may produce, in bytes (as ROS 2's buffer backends).
pub const MAX_DESCRIPTOR_LEN: usize = 4096;

/// The bytes of one received (or built) message frame, shared by reference count.
///
/// Buffers that view the frame hold a clone of the [`Frame`], so the frame (and
/// the shared-memory sample under it) lives as long as any of them.
pub trait FrameMemory: Send + Sync + fmt::Debug {
    /// The frame's bytes.
    fn bytes(&self) -> &[u8];
    /// Whether the frame is this process's private heap memory (intra-process
    /// delivery) rather than memory shared with other processes.
    fn is_process_local(&self) -> bool;
}

/// A shared handle to a frame.
pub type Frame = Arc<dyn FrameMemory>;

/// A frame on the heap of this process, used for intra-process delivery.
#[derive(Debug)]
pub struct HeapFrame(pub Vec<u8>);

impl FrameMemory for HeapFrame {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
    fn is_process_local(&self) -> bool {
        true
    }
}

/// A region of a frame under construction, reserved for one in-frame buffer.
#[derive(Debug)]
pub struct FrameSlot {
    /// Offset of the region from the start of the frame.
    pub offset: usize,
    /// Start of the region in the writer's mapping.
    pub ptr: *mut u8,
    /// Length of the region.
    pub len: usize,
    /// Whether the frame is memory of this process alone (a [`HeapFrame`],
    /// for intra-process delivery) rather than memory other processes may
    /// map: backends that map shared memory for a device leave it unmapped.
    pub process_local: bool,
}

// SAFETY: a FrameSlot is an exclusive claim on a region of a frame that the
// writer owns until it publishes; it is moved, never shared, between threads.
unsafe impl Send for FrameSlot {}

/// A descriptor: what a reader needs to import a block. At most
/// [`MAX_DESCRIPTOR_LEN`] bytes; short ones (every backend's but the largest)
/// live inline, so describing a buffer does not allocate.
#[derive(Clone, PartialEq, Eq)]
pub struct Descriptor(DescriptorBytes);

/// Room for the longest descriptor any backend writes (`cuda`: 248 bytes).
const INLINE_DESCRIPTOR: usize = 248;

// Inline on purpose: describing a buffer does not allocate, and descriptors
// live only for the length of a publish.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Eq)]
enum DescriptorBytes {
    Inline(u8, [u8; INLINE_DESCRIPTOR]),
    Heap(Vec<u8>),
}

impl Descriptor {
    /// Wraps bytes, refusing more than [`MAX_DESCRIPTOR_LEN`].
    pub fn new(bytes: Vec<u8>) -> Result<Self, ExportError> {
        if bytes.len() > MAX_DESCRIPTOR_LEN {
            return Err(ExportError::DescriptorTooLong(bytes.len()));
        }
        Ok(Descriptor(DescriptorBytes::Heap(bytes)))
    }

    /// Copies a short descriptor without allocating (longer ones go to the heap).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ExportError> {
        if bytes.len() > INLINE_DESCRIPTOR {
            return Self::new(bytes.to_vec());
        }
        let mut inline = [0u8; INLINE_DESCRIPTOR];
        inline[..bytes.len()].copy_from_slice(bytes);
        Ok(Descriptor(DescriptorBytes::Inline(bytes.len() as u8, inline)))
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            DescriptorBytes::Inline(len, bytes) => &bytes[..*len as usize],
            DescriptorBytes::Heap(v) => v,
        }
    }
}

impl fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Descriptor({} bytes)", self.as_bytes().len())
    }
}

/// Writable memory for one buffer, lent by [`Backend::allocate`].
pub trait WritableBlock: Send + fmt::Debug {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the block is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The memory as host bytes, when the CPU can write it in place.
    fn host_mut(&mut self) -> Option<&mut [MaybeUninit<u8>]>;
    /// Copies `src` into the block at `offset` (a host-to-device copy for devices).
    fn write_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), WriteError>;
    /// Where a device addresses the block, for writers that fill it with
    /// kernels; `None` for memory only the CPU reaches.
    fn device_view(&self) -> Option<DeviceView> {
        None
    }
    /// Names the stream (a `CUstream` handle, `0` the legacy default stream)
    /// that the writer's kernels and copies into this block were submitted to.
    /// [`Backend::export`] orders readers after that stream's work up to the
    /// export, without blocking the host. Backends the CPU writes ignore it.
    fn set_write_stream(&mut self, stream: u64) {
        let _ = stream;
    }
    /// Lets `export` recover the concrete type.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}

/// A block handed out by [`Backend::allocate`].
pub type BlockMut = Box<dyn WritableBlock>;

/// Usage counters of a backend, for tests and `freight topic info`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Blocks allocated and not yet returned.
    pub blocks_in_use: usize,
    /// Bytes of those blocks.
    pub bytes_in_use: usize,
}

/// One kind of memory that buffer fields can live in.
///
/// The writer calls [`allocate`](Backend::allocate), writes, and calls
/// [`export`](Backend::export) with the readers that will import the block;
/// each reader calls [`import`](Backend::import) once (or
/// [`release_unimported`](Backend::release_unimported) if it will not). Memory
/// returns to the backend when every reader's hold is gone.
/// In-frame backends need none of this bookkeeping: the frame owns the bytes.
pub trait Backend: Send + Sync + fmt::Debug {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Whether buffers of this backend travel inside the frame (`cpu`, `shm`)
    /// rather than in a pool of their own (devices).
    fn in_frame(&self) -> bool;

    /// The largest block this backend lends.
    fn max_block_len(&self) -> usize;

    /// Lends `len` writable bytes. In-frame backends are given the frame region
    /// reserved for the buffer as `slot`; pool backends get `None`.
    fn allocate(&self, len: usize, slot: Option<FrameSlot>) -> Result<BlockMut, AllocError>;

    /// Seals a written block and describes it, with one hold for each reader
    /// (given by process id; a process may appear once per subscription it
    /// has). The block stays allocated until every hold is gone: imported and
    /// dropped, released unimported, or reclaimed because its process died.
    /// With no readers it is freed at once.
    fn export(&self, block: BlockMut, readers: &[u32]) -> Result<Descriptor, ExportError>;

    /// Opens the block `descriptor` describes, found in `frame`. The descriptor
    /// came from another process: every field is checked.
    fn import(&self, frame: &Frame, descriptor: &[u8]) -> Result<Arc<dyn BufferStorage>, ImportError>;

    /// Gives back the hold of `reader` (a process id) on a block it will not
    /// import: it chose another representation, or never received the message.
    fn release_unimported(&self, descriptor: &[u8], reader: u32) -> Result<(), ImportError>;

    /// Whether process `reader` has a hold on the block `descriptor` names
    /// that it has not imported: the message is on its way to it, or never
    /// reached it. `false` once it imported or gave back every hold of its
    /// own, for a descriptor that is stale or not of this backend, and for
    /// backends whose memory the frame owns.
    fn awaits(&self, _descriptor: &[u8], _reader: u32) -> bool {
        false
    }

    /// The UUID of the device whose memory this backend lends (`cuda`,
    /// `cuda-host`, and the simulated device of `fake-device`); `None` for
    /// host-only backends. A reader on another device cannot import this
    /// backend's blocks and is sent host bytes instead.
    fn device_uuid(&self) -> Option<[u8; 16]> {
        None
    }

    /// Bytes of this backend's blocks that process `reader` holds (imported,
    /// or exported for it and not yet given back). Backends whose memory the
    /// frame owns hold nothing for readers.
    fn held_for(&self, _reader: u32) -> usize {
        0
    }

    /// Releases the holds of readers whose process died; returns how many.
    /// Backends whose memory the frame owns have none.
    fn reclaim_dead_readers(&self) -> usize {
        0
    }

    /// Current usage.
    fn stats(&self) -> BackendStats;
}

/// Why [`Backend::allocate`] failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// More than the backend lends in one block.
    #[error("{backend}: a block of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The backend.
        backend: BackendKind,
        /// Bytes asked for.
        len: usize,
        /// The backend's limit.
        max: usize,
    },
    /// The pool has no room left: readers hold its blocks, or (device memory)
    /// reader processes still have idle blocks open, which keeps their memory
    /// until those readers import again or exit.
    #[error(
        "{backend}: pool exhausted ({in_use} bytes carved of {capacity}): blocks are held by readers, or idle \
         but still open in a reader process (freed when it next imports or exits); raise the pool's capacity"
    )]
    Exhausted {
        /// The backend.
        backend: BackendKind,
        /// Bytes carved from the pool (held, or idle but not yet freed).
        in_use: usize,
        /// Pool capacity.
        capacity: usize,
    },
    /// An in-frame backend was not given a frame region, or it has the wrong length.
    #[error("{backend}: needs a frame region of {len} bytes")]
    MissingSlot {
        /// The backend.
        backend: BackendKind,
        /// Bytes asked for.
        len: usize,
    },
    /// The operating system or device refused.
    #[error("{backend}: {reason}")]
    System {
        /// The backend.
        backend: BackendKind,
        /// What failed.
        reason: String,
    },
}

/// Why [`WritableBlock::write_from_host`] failed: the write overruns the
/// block, or (`failure` is set) the device refused the copy.
#[derive(Debug, PartialEq, Eq)]
pub struct WriteError {
    /// Where the write started.
    pub offset: usize,
    /// Bytes written.
    pub len: usize,
    /// Size of the block.
    pub block_len: usize,
    /// What the device reported when a write within the block failed;
    /// `None` when the write overruns the block.
    pub failure: Option<String>,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let WriteError { offset, len, block_len, failure } = self;
        match failure {
            None => write!(f, "write of {len} bytes at offset {offset} overruns a block of {block_len} bytes"),
            Some(e) => write!(f, "write of {len} bytes at offset {offset} of a {block_len}-byte block failed: {e}"),
        }
    }
}

impl std::error::Error for WriteError {}

/// Why [`Backend::export`] failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExportError {
    /// The block was lent by another backend.
    #[error("the block was not allocated by this backend")]
    ForeignBlock,
    /// The descriptor would exceed [`MAX_DESCRIPTOR_LEN`].
    #[error("descriptor of {0} bytes exceeds the 4096-byte limit")]
    DescriptorTooLong(usize),
    /// The device refused to seal the block (recording its event, or
    /// getting its IPC handles).
    #[error("{backend}: {reason}")]
    Device {
        /// The backend.
        backend: BackendKind,
        /// What the device reported.
        reason: String,
    },
    /// The backend records fewer readers per block than `export` was given.
    #[error("{backend}: a block records at most {max} readers, {readers} were given")]
    TooManyReaders {
        /// The backend.
        backend: BackendKind,
        /// Readers given to `export`.
        readers: usize,
        /// Readers a block can record.
        max: usize,
    },
}

/// Why [`Backend::import`] failed. None of these is ever turned into an empty
/// buffer: the caller reports the error or falls back to host bytes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImportError {
    /// The descriptor is not one this backend writes.
    #[error("{backend}: malformed descriptor: {reason}")]
    Malformed {
        /// The backend.
        backend: BackendKind,
        /// What is wrong with it.
        reason: String,
    },
    /// The descriptor points outside the frame it came in.
    #[error("{backend}: descriptor points at bytes {offset}..{end} of a {frame_len}-byte frame")]
    OutOfFrame {
        /// The backend.
        backend: BackendKind,
        /// Start of the region.
        offset: u64,
        /// End of the region.
        end: u64,
        /// Length of the frame.
        frame_len: usize,
    },
    /// The block was released and reused since the descriptor was written.
    #[error("{backend}: block {block} is stale (descriptor generation {expected}, block is at {found})")]
    Stale {
        /// The backend.
        backend: BackendKind,
        /// The block.
        block: u32,
        /// Generation in the descriptor.
        expected: u64,
        /// Generation of the block now.
        found: u64,
    },
    /// The memory the descriptor names cannot be reached from this process.
    #[error("{backend}: cannot open the memory: {reason}")]
    Unreachable {
        /// The backend.
        backend: BackendKind,
        /// Why.
        reason: String,
    },
    /// The process has no hold of its own on the block: it was not named as a
    /// reader at export, or has already imported or released every hold it was
    /// given. It may not take another reader's.
    #[error("{backend}: process {pid} holds no unclaimed share of the block (not a reader, or every share used)")]
    NotAReader {
        /// The backend.
        backend: BackendKind,
        /// The process that asked.
        pid: u32,
    },
}

/// The backends this process can use, by kind.
pub fn available_backends() -> Vec<Arc<dyn Backend>> {
    vec![Arc::new(CpuBackend), Arc::new(ShmBackend::default())]
}
