//! The [`Message`] trait and [`CdrField`], the encoding of each field type.
//!
//! Buffer fields are encoded through a [`BufferEncoder`] / [`BufferDecoder`]
//! chosen by the transport: shared memory writes an index into the frame's
//! buffer table, the network writes the bytes as a CDR sequence
//! ([`InlineBuffers`]). Everything else is plain CDR either way.

use std::fmt;

use crate::buffer::{Buffer, Element, RawBuffer};
use crate::cdr::{CdrReader, CdrWriter, DecodeError, DecodeErrorKind, EncodeError};
use crate::yaml::{self, YamlField, YamlOptions};

#[cfg(not(target_endian = "little"))]
compile_error!("freight's CDR bulk copies assume a little-endian host");

/// The element type of a buffer field, as an encoder needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementInfo {
    /// Bytes per element (also its CDR alignment).
    pub size: usize,
    /// The ROS 2 name of the element type.
    pub ros_name: &'static str,
}

impl ElementInfo {
    /// The info of `T`.
    pub fn of<T: Element>() -> Self {
        ElementInfo { size: std::mem::size_of::<T>(), ros_name: T::ROS_NAME }
    }
}

/// Encodes buffer fields for one transport.
pub trait BufferEncoder {
    /// Writes `buf` (whose elements are `element`) at the writer's position.
    fn write_buffer(&mut self, w: &mut CdrWriter, buf: &RawBuffer, element: ElementInfo) -> Result<(), EncodeError>;
}

/// Decodes buffer fields for one transport.
pub trait BufferDecoder {
    /// Reads a buffer of `element`s at the reader's position.
    fn read_buffer(&mut self, r: &mut CdrReader<'_>, element: ElementInfo) -> Result<RawBuffer, DecodeError>;
}

/// Buffers as plain CDR sequences: the ROS 2 wire form of a CPU buffer. Decoding
/// copies the bytes into a new `cpu` buffer; encoding copies device memory to the
/// host first, so a reader never gets an empty buffer in its place.
#[derive(Debug, Default, Clone, Copy)]
pub struct InlineBuffers;

impl BufferEncoder for InlineBuffers {
    fn write_buffer(&mut self, w: &mut CdrWriter, buf: &RawBuffer, element: ElementInfo) -> Result<(), EncodeError> {
        match buf.host_bytes() {
            Some(b) => write_inline(w, b, element),
            None => write_inline(w, &buf.to_host_vec().map_err(|e| EncodeError::Buffer(e.to_string()))?, element),
        }
    }
}

impl BufferDecoder for InlineBuffers {
    fn read_buffer(&mut self, r: &mut CdrReader<'_>, element: ElementInfo) -> Result<RawBuffer, DecodeError> {
        Ok(Buffer::from(read_inline(r, element)?.to_vec()).raw().clone())
    }
}

/// Writes a buffer's bytes as the CDR sequence of `element`s a stock ROS 2
/// node expects: length, alignment, elements.
pub fn write_inline(w: &mut CdrWriter, bytes: &[u8], element: ElementInfo) -> Result<(), EncodeError> {
    let count = bytes.len() / element.size;
    w.write_len(count)?;
    if count > 0 {
        w.align(element.size);
    }
    w.write_raw(bytes);
    Ok(())
}

/// Reads the CDR sequence of `element`s that [`write_inline`] writes; returns
/// its bytes, checked against what remains of the input.
pub fn read_inline<'a>(r: &mut CdrReader<'a>, element: ElementInfo) -> Result<&'a [u8], DecodeError> {
    let count = r.read_len(element.size)?;
    if count > 0 {
        r.align(element.size)?;
    }
    r.take(count * element.size)
}

/// A type that can be a field of a message: how it is written as CDR.
pub trait CdrField: Sized {
    /// The fewest bytes one value occupies on the wire; bounds sequence lengths
    /// before anything is allocated.
    const MIN_SIZE: usize;

    /// Writes the value.
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError>;

