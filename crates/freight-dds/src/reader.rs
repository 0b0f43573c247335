//! Readers of raw CDR samples.

use std::sync::Arc;

use cyclors as dds;

use crate::discovery::{endpoint_from_builtin, matched_handles, DiscoveredEndpoint};
use crate::error::{check, DdsError};
use crate::participant::{entity_guid, Participant};
use crate::qos::{EndpointQos, Qos};

type Callback = Box<dyn Fn() + Send + Sync>;

/// A DDS reader of serialized samples.
///
/// ```no_run
/// use std::time::Duration;
/// use freight_dds::{DdsConfig, EndpointQos, Participant};
/// let p = std::sync::Arc::new(Participant::new(0, &DdsConfig::loopback())?);
/// let qos = EndpointQos::reliable(Duration::from_millis(100));
/// let r = p.create_reader("rt/chatter", "std_msgs::msg::dds_::String_", &qos, Box::new(|| {}))?;
/// while let Some(sample) = r.take()? {
///     println!("{} bytes from writer {:x}", sample.bytes().len(), sample.publication_handle());
/// }
/// # Ok::<_, freight_dds::DdsError>(())
/// ```
pub struct Reader {
    entity: dds::dds_entity_t,
    topic: dds::dds_entity_t,
    /// The listener's argument; freed after the reader (and so its listener) is gone.
    callback: *mut Callback,
    /// Reliable: a sample it has no room for is sent again, not lost.
    reliable: bool,
    _participant: Arc<Participant>,
}

// SAFETY: Cyclone entities are thread-safe handles; the callback is `Send + Sync`.
unsafe impl Send for Reader {}
// SAFETY: as above; every method goes through Cyclone's own locking.
unsafe impl Sync for Reader {}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reader({})", self.entity)
    }
}

unsafe extern "C" fn on_data_available(_reader: dds::dds_entity_t, arg: *mut std::ffi::c_void) {
    // SAFETY: `arg` is the `Callback` box of a reader that is not yet deleted
    // (see `Drop for Reader`).
    let f = unsafe { &*(arg as *const Callback) };
    f();
}

/// One received sample: the serialized bytes as Cyclone holds them (no copy).
pub struct ReceivedCdr {
    serdata: *mut dds::ddsi_serdata,
    /// A reference into `serdata`'s bytes, from `ddsi_serdata_to_ser_ref`.
    iov: dds::ddsrt_iovec_t,
    info: dds::dds_sample_info_t,
}

// SAFETY: serdata are reference-counted with atomic operations and immutable
// once received.
unsafe impl Send for ReceivedCdr {}
// SAFETY: as above; only read access is given out.
unsafe impl Sync for ReceivedCdr {}

impl ReceivedCdr {
    /// The sample in CDR, encapsulation header included, without the end
    /// padding its header announces (the low two bits of the options).
    pub fn bytes(&self) -> &[u8] {
        if self.iov.iov_len == 0 {
            return &[];
        }
        // SAFETY: `iov` refers to `iov_len` bytes that stay valid while the
        // serdata reference taken with it is held (until drop).
        let all = unsafe { std::slice::from_raw_parts(self.iov.iov_base.cast::<u8>(), self.iov.iov_len) };
        match all.get(3) {
            Some(options) if all.len() >= 4 + (*options & 3) as usize => &all[..all.len() - (*options & 3) as usize],
            _ => all,
        }
    }

    /// The instance handle of the writer that sent it (match it against
    /// [`Reader::matched_writer`]).
    pub fn publication_handle(&self) -> u64 {
        self.info.publication_handle
    }

    /// The writer's timestamp, nanoseconds since the Unix epoch.
    pub fn source_timestamp_ns(&self) -> i64 {
        self.info.source_timestamp
    }
}

impl std::fmt::Debug for ReceivedCdr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReceivedCdr({} bytes)", self.iov.iov_len)
    }
}

impl Drop for ReceivedCdr {
    fn drop(&mut self) {
        // SAFETY: the byte reference and the sample reference are released once each.
        unsafe {
            dds::ddsi_serdata_to_ser_unref(self.serdata, &self.iov);
            dds::ddsi_serdata_unref(self.serdata);
        }
    }
}

