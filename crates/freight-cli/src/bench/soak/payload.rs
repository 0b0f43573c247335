//! What a soak message carries, and how a subscriber proves every byte of it.
//!
//! A message is a [`SoakFrame`]: small fields naming its publisher, the publisher's
//! incarnation (restart count) and sequence number, and one buffer, the payload:
//!
//! ```text
//! 0   u64  magic "FRSOAK01"
//! 8   u32  publisher id            12  u32  incarnation
//! 16  u64  sequence number (from 1 in each incarnation)
//! 24  u64  payload length in bytes (at least 64)
//! 32  u64  publish time, CLOCK_MONOTONIC ns, taken after the fill was written
//! 40  u32  flags: bit 0 = sent as a loan (else `publish_copy`)
//! 44  u32  0
//! 48  u64  checksum of bytes 64.. as written
//! 56  u64  hash of bytes 0..56
//! 64  the fill: 8-byte words, word i = mix(key + i * K) where key hashes the publisher,
//!     incarnation, sequence number and length; a last partial word is cut
//! ```
//!
//! All little-endian. The fill is derived from the message's identity, so the subscriber
//! regenerates it and compares every word: a byte from another message, an older message
//! in a reused buffer, or memory never written is found at its offset. The checksum (an
//! order-dependent fold of the words actually present) and the header hash catch a header
//! that does not belong to its fill.

use std::mem::MaybeUninit;

use super::rng::mix;

freight::message! {
    /// One message of the soak: who sent it, and a payload that proves itself.
    pub struct SoakFrame = "freight_soak/msg/Frame" {
        /// The publisher's id (one per topology).
        pub publisher: u32,
        /// How many times the publisher's process has been restarted.
        pub incarnation: u32,
        /// Sequence number in this incarnation, from 1.
        pub seq: u64,
        /// The payload: header and fill.
        pub data: freight::Buffer<u8>,
    }
}

/// Bytes of the header at the start of every payload; also the smallest payload.
pub const HEADER_LEN: usize = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"FRSOAK01");
/// Flag: the message was written into a loan.
const LOANED: u32 = 1;
/// Spreads word indices apart before mixing (an odd constant, so distinct indices stay distinct).
const WORD_STEP: u64 = 0xD6E8_FEB8_6659_FD93;

/// Who sent a message, which one it is, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The publisher's id.
    pub publisher: u32,
    /// Its incarnation.
    pub incarnation: u32,
    /// The sequence number.
    pub seq: u64,
    /// Payload bytes, header included.
    pub len: u64,
    /// CLOCK_MONOTONIC when the payload was finished.
    pub publish_ns: u64,
    /// Written into a loan (else copied by `publish_copy`).
    pub loaned: bool,
}

impl Stamp {
    /// The seed of the fill: the message's identity, mixed.
    fn key(&self) -> u64 {
        let mut k = mix(u64::from(self.publisher) << 32 | u64::from(self.incarnation));
        k = mix(k ^ self.seq);
        mix(k ^ self.len)
    }
}

/// Where a payload is written: a loan's uninitialised memory or an ordinary buffer.
pub trait Sink {
    /// Writes `bytes` at `at`.
    fn put(&mut self, at: usize, bytes: &[u8]);
    /// Bytes of the sink.
    fn size(&self) -> usize;
}

impl Sink for [u8] {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn size(&self) -> usize {
        self.len()
    }
}

impl Sink for [MaybeUninit<u8>] {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        for (d, s) in self[at..at + bytes.len()].iter_mut().zip(bytes) {
            d.write(*s);
        }
    }
    fn size(&self) -> usize {
        self.len()
    }
}

/// One step of the checksum: order-dependent, so swapped words change it.
fn fold(sum: u64, word: u64) -> u64 {
    (sum ^ word).wrapping_mul(0x0000_0100_0000_01B3).rotate_left(29)
}

/// The fill word `i` of the message with key `key`.
fn fill_word(key: u64, i: usize) -> u64 {
    mix(key.wrapping_add((i as u64).wrapping_mul(WORD_STEP)))
}

/// Writes the fill of `stamp` (bytes 64..) into `out` and returns its checksum. The header
/// is written separately ([`write_header`]), last, so that its publish time is taken after
/// the (possibly long) fill.
pub fn write_fill<S: Sink + ?Sized>(stamp: &Stamp, out: &mut S) -> u64 {
    let len = out.size();
    debug_assert!(len >= HEADER_LEN && len as u64 == stamp.len);
    let key = stamp.key();
    let mut sum = 0u64;
    for (i, at) in (HEADER_LEN..len).step_by(8).enumerate() {
        let take = (len - at).min(8);
        let mut bytes = fill_word(key, i).to_le_bytes();
        bytes[take..].fill(0);
        out.put(at, &bytes[..take]);
        sum = fold(sum, u64::from_le_bytes(bytes));
    }
    sum
}

