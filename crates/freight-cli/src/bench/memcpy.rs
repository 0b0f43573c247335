//! The `memcpy` floor: what one copy of the payload costs on this machine.
//!
//! `shm-copy` copies the user's buffer into shared memory once per message, so no
//! implementation of it can beat one `memcpy` of the same size; its "vs baseline" column is
//! measured against this.

use super::transport::{Loopback, Placement, RowConfig, Transport, HEADER_LEN};
use super::BenchError;

/// The single-threaded copy baseline.
pub struct Memcpy;

impl Transport for Memcpy {
    fn name(&self) -> &'static str {
        "memcpy"
    }

    fn placement(&self) -> Placement {
        Placement::Inline
    }

    fn open_loopback(&self, row: &RowConfig) -> Result<Box<dyn Loopback>, BenchError> {
        let len = row.wire_len();
        // Filled with a non-zero byte on purpose: `vec![0; n]` comes from calloc, whose pages
        // are mapped lazily, and the first copies would then measure page faults instead of
        // the copy. Writing every byte faults both buffers in before the row starts.
        let src = vec![0x5a_u8; len];
        let dst = vec![0xa5_u8; len];
        Ok(Box::new(CopyLoop { src, dst }))
    }
}

struct CopyLoop {
    src: Vec<u8>,
    dst: Vec<u8>,
}

impl Loopback for CopyLoop {
    fn transfer(
        &mut self,
        stamp: &mut dyn FnMut() -> [u8; HEADER_LEN],
        on_arrival: &mut dyn FnMut(&[u8]),
    ) -> Result<(), BenchError> {
        self.src[..HEADER_LEN].copy_from_slice(&stamp());
        self.dst.copy_from_slice(&self.src);
        on_arrival(&self.dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::transport::{Header, WaitMode};
    use super::*;

    #[test]
    fn copies_the_header_through() {
        let row = RowConfig::latency("memcpy", WaitMode::Spin, 8, "test".into());
        let mut lb = Memcpy.open_loopback(&row).unwrap();
        let sent = Header { seq: 7, t_send_ns: 42 };
        let mut got = None;
        lb.transfer(&mut || sent.to_bytes(), &mut |p| got = Some((p.len(), Header::from_payload(p)))).unwrap();
        // An 8-byte row still carries the 16-byte header.
        assert_eq!(got, Some((HEADER_LEN, Some(sent))));
    }
}
