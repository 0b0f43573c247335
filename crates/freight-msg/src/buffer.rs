//! [`Buffer`]: a large message field whose bytes live in a memory backend.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// A memory backend: where the bytes of a [`Buffer`] live.
///
/// The name ([`BackendKind::name`]) is what subscribers advertise and what
/// travels on the wire before a descriptor, so it never changes once released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BackendKind {
    /// Ordinary process memory. Every endpoint accepts it.
    Cpu,
    /// Shared memory between processes of one host (iceoryx2).
    Shm,
    /// A simulated device memory pool in its own address space, for testing the
    /// device protocol (handles, import, release, staleness) without a GPU.
    FakeDevice,
    /// CUDA device memory shared through IPC.
    Cuda,
    /// Page-locked host memory mapped for a CUDA device.
    CudaHost,
}

impl BackendKind {
    /// Every backend, in order of preference when several are acceptable:
    /// memory the data is already in beats a copy, device beats host.
    pub const ALL: [BackendKind; 5] =
        [BackendKind::Cuda, BackendKind::FakeDevice, BackendKind::CudaHost, BackendKind::Shm, BackendKind::Cpu];

    /// The stable name of this backend (`"cpu"`, `"shm"`, `"fake-device"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Shm => "shm",
            BackendKind::FakeDevice => "fake-device",
            BackendKind::Cuda => "cuda",
            BackendKind::CudaHost => "cuda-host",
        }
    }

    /// Parses a backend name as written by [`BackendKind::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether this backend's memory is addressable by the CPU of this host.
    pub fn is_host_memory(self) -> bool {
        matches!(self, BackendKind::Cpu | BackendKind::Shm | BackendKind::CudaHost)
    }

    fn bit(self) -> u8 {
        match self {
            BackendKind::Cpu => 1,
            BackendKind::Shm => 2,
            BackendKind::FakeDevice => 4,
            BackendKind::Cuda => 8,
            BackendKind::CudaHost => 16,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of backends, e.g. the ones a subscription accepts. `cpu` is always in
/// it: every endpoint can take plain bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BackendSet(u8);

impl BackendSet {
    /// The set with only `cpu`.
    pub const CPU_ONLY: BackendSet = BackendSet(1);

    /// Builds a set from a list; `cpu` is added.
    pub fn of(kinds: &[BackendKind]) -> Self {
        kinds.iter().fold(Self::CPU_ONLY, |s, k| s.with(*k))
    }

    /// This set plus `kind`.
    pub fn with(self, kind: BackendKind) -> Self {
        BackendSet(self.0 | kind.bit())
    }

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: BackendKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The members, most preferred first (see [`BackendKind::ALL`]).
    pub fn iter(self) -> impl Iterator<Item = BackendKind> {
        BackendKind::ALL.into_iter().filter(move |k| self.contains(*k))
    }

    /// The raw bits, for compact advertisement. Round-trips with [`BackendSet::from_bits`].
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Rebuilds a set from [`BackendSet::bits`]; unknown bits are dropped and `cpu` is added.
    pub fn from_bits(bits: u8) -> Self {
        BackendSet((bits & 0b1_1111) | 1)
    }
}

impl fmt::Debug for BackendSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(BackendKind::name)).finish()
    }
}

impl fmt::Display for BackendSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(BackendKind::name).collect();
        f.write_str(&names.join(","))
    }
}

/// Errors from reading a [`Buffer`]'s contents.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum BufferError {
    /// The destination has another length than the buffer.
    #[error("destination holds {dst} bytes but the buffer has {len}")]
    LengthMismatch {
        /// Bytes in the buffer.
        len: usize,
        /// Bytes in the destination.
        dst: usize,
    },
    /// The buffer is a slot of a loan that is still being written; write it
    /// through the loan instead.
    #[error("this buffer is a loan slot that is still being written; access it through the loan")]
    PendingLoan,
    /// The backend failed to copy its memory to the host.
    #[error("{backend} could not copy to host memory: {reason}")]
    Backend {
        /// The backend that failed.
        backend: BackendKind,
        /// What it reported.
        reason: String,
    },
}