    /// Reads a value.
    fn read(r: &mut CdrReader<'_>, bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError>;

    /// Writes a sequence of values (length, then elements).
    fn write_seq(items: &[Self], w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        w.write_len(items.len())?;
        items.iter().enumerate().try_for_each(|(i, item)| item.write(w, bufs).map_err(|e| e.at(i)))
    }

    /// Reads a sequence of values.
    fn read_seq(r: &mut CdrReader<'_>, bufs: &mut dyn BufferDecoder) -> Result<Vec<Self>, DecodeError> {
        let n = r.read_len(Self::MIN_SIZE.max(1))?;
        (0..n).map(|_| Self::read(r, bufs)).collect()
    }

    /// Calls `f` on every buffer field inside the value.
    fn visit_buffers<'a>(&'a self, _f: &mut dyn FnMut(&'a RawBuffer)) {}

    /// Calls `f` on every buffer field inside the value, mutably.
    fn visit_buffers_mut(&mut self, _f: &mut dyn FnMut(&mut RawBuffer)) {}
}

macro_rules! primitive_fields {
    ($($t:ty: $write:ident, $read:ident;)*) => {$(
        impl CdrField for $t {
            const MIN_SIZE: usize = std::mem::size_of::<$t>();
            fn write(&self, w: &mut CdrWriter, _: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
                w.$write(*self);
                Ok(())
            }
            fn read(r: &mut CdrReader<'_>, _: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
                r.$read()
            }
            // Sequences of numbers are copied in bulk (the host is little-endian,
            // as CDR_LE is).
            fn write_seq(items: &[Self], w: &mut CdrWriter, _: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
                w.write_len(items.len())?;
                if !items.is_empty() {
                    w.align(Self::MIN_SIZE);
                    // SAFETY: plain numbers have no padding; the slice is viewed as
                    // its own bytes for the duration of the copy.
                    w.write_raw(unsafe {
                        std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items))
                    });
                }
                Ok(())
            }
            fn read_seq(r: &mut CdrReader<'_>, _: &mut dyn BufferDecoder) -> Result<Vec<Self>, DecodeError> {
                let n = r.read_len(Self::MIN_SIZE)?;
                if n == 0 {
                    return Ok(Vec::new());
                }
                r.align(Self::MIN_SIZE)?;
                let bytes = r.take(n * Self::MIN_SIZE)?;
                Ok(bytes.chunks_exact(Self::MIN_SIZE)
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("chunk has the element's size")))
                    .collect())
            }
        }
    )*};
}

primitive_fields! {
    u8: write_u8, read_u8; i8: write_i8, read_i8; u16: write_u16, read_u16; i16: write_i16, read_i16;
    u32: write_u32, read_u32; i32: write_i32, read_i32; u64: write_u64, read_u64; i64: write_i64, read_i64;
    f32: write_f32, read_f32; f64: write_f64, read_f64;
}

impl CdrField for bool {
    const MIN_SIZE: usize = 1;
    fn write(&self, w: &mut CdrWriter, _: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        w.write_bool(*self);
        Ok(())
    }
    fn read(r: &mut CdrReader<'_>, _: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        r.read_bool()
    }
}

impl CdrField for String {
    const MIN_SIZE: usize = 5;
    fn write(&self, w: &mut CdrWriter, _: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        w.write_string(self)
    }
    fn read(r: &mut CdrReader<'_>, _: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        r.read_string()
    }
}

impl<T: CdrField> CdrField for Vec<T> {
    const MIN_SIZE: usize = 4;
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        T::write_seq(self, w, bufs)
    }
    fn read(r: &mut CdrReader<'_>, bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        T::read_seq(r, bufs)
    }
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer)) {
        self.iter().for_each(|i| i.visit_buffers(f));
    }
    fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&mut RawBuffer)) {
        self.iter_mut().for_each(|i| i.visit_buffers_mut(f));
    }
}

