//! Reading what a receiver took: a frame's header and meta checked, each
//! buffer imported in the memory negotiation picks, the small fields decoded;
//! or a network message's CDR decoded.

use std::sync::Arc;

use freight_backend::{BufferStorage, Frame};
use freight_msg::{BackendKind, BufferDecoder, DecodeError, Message, RawBuffer};

use super::receiver::device_name;
use super::Receiver;
use crate::error::TakeError;
use crate::frame::{decode_meta, EntryRef, FrameError, Header, ImportingDecoder};
use crate::negotiation::{is_device_pool, negotiate, takes_device_memory};
use crate::network::ReceivedBuffers;
use crate::sample::{MessageInfo, Sample, Transport};

/// Reads a frame: checks it, imports each buffer from the representation this
/// subscription takes (as the small-field decoder reaches it), decodes the
/// small fields.
pub(crate) fn decode<M: Message>(sub: &Receiver, frame: Frame, transport: Transport) -> Result<Sample<M>, TakeError> {
    let (msg, info) = decode_frame(sub, frame, transport, (M::TYPE_NAME, M::TYPE_HASH), M::from_cdr_with)?;
    Ok(Sample { msg, info })
}

/// As [`decode`], for a message of type `ty` (name, hash) that `read` reads
/// from its small fields.
pub(crate) fn decode_frame<T>(
    sub: &Receiver,
    frame: Frame,
    transport: Transport,
    ty: (&'static str, u64),
    read: impl FnOnce(&[u8], &mut dyn BufferDecoder) -> Result<T, DecodeError>,
) -> Result<(T, MessageInfo), TakeError> {
    let bytes = frame.bytes();
    let header = Header::read(bytes)?;
    if header.type_hash != ty.1 {
        return Err(TakeError::WrongType { expected: ty.0, expected_hash: ty.1, found: header.type_hash });
    }
    let meta = decode_meta(bytes, &header)?;
    let mut first_backend = None;
    let mut failure = None;
    let mut decoder = ImportingDecoder {
        table: meta.table.clone(),
        next: 0,
        import: |ordinal: usize, e: EntryRef<'_>| match import(sub, &frame, ordinal, e, &header) {
            Ok(storage) => {
                first_backend.get_or_insert(storage.backend());
                Ok(RawBuffer::from_storage(storage))
            }
            Err(err) => {
                let text = err.to_string();
                failure = Some(err);
                Err(text)
            }
        },
        table_error: None,
    };
    let decoded = read(meta.small, &mut decoder);
    let (unread, table_error) = (decoder.table, decoder.table_error);
    let unread_count = unread.remaining();
    sub.unread.release(unread, header.device);
    if let (Err(_), Some(e)) = (&decoded, table_error) {
        return Err(TakeError::Malformed(e));
    }
    let msg = match (decoded, failure) {
        (Ok(msg), _) if unread_count == 0 => msg,
        (Ok(_), _) => {
            return Err(TakeError::Malformed(FrameError::Truncated {
                len: bytes.len(),
                reason: "buffer table has entries no field refers to",
            }))
        }
        (Err(_), Some(typed)) => return Err(typed),
        (Err(e), None) => return Err(FrameError::from(e).into()),
    };
    let info = MessageInfo {
        publisher_id: header.publisher_id,
        sequence: header.sequence,
        publish_time_ns: header.publish_time_ns,
        transport,
        backend: first_backend.unwrap_or(BackendKind::Cpu),
    };
    Ok((msg, info))
}

/// Reads a message that came over DDS: plain CDR, buffers viewing the sample.
pub(crate) fn decode_cdr<M: Message>(sub: &Receiver, sample: freight_dds::ReceivedCdr) -> Result<Sample<M>, TakeError> {
    let (msg, info) = decode_network(sub, sample, M::from_cdr_with)?;
    Ok(Sample { msg, info })
}