/// Memory a [`Buffer`] can live in. Implemented by each backend's block type.
///
/// Implementations release their memory (or their hold on it) when dropped.
pub trait BufferStorage: Send + Sync + fmt::Debug {
    /// The backend this memory belongs to.
    fn backend(&self) -> BackendKind;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Whether the storage holds no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The bytes, when the CPU can address them directly; `None` for device memory.
    fn host_bytes(&self) -> Option<&[u8]>;
    /// The bytes, writable, for storage that its owner may change in place
    /// (heap memory); `None` for memory shared with other readers.
    fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        None
    }
    /// Where a device addresses the bytes: CUDA device memory, or host memory
    /// mapped for a device. `None` for memory only the CPU reaches.
    fn device_view(&self) -> Option<DeviceView> {
        None
    }
    /// Orders work later submitted to `stream` (a `CUstream` handle; `0` is the
    /// legacy default stream, as in DLPack's `__dlpack__(stream=...)` also `1`)
    /// after the writer's writes to this memory, without blocking the host.
    /// Storage the host can already read in full (every host-memory backend)
    /// needs no ordering and returns `Ok`.
    fn order_on_stream(&self, stream: u64) -> Result<(), BufferError> {
        let _ = stream;
        Ok(())
    }
    /// Copies the bytes to `dst` (which must be exactly [`BufferStorage::len`] long).
    fn copy_to_host(&self, dst: &mut [u8]) -> Result<(), BufferError> {
        if dst.len() != self.len() {
            return Err(BufferError::LengthMismatch { len: self.len(), dst: dst.len() });
        }
        match self.host_bytes() {
            Some(src) => {
                dst.copy_from_slice(src);
                Ok(())
            }
            None => Err(BufferError::Backend {
                backend: self.backend(),
                reason: "storage is not host memory and has no copy routine".into(),
            }),
        }
    }
}

/// Which device addresses a buffer's memory, and where.
///
/// The device is named by its UUID (as `cuDeviceGetUuid` reports it), which is
/// the same in every process whatever `CUDA_VISIBLE_DEVICES` says; the ordinal
/// is this process's index of that device, for APIs that want one (DLPack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceView {
    /// Device address of the first byte (a `CUdeviceptr`).
    pub ptr: u64,
    /// This process's ordinal of the device.
    pub ordinal: i32,
    /// The device's UUID.
    pub uuid: [u8; 16],
    /// Whether the memory is host memory mapped for the device (`cuda-host`)
    /// rather than device memory (`cuda`).
    pub host_mapped: bool,
}

/// Heap bytes: the `cpu` backend's storage for data a user built.
struct HeapStorage<T: Element>(Vec<T>);

impl<T: Element> fmt::Debug for HeapStorage<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HeapStorage({} bytes)", self.len())
    }
}

impl<T: Element> BufferStorage for HeapStorage<T> {
    fn backend(&self) -> BackendKind {
        BackendKind::Cpu
    }
    fn len(&self) -> usize {
        std::mem::size_of_val(self.0.as_slice())
    }
    fn host_bytes(&self) -> Option<&[u8]> {
        // SAFETY: `T: Element` is a plain number type without padding or invalid
        // bit patterns, so its memory can be viewed as initialized bytes.
        Some(unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), self.len()) })
    }
    fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        let len = self.len();
        // SAFETY: as in `host_bytes`; any byte pattern written is a valid `T`.
        Some(unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), len) })
    }
}

/// A plain number type that may be the element of a [`Buffer`]: no padding, no
/// invalid bit patterns, fixed little-endian layout on the wire.
pub trait Element: Copy + Send + Sync + fmt::Debug + PartialEq + Default + 'static + sealed::Sealed {
    /// The ROS 2 / IDL name of the type (`uint8`, `float32`, ...).
    const ROS_NAME: &'static str;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! elements {
    ($($t:ty => $name:literal),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const ROS_NAME: &'static str = $name; }
    )*};
}
elements!(u8 => "uint8", i8 => "int8", u16 => "uint16", i16 => "int16", u32 => "uint32",
          i32 => "int32", u64 => "uint64", i64 => "int64", f32 => "float32", f64 => "float64");

#[derive(Clone)]
enum Repr {
    Empty,
    Storage(Arc<dyn BufferStorage>),
    /// A slot of a publisher's loan: memory exists but is being written through
    /// the loan, so it is not readable through the message.
    LoanSlot {
        slot: u32,
        len: usize,
        backend: BackendKind,
    },
}

