//! A message's bytes as the reader found them: a range of the mapped file
//! where its chunk is stored uncompressed, else the decompressed copy.
//!
//! Messages decoded from mapped bytes ([`crate::Message::decode`]) keep their
//! large arrays (`Buffer` fields: an image's pixels, a cloud's points) as
//! views over the file's memory, so reading a recorded 4K frame copies
//! nothing until the program touches the pixels, and then only what the page
//! cache does.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use freight_msg::message::{read_inline, ElementInfo};
use freight_msg::{BackendKind, Buffer, BufferDecoder, BufferStorage, CdrReader, DecodeError, RawBuffer};
use memmap2::Mmap;

/// The CDR bytes of one recorded message.
///
/// ```no_run
/// let bag = freight_bag::Reader::open("my_bag").unwrap();
/// for m in bag.messages() {
///     let m = m.unwrap();
///     let first: &[u8] = &m.data[..4]; // the CDR encapsulation header
///     println!("{} bytes, in the file's memory: {}", m.data.len(), m.data.is_mapped());
/// }
/// ```
#[derive(Clone)]
pub struct Bytes(Repr);

#[derive(Clone)]
enum Repr {
    /// `len` bytes at `start` of a file mapping.
    Mapped { map: Arc<Mmap>, start: usize, len: usize },
    /// Bytes decompressed from a chunk.
    Owned(Vec<u8>),
}

impl Bytes {
    /// `data` as the MCAP reader lent it: when it lies inside `map` (an
    /// uncompressed chunk), a range of the mapping; else a copy.
    pub(crate) fn from_file(map: &Arc<Mmap>, data: std::borrow::Cow<'_, [u8]>) -> Bytes {
        match data {
            std::borrow::Cow::Borrowed(s) => match offset_in(map, s) {
                Some(start) => Bytes(Repr::Mapped { map: Arc::clone(map), start, len: s.len() }),
                None => Bytes(Repr::Owned(s.to_vec())),
            },
            std::borrow::Cow::Owned(v) => Bytes(Repr::Owned(v)),
        }
    }

    /// Whether the bytes are the file's own memory (an uncompressed chunk)
    /// rather than a decompressed copy.
    pub fn is_mapped(&self) -> bool {
        matches!(self.0, Repr::Mapped { .. })
    }

    /// The bytes as a vector (a copy when they are the file's memory).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Owned(v) => v,
            Repr::Mapped { .. } => self.to_vec(),
        }
    }

    /// Decodes `M`, its `Buffer` fields viewing this memory where it is the
    /// file's and aligned for the element type, else copied.
    pub(crate) fn decode<M: freight_msg::Message>(&self) -> Result<M, DecodeError> {
        match &self.0 {
            Repr::Mapped { map, .. } => M::from_cdr_with(self, &mut FileBuffers { map }),
            Repr::Owned(v) => M::from_cdr(v),
        }
    }
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Mapped { map, start, len } => &map[*start..*start + *len],
            Repr::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

impl PartialEq<[u8]> for Bytes {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<Vec<u8>> for Bytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = if self.is_mapped() { "mapped" } else { "decompressed" };
        write!(f, "Bytes({} bytes, {place})", self.len())
    }
}

/// Where `s` starts in `map`, if it lies wholly inside it.
fn offset_in(map: &Mmap, s: &[u8]) -> Option<usize> {
    let start = (s.as_ptr() as usize).checked_sub(map.as_ptr() as usize)?;
    (start.checked_add(s.len())? <= map.len()).then_some(start)
}

/// Reads buffer fields as views over the file mapping (the `cpu` backend's
/// kind of memory: host bytes, read-only).
struct FileBuffers<'m> {
    map: &'m Arc<Mmap>,
}

impl BufferDecoder for FileBuffers<'_> {
    fn read_buffer(&mut self, r: &mut CdrReader<'_>, element: ElementInfo) -> Result<RawBuffer, DecodeError> {
        let bytes = read_inline(r, element)?;
        // A typed view needs its elements aligned in memory; CDR aligns them
        // from the payload's start, which a chunk may place anywhere. Those,
        // and empty arrays, are copied (as the network plane copies them).
        let aligned = bytes.as_ptr().align_offset(element.size) == 0;
        match offset_in(self.map, bytes) {
            Some(start) if aligned && !bytes.is_empty() => {
                Ok(RawBuffer::from_storage(Arc::new(FileSlice { map: Arc::clone(self.map), start, len: bytes.len() })))
            }
            _ => Ok(Buffer::from(bytes.to_vec()).raw().clone()),
        }
    }
}

/// A buffer field's bytes in a mapped bag file; the mapping lives as long as
/// some buffer views it.
struct FileSlice {
    map: Arc<Mmap>,
    start: usize,
    len: usize,
}

impl fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileSlice({} bytes at {})", self.len, self.start)
    }
}

impl BufferStorage for FileSlice {
    fn backend(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn len(&self) -> usize {
        self.len
    }

    fn host_bytes(&self) -> Option<&[u8]> {
        Some(&self.map[self.start..self.start + self.len])
    }
}
