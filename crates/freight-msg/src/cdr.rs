//! A little-endian CDR (XCDR1, as ROS 2 uses) writer and a reader that treats
//! every input as hostile.
//!
//! Alignment is relative to the end of the 4-byte encapsulation header, as in
//! ROS 2. The reader checks every length against the bytes that remain before it
//! allocates, so a 4-byte blob can never make it reserve gigabytes.

/// The encapsulation header of little-endian plain CDR (`CDR_LE`).
pub const ENCAPSULATION_CDR_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Failure to decode CDR data; `offset` is where in the input it happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed CDR at byte {offset}: {kind}")]
pub struct DecodeError {
    /// Byte offset into the input.
    pub offset: usize,
    /// What was wrong.
    pub kind: DecodeErrorKind,
}

/// What was wrong with CDR input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// The input ended before a value.
    #[error("input ends: {needed} more bytes needed, {remaining} remain")]
    UnexpectedEnd {
        /// Bytes the value needs.
        needed: usize,
        /// Bytes left.
        remaining: usize,
    },
    /// The encapsulation header is not little-endian plain CDR.
    #[error("unsupported encapsulation {0:02x?} (expected CDR_LE 00 01 00 00)")]
    Encapsulation([u8; 4]),
    /// A sequence or string claims more elements than the remaining bytes can hold.
    #[error("length {len} needs at least {needed} bytes but only {remaining} remain")]
    LengthTooLarge {
        /// The claimed length.
        len: u64,
        /// Bytes that length needs at minimum.
        needed: u64,
        /// Bytes left.
        remaining: usize,
    },
    /// A string is not valid UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A string has length 0 or lacks its terminating NUL.
    #[error("string is not NUL-terminated")]
    MissingNul,
    /// A boolean is neither 0 nor 1.
    #[error("boolean byte {0} is neither 0 nor 1")]
    InvalidBool(u8),
    /// A buffer field refers to something the message does not carry.
    #[error("buffer field: {0}")]
    Buffer(String),
    /// Bytes remain after the message.
    #[error("{0} unexpected bytes after the message")]
    TrailingBytes(usize),
    /// A bounded string or sequence of a message being made holds more
    /// than its bound (see [`crate::bounds`]).
    #[error("field `{field}`: {over}")]
    OverBound {
        /// Its path in the message: `label`, `inner.label`, `tags[2]`.
        field: String,
        /// What exceeds what.
        over: crate::bounds::OverBound,
    },
}

/// Failure to encode a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A sequence or string is longer than CDR's 32-bit length allows.
    #[error("a sequence of {0} elements exceeds CDR's 32-bit length")]
    TooLong(usize),
    /// A buffer field cannot be encoded here (e.g. device memory on a plain-CDR path).
    #[error("buffer field: {0}")]
    Buffer(String),
    /// A bounded string or sequence holds more than its bound (see [`crate::bounds`]).
    #[error("field `{field}`: {over}")]
    OverBound {
        /// Its path in the message: `label`, `inner.label`, `names[2]`, as
        /// a run-time layout gives it ([`DecodeErrorKind::OverBound`]).
        field: String,
        /// What exceeds what.
        over: crate::bounds::OverBound,
    },
}

impl EncodeError {
    /// The same error, raised in `segment` (a field, or an element `[i]`)
    /// of the value being written: a bound's path grows by one level on the
    /// way out of a nested write.
    ///
    /// ```
    /// use freight_msg::{bounds::OverBound, EncodeError};
    /// let over = OverBound::String { bound: 4, len: 5 };
    /// let e = EncodeError::OverBound { field: "label".into(), over }.within("[1]").within("inners");
    /// assert_eq!(e.to_string(), "field `inners[1].label`: a string<=4 holds at most 4 bytes, not 5");
    /// ```
    pub fn within(self, segment: &str) -> EncodeError {
        match self {
            EncodeError::OverBound { field, over } => {
                EncodeError::OverBound { field: crate::bounds::within(crate::bounds::ros_name(segment), &field), over }
            }
            other => other,
        }
    }

    /// The same error, raised in element `i` of the sequence or array
    /// being written.
    pub fn at(self, i: usize) -> EncodeError {
        match self {
            EncodeError::OverBound { .. } => self.within(&format!("[{i}]")),
            other => other,
        }
    }
}