/// The 64 header bytes of `stamp` whose fill has checksum `sum`.
pub fn header(stamp: &Stamp, sum: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    h[8..12].copy_from_slice(&stamp.publisher.to_le_bytes());
    h[12..16].copy_from_slice(&stamp.incarnation.to_le_bytes());
    h[16..24].copy_from_slice(&stamp.seq.to_le_bytes());
    h[24..32].copy_from_slice(&stamp.len.to_le_bytes());
    h[32..40].copy_from_slice(&stamp.publish_ns.to_le_bytes());
    h[40..44].copy_from_slice(&(if stamp.loaned { LOANED } else { 0 }).to_le_bytes());
    h[48..56].copy_from_slice(&sum.to_le_bytes());
    let hash = header_hash(&h);
    h[56..64].copy_from_slice(&hash.to_le_bytes());
    h
}

/// Writes the header at the start of `out`.
pub fn write_header<S: Sink + ?Sized>(stamp: &Stamp, sum: u64, out: &mut S) {
    out.put(0, &header(stamp, sum));
}

fn header_hash(h: &[u8; HEADER_LEN]) -> u64 {
    h[..56].chunks_exact(8).fold(0x5EED, |acc, w| mix(acc ^ u64::from_le_bytes(w.try_into().unwrap_or_default())))
}

fn word_at(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    let end = (at + 8).min(bytes.len());
    w[..end - at].copy_from_slice(&bytes[at..end]);
    u64::from_le_bytes(w)
}

/// Why a payload is not what its publisher wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corruption {
    /// Shorter than a header.
    #[error("{0} bytes, shorter than the 64-byte header")]
    TooShort(usize),
    /// The first word is not the magic.
    #[error("no soak header (magic {0:#018x})")]
    BadMagic(u64),
    /// The header's hash does not match its bytes.
    #[error("header hash mismatch: the header's bytes were changed")]
    BadHeader,
    /// The header says another length than the buffer has.
    #[error("header says {header} bytes, the buffer has {actual}")]
    Length {
        /// From the header.
        header: u64,
        /// The buffer's.
        actual: usize,
    },
    /// A byte of the fill differs from what the header's message has there.
    #[error("byte {offset} is {found:#04x}, expected {expected:#04x}")]
    WrongByte {
        /// Offset in the payload.
        offset: usize,
        /// What is there.
        found: u8,
        /// What the publisher wrote.
        expected: u8,
    },
    /// The fill matches but the checksum in the header does not.
    #[error("checksum {found:#018x} in the header, {computed:#018x} over the bytes")]
    Checksum {
        /// In the header.
        found: u64,
        /// Over the fill.
        computed: u64,
    },
}

/// Reads and checks the header of `bytes` (not the fill).
pub fn read_header(bytes: &[u8]) -> Result<(Stamp, u64), Corruption> {
    let h: &[u8; HEADER_LEN] =
        bytes.get(..HEADER_LEN).and_then(|h| h.try_into().ok()).ok_or(Corruption::TooShort(bytes.len()))?;
    let u32_at = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let u64_at = |at: usize| word_at(h, at);
    if u64_at(0) != MAGIC {
        return Err(Corruption::BadMagic(u64_at(0)));
    }
    if u64_at(56) != header_hash(h) {
        return Err(Corruption::BadHeader);
    }
    let stamp = Stamp {
        publisher: u32_at(8),
        incarnation: u32_at(12),
        seq: u64_at(16),
        len: u64_at(24),
        publish_ns: u64_at(32),
        loaned: u32_at(40) & LOANED != 0,
    };
    if stamp.len != bytes.len() as u64 {
        return Err(Corruption::Length { header: stamp.len, actual: bytes.len() });
    }
    Ok((stamp, u64_at(48)))
}

/// Checks every byte of a payload: header, fill and checksum. Returns who sent it.
pub fn verify(bytes: &[u8]) -> Result<Stamp, Corruption> {
    let (stamp, sum) = read_header(bytes)?;
    let key = stamp.key();
    let mut computed = 0u64;
    for (i, at) in (HEADER_LEN..bytes.len()).step_by(8).enumerate() {
        let found = word_at(bytes, at);
        let expected = fill_word(key, i) & partial_mask(bytes.len() - at);
        if found != expected {
            let lane = ((found ^ expected).trailing_zeros() / 8) as usize;
            return Err(Corruption::WrongByte {
                offset: at + lane,
                found: found.to_le_bytes()[lane],
                expected: expected.to_le_bytes()[lane],
            });
        }
        computed = fold(computed, found);
    }
    if computed != sum {
        return Err(Corruption::Checksum { found: sum, computed });
    }
    Ok(stamp)
}