/// The untyped core of a [`Buffer`]: bytes in some backend, shared by reference
/// count. Transports work on this; users work on [`Buffer`].
#[derive(Clone)]
pub struct RawBuffer {
    repr: Repr,
}

impl RawBuffer {
    /// An empty buffer (in `cpu`).
    pub const fn empty() -> Self {
        RawBuffer { repr: Repr::Empty }
    }

    /// A buffer over backend storage.
    pub fn from_storage(storage: Arc<dyn BufferStorage>) -> Self {
        RawBuffer { repr: Repr::Storage(storage) }
    }

    /// A placeholder for slot `slot` of a publisher's loan, `len` bytes in `backend`.
    /// Publishing the loan replaces it with the slot's memory.
    pub fn loan_slot(slot: u32, len: usize, backend: BackendKind) -> Self {
        RawBuffer { repr: Repr::LoanSlot { slot, len, backend } }
    }

    /// The loan slot this buffer stands for, if it is one.
    pub fn as_loan_slot(&self) -> Option<u32> {
        match self.repr {
            Repr::LoanSlot { slot, .. } => Some(slot),
            _ => None,
        }
    }

    /// The storage, if the buffer has any.
    pub fn storage(&self) -> Option<&Arc<dyn BufferStorage>> {
        match &self.repr {
            Repr::Storage(s) => Some(s),
            _ => None,
        }
    }

    /// Length in bytes.
    pub fn len_bytes(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Storage(s) => s.len(),
            Repr::LoanSlot { len, .. } => *len,
        }
    }

    /// The backend holding the bytes.
    pub fn backend(&self) -> BackendKind {
        match &self.repr {
            Repr::Empty => BackendKind::Cpu,
            Repr::Storage(s) => s.backend(),
            Repr::LoanSlot { backend, .. } => *backend,
        }
    }

    /// The bytes, when they are host memory.
    pub fn host_bytes(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Empty => Some(&[]),
            Repr::Storage(s) => s.host_bytes(),
            Repr::LoanSlot { .. } => None,
        }
    }

    /// Where a device addresses the bytes (`cuda` device memory, or
    /// `cuda-host` memory mapped for a device); `None` for memory only the CPU
    /// reaches, for an empty buffer and for a loan slot.
    pub fn device_view(&self) -> Option<DeviceView> {
        self.storage().and_then(|s| s.device_view())
    }

    /// Orders work later submitted to `stream` (a `CUstream` handle, `0` the
    /// legacy default stream) after the writer's writes to these bytes,
    /// without blocking the host: call it before launching a kernel that reads
    /// the buffer on `stream`. Host memory needs no ordering (`Ok`). See
    /// [`BufferStorage::order_on_stream`].
    pub fn order_on_stream(&self, stream: u64) -> Result<(), BufferError> {
        match &self.repr {
            Repr::Empty => Ok(()),
            Repr::Storage(s) => s.order_on_stream(stream),
            Repr::LoanSlot { .. } => Err(BufferError::PendingLoan),
        }
    }

    /// Copies the bytes into a new vector, from whatever memory they are in.
    pub fn to_host_vec(&self) -> Result<Vec<u8>, BufferError> {
        match &self.repr {
            Repr::Empty => Ok(Vec::new()),
            Repr::LoanSlot { .. } => Err(BufferError::PendingLoan),
            Repr::Storage(s) => match s.host_bytes() {
                Some(b) => Ok(b.to_vec()),
                None => {
                    let mut v = vec![0u8; s.len()];
                    s.copy_to_host(&mut v)?;
                    Ok(v)
                }
            },
        }
    }
}

impl fmt::Debug for RawBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::LoanSlot { slot, len, backend } => {
                write!(f, "Buffer(loan slot {slot}, {len} bytes in {backend})")
            }
            _ => write!(f, "Buffer({} bytes in {})", self.len_bytes(), self.backend()),
        }
    }
}

