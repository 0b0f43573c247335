//! The frame: the bytes one message occupies on the local plane.
//!
//! ```text
//! 0    header (64 bytes): magic, version, type hash, publisher id, sequence,
//!      publish time, meta length, buffer count, and at 48 the UUID of the
//!      device of the publisher's pool (zero: none)
//! 64   meta: u32 small-field length, small fields as CDR (buffer fields are
//!      u32 indices into the table), then the buffer table:
//!      per buffer { kind u8, alt kind u8, desc len u16, alt len u16, 2 pad,
//!                   descriptor, alt descriptor, pad to 4 }
//! ...  in-frame buffer bytes, each 64-byte aligned
//! ```
//!
//! A buffer has a primary representation (the publisher's backend) and, when a
//! subscriber cannot take that backend, an alternative host copy made once for
//! all such subscribers. Every field is checked on decode: a frame may come from
//! a buggy or hostile process.

use freight_backend::Descriptor;
use freight_msg::cdr::DecodeErrorKind;
use freight_msg::{BackendKind, BufferDecoder, BufferEncoder, CdrReader, CdrWriter, DecodeError, ElementInfo};
use freight_msg::{EncodeError, RawBuffer};

pub(crate) const HEADER_LEN: usize = 64;
pub(crate) const DATA_ALIGN: usize = 64;
const MAGIC: u32 = u32::from_le_bytes(*b"FRT1");
const VERSION: u16 = 1;
const NO_ALT: u8 = 0xff;
const ENTRY_FIXED: usize = 8;

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// Not a freight frame, or another version.
    #[error("not a freight v1 frame (magic {magic:#x}, version {version})")]
    BadHeader {
        /// The magic found.
        magic: u32,
        /// The version found.
        version: u16,
    },
    /// The frame is shorter than its header says.
    #[error("frame of {len} bytes is truncated: {reason}")]
    Truncated {
        /// Bytes in the frame.
        len: usize,
        /// What is missing.
        reason: &'static str,
    },
    /// The buffer table names an unknown backend.
    #[error("unknown backend code {0}")]
    UnknownBackend(u8),
    /// The small fields do not decode.
    #[error("small fields: {0}")]
    Fields(#[from] DecodeError),
}

/// Wire code of a backend in the buffer table.
pub(crate) fn backend_code(b: BackendKind) -> u8 {
    match b {
        BackendKind::Cpu => 1,
        BackendKind::Shm => 2,
        BackendKind::FakeDevice => 3,
        BackendKind::Cuda => 4,
        BackendKind::CudaHost => 5,
        _ => 0,
    }
}

fn backend_from_code(c: u8) -> Result<BackendKind, FrameError> {
    Ok(match c {
        1 => BackendKind::Cpu,
        2 => BackendKind::Shm,
        3 => BackendKind::FakeDevice,
        4 => BackendKind::Cuda,
        5 => BackendKind::CudaHost,
        c => return Err(FrameError::UnknownBackend(c)),
    })
}

/// Fixed header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub type_hash: u64,
    pub publisher_id: u64,
    pub sequence: u64,
    pub publish_time_ns: u64,
    pub meta_len: u32,
    pub buffer_count: u32,
    /// The UUID of the device whose pool holds the publisher's device buffers
    /// (`cuda`, `fake-device`); `None` (all zero on the wire) for host memory.
    pub device: Option<[u8; 16]>,
}