/// Checks the header and 64 words spread over the fill: whether a payload held for a while
/// still holds what it held when it was verified in full.
pub fn spot_check(bytes: &[u8]) -> Result<Stamp, Corruption> {
    let (stamp, _) = read_header(bytes)?;
    let words = (bytes.len() - HEADER_LEN).div_ceil(8);
    let key = stamp.key();
    for j in 0..words.min(64) {
        let i = if words <= 64 { j } else { j * (words - 1) / 63 };
        let at = HEADER_LEN + i * 8;
        let expected = fill_word(key, i) & partial_mask(bytes.len() - at);
        let found = word_at(bytes, at);
        if found != expected {
            let lane = ((found ^ expected).trailing_zeros() / 8) as usize;
            return Err(Corruption::WrongByte {
                offset: at + lane,
                found: found.to_le_bytes()[lane],
                expected: expected.to_le_bytes()[lane],
            });
        }
    }
    Ok(stamp)
}

/// The bytes of a word that remain before the end of the payload.
fn partial_mask(left: usize) -> u64 {
    if left >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * left)) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(stamp: &Stamp) -> Vec<u8> {
        let mut v = vec![0u8; stamp.len as usize];
        let sum = write_fill(stamp, v.as_mut_slice());
        write_header(stamp, sum, v.as_mut_slice());
        v
    }

    fn stamp(seq: u64, len: u64) -> Stamp {
        Stamp { publisher: 3, incarnation: 2, seq, len, publish_ns: 99, loaned: true }
    }

    #[test]
    fn a_payload_verifies_at_every_length() {
        for len in [64, 65, 71, 72, 73, 1000, 4096, 65_537] {
            let s = stamp(5, len);
            assert_eq!(verify(&payload(&s)), Ok(s), "{len}");
            assert_eq!(spot_check(&payload(&s)), Ok(s), "{len}");
        }
        let mut uninit = vec![MaybeUninit::<u8>::uninit(); 100];
        let s = stamp(1, 100);
        let sum = write_fill(&s, uninit.as_mut_slice());
        write_header(&s, sum, uninit.as_mut_slice());
        // SAFETY: write_fill wrote bytes 64.. and write_header bytes 0..64: every byte.
        let bytes: Vec<u8> = uninit.iter().map(|b| unsafe { b.assume_init() }).collect();
        assert_eq!(bytes, payload(&s));
    }

    #[test]
    fn one_wrong_byte_is_found_where_it_is() {
        let s = stamp(9, 4099);
        for offset in [64, 100, 4098] {
            let mut p = payload(&s);
            p[offset] ^= 0x10;
            match verify(&p) {
                Err(Corruption::WrongByte { offset: at, .. }) => assert_eq!(at, offset),
                other => panic!("{other:?}"),
            }
        }
        let mut p = payload(&s);
        p[20] ^= 1;
        assert_eq!(verify(&p), Err(Corruption::BadHeader));
        assert_eq!(verify(&p[..63]), Err(Corruption::TooShort(63)));
        assert!(matches!(verify(&payload(&s)[..4000]), Err(Corruption::Length { header: 4099, actual: 4000 })));
    }

    #[test]
    fn another_messages_fill_under_a_valid_header_is_wrong() {
        // A stale buffer: the header of message 10 over the fill of message 9.
        let old = payload(&stamp(9, 1000));
        let new = payload(&stamp(10, 1000));
        let mut mixed = old.clone();
        mixed[..HEADER_LEN].copy_from_slice(&new[..HEADER_LEN]);
        assert!(matches!(verify(&mixed), Err(Corruption::WrongByte { offset: 64..=71, .. })));
        let zeros = {
            let mut z = vec![0u8; 1000];
            z[..HEADER_LEN].copy_from_slice(&new[..HEADER_LEN]);
            z
        };
        assert!(verify(&zeros).is_err(), "memory never written is found");
        // A header whose checksum is wrong but whose hash was recomputed.
        let s = stamp(10, 1000);
        let mut forged = new.clone();
        forged[..HEADER_LEN].copy_from_slice(&header(&s, 12345));
        assert!(matches!(verify(&forged), Err(Corruption::Checksum { found: 12345, .. })));
    }
}