/// A large message field: a sequence of `T` that lives in a memory backend.
///
/// Cloning a `Buffer` shares the memory; it never copies. A received buffer keeps
/// the memory it views alive (and so the shared-memory sample it came in) until
/// the last clone is dropped.
///
/// ```
/// use freight_msg::{Buffer, BackendKind};
/// let b = Buffer::from(vec![1u16, 2, 3]);
/// assert_eq!(b.len(), 3);
/// assert_eq!(b.backend(), BackendKind::Cpu);
/// assert_eq!(b.as_slice(), Some(&[1u16, 2, 3][..]));
/// ```
pub struct Buffer<T: Element = u8> {
    raw: RawBuffer,
    _element: PhantomData<T>,
}

impl<T: Element> Buffer<T> {
    /// An empty buffer.
    pub const fn new() -> Self {
        Buffer { raw: RawBuffer::empty(), _element: PhantomData }
    }

    /// Wraps untyped storage. Fails when its length is not a whole number of `T`.
    pub fn from_raw(raw: RawBuffer) -> Result<Self, RawBuffer> {
        if !raw.len_bytes().is_multiple_of(std::mem::size_of::<T>()) {
            return Err(raw);
        }
        Ok(Buffer { raw, _element: PhantomData })
    }

    /// The untyped buffer.
    pub fn raw(&self) -> &RawBuffer {
        &self.raw
    }

    /// The untyped buffer, mutably (transports resolve loan slots through it).
    pub fn raw_mut(&mut self) -> &mut RawBuffer {
        &mut self.raw
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.raw.len_bytes() / std::mem::size_of::<T>()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.raw.len_bytes()
    }

    /// The backend holding the data.
    pub fn backend(&self) -> BackendKind {
        self.raw.backend()
    }

    /// The bytes, when they are host memory (`None` for device memory and loan slots).
    pub fn as_bytes(&self) -> Option<&[u8]> {
        self.raw.host_bytes()
    }

    /// Where a device addresses the data, for buffers in `cuda` or
    /// `cuda-host` memory; `None` for memory only the CPU reaches.
    ///
    /// ```
    /// use freight_msg::Buffer;
    /// assert_eq!(Buffer::from(vec![1u8, 2, 3]).device_view(), None);
    /// ```
    pub fn device_view(&self) -> Option<DeviceView> {
        self.raw.device_view()
    }

    /// Orders work later submitted to `stream` (a `CUstream` handle, `0` the
    /// legacy default stream) after the publisher's writes to this buffer,
    /// without blocking the host. Call it before a kernel on `stream` reads the
    /// buffer through [`Buffer::device_view`]; host memory needs no ordering
    /// and returns `Ok`.
    ///
    /// ```
    /// use freight_msg::Buffer;
    /// let b = Buffer::from(vec![0f32; 16]);
    /// b.order_on_stream(0).unwrap(); // host memory: nothing to wait for
    /// ```
    pub fn order_on_stream(&self, stream: u64) -> Result<(), BufferError> {
        self.raw.order_on_stream(stream)
    }

    /// The elements, when they are host memory and aligned for `T`.
    pub fn as_slice(&self) -> Option<&[T]> {
        let bytes = self.raw.host_bytes()?;
        if bytes.is_empty() {
            return Some(&[]);
        }
        if bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0 {
            return None;
        }
        // SAFETY: the pointer is aligned for T (checked above), the length is a
        // whole number of T (checked at construction), and every bit pattern is
        // a valid T (`Element`). The borrow ties the slice to `self`, which keeps
        // the storage alive.
        Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), self.len()) })
    }

    /// The elements, writable, when this is the only handle to heap memory
    /// (as `Arc::get_mut`): lets an owner reuse its buffer from message to
    /// message without allocating. `None` when the memory is shared or not heap.
    ///
    /// ```
    /// use freight_msg::Buffer;
    /// let mut b = Buffer::from(vec![0u32; 4]);
    /// b.get_mut().unwrap()[0] = 7;
    /// let shared = b.clone();
    /// assert!(b.get_mut().is_none());
    /// assert_eq!(shared.as_slice().unwrap()[0], 7);
    /// ```
    pub fn get_mut(&mut self) -> Option<&mut [T]> {
        let Repr::Storage(storage) = &mut self.raw.repr else { return None };
        let bytes = Arc::get_mut(storage)?.host_bytes_mut()?;
        if bytes.as_ptr().align_offset(std::mem::align_of::<T>()) != 0 {
            return None;
        }
        let len = bytes.len() / std::mem::size_of::<T>();
        // SAFETY: aligned (checked), a whole number of `T` (checked at
        // construction), every bit pattern valid (`Element`); the exclusive
        // borrow of `self` is the only access while the slice lives.
        Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), len) })
    }

    /// Copies the data to a new host vector, from whatever memory it is in.
    pub fn to_vec(&self) -> Result<Vec<T>, BufferError> {
        let bytes = self.raw.to_host_vec()?;
        let mut out = vec![T::default(); self.len()];
        // SAFETY: `out` holds exactly `bytes.len()` bytes of plain `Element`s,
        // for which every bit pattern is valid.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr().cast::<u8>(), bytes.len()) };
        Ok(out)
    }
}