impl Header {
    pub(crate) fn write(&self, out: &mut [u8]) {
        out[..HEADER_LEN].fill(0);
        out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&VERSION.to_le_bytes());
        out[8..16].copy_from_slice(&self.type_hash.to_le_bytes());
        out[16..24].copy_from_slice(&self.publisher_id.to_le_bytes());
        out[24..32].copy_from_slice(&self.sequence.to_le_bytes());
        out[32..40].copy_from_slice(&self.publish_time_ns.to_le_bytes());
        out[40..44].copy_from_slice(&self.meta_len.to_le_bytes());
        out[44..48].copy_from_slice(&self.buffer_count.to_le_bytes());
        out[48..64].copy_from_slice(&self.device.unwrap_or_default());
    }

    pub(crate) fn read(frame: &[u8]) -> Result<Header, FrameError> {
        if frame.len() < HEADER_LEN {
            return Err(FrameError::Truncated { len: frame.len(), reason: "no room for the header" });
        }
        let u32_at = |o: usize| u32::from_le_bytes(frame[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(frame[o..o + 8].try_into().expect("8 bytes"));
        let magic = u32_at(0);
        let version = u16::from_le_bytes([frame[4], frame[5]]);
        if magic != MAGIC || version != VERSION {
            return Err(FrameError::BadHeader { magic, version });
        }
        let h = Header {
            type_hash: u64_at(8),
            publisher_id: u64_at(16),
            sequence: u64_at(24),
            publish_time_ns: u64_at(32),
            meta_len: u32_at(40),
            buffer_count: u32_at(44),
            device: Some(frame[48..64].try_into().expect("16 bytes")).filter(|d| *d != [0u8; 16]),
        };
        if h.meta_len as usize > frame.len() - HEADER_LEN {
            return Err(FrameError::Truncated { len: frame.len(), reason: "meta runs past the end" });
        }
        Ok(h)
    }
}

/// One buffer's entry in the table, as the publisher writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: BackendKind,
    pub descriptor: Descriptor,
    /// A host copy for subscribers that cannot take `kind`.
    pub alt: Option<(BackendKind, Descriptor)>,
}

/// One buffer's entry in the table, as a subscriber reads it (borrowed from the frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryRef<'a> {
    pub kind: BackendKind,
    pub descriptor: &'a [u8],
    pub alt: Option<(BackendKind, &'a [u8])>,
}

/// What a frame (and the network) needs of a message: its buffers and its
/// CDR, for a typed message ([`Typed`]) and a generic one alike.
pub(crate) trait Outgoing {
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer));
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError>;
    /// The small fields as a frame's meta holds them, when the message has
    /// them so already (no need to encode them again).
    fn frame_fields(&self) -> Option<&[u8]> {
        None
    }
}

/// A message of a Rust type.
pub(crate) struct Typed<'a, M>(pub &'a M);

impl<M: freight_msg::Message> Outgoing for Typed<'_, M> {
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer)) {
        self.0.visit_buffers(f)
    }
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        self.0.write(w, bufs)
    }
}

impl Outgoing for freight_msg::generic::GenericMessage {
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer)) {
        self.buffers().iter().for_each(f)
    }
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        freight_msg::generic::GenericMessage::write(self, w, bufs)
    }
    /// Its fields, which name its buffers 0, 1, … in order (checked when it
    /// was made), are what the ordinal encoder would write.
    fn frame_fields(&self) -> Option<&[u8]> {
        Some(self.fields())
    }
}

/// Writes buffer fields as their ordinal in the table; the table itself is
/// prepared by the publisher in the same (field) order.
pub(crate) struct OrdinalEncoder {
    pub next: u32,
}

impl BufferEncoder for OrdinalEncoder {
    fn write_buffer(&mut self, w: &mut CdrWriter, _: &RawBuffer, _: ElementInfo) -> Result<(), EncodeError> {
        w.write_u32(self.next);
        self.next += 1;
        Ok(())
    }
}

