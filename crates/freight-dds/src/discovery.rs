//! What DDS discovery knows: participants, writers and readers.

use cyclors as dds;

use crate::error::{check, DdsError};
use crate::qos;

/// A writer or reader somewhere in the domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredEndpoint {
    /// The endpoint's GUID.
    pub guid: [u8; 16],
    /// Its participant's GUID.
    pub participant_guid: [u8; 16],
    /// A writer (else a reader).
    pub is_writer: bool,
    /// DDS topic name (`rt/...` for ROS 2 topics).
    pub topic_name: String,
    /// DDS type name (`sensor_msgs::msg::dds_::Image_`).
    pub type_name: String,
    /// Reliable (else best effort).
    pub reliable: bool,
    /// Transient local (else volatile).
    pub transient_local: bool,
    /// Its USER_DATA.
    pub user_data: Vec<u8>,
}

/// A participant somewhere in the domain, with what it says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredParticipant {
    /// The participant's GUID.
    pub guid: [u8; 16],
    /// Its host name, when it says (Cyclone DDS participants do).
    pub hostname: Option<String>,
    /// Its process id, when it says.
    pub pid: Option<u32>,
    /// Its process name, when it says.
    pub process_name: Option<String>,
    /// Its USER_DATA (`enclave=/;` for ROS 2 participants).
    pub user_data: Vec<u8>,
}

/// A snapshot of discovery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Participants alive.
    pub participants: Vec<DiscoveredParticipant>,
    /// Writers and readers alive.
    pub endpoints: Vec<DiscoveredEndpoint>,
}

