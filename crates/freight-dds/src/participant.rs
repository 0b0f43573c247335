//! A DDS domain participant and the entities it creates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cyclors as dds;

use crate::config::DdsConfig;
use crate::discovery::{self, Discovered};
use crate::error::{check, cstring, DdsError};
use crate::qos::{EndpointQos, Qos};
use crate::reader::Reader;
use crate::writer::Writer;

/// One participant in a DDS domain, with discovery readers that keep the
/// domain's graph.
///
/// ```no_run
/// use freight_dds::{DdsConfig, Participant};
/// let participant = std::sync::Arc::new(Participant::new(0, &DdsConfig::default())?);
/// for e in participant.discovered()?.endpoints {
///     println!("{} {} {}", e.topic_name, e.type_name, if e.is_writer { "writer" } else { "reader" });
/// }
/// # Ok::<_, freight_dds::DdsError>(())
/// ```
#[derive(Debug)]
pub struct Participant {
    pub(crate) entity: dds::dds_entity_t,
    domain_id: u32,
    builtin: discovery::BuiltinReaders,
}

/// Configurations this process gave to domains. A domain is configured once
/// per process (Cyclone's rule) and lives until the process exits.
fn configured_domains() -> &'static Mutex<HashMap<u32, DdsConfig>> {
    static D: OnceLock<Mutex<HashMap<u32, DdsConfig>>> = OnceLock::new();
    D.get_or_init(Mutex::default)
}

fn configure_domain(domain_id: u32, config: &DdsConfig) -> Result<(), DdsError> {
    let mut domains = configured_domains().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = domains.get(&domain_id) {
        if existing != config {
            return Err(DdsError::Call {
                call: "dds_create_domain",
                code: dds::DDS_RETCODE_PRECONDITION_NOT_MET,
                text: format!("domain {domain_id} is already configured differently in this process"),
            });
        }
        return Ok(());
    }
    let effective = config.effective();
    for warning in &effective.warnings {
        eprintln!("freight: DDS domain {domain_id}: {warning}");
    }
    let xml = cstring("DDS configuration", &effective.xml())?;
    // SAFETY: `xml` is a valid C string; Cyclone parses it during the call.
    let ret = unsafe { dds::dds_create_domain(domain_id, xml.as_ptr()) };
    check("dds_create_domain", ret)?;
    domains.insert(domain_id, config.clone());
    Ok(())
}

impl Participant {
    /// Joins `domain_id` (the ROS domain id) with `config`. Its user data says
    /// `enclave=/;`, as a ROS 2 participant's does.
    pub fn new(domain_id: u32, config: &DdsConfig) -> Result<Self, DdsError> {
        configure_domain(domain_id, config)?;
        let mut qos = Qos::new();
        qos.set_user_data(b"enclave=/;");
        // SAFETY: the QoS is valid for the call; no listener.
        let entity = unsafe { dds::dds_create_participant(domain_id, qos.as_ptr(), std::ptr::null()) };
        let entity = check("dds_create_participant", entity)?;
        let builtin = match discovery::BuiltinReaders::new(entity) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: the participant was created above and is deleted once.
                unsafe { dds::dds_delete(entity) };
                return Err(e);
            }
        };
        Ok(Participant { entity, domain_id, builtin })
    }

    /// The domain id.
    pub fn domain_id(&self) -> u32 {
        self.domain_id
    }

    /// This participant's GUID.
    pub fn guid(&self) -> [u8; 16] {
        entity_guid(self.entity)
    }

    /// A writer of raw CDR samples on `topic_name` with DDS type `type_name`.
    /// `on_match_change` runs (on a Cyclone thread) whenever a reader matches or
    /// leaves.
    pub fn create_writer(
        self: &Arc<Self>,
        topic_name: &str,
        type_name: &str,
        qos: &EndpointQos,
        on_match_change: Box<dyn Fn() + Send + Sync>,
    ) -> Result<Writer, DdsError> {
        Writer::new(self, topic_name, type_name, qos, on_match_change)
    }

    /// A reader of raw CDR samples on `topic_name` with DDS type `type_name`.
    /// `on_data` runs (on a Cyclone thread) whenever samples arrive.
    pub fn create_reader(
        self: &Arc<Self>,
        topic_name: &str,
        type_name: &str,
        qos: &EndpointQos,
        on_data: Box<dyn Fn() + Send + Sync>,
    ) -> Result<Reader, DdsError> {
        Reader::new(self, topic_name, type_name, qos, on_data)
    }

    /// What discovery knows now: the participants and the writers and readers
    /// of every topic in the domain (this participant's own included).
    pub fn discovered(&self) -> Result<Discovered, DdsError> {
        self.builtin.snapshot()
    }

    /// A keyless topic whose samples Cyclone treats as opaque CDR.
    pub(crate) fn blob_topic(&self, topic_name: &str, type_name: &str) -> Result<dds::dds_entity_t, DdsError> {
        let name = cstring("topic name", topic_name)?;
        let ty = cstring("type name", type_name)?;
        // SAFETY: both strings are valid for the call and copied by Cyclone;
        // the function does not write through them despite the `*mut`.
        let t =
            unsafe { dds::cdds_create_blob_topic(self.entity, name.as_ptr().cast_mut(), ty.as_ptr().cast_mut(), true) };
        check("dds_create_topic", t)
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        // SAFETY: the handle is deleted once; writers and readers hold the
        // participant in an `Arc`, so none outlives it.
        unsafe { dds::dds_delete(self.entity) };
    }
}

pub(crate) fn entity_guid(entity: dds::dds_entity_t) -> [u8; 16] {
    let mut guid = dds::dds_guid_t { v: [0; 16] };
    // SAFETY: `guid` is a valid out-pointer; on error it stays zero.
    unsafe { dds::dds_get_guid(entity, &mut guid) };
    guid.v
}