/// Writes CDR into a growing byte vector.
///
/// ```
/// use freight_msg::CdrWriter;
/// let mut w = CdrWriter::new();
/// w.write_u8(1);
/// w.write_u32(7); // aligned to 4 after the header
/// assert_eq!(w.finish(), vec![0, 1, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0]);
/// ```
#[derive(Debug)]
pub struct CdrWriter {
    buf: Vec<u8>,
}

impl Default for CdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

macro_rules! write_prim {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Writes a `", stringify!($t), "`, aligned to its size.")]
        pub fn $name(&mut self, v: $t) {
            self.align(std::mem::size_of::<$t>());
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    )*};
}

impl CdrWriter {
    /// A writer that has written the encapsulation header.
    pub fn new() -> Self {
        Self::with_capacity(64)
    }

    /// A writer that reuses `buf`'s allocation (its contents are discarded).
    pub fn from_vec(mut buf: Vec<u8>) -> Self {
        buf.clear();
        buf.extend_from_slice(&ENCAPSULATION_CDR_LE);
        CdrWriter { buf }
    }

    /// Like [`CdrWriter::new`], reserving `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(4));
        buf.extend_from_slice(&ENCAPSULATION_CDR_LE);
        CdrWriter { buf }
    }

    /// Pads with zeros to a multiple of `n` bytes after the header.
    pub fn align(&mut self, n: usize) {
        let pos = self.buf.len() - 4;
        let pad = (n - pos % n) % n;
        self.buf.resize(self.buf.len() + pad, 0);
    }

    write_prim!(write_u8: u8, write_i8: i8, write_u16: u16, write_i16: i16, write_u32: u32,
                write_i32: i32, write_u64: u64, write_i64: i64, write_f32: f32, write_f64: f64);

    /// Writes a boolean as one byte.
    pub fn write_bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }

    /// Writes a sequence or string length.
    pub fn write_len(&mut self, len: usize) -> Result<(), EncodeError> {
        let len = u32::try_from(len).map_err(|_| EncodeError::TooLong(len))?;
        self.write_u32(len);
        Ok(())
    }

    /// Writes a string: length including the NUL, the bytes, the NUL.
    pub fn write_string(&mut self, s: &str) -> Result<(), EncodeError> {
        self.write_len(s.len() + 1)?;
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.push(0);
        Ok(())
    }

    /// Appends raw bytes (the caller has aligned as needed).
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes written so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether only the header has been written.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 4
    }

    /// The encoded bytes, header included.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads CDR from a byte slice, checking every step.
///
/// ```
/// use freight_msg::CdrReader;
/// let mut r = CdrReader::new(&[0, 1, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0]).unwrap();
/// assert_eq!(r.read_u8().unwrap(), 1);
/// assert_eq!(r.read_u32().unwrap(), 7);
/// r.finish().unwrap();
/// ```
#[derive(Debug)]
pub struct CdrReader<'a> {
    data: &'a [u8],
    pos: usize,
}

macro_rules! read_prim {
    ($($name:ident: $t:ty),*) => {$(
        #[doc = concat!("Reads a `", stringify!($t), "`, aligned to its size.")]
        pub fn $name(&mut self) -> Result<$t, DecodeError> {
            const N: usize = std::mem::size_of::<$t>();
            self.align(N)?;
            let b = self.take(N)?;
            let mut a = [0u8; N];
            a.copy_from_slice(b);
            Ok(<$t>::from_le_bytes(a))
        }
    )*};
}

impl<'a> CdrReader<'a> {
    /// Starts reading; checks the encapsulation header.
    pub fn new(data: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = CdrReader { data, pos: 0 };
        let h = r.take(4)?;
        if h[0..2] != ENCAPSULATION_CDR_LE[0..2] {
            return Err(DecodeError { offset: 0, kind: DecodeErrorKind::Encapsulation([h[0], h[1], h[2], h[3]]) });
        }
        Ok(r)
    }

    fn err(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError { offset: self.pos, kind }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Takes `n` raw bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.err(DecodeErrorKind::UnexpectedEnd { needed: n, remaining: self.remaining() }));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Skips padding to a multiple of `n` bytes after the header.
    pub fn align(&mut self, n: usize) -> Result<(), DecodeError> {
        let pad = (n - (self.pos - 4) % n) % n;
        self.take(pad).map(|_| ())
    }