/// Fixed-size arrays: elements without a length prefix.
impl<T: CdrField + Default, const N: usize> CdrField for [T; N] {
    const MIN_SIZE: usize = T::MIN_SIZE * N;
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        self.iter().enumerate().try_for_each(|(i, item)| item.write(w, bufs).map_err(|e| e.at(i)))
    }
    fn read(r: &mut CdrReader<'_>, bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        let mut out: [T; N] = std::array::from_fn(|_| T::default());
        for slot in out.iter_mut() {
            *slot = T::read(r, bufs)?;
        }
        Ok(out)
    }
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer)) {
        self.iter().for_each(|i| i.visit_buffers(f));
    }
    fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&mut RawBuffer)) {
        self.iter_mut().for_each(|i| i.visit_buffers_mut(f));
    }
}

impl<T: Element> CdrField for Buffer<T> {
    const MIN_SIZE: usize = 4;
    fn write(&self, w: &mut CdrWriter, bufs: &mut dyn BufferEncoder) -> Result<(), EncodeError> {
        bufs.write_buffer(w, self.raw(), ElementInfo::of::<T>())
    }
    fn read(r: &mut CdrReader<'_>, bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        let raw = bufs.read_buffer(r, ElementInfo::of::<T>())?;
        let len = raw.len_bytes();
        Buffer::from_raw(raw).map_err(|_| {
            r.error(DecodeErrorKind::Buffer(format!("{len} bytes is not a whole number of {} elements", T::ROS_NAME)))
        })
    }
    fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a RawBuffer)) {
        f(self.raw());
    }
    fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&mut RawBuffer)) {
        f(self.raw_mut());
    }
}

/// A ROS 2 message type. Declare one with [`crate::message!`].
pub trait Message: CdrField + YamlField + Clone + Default + fmt::Debug + PartialEq + Send + Sync + 'static {
    /// The ROS 2 type name, `package/msg/Name`.
    const TYPE_NAME: &'static str;
    /// The declared fields, used to tell two layouts with one name apart.
    const DEFINITION: &'static str;
    /// A hash of name and fields; endpoints whose hashes differ do not exchange data.
    const TYPE_HASH: u64 = fnv1a(Self::DEFINITION.as_bytes());

    /// The DDS type name ROS 2 uses (`sensor_msgs::msg::dds_::Image_`).
    fn dds_type_name() -> String {
        let mut parts: Vec<&str> = Self::TYPE_NAME.split('/').collect();
        let name = parts.pop().unwrap_or_default();
        format!("{}::dds_::{name}_", parts.join("::"))
    }

    /// How many buffer fields this value has (nested ones included).
    fn buffer_count(&self) -> usize {
        let mut n = 0;
        self.visit_buffers(&mut |_| n += 1);
        n
    }

    /// Serializes to plain CDR with buffers inline, as a stock ROS 2 node expects.
    fn to_cdr(&self) -> Result<Vec<u8>, EncodeError> {
        let mut w = CdrWriter::new();
        self.write(&mut w, &mut InlineBuffers)?;
        Ok(w.finish())
    }

    /// The message as `ros2 topic echo` prints it (YAML, without the `---`
    /// line that follows each message); see [`crate::yaml`].
    fn to_yaml(&self, options: &YamlOptions) -> String {
        yaml::to_string(self, options)
    }

    /// Parses plain CDR with buffers inline; buffers land in `cpu` memory.
    fn from_cdr(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::from_cdr_with(bytes, &mut InlineBuffers)
    }

    /// Parses CDR (encapsulation header first, nothing but padding after the
    /// message), reading buffer fields through `bufs`.
    fn from_cdr_with(bytes: &[u8], bufs: &mut dyn BufferDecoder) -> Result<Self, DecodeError> {
        let mut r = CdrReader::new(bytes)?;
        let v = Self::read(&mut r, bufs)?;
        r.finish()?;
        Ok(v)
    }
}

/// FNV-1a, 64 bit: a stable hash usable in constants.
pub const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}