/// Encodes the meta region (small fields, then the table) into `meta`, which
/// is cleared first; `scratch` holds the small fields on the way. Both are
/// reused from message to message, so encoding allocates nothing once warm.
pub(crate) fn encode_meta<O: Outgoing>(
    msg: &O,
    entries: &[Entry],
    meta: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let small = match msg.frame_fields() {
        Some(fields) => fields,
        None => {
            let mut w = CdrWriter::from_vec(std::mem::take(scratch));
            let mut enc = OrdinalEncoder { next: 0 };
            let written = msg.write(&mut w, &mut enc);
            *scratch = w.finish();
            written?;
            scratch
        }
    };
    let small_len = u32::try_from(small.len()).map_err(|_| EncodeError::TooLong(small.len()))?;
    meta.clear();
    meta.extend_from_slice(&small_len.to_le_bytes());
    meta.extend_from_slice(small);
    pad4(meta);
    for e in entries {
        let (alt_kind, alt_desc) = match &e.alt {
            Some((k, d)) => (backend_code(*k), d.as_bytes()),
            None => (NO_ALT, &[][..]),
        };
        meta.push(backend_code(e.kind));
        meta.push(alt_kind);
        meta.extend_from_slice(&(e.descriptor.as_bytes().len() as u16).to_le_bytes());
        meta.extend_from_slice(&(alt_desc.len() as u16).to_le_bytes());
        meta.extend_from_slice(&[0, 0]);
        meta.extend_from_slice(e.descriptor.as_bytes());
        meta.extend_from_slice(alt_desc);
        pad4(meta);
    }
    Ok(())
}

fn pad4(v: &mut Vec<u8>) {
    v.resize(v.len().next_multiple_of(4), 0);
}

/// The meta region of a received frame: the small fields and a reader of the
/// buffer table. Entries are parsed one by one as the small fields reach the
/// buffer fields, so reading a message allocates nothing for its table.
#[derive(Debug, Clone)]
pub(crate) struct Meta<'a> {
    pub small: &'a [u8],
    pub table: TableReader<'a>,
}

/// Walks the buffer table, checking each entry against the meta's end.
#[derive(Debug, Clone)]
pub(crate) struct TableReader<'a> {
    meta: &'a [u8],
    pos: usize,
    left: usize,
    frame_len: usize,
}

impl<'a> TableReader<'a> {
    /// Entries not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.left
    }
}

impl<'a> Iterator for TableReader<'a> {
    type Item = Result<EntryRef<'a>, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let trunc = |reason| FrameError::Truncated { len: self.frame_len, reason };
        let meta = self.meta;
        let mut pos = self.pos;
        let entry = (|| {
            let fixed = meta.get(pos..pos + ENTRY_FIXED).ok_or(trunc("buffer entry runs past the meta"))?;
            let kind = backend_from_code(fixed[0])?;
            let alt_code = fixed[1];
            let dlen = u16::from_le_bytes([fixed[2], fixed[3]]) as usize;
            let alen = u16::from_le_bytes([fixed[4], fixed[5]]) as usize;
            pos += ENTRY_FIXED;
            let descriptor = meta.get(pos..pos + dlen).ok_or(trunc("descriptor runs past the meta"))?;
            pos += dlen;
            let alt_desc = meta.get(pos..pos + alen).ok_or(trunc("alternative runs past the meta"))?;
            pos = (pos + alen).next_multiple_of(4);
            let alt = if alt_code == NO_ALT { None } else { Some((backend_from_code(alt_code)?, alt_desc)) };
            Ok(EntryRef { kind, descriptor, alt })
        })();
        self.pos = pos;
        if entry.is_err() {
            self.left = 0;
        }
        Some(entry)
    }
}

pub(crate) fn decode_meta<'a>(frame: &'a [u8], h: &Header) -> Result<Meta<'a>, FrameError> {
    let trunc = |reason| FrameError::Truncated { len: frame.len(), reason };
    let meta = &frame[HEADER_LEN..HEADER_LEN + h.meta_len as usize];
    if meta.len() < 4 {
        return Err(trunc("meta has no small-field length"));
    }
    let small_len = u32::from_le_bytes(meta[..4].try_into().expect("4 bytes")) as usize;
    let small = meta.get(4..4 + small_len).ok_or(trunc("small fields run past the meta"))?;
    let pos = (4 + small_len).next_multiple_of(4);
    // Every entry takes at least ENTRY_FIXED bytes: a count that cannot fit is
    // refused before anything relies on it.
    let count = h.buffer_count as usize;
    if count > meta.len().saturating_sub(pos) / ENTRY_FIXED {
        return Err(trunc("buffer table claims more entries than fit"));
    }
    Ok(Meta { small, table: TableReader { meta, pos, left: count, frame_len: frame.len() } })
}

