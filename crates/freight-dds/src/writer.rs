//! Writers of raw CDR samples.

use std::sync::Arc;

use cyclors as dds;

use crate::discovery::{endpoint_from_builtin, matched_handles, DiscoveredEndpoint};
use crate::error::{check, DdsError};
use crate::participant::{entity_guid, Participant};
use crate::qos::{EndpointQos, Qos};

type Callback = Box<dyn Fn() + Send + Sync>;

/// A DDS writer of serialized samples (CDR with its encapsulation header).
///
/// ```no_run
/// use std::time::Duration;
/// use freight_dds::{DdsConfig, EndpointQos, Participant};
/// let p = std::sync::Arc::new(Participant::new(0, &DdsConfig::loopback())?);
/// let qos = EndpointQos::reliable(Duration::from_millis(100));
/// let w = p.create_writer("rt/chatter", "std_msgs::msg::dds_::String_", &qos, Box::new(|| {}))?;
/// w.write_cdr(&[0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0, 0])?;
/// # Ok::<_, freight_dds::DdsError>(())
/// ```
pub struct Writer {
    entity: dds::dds_entity_t,
    topic: dds::dds_entity_t,
    sertype: *const dds::ddsi_sertype,
    /// The listener's argument; freed after the writer (and so its listener) is gone.
    callback: *mut Callback,
    _participant: Arc<Participant>,
}

// SAFETY: Cyclone entities are thread-safe handles; the sertype pointer is
// owned by the topic, which lives as long as this writer; the callback is
// `Send + Sync`.
unsafe impl Send for Writer {}
// SAFETY: as above; every method goes through Cyclone's own locking.
unsafe impl Sync for Writer {}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Writer({})", self.entity)
    }
}

unsafe extern "C" fn on_publication_matched(
    _writer: dds::dds_entity_t,
    _status: dds::dds_publication_matched_status_t,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: `arg` is the `Callback` box of a writer that is not yet deleted
    // (the box is freed only after `dds_delete` of the writer returned, which
    // waits for running listeners).
    let f = unsafe { &*(arg as *const Callback) };
    f();
}

impl Writer {
    pub(crate) fn new(
        participant: &Arc<Participant>,
        topic_name: &str,
        type_name: &str,
        qos: &EndpointQos,
        on_match_change: Callback,
    ) -> Result<Self, DdsError> {
        let topic = participant.blob_topic(topic_name, type_name)?;
        let callback = Box::into_raw(Box::new(on_match_change));
        let qos = Qos::endpoint(qos);
        // SAFETY: the listener is created, used for the call (Cyclone copies
        // it) and deleted; its argument outlives the writer (see `Drop`).
        let entity = unsafe {
            let listener = dds::dds_create_listener(callback.cast());
            dds::dds_lset_publication_matched(listener, Some(on_publication_matched));
            let w = dds::dds_create_writer(participant.entity, topic, qos.as_ptr(), listener);
            dds::dds_delete_listener(listener);
            w
        };
        let entity = match check("dds_create_writer", entity) {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: nothing refers to the callback or the topic any more.
                unsafe {
                    drop(Box::from_raw(callback));
                    dds::dds_delete(topic);
                }
                return Err(e);
            }
        };
        let mut sertype: *const dds::ddsi_sertype = std::ptr::null();
        // SAFETY: `entity` is a live writer; `sertype` is a valid out-pointer.
        let ret = unsafe { dds::dds_get_entity_sertype(entity, &mut sertype) };
        let writer = Writer { entity, topic, sertype, callback, _participant: participant.clone() };
        check("dds_get_entity_sertype", ret)?;
        Ok(writer)
    }

    /// Publishes one serialized sample (CDR, encapsulation header first). As
    /// Cyclone's own serializer does, the sample goes out padded to a multiple
    /// of 4 bytes with the pad count in the low bits of the encapsulation
    /// options, so readers know where it ends. Cyclone copies it once; every
    /// matched reader, however many, is served from that copy.
    pub fn write_cdr(&self, cdr: &[u8]) -> Result<(), DdsError> {
        let Some((header, body)) = cdr.split_first_chunk::<4>() else {
            return Err(DdsError::call("dds_writecdr", dds::DDS_RETCODE_BAD_PARAMETER));
        };
        let pad = (4 - cdr.len() % 4) % 4;
        let mut header = *header;
        header[3] = (header[3] & !3) | pad as u8;
        let zeros = [0u8; 3];
        let iov =
            |bytes: &[u8]| dds::ddsrt_iovec_t { iov_base: bytes.as_ptr().cast_mut().cast(), iov_len: bytes.len() };
        let iovs = [iov(&header), iov(body), iov(&zeros[..pad])];
        let total = cdr.len() + pad;
        // SAFETY: the sertype belongs to this writer's topic; the iovecs point
        // to live bytes, which the call copies and does not write.
        let sd = unsafe {
            dds::ddsi_serdata_from_ser_iov(
                self.sertype,
                dds::ddsi_serdata_kind_SDK_DATA,
                iovs.len(),
                iovs.as_ptr(),
                total,
            )
        };
        if sd.is_null() {
            return Err(DdsError::call("ddsi_serdata_from_ser_iov", dds::DDS_RETCODE_OUT_OF_RESOURCES));
        }
        // SAFETY: dds_writecdr takes over the reference to `sd`.
        check("dds_writecdr", unsafe { dds::dds_writecdr(self.entity, sd) }).map(|_| ())
    }

    /// The readers matched now, with their discovery data.
    pub fn matched_readers(&self) -> Result<Vec<DiscoveredEndpoint>, DdsError> {
        let handles =
            matched_handles(self.entity, "dds_get_matched_subscriptions", dds::dds_get_matched_subscriptions)?;
        Ok(handles
            .into_iter()
            .filter_map(|h| {
                // SAFETY: a null result (the reader just left) is skipped; a
                // non-null one is converted and freed by `endpoint_from_builtin`.
                unsafe { endpoint_from_builtin(dds::dds_get_matched_subscription_data(self.entity, h), false) }
            })
            .collect())
    }

    /// This writer's GUID, as readers see it.
    pub fn guid(&self) -> [u8; 16] {
        entity_guid(self.entity)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // SAFETY: the writer is deleted first (Cyclone waits for its running
        // listener calls), then nothing refers to the callback or the topic.
        unsafe {
            dds::dds_delete(self.entity);
            dds::dds_delete(self.topic);
            drop(Box::from_raw(self.callback));
        }
    }
}