impl Reader {
    pub(crate) fn new(
        participant: &Arc<Participant>,
        topic_name: &str,
        type_name: &str,
        qos: &EndpointQos,
        on_data: Callback,
    ) -> Result<Self, DdsError> {
        let topic = participant.blob_topic(topic_name, type_name)?;
        let callback = Box::into_raw(Box::new(on_data));
        let reliable = qos.reliable;
        let qos = Qos::endpoint(qos);
        // SAFETY: as in `Writer::new`: the listener is copied by Cyclone; its
        // argument outlives the reader.
        let entity = unsafe {
            let listener = dds::dds_create_listener(callback.cast());
            dds::dds_lset_data_available(listener, Some(on_data_available));
            let r = dds::dds_create_reader(participant.entity, topic, qos.as_ptr(), listener);
            dds::dds_delete_listener(listener);
            r
        };
        match check("dds_create_reader", entity) {
            Ok(entity) => Ok(Reader { entity, topic, callback, reliable, _participant: participant.clone() }),
            Err(e) => {
                // SAFETY: nothing refers to the callback or the topic any more.
                unsafe {
                    drop(Box::from_raw(callback));
                    dds::dds_delete(topic);
                }
                Err(e)
            }
        }
    }

    /// Takes the oldest sample, if any. Samples without data (a writer left or
    /// disposed) are skipped.
    pub fn take(&self) -> Result<Option<ReceivedCdr>, DdsError> {
        loop {
            let mut sd: *mut dds::ddsi_serdata = std::ptr::null_mut();
            // SAFETY: dds_sample_info_t is plain data; all zero is a valid value.
            let mut info: dds::dds_sample_info_t = unsafe { std::mem::zeroed() };
            // SAFETY: room for one serdata pointer and one sample info.
            let n = unsafe { dds::dds_takecdr(self.entity, &mut sd, 1, &mut info, dds::DDS_ANY_STATE) };
            if check("dds_takecdr", n)? == 0 || sd.is_null() {
                return Ok(None);
            }
            if !info.valid_data {
                // SAFETY: the reference returned by dds_takecdr is released once.
                unsafe { dds::ddsi_serdata_unref(sd) };
                continue;
            }
            let mut iov = dds::ddsrt_iovec_t { iov_base: std::ptr::null_mut(), iov_len: 0 };
            // SAFETY: `sd` is a live serdata; the reference covers all its bytes.
            unsafe {
                let size = dds::ddsi_serdata_size(sd) as usize;
                dds::ddsi_serdata_to_ser_ref(sd, 0, size, &mut iov);
            }
            return Ok(Some(ReceivedCdr { serdata: sd, iov, info }));
        }
    }

    /// Samples DDS knows this reader missed, since it was made: lost (a gap
    /// in a writer's sequence numbers: a best-effort datagram that did not
    /// come, or a sample a keep-last writer dropped before this reader had
    /// it) and, for a best-effort reader, rejected (no room under its
    /// resource limits; a reliable reader's are sent again, not lost). What
    /// rclcpp reports as the message-lost event, and rosbag2 does not count.
    pub fn missed(&self) -> Result<u64, DdsError> {
        let mut lost = dds::dds_sample_lost_status { total_count: 0, total_count_change: 0 };
        // SAFETY: a live reader and a status struct to fill.
        check("dds_get_sample_lost_status", unsafe { dds::dds_get_sample_lost_status(self.entity, &mut lost) })?;
        // SAFETY: plain data; all zero is a valid value.
        let mut rejected: dds::dds_sample_rejected_status_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        check("dds_get_sample_rejected_status", unsafe {
            dds::dds_get_sample_rejected_status(self.entity, &mut rejected)
        })?;
        let rejected = if self.reliable { 0 } else { rejected.total_count };
        Ok(u64::from(lost.total_count) + u64::from(rejected))
    }

    /// The writers matched now, with their discovery data.
    pub fn matched_writers(&self) -> Result<Vec<DiscoveredEndpoint>, DdsError> {
        let handles = matched_handles(self.entity, "dds_get_matched_publications", dds::dds_get_matched_publications)?;
        Ok(handles.into_iter().filter_map(|h| self.matched_writer(h)).collect())
    }

    /// Discovery data of a matched writer, by the handle a sample carries.
    /// `None` when it has left since.
    pub fn matched_writer(&self, publication_handle: u64) -> Option<DiscoveredEndpoint> {
        // SAFETY: a null result is handled; a non-null one is converted and freed.
        unsafe { endpoint_from_builtin(dds::dds_get_matched_publication_data(self.entity, publication_handle), true) }
    }

    /// This reader's GUID.
    pub fn guid(&self) -> [u8; 16] {
        entity_guid(self.entity)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: the reader is deleted first (Cyclone waits for its running
        // listener calls), then nothing refers to the callback or the topic.
        unsafe {
            dds::dds_delete(self.entity);
            dds::dds_delete(self.topic);
            drop(Box::from_raw(self.callback));
        }
    }
}