/// Rewrites the buffer table of a frame this process wrote so that buffers of
/// backend `from` say `to` (primary and host-copy representations alike): the
/// frame was moved to memory of another kind. The frame's layout is unchanged.
pub(crate) fn retag(frame: &mut [u8], from: BackendKind, to: BackendKind) -> Result<(), FrameError> {
    let header = Header::read(frame)?;
    let meta_start = frame.as_ptr() as usize;
    let mut kind_bytes = Vec::new();
    for entry in decode_meta(frame, &header)?.table {
        let e = entry?;
        // The entry's fixed part (kind, alt kind, ...) precedes its descriptor.
        let fixed = e.descriptor.as_ptr() as usize - meta_start - ENTRY_FIXED;
        if e.kind == from {
            kind_bytes.push(fixed);
        }
        if e.alt.is_some_and(|(k, _)| k == from) {
            kind_bytes.push(fixed + 1);
        }
    }
    for at in kind_bytes {
        frame[at] = backend_code(to);
    }
    Ok(())
}

/// What [`inspect_frame`] reads from a frame: its header and buffer table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameSummary {
    /// Hash of the message type's definition (`Message::TYPE_HASH`).
    pub type_hash: u64,
    /// The publisher that sent the frame.
    pub publisher_id: u64,
    /// The publisher's sequence number of the message.
    pub sequence: u64,
    /// When it was published, in nanoseconds of the publisher's clock.
    pub publish_time_ns: u64,
    /// The UUID of the device whose pool holds the publisher's device
    /// buffers; `None` when they are host memory.
    pub device: Option<[u8; 16]>,
    /// The buffer table, one entry per buffer field (its length is the
    /// frame's buffer count).
    pub buffers: Vec<BufferSummary>,
}

/// One entry of a frame's buffer table, as [`inspect_frame`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferSummary {
    /// The backend of the publisher's memory.
    pub kind: BackendKind,
    /// Where its descriptor lies in the frame; `descriptor.len()` is its length.
    pub descriptor: std::ops::Range<usize>,
    /// The host copy that came with it for subscribers that cannot take
    /// `kind`: its backend and where its descriptor lies in the frame.
    pub alt: Option<(BackendKind, std::ops::Range<usize>)>,
}

/// Reads a frame's header and walks its whole buffer table without knowing
/// the message type, checking every length: the frame may come from a buggy
/// or hostile process. Neither the small fields nor the buffers are decoded.
///
/// ```
/// // A frame by hand: the 64-byte header, then the meta: the small fields'
/// // length and the small fields (an empty CDR message), and no buffers.
/// let mut frame = vec![0u8; 64];
/// frame[0..4].copy_from_slice(b"FRT1"); // magic
/// frame[4] = 1; // version
/// frame[8..16].copy_from_slice(&42u64.to_le_bytes()); // type hash
/// frame[24..32].copy_from_slice(&7u64.to_le_bytes()); // sequence
/// frame[40..44].copy_from_slice(&8u32.to_le_bytes()); // meta length
/// frame.extend_from_slice(&4u32.to_le_bytes());
/// frame.extend_from_slice(&[0, 1, 0, 0]);
///
/// let summary = freight::inspect_frame(&frame).unwrap();
/// assert_eq!((summary.type_hash, summary.sequence), (42, 7));
/// assert!(summary.buffers.is_empty());
///
/// // A frame that claims a buffer it has no room for is refused.
/// frame[44..48].copy_from_slice(&1u32.to_le_bytes());
/// assert!(freight::inspect_frame(&frame).is_err());
/// ```
pub fn inspect_frame(bytes: &[u8]) -> Result<FrameSummary, FrameError> {
    let header = Header::read(bytes)?;
    let meta = decode_meta(bytes, &header)?;
    // Descriptors are borrowed from `bytes`: their offsets locate them there.
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - bytes.as_ptr() as usize;
        start..start + s.len()
    };
    // `decode_meta` bounded the count by the meta's length.
    let mut buffers = Vec::with_capacity(meta.table.remaining());
    for entry in meta.table {
        let e = entry?;
        buffers.push(BufferSummary { kind: e.kind, descriptor: at(e.descriptor), alt: e.alt.map(|(k, d)| (k, at(d))) });
    }
    Ok(FrameSummary {
        type_hash: header.type_hash,
        publisher_id: header.publisher_id,
        sequence: header.sequence,
        publish_time_ns: header.publish_time_ns,
        device: header.device,
        buffers,
    })
}