    read_prim!(read_u8: u8, read_i8: i8, read_u16: u16, read_i16: i16, read_u32: u32,
               read_i32: i32, read_u64: u64, read_i64: i64, read_f32: f32, read_f64: f64);

    /// Reads a boolean; any byte but 0 and 1 is an error.
    pub fn read_bool(&mut self) -> Result<bool, DecodeError> {
        match self.read_u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.err(DecodeErrorKind::InvalidBool(b))),
        }
    }

    /// Reads a sequence length and checks that `len` elements of at least
    /// `min_element_size` bytes each fit in what remains.
    pub fn read_len(&mut self, min_element_size: usize) -> Result<usize, DecodeError> {
        let len = self.read_u32()? as u64;
        let needed = len.saturating_mul(min_element_size as u64);
        if needed > self.remaining() as u64 {
            return Err(self.err(DecodeErrorKind::LengthTooLarge { len, needed, remaining: self.remaining() }));
        }
        Ok(len as usize)
    }

    /// Reads a string (length with NUL, bytes, NUL).
    pub fn read_string(&mut self) -> Result<String, DecodeError> {
        let len = self.read_len(1)?;
        if len == 0 {
            return Err(self.err(DecodeErrorKind::MissingNul));
        }
        let bytes = self.take(len)?;
        let (body, nul) = bytes.split_at(len - 1);
        if nul != [0] {
            return Err(self.err(DecodeErrorKind::MissingNul));
        }
        String::from_utf8(body.to_vec()).map_err(|_| self.err(DecodeErrorKind::InvalidUtf8))
    }

    /// Builds an error at the current position (for callers' own checks).
    pub fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        self.err(kind)
    }

    /// Succeeds when the input was consumed up to trailing alignment padding.
    pub fn finish(self) -> Result<(), DecodeError> {
        // ROS 2 serializers may pad the end to 4 bytes; more is an error.
        if self.remaining() >= 4 {
            return Err(self.err(DecodeErrorKind::TrailingBytes(self.remaining())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_round_trips_with_nul_and_non_ascii() {
        let mut w = CdrWriter::new();
        w.write_string("kamera-ß").unwrap();
        w.write_string("").unwrap();
        let b = w.finish();
        let mut r = CdrReader::new(&b).unwrap();
        assert_eq!(r.read_string().unwrap(), "kamera-ß");
        assert_eq!(r.read_string().unwrap(), "");
        r.finish().unwrap();
    }

    #[test]
    fn huge_claimed_length_is_refused_before_allocating() {
        let mut b = ENCAPSULATION_CDR_LE.to_vec();
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut r = CdrReader::new(&b).unwrap();
        let e = r.read_len(1).unwrap_err();
        assert!(matches!(e.kind, DecodeErrorKind::LengthTooLarge { len: 4294967295, .. }), "{e}");
    }

    #[test]
    fn truncated_and_malformed_inputs_give_typed_errors() {
        assert!(CdrReader::new(&[0, 1]).is_err());
        assert!(matches!(CdrReader::new(&[1, 0, 0, 0]).unwrap_err().kind, DecodeErrorKind::Encapsulation(_)));
        let mut r = CdrReader::new(&[0, 1, 0, 0, 2]).unwrap();
        assert_eq!(r.read_bool().unwrap_err().kind, DecodeErrorKind::InvalidBool(2));
        let mut r = CdrReader::new(&[0, 1, 0, 0, 2, 0, 0, 0, b'a', b'b']).unwrap();
        assert_eq!(r.read_string().unwrap_err().kind, DecodeErrorKind::MissingNul);
        let mut r = CdrReader::new(&[0, 1, 0, 0, 1, 0]).unwrap();
        assert!(matches!(r.read_u32().unwrap_err().kind, DecodeErrorKind::UnexpectedEnd { .. }));
    }

    #[test]
    fn alignment_is_relative_to_the_body() {
        let mut w = CdrWriter::new();
        w.write_u8(9);
        w.write_f64(1.0);
        let b = w.finish();
        assert_eq!(b.len(), 4 + 8 + 8);
        let mut r = CdrReader::new(&b).unwrap();
        assert_eq!(r.read_u8().unwrap(), 9);
        assert_eq!(r.read_f64().unwrap(), 1.0);
    }
}