fn c_string(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: Cyclone's built-in topic samples hold NUL-terminated strings.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The instance handles `get` reports for `entity` (Cyclone's
/// `dds_get_matched_subscriptions` / `_publications`), however many there are.
pub(crate) fn matched_handles(
    entity: dds::dds_entity_t,
    call: &'static str,
    get: unsafe extern "C" fn(dds::dds_entity_t, *mut dds::dds_instance_handle_t, usize) -> dds::dds_return_t,
) -> Result<Vec<dds::dds_instance_handle_t>, DdsError> {
    let mut handles = vec![0; 64];
    loop {
        // SAFETY: `handles` has room for `handles.len()` entries.
        let n = check(call, unsafe { get(entity, handles.as_mut_ptr(), handles.len()) })? as usize;
        if n <= handles.len() {
            handles.truncate(n);
            return Ok(handles);
        }
        // More matched than room: ask again with room for all of them.
        handles.resize(n, 0);
    }
}

/// Converts an endpoint sample Cyclone allocated and frees it.
///
/// # Safety
/// `e` is null or came from `dds_get_matched_*_data`.
pub(crate) unsafe fn endpoint_from_builtin(
    e: *mut dds::dds_builtintopic_endpoint_t,
    is_writer: bool,
) -> Option<DiscoveredEndpoint> {
    if e.is_null() {
        return None;
    }
    // SAFETY: non-null and valid (caller); freed once below.
    let out = unsafe { endpoint(&*e, is_writer) };
    // SAFETY: as above.
    unsafe { dds::dds_builtintopic_free_endpoint(e) };
    Some(out)
}

/// # Safety
/// `e`'s pointers are valid (a sample Cyclone produced).
unsafe fn endpoint(e: &dds::dds_builtintopic_endpoint_t, is_writer: bool) -> DiscoveredEndpoint {
    // SAFETY: the QoS pointer of a built-in sample is null or valid.
    let (reliable, transient_local) = unsafe { qos::reliability_durability(e.qos) };
    DiscoveredEndpoint {
        guid: e.key.v,
        participant_guid: e.participant_key.v,
        is_writer,
        topic_name: c_string(e.topic_name),
        type_name: c_string(e.type_name),
        reliable,
        transient_local,
        // SAFETY: as above.
        user_data: unsafe { qos::user_data(e.qos) },
    }
}

/// Readers of the DCPSParticipant, DCPSPublication and DCPSSubscription
/// built-in topics: Cyclone keeps every alive instance in them.
#[derive(Debug)]
pub(crate) struct BuiltinReaders {
    participants: dds::dds_entity_t,
    publications: dds::dds_entity_t,
    subscriptions: dds::dds_entity_t,
}

impl BuiltinReaders {
    pub(crate) fn new(participant: dds::dds_entity_t) -> Result<Self, DdsError> {
        let make = |topic| {
            // SAFETY: built-in topics take no QoS or listener of ours.
            let r = unsafe { dds::dds_create_reader(participant, topic, std::ptr::null(), std::ptr::null()) };
            check("dds_create_reader (built-in topic)", r)
        };
        Ok(BuiltinReaders {
            participants: make(dds::DDS_BUILTIN_TOPIC_DCPSPARTICIPANT)?,
            publications: make(dds::DDS_BUILTIN_TOPIC_DCPSPUBLICATION)?,
            subscriptions: make(dds::DDS_BUILTIN_TOPIC_DCPSSUBSCRIPTION)?,
        })
    }

    pub(crate) fn snapshot(&self) -> Result<Discovered, DdsError> {
        let mut out = Discovered::default();
        read_alive(self.participants, |p: &dds::dds_builtintopic_participant_t| {
            // SAFETY: the QoS of a built-in sample is null or valid.
            let prop = |name: &std::ffi::CStr| unsafe { qos::property(p.qos, name) };
            out.participants.push(DiscoveredParticipant {
                guid: p.key.v,
                hostname: prop(c"__Hostname"),
                pid: prop(c"__Pid").and_then(|s| s.parse().ok()),
                process_name: prop(c"__ProcessName"),
                // SAFETY: as above.
                user_data: unsafe { qos::user_data(p.qos) },
            });
        })?;
        // SAFETY: the samples are endpoint samples Cyclone produced.
        read_alive(self.publications, |e| out.endpoints.push(unsafe { endpoint(e, true) }))?;
        // SAFETY: as above.
        read_alive(self.subscriptions, |e| out.endpoints.push(unsafe { endpoint(e, false) }))?;
        Ok(out)
    }
}

/// Reads (without taking) every alive instance of a built-in reader (one
/// sample each).
fn read_alive<T>(reader: dds::dds_entity_t, mut f: impl FnMut(&T)) -> Result<(), DdsError> {
    let mask = dds::DDS_ANY_SAMPLE_STATE | dds::DDS_ANY_VIEW_STATE | dds::DDS_ALIVE_INSTANCE_STATE;
    let mut room = 256usize;
    loop {
        let mut samples = vec![std::ptr::null_mut::<std::ffi::c_void>(); room];
        // SAFETY: plain data; all zero is valid.
        let mut infos: Vec<dds::dds_sample_info_t> = vec![unsafe { std::mem::zeroed() }; room];
        // SAFETY: `samples[0]` is null, so Cyclone lends its own buffers,
        // returned below; both arrays have room for `room` entries.
        let n =
            unsafe { dds::dds_read_mask(reader, samples.as_mut_ptr(), infos.as_mut_ptr(), room, room as u32, mask) };
        let n = check("dds_read", n)? as usize;
        if n == room {
            // Perhaps more: read again with more room (reading takes nothing away).
            // SAFETY: returns the loan taken above.
            unsafe { dds::dds_return_loan(reader, samples.as_mut_ptr(), n as i32) };
            room *= 4;
            continue;
        }
        for (s, i) in samples.iter().zip(&infos).take(n) {
            if i.valid_data && !s.is_null() {
                // SAFETY: a valid sample of this built-in topic's type.
                f(unsafe { &*(*s as *const T) });
            }
        }
        if n > 0 {
            // SAFETY: returns the loan taken above.
            unsafe { dds::dds_return_loan(reader, samples.as_mut_ptr(), n as i32) };
        }
        return Ok(());
    }
}