/// Reads buffer-field ordinals from the small fields and imports each buffer
/// as it is reached, with `import` deciding which representation to take.
pub(crate) struct ImportingDecoder<'a, F> {
    pub table: TableReader<'a>,
    pub next: u32,
    pub import: F,
    /// A malformed table entry met on the way, kept typed for the caller.
    pub table_error: Option<FrameError>,
}

impl<'a, F> BufferDecoder for ImportingDecoder<'a, F>
where
    F: FnMut(usize, EntryRef<'a>) -> Result<RawBuffer, String>,
{
    fn read_buffer(&mut self, r: &mut CdrReader<'_>, _: ElementInfo) -> Result<RawBuffer, DecodeError> {
        let i = r.read_u32()?;
        if i != self.next {
            return Err(r.error(DecodeErrorKind::Buffer(format!("buffer {i} where buffer {} was due", self.next))));
        }
        self.next += 1;
        match self.table.next() {
            Some(Ok(entry)) => (self.import)(i as usize, entry).map_err(|e| r.error(DecodeErrorKind::Buffer(e))),
            Some(Err(e)) => {
                let text = e.to_string();
                self.table_error = Some(e);
                Err(r.error(DecodeErrorKind::Buffer(text)))
            }
            None => Err(r.error(DecodeErrorKind::Buffer(format!("buffer {i} is not in the table")))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use freight_msg::msgs::sensor_msgs::Image;

    fn sample_frame() -> Vec<u8> {
        let entries = vec![Entry {
            kind: BackendKind::FakeDevice,
            descriptor: Descriptor::new(vec![1, 2, 3]).unwrap(),
            alt: Some((BackendKind::Shm, Descriptor::new(vec![9; 16]).unwrap())),
        }];
        let (mut meta, mut scratch) = (Vec::new(), Vec::new());
        encode_meta(
            &Typed(&Image { encoding: "bgra8".into(), ..Default::default() }),
            &entries,
            &mut meta,
            &mut scratch,
        )
        .unwrap();
        let mut f = vec![0u8; HEADER_LEN + meta.len()];
        Header {
            type_hash: 7,
            publisher_id: 1,
            sequence: 2,
            publish_time_ns: 3,
            meta_len: meta.len() as u32,
            buffer_count: 1,
            device: Some([0xd; 16]),
        }
        .write(&mut f);
        f[HEADER_LEN..].copy_from_slice(&meta);
        f
    }

    #[test]
    fn meta_round_trips() {
        let f = sample_frame();
        let h = Header::read(&f).unwrap();
        assert_eq!((h.type_hash, h.sequence, h.buffer_count, h.device), (7, 2, 1, Some([0xd; 16])));
        let mut m = decode_meta(&f, &h).unwrap();
        let e = m.table.next().unwrap().unwrap();
        assert_eq!(e.descriptor, &[1, 2, 3]);
        assert_eq!(e.alt, Some((BackendKind::Shm, &[9u8; 16][..])));
        assert!(m.table.next().is_none());
    }

    #[test]
    fn retagging_rewrites_the_kind_of_primary_and_host_copy_entries_only() {
        let mut f = sample_frame();
        retag(&mut f, BackendKind::Shm, BackendKind::Cpu).unwrap();
        let h = Header::read(&f).unwrap();
        let e = decode_meta(&f, &h).unwrap().table.next().unwrap().unwrap();
        assert_eq!(e.kind, BackendKind::FakeDevice, "other kinds stay");
        assert_eq!(e.alt, Some((BackendKind::Cpu, &[9u8; 16][..])));
        assert_eq!(e.descriptor, &[1, 2, 3]);
        let mut g = sample_frame();
        retag(&mut g, BackendKind::FakeDevice, BackendKind::Cuda).unwrap();
        let h = Header::read(&g).unwrap();
        assert_eq!(decode_meta(&g, &h).unwrap().table.next().unwrap().unwrap().kind, BackendKind::Cuda);
        assert!(retag(&mut g[..10], BackendKind::Cpu, BackendKind::Shm).is_err());
    }

    #[test]
    fn every_truncation_and_byte_flip_is_an_error_or_harmless() {
        let f = sample_frame();
        for cut in 0..f.len() {
            let g = &f[..cut];
            if let Ok(h) = Header::read(g) {
                let whole = decode_meta(g, &h).and_then(|m| m.table.collect::<Result<Vec<_>, _>>());
                assert!(whole.is_err(), "truncated frame of {cut} bytes decoded");
            }
        }
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 0xff;
            if let Ok(h) = Header::read(&g) {
                // Must not panic, whatever the flipped byte was.
                let _ = decode_meta(&g, &h).map(|m| m.table.collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn unknown_backend_code_is_reported_as_such() {
        let mut f = sample_frame();
        let h = Header::read(&f).unwrap();
        let small_len = u32::from_le_bytes(f[HEADER_LEN..HEADER_LEN + 4].try_into().unwrap()) as usize;
        let entry_at = HEADER_LEN + (4 + small_len).next_multiple_of(4);
        f[entry_at] = 99;
        let mut m = decode_meta(&f, &h).unwrap();
        assert_eq!(m.table.next(), Some(Err(FrameError::UnknownBackend(99))));
        assert_eq!(m.table.next(), None, "a malformed table ends the walk");
    }

    #[test]
    fn inspect_frame_reads_header_and_every_entry() {
        let f = sample_frame();
        let s = inspect_frame(&f).unwrap();
        assert_eq!((s.type_hash, s.publisher_id, s.sequence, s.publish_time_ns), (7, 1, 2, 3));
        assert_eq!(s.device, Some([0xd; 16]));
        assert_eq!(s.buffers.len(), 1);
        let b = &s.buffers[0];
        assert_eq!(b.kind, BackendKind::FakeDevice);
        assert_eq!(&f[b.descriptor.clone()], &[1, 2, 3]);
        let (alt_kind, alt) = b.alt.clone().unwrap();
        assert_eq!(alt_kind, BackendKind::Shm);
        assert_eq!(&f[alt], &[9u8; 16]);
    }

    #[test]
    fn inspect_frame_refuses_every_truncation_and_reports_bad_entries() {
        let f = sample_frame();
        for cut in 0..f.len() {
            assert!(inspect_frame(&f[..cut]).is_err(), "truncated frame of {cut} bytes inspected");
        }
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 0xff;
            if let Ok(s) = inspect_frame(&g) {
                for b in &s.buffers {
                    assert!(b.descriptor.end <= g.len() && b.alt.as_ref().is_none_or(|(_, r)| r.end <= g.len()));
                }
            }
        }
        let mut g = f.clone();
        let small_len = u32::from_le_bytes(g[HEADER_LEN..HEADER_LEN + 4].try_into().unwrap()) as usize;
        g[HEADER_LEN + (4 + small_len).next_multiple_of(4) + 1] = 42; // the alternative's backend
        assert_eq!(inspect_frame(&g), Err(FrameError::UnknownBackend(42)));
        g[44..48].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(inspect_frame(&g), Err(FrameError::Truncated { .. })));
    }

    #[test]
    fn huge_buffer_count_is_refused_before_allocating() {
        let mut f = sample_frame();
        f[44..48].copy_from_slice(&u32::MAX.to_le_bytes());
        let h = Header::read(&f).unwrap();
        assert!(matches!(decode_meta(&f, &h), Err(FrameError::Truncated { .. })));
    }
}