impl<T: Element> Default for Buffer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Element> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        Buffer { raw: self.raw.clone(), _element: PhantomData }
    }
}

impl<T: Element> From<Vec<T>> for Buffer<T> {
    /// Takes ownership of the vector without copying (backend `cpu`).
    fn from(v: Vec<T>) -> Self {
        if v.is_empty() {
            return Self::new();
        }
        Buffer { raw: RawBuffer::from_storage(Arc::new(HeapStorage(v))), _element: PhantomData }
    }
}

impl<T: Element> From<&[T]> for Buffer<T> {
    /// Copies the slice into a new `cpu` buffer.
    fn from(v: &[T]) -> Self {
        Self::from(v.to_vec())
    }
}

impl<T: Element> PartialEq for Buffer<T> {
    /// Buffers are equal when their contents are, wherever they live.
    fn eq(&self, other: &Self) -> bool {
        if self.len_bytes() != other.len_bytes() {
            return false;
        }
        match (self.raw.host_bytes(), other.raw.host_bytes()) {
            (Some(a), Some(b)) => a == b,
            _ => match (self.raw.to_host_vec(), other.raw.to_host_vec()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            },
        }
    }
}

impl<T: Element> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer<{}>[{}] in {}", T::ROS_NAME, self.len(), self.backend())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_set_always_contains_cpu_and_round_trips_bits() {
        let s = BackendSet::of(&[BackendKind::Shm]);
        assert!(s.contains(BackendKind::Cpu));
        assert_eq!(BackendSet::from_bits(s.bits()), s);
        assert_eq!(BackendSet::from_bits(0), BackendSet::CPU_ONLY);
        assert_eq!(s.to_string(), "shm,cpu");
    }

    #[test]
    fn backend_names_parse_back() {
        for k in BackendKind::ALL {
            assert_eq!(BackendKind::from_name(k.name()), Some(k));
        }
        assert_eq!(BackendKind::from_name("gpu"), None);
    }

    #[test]
    fn typed_buffer_views_its_heap_elements_without_copy() {
        let v = vec![1.0f64, 2.0, 3.0];
        let p = v.as_ptr();
        let b = Buffer::from(v);
        assert_eq!(b.len(), 3);
        assert_eq!(b.len_bytes(), 24);
        assert_eq!(b.as_slice().map(|s| s.as_ptr()), Some(p));
        assert_eq!(b.clone(), b);
    }

    #[test]
    fn loan_slot_is_not_readable_through_the_message() {
        let b = Buffer::<u8>::from_raw(RawBuffer::loan_slot(0, 16, BackendKind::Shm)).unwrap();
        assert_eq!(b.len(), 16);
        assert!(b.as_bytes().is_none());
        assert_eq!(b.to_vec(), Err(BufferError::PendingLoan));
    }

    #[test]
    fn host_buffers_need_no_stream_order_and_loan_slots_refuse_it() {
        let b = Buffer::from(vec![1u8; 8]);
        assert_eq!((b.device_view(), b.order_on_stream(7)), (None, Ok(())));
        assert_eq!(Buffer::<u8>::new().order_on_stream(0), Ok(()));
        let slot = Buffer::<u8>::from_raw(RawBuffer::loan_slot(0, 16, BackendKind::Cuda)).unwrap();
        assert_eq!(slot.order_on_stream(0), Err(BufferError::PendingLoan));
        assert_eq!(slot.device_view(), None);
    }

    #[test]
    fn raw_of_odd_length_is_refused_for_wider_elements() {
        let raw = Buffer::from(vec![0u8; 3]).raw().clone();
        assert!(Buffer::<u16>::from_raw(raw).is_err());
    }
}