/// As [`decode_cdr`], for a message that `read` reads.
pub(crate) fn decode_network<T>(
    sub: &Receiver,
    sample: freight_dds::ReceivedCdr,
    read: impl FnOnce(&[u8], &mut dyn BufferDecoder) -> Result<T, DecodeError>,
) -> Result<(T, MessageInfo), TakeError> {
    let sample = Arc::new(sample);
    let info = MessageInfo {
        publisher_id: sample.publication_handle(),
        sequence: 0,
        publish_time_ns: u64::try_from(sample.source_timestamp_ns()).unwrap_or(0),
        transport: Transport::Network,
        backend: BackendKind::Cpu,
    };
    let msg = read(sample.bytes(), &mut ReceivedBuffers(sample.clone())).map_err(TakeError::MalformedCdr)?;
    if let Some(wanted) = sub.accepts.iter().find(|k| !matches!(k, BackendKind::Cpu | BackendKind::Shm)) {
        sub.note_fallback(info.publisher_id, || {
            format!(
                "a publisher reached over the network (another host, or not freight) sends CDR: its buffers arrive \
                 in cpu memory, not {wanted}"
            )
        });
    }
    Ok((msg, info))
}

/// Imports one buffer, in the memory [`negotiate`] picks: the publisher's if
/// this subscription takes its backend (and, for device memory, is on its
/// device), else the host bytes (the host copy that came with a device
/// buffer, or the buffer itself in the frame) as they are or mapped for this
/// process's device (`cuda-host`), else a private CPU copy. When the chosen
/// memory cannot be opened, the host bytes are taken instead (and the
/// fallback reported). Never an empty buffer in place of data.
fn import(
    sub: &Receiver,
    frame: &Frame,
    ordinal: usize,
    e: EntryRef<'_>,
    header: &Header,
) -> Result<Arc<dyn BufferStorage>, TakeError> {
    let ctx = &sub.node.inner.ctx.inner;
    let with = |kind: BackendKind, descriptor: &[u8]| {
        let b = ctx.backend(kind).map_err(|u| TakeError::Unusable { ordinal, backend: kind, reason: u.reason })?;
        b.import(frame, descriptor).map_err(|source| TakeError::Import { ordinal, source })
    };
    let same_device = sub.same_device(e.kind, header.device);
    // Where the host bytes are: the host copy that came with a device buffer,
    // or the buffer itself when it is host memory in the frame.
    let host = e.alt.map_or(e.kind, |(kind, _)| kind);
    let host_descriptor = match e.alt {
        Some((_, d)) => Some(d),
        None if e.kind.is_host_memory() => Some(e.descriptor),
        None => None,
    };
    let choice = negotiate(e.kind, host, sub.accepts, same_device);
    let first = if choice == e.kind {
        with(choice, e.descriptor)
    } else {
        match host_descriptor {
            Some(d) => with(choice, d),
            None => {
                return Err(TakeError::Unusable {
                    ordinal,
                    backend: e.kind,
                    reason: "no host copy came with it (did the subscription join after it was sent?)".into(),
                })
            }
        }
    };
    let storage = match (first, host_descriptor) {
        (Ok(s), _) => s,
        (Err(err), None) => return Err(err),
        (Err(err), Some(d)) => {
            if choice == e.kind && takes_device_memory(e.kind, sub.accepts, same_device) {
                // Not imported: give the hold back (an error means there was none).
                if let Ok(b) = ctx.backend(e.kind) {
                    let _ = b.release_unimported(e.descriptor, std::process::id());
                }
            }
            // The host bytes as they are if this subscription takes them,
            // else a private copy, which always works for frame memory.
            let frame_kind = if frame.is_process_local() { BackendKind::Cpu } else { BackendKind::Shm };
            let fallback =
                if sub.accepts.contains(frame_kind) && frame_kind != choice { frame_kind } else { BackendKind::Cpu };
            if fallback == choice {
                return Err(err);
            }
            let storage = with(fallback, d)?;
            sub.note_fallback(header.publisher_id, || {
                format!(
                    "buffer {ordinal} could not be taken in {choice} ({err}); it arrives in {} instead (and so may \
                     the buffers of later messages of publisher {:016x})",
                    storage.backend(),
                    header.publisher_id
                )
            });
            storage
        }
    };
    if is_device_pool(e.kind) && sub.accepts.contains(e.kind) && !same_device {
        sub.note_fallback(header.publisher_id, || {
            format!(
                "publisher {:016x} lends {} memory of device {}, this subscription's device is {}: its buffers arrive \
                 as a host copy in {}",
                header.publisher_id,
                e.kind,
                device_name(header.device),
                device_name(sub.devices.get(e.kind)),
                storage.backend()
            )
        });
    }
    Ok(storage)
}
