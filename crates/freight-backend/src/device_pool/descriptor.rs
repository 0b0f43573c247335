//! Descriptors of pool blocks: [`Handle`], the fields a descriptor carries
//! (pool, block, generation, length, allocation serial, device UUID, the
//! memory's handle bytes), their encoding, and a decoding that checks every
//! field it can without the pool, since descriptors come from other
//! processes. Also how UUIDs are printed and the `Malformed` error.

use super::files::{valid_pool_name, MAX_NAME_LEN};
use super::memory::PoolMemory;
use crate::ImportError;

/// Bytes of a descriptor in front of the memory's handle bytes.
const DESCRIPTOR_HEAD: usize = 56 + MAX_NAME_LEN;
const DESCRIPTOR_VERSION: u8 = 2;

/// Formats a UUID as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub(crate) fn format_uuid(u: &[u8; 16]) -> String {
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

pub(super) fn malformed<M: PoolMemory>(reason: impl Into<String>) -> ImportError {
    ImportError::Malformed { backend: M::KIND, reason: reason.into() }
}

/// The fields of a descriptor.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Handle<'a> {
    pub(crate) name: &'a str,
    pub(crate) index: u32,
    pub(crate) generation: u64,
    pub(crate) len: u64,
    pub(crate) serial: u64,
    pub(crate) device: [u8; 16],
    pub(crate) handle: &'a [u8],
}

/// Length of every descriptor of memory `M`.
pub(crate) const fn descriptor_len<M: PoolMemory>() -> usize {
    DESCRIPTOR_HEAD + M::HANDLE_LEN
}

/// Encodes a descriptor:
///
/// ```text
///   0  4  magic (the memory's)
///   4  1  version (2)
///   5  1  pool name length n, 1..=64
///   6  2  handle length, u16 (the memory's)
///   8  4  block index, u32
///  12  4  reserved, zero
///  16  8  generation, u64
///  24  8  length in bytes, u64
///  32  8  allocation serial, u64
///  40 16  device UUID
///  56 64  pool name: n ASCII bytes, then zeros
/// 120  h  handle bytes
/// ```
pub(crate) fn encode<M: PoolMemory>(h: &Handle<'_>) -> Vec<u8> {
    let mut d = vec![0u8; descriptor_len::<M>()];
    d[..4].copy_from_slice(&M::MAGIC);
    d[4] = DESCRIPTOR_VERSION;
    d[5] = h.name.len() as u8;
    d[6..8].copy_from_slice(&(M::HANDLE_LEN as u16).to_le_bytes());
    d[8..12].copy_from_slice(&h.index.to_le_bytes());
    d[16..24].copy_from_slice(&h.generation.to_le_bytes());
    d[24..32].copy_from_slice(&h.len.to_le_bytes());
    d[32..40].copy_from_slice(&h.serial.to_le_bytes());
    d[40..56].copy_from_slice(&h.device);
    d[56..56 + h.name.len()].copy_from_slice(h.name.as_bytes());
    d[DESCRIPTOR_HEAD..].copy_from_slice(h.handle);
    d
}

/// Decodes a descriptor, checking every field that can be checked without
/// the pool: length, magic, version, name, reserved bytes.
pub(crate) fn decode<M: PoolMemory>(d: &[u8]) -> Result<Handle<'_>, ImportError> {
    let expected = descriptor_len::<M>();
    if d.len() != expected {
        return Err(malformed::<M>(format!("expected {expected} bytes, got {}", d.len())));
    }
    if d[..4] != M::MAGIC {
        return Err(malformed::<M>(format!("not a {} descriptor", M::KIND)));
    }
    if d[4] != DESCRIPTOR_VERSION {
        return Err(malformed::<M>(format!("unknown version {}", d[4])));
    }
    let name_len = usize::from(d[5]);
    if name_len == 0 || name_len > MAX_NAME_LEN {
        return Err(malformed::<M>(format!("pool name length {name_len}")));
    }
    let handle_len = usize::from(u16::from_le_bytes([d[6], d[7]]));
    if handle_len != M::HANDLE_LEN {
        return Err(malformed::<M>(format!("handle of {handle_len} bytes, expected {}", M::HANDLE_LEN)));
    }
    if d[12..16] != [0; 4] || d[56 + name_len..DESCRIPTOR_HEAD].iter().any(|b| *b != 0) {
        return Err(malformed::<M>("reserved bytes are not zero"));
    }
    let name = std::str::from_utf8(&d[56..56 + name_len])
        .ok()
        .filter(|n| valid_pool_name(M::NAME_PREFIX, n))
        .ok_or_else(|| malformed::<M>("invalid pool name"))?;
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let mut device = [0u8; 16];
    device.copy_from_slice(&d[40..56]);
    Ok(Handle {
        name,
        index: u32::from_le_bytes([d[8], d[9], d[10], d[11]]),
        generation: u64_at(16),
        len: u64_at(24),
        serial: u64_at(32),
        device,
        handle: &d[DESCRIPTOR_HEAD..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_formatted_as_usual() {
        let u = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(format_uuid(&u), "12345678-9abc-def0-0102-030405060708");
    }
}
