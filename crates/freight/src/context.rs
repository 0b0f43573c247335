//! The context: one per process and ROS domain, like `rclcpp::Context`.

use std::sync::{Arc, Mutex, OnceLock};

use freight_backend::{Backend, CpuBackend, ShmBackend};
use freight_dds::{DdsConfig, DdsError, Participant};
use freight_msg::{BackendKind, BackendSet};
use freight_tune::Profile;

use crate::endpoint::{DeviceTag, Devices};
use crate::error::{BackendUnavailable, ContextError, CreateError};
use crate::limits::Limits;
use crate::qos::{LargeData, QoS};
use crate::ros_discovery::RosGraph;
use crate::sync::lock;

pub(crate) struct ContextInner {
    pub(crate) domain_id: u32,
    pub(crate) limits: Limits,
    cpu: Arc<dyn Backend>,
    shm: Arc<dyn Backend>,
    /// Backends created on first use; the error is why one cannot be.
    fake_device: OnceLock<Result<Arc<dyn Backend>, String>>,
    cuda: OnceLock<Result<Arc<dyn Backend>, String>>,
    cuda_host: OnceLock<Result<Arc<dyn Backend>, String>>,
    /// This process's CUDA device: ordinal of the `cuda` and `cuda-host` backends.
    pub(crate) cuda_device: i32,
    /// The simulated device of `fake-device`; `None`: the backend's default.
    fake_device_uuid: Option<[u8; 16]>,
    /// The network plane's configuration; `None`: local only.
    network: Option<DdsConfig>,
    /// The tuning of the large-data streams declared up front
    /// ([`ContextBuilder::large_data`]), widened to serve all of them.
    declared_tuning: Option<Profile>,
    /// The DDS participant, joined when the first endpoint needs it.
    participant: Mutex<Option<Joined>>,
    /// This context's nodes in the ROS graph, and the nodes other participants announce.
    pub(crate) ros_graph: Arc<RosGraph>,
}

impl ContextInner {
    /// The backend of `kind`, or why this process cannot use it. Device
    /// backends are created on first use, for this process's device; a
    /// failure is kept (and reported again) rather than retried.
    pub(crate) fn backend(&self, kind: BackendKind) -> Result<Arc<dyn Backend>, BackendUnavailable> {
        let lazy = |cell: &OnceLock<Result<Arc<dyn Backend>, String>>, create: &dyn Fn() -> Result<_, String>| {
            cell.get_or_init(create).clone().map_err(|reason| BackendUnavailable { backend: kind, reason })
        };
        match kind {
            BackendKind::Cpu => Ok(self.cpu.clone()),
            BackendKind::Shm => Ok(self.shm.clone()),
            BackendKind::FakeDevice => lazy(&self.fake_device, &|| {
                devices::fake_device(self.limits.fake_device_capacity, self.fake_device_uuid)
            }),
            BackendKind::Cuda => lazy(&self.cuda, &|| devices::cuda(self.cuda_device, self.limits.cuda_pool_capacity)),
            BackendKind::CudaHost => lazy(&self.cuda_host, &|| devices::cuda_host(self.cuda_device)),
            other => Err(BackendUnavailable { backend: other, reason: "unknown to this version of freight".into() }),
        }
    }

    /// The UUID of the device whose memory this process's `kind` backend
    /// lends (`None` for host memory, or when the backend is unavailable).
    pub(crate) fn device_uuid(&self, kind: BackendKind) -> Option<[u8; 16]> {
        if !crate::negotiation::is_device_pool(kind) {
            return None;
        }
        let backend = self.backend(kind).ok()?;
        // An all-zero UUID names no device (frame headers write "none" so).
        backend.device_uuid().filter(|u| *u != [0; 16])
    }

    /// The tag of [`ContextInner::device_uuid`], as port names carry it.
    pub(crate) fn device_tag(&self, kind: BackendKind) -> Option<DeviceTag> {
        self.device_uuid(kind).map(|u| DeviceTag::of_uuid(&u))
    }

    /// The devices of the device-pool backends in `kinds` (for port names).
    pub(crate) fn devices_of(&self, kinds: BackendSet) -> Devices {
        kinds.iter().fold(Devices::default(), |d, k| d.with(k, self.device_tag(k)))
    }

    /// The DDS participant of this context; `None` when it is local only.
    pub(crate) fn participant(&self) -> Result<Option<Arc<Participant>>, DdsError> {
        let Some(config) = &self.network else { return Ok(None) };
        let mut joined = lock(&self.participant);
        self.join(&mut joined, config, None).participant.clone().map(Some)
    }

    /// The DDS participant for an endpoint on `topic` with `qos`, with the
    /// error an endpoint reports. A large-data QoS is tuned here; the domain
    /// must be (or now be) configured for it.
    pub(crate) fn participant_for(&self, topic: &str, qos: &QoS) -> Result<Option<Arc<Participant>>, CreateError> {
        let Some(config) = &self.network else { return Ok(None) };
        let wanted = match qos.large_data {
            Some(stream) => Some(
                stream.profile(topic).map_err(|e| CreateError::Tune { topic: topic.into(), source: Box::new(e) })?,
            ),
            None => None,
        };
        let mut joined = lock(&self.participant);
        let joined = self.join(&mut joined, config, wanted.as_ref());
        let participant =
            joined.participant.clone().map_err(|source| CreateError::Network { topic: topic.into(), source })?;
        if let Some(wanted) = &wanted {
            let short = match &joined.tuning {
                Some(applied) => applied.covers(wanted).err(),
                None => Some(vec!["the domain was joined with the DDS configuration as given, untuned".into()]),
            };
            if let Some(short) = short {
                return Err(CreateError::NetworkTuning { topic: topic.into(), short: short.join("; ") });
            }
        }
        Ok(Some(participant))
    }

    /// Joins the domain unless done: with `config`, overlaid with the tuned
    /// settings of the declared streams and of `wanted`; then announces this
    /// context's nodes in the ROS graph.
    fn join<'a>(&self, joined: &'a mut Option<Joined>, config: &DdsConfig, wanted: Option<&Profile>) -> &'a Joined {
        joined.get_or_insert_with(|| {
            let tuning = widen(self.declared_tuning.clone(), wanted);
            let config = match &tuning {
                Some(t) => tuned_config(config, t),
                None => config.clone(),
            };
            let participant = Participant::new(self.domain_id, &config).map(Arc::new);
            if let Ok(p) = &participant {
                self.ros_graph.joined(p);
            }
            Joined { participant, tuning }
        })
    }

    /// Backends a subscription accepts unless told otherwise: every one this
    /// process can use. The fake device is a test backend and must be asked for.
    pub(crate) fn default_accepted(&self) -> BackendSet {
        BackendSet::of(&[BackendKind::Cpu, BackendKind::Shm])
    }
}

/// The DDS participant of a context and the tuning its domain was configured with.
struct Joined {
    participant: Result<Arc<Participant>, DdsError>,
    tuning: Option<Profile>,
}

/// `config` (or `CYCLONEDDS_URI` when it gives none) with the tuned settings
/// after it: Cyclone reads a list of configurations, later ones overriding
/// (freight's own settings for the host come before both: `DdsConfig::effective`).
fn tuned_config(config: &DdsConfig, tuning: &Profile) -> DdsConfig {
    let base = config.xml.clone().or_else(|| std::env::var("CYCLONEDDS_URI").ok().filter(|s| !s.trim().is_empty()));
    let tuned = freight_tune::render::cyclonedds_xml(tuning);
    // The `<?xml ..?>` declaration is for a file; in a list it would stand
    // after another document, so it is dropped.
    let tuned = tuned.trim_start_matches(|c| c != '\n').trim_start().to_string();
    DdsConfig {
        xml: Some(match base {
            Some(base) => format!("{base},{tuned}"),
            None => tuned,
        }),
        ..config.clone()
    }
}

/// `tuning` widened to serve `other` too (or `other`'s, when there is none yet).
fn widen(tuning: Option<Profile>, other: Option<&Profile>) -> Option<Profile> {
    match (tuning, other) {
        (Some(mut t), Some(o)) => {
            t.widen(o);
            Some(t)
        }
        (t, o) => t.or_else(|| o.cloned()),
    }
}

/// The entry point: one per process and ROS domain.
///
/// ```no_run
/// use freight::Context;
/// let ctx = Context::new()?; // domain from ROS_DOMAIN_ID, default 0
/// let node = ctx.create_node("camera")?;
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("domain_id", &self.inner.domain_id).finish()
    }
}

/// Builds a [`Context`] with explicit settings.
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    domain_id: Option<u32>,
    limits: Limits,
    network: Option<DdsConfig>,
    cuda_device: Option<i32>,
    fake_device_uuid: Option<[u8; 16]>,
    large_data: Vec<LargeData>,
}

impl Default for ContextBuilder {
    fn default() -> Self {
        ContextBuilder {
            domain_id: None,
            limits: Limits::default(),
            network: Some(DdsConfig::default()),
            cuda_device: None,
            fake_device_uuid: None,
            large_data: Vec::new(),
        }
    }
}

/// The environment variable that picks this process's CUDA device (an
/// ordinal as CUDA numbers the visible devices) when the builder does not.
pub const CUDA_DEVICE_ENV: &str = "FREIGHT_CUDA_DEVICE";

/// Test hook: the environment variable that gives this process's simulated
/// device (`fake-device`) a UUID of its own (32 hex digits, dashes allowed),
/// so that tests can put two processes on different devices without a GPU.
/// [`ContextBuilder::fake_device_uuid`] does the same in code.
pub const FAKE_DEVICE_UUID_ENV: &str = "FREIGHT_FAKE_DEVICE_UUID";

impl ContextBuilder {
    /// Uses this domain instead of `ROS_DOMAIN_ID`.
    pub fn domain_id(mut self, id: u32) -> Self {
        self.domain_id = Some(id);
        self
    }

    /// Uses these limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Configures the network plane (DDS). By default it reads
    /// `CYCLONEDDS_URI`, as Cyclone-based ROS 2 nodes do.
    ///
    /// ```no_run
    /// use freight::{Context, DdsConfig};
    /// let ctx = Context::builder().dds_config(DdsConfig::loopback()).create()?;
    /// # Ok::<_, freight::ContextError>(())
    /// ```
    pub fn dds_config(mut self, config: DdsConfig) -> Self {
        self.network = Some(config);
        self
    }

    /// Declares a large stream over a lossy link that this context will carry
    /// ([`QoS::large_data_lossy`]), so that the DDS domain is configured for it
    /// even when another network endpoint is created first. Several streams
    /// share the strictest of each domain-wide setting. The tuner's errors
    /// come back from [`create`](Self::create).
    ///
    /// ```no_run
    /// use freight::{Context, LargeData};
    /// let ctx = Context::builder()
    ///     .large_data(LargeData::new(30.0, 512 << 10, 433e6)) // point cloud
    ///     .large_data(LargeData::new(15.0, 2 << 20, 433e6))   // camera
    ///     .create()?;
    /// # Ok::<_, freight::ContextError>(())
    /// ```
    pub fn large_data(mut self, stream: LargeData) -> Self {
        self.large_data.push(stream);
        self
    }

    /// No network plane: endpoints reach this host's freight peers only, and
    /// nothing is sent to or read from the network.
    pub fn local_only(mut self) -> Self {
        self.network = None;
        self
    }

    /// Uses CUDA device `ordinal` (as CUDA numbers the devices visible to
    /// this process) for the `cuda` and `cuda-host` backends, instead of
    /// `FREIGHT_CUDA_DEVICE` (default 0). Devices are matched between
    /// processes by UUID, so `CUDA_VISIBLE_DEVICES` may differ between them.
    ///
    /// ```no_run
    /// let ctx = freight::Context::builder().cuda_device(1).create()?;
    /// # Ok::<_, freight::ContextError>(())
    /// ```
    pub fn cuda_device(mut self, ordinal: i32) -> Self {
        self.cuda_device = Some(ordinal);
        self
    }

    /// Test hook: gives this context's simulated device (`fake-device`) this
    /// UUID instead of the default one (or `FREIGHT_FAKE_DEVICE_UUID`). Device
    /// memory only goes to subscriptions on the same device; the others get a
    /// host copy, as they would on another GPU.
    pub fn fake_device_uuid(mut self, uuid: [u8; 16]) -> Self {
        self.fake_device_uuid = Some(uuid);
        self
    }

    /// Creates the context. The first one raises the process's soft limit of
    /// open files to the hard one: each topic costs a few descriptors.
    pub fn create(self) -> Result<Context, ContextError> {
        // Topics cost descriptors; a desktop's soft limit (1024) would stop a
        // node at a few dozen of them.
        crate::fd_limit::raise_soft_limit();
        let domain_id = match self.domain_id {
            Some(d) => d,
            None => domain_from_env()?,
        };
        let cuda_device = match self.cuda_device {
            Some(d) => d,
            None => cuda_device_from_env()?,
        };
        let fake_device_uuid = match self.fake_device_uuid {
            Some(u) => Some(u),
            None => fake_device_uuid_from_env()?,
        };
        let mut declared_tuning = None;
        for stream in &self.large_data {
            let profile = stream.profile("/large_data").map_err(|e| ContextError::Tune(Box::new(e)))?;
            declared_tuning = widen(declared_tuning, Some(&profile));
        }
        // iceoryx2 logs at info level and warns that it runs without a config
        // file, which is how freight means it; keep its console to errors.
        iceoryx2::prelude::set_log_level(iceoryx2::prelude::LogLevel::Error);
        Ok(Context {
            inner: Arc::new(ContextInner {
                domain_id,
                limits: self.limits,
                cpu: Arc::new(CpuBackend),
                shm: Arc::new(ShmBackend::with_max_block_len(self.limits.max_message_bytes)),
                fake_device: OnceLock::new(),
                cuda: OnceLock::new(),
                cuda_host: OnceLock::new(),
                cuda_device,
                fake_device_uuid,
                network: self.network,
                declared_tuning,
                participant: Mutex::new(None),
                ros_graph: Arc::default(),
            }),
        })
    }
}

fn domain_from_env() -> Result<u32, ContextError> {
    match std::env::var("ROS_DOMAIN_ID") {
        Err(_) => Ok(0),
        Ok(s) if s.trim().is_empty() => Ok(0),
        Ok(s) => s.trim().parse::<u32>().ok().filter(|d| *d <= 232).ok_or(ContextError::BadDomainId(s)),
    }
}

fn cuda_device_from_env() -> Result<i32, ContextError> {
    match std::env::var(CUDA_DEVICE_ENV) {
        Err(_) => Ok(0),
        Ok(s) if s.trim().is_empty() => Ok(0),
        Ok(s) => s.trim().parse::<i32>().ok().filter(|d| *d >= 0).ok_or(ContextError::BadEnvironment {
            variable: CUDA_DEVICE_ENV,
            value: s,
            expected: "a CUDA device ordinal (0, 1, ...)",
        }),
    }
}

fn fake_device_uuid_from_env() -> Result<Option<[u8; 16]>, ContextError> {
    match std::env::var(FAKE_DEVICE_UUID_ENV) {
        Err(_) => Ok(None),
        Ok(s) if s.trim().is_empty() => Ok(None),
        Ok(s) => parse_uuid(s.trim()).map(Some).ok_or(ContextError::BadEnvironment {
            variable: FAKE_DEVICE_UUID_ENV,
            value: s,
            expected: "a UUID (32 hex digits, dashes allowed)",
        }),
    }
}

/// Parses 32 hex digits, with dashes anywhere between them.
fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = s.bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut uuid = [0u8; 16];
    for (i, b) in uuid.iter_mut().enumerate() {
        *b = u8::from_str_radix(std::str::from_utf8(&hex[2 * i..2 * i + 2]).ok()?, 16).ok()?;
    }
    Some(uuid)
}

/// Creating the device backends, keeping why one cannot be.
mod devices {
    use std::sync::Arc;

    use freight_backend::{cuda, Backend, FakeDeviceBackend};

    pub(super) fn fake_device(capacity: usize, uuid: Option<[u8; 16]>) -> Result<Arc<dyn Backend>, String> {
        let b = match uuid {
            Some(uuid) => FakeDeviceBackend::with_device(capacity, uuid),
            None => FakeDeviceBackend::new(capacity),
        };
        Ok(Arc::new(b.map_err(|e| e.to_string())?))
    }

    pub(super) fn cuda(ordinal: i32, capacity: usize) -> Result<Arc<dyn Backend>, String> {
        cuda::available().map_err(|e| format!("cuda: {e}"))?;
        Ok(Arc::new(cuda::CudaBackend::new(ordinal, capacity).map_err(|e| e.to_string())?))
    }

    pub(super) fn cuda_host(ordinal: i32) -> Result<Arc<dyn Backend>, String> {
        cuda::available().map_err(|e| format!("cuda-host: {e}"))?;
        Ok(Arc::new(cuda::CudaHostBackend::new(ordinal).map_err(|e| e.to_string())?))
    }
}

impl Context {
    /// A context with default limits on the domain from `ROS_DOMAIN_ID` (default 0).
    pub fn new() -> Result<Context, ContextError> {
        Self::builder().create()
    }

    /// A builder for explicit settings.
    pub fn builder() -> ContextBuilder {
        ContextBuilder::default()
    }

    /// The ROS domain.
    pub fn domain_id(&self) -> u32 {
        self.inner.domain_id
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    /// This process's CUDA device, as an ordinal (see [`ContextBuilder::cuda_device`]).
    pub fn cuda_device(&self) -> i32 {
        self.inner.cuda_device
    }

    /// Whether this process can use `kind`, and if not, why. Device backends
    /// are set up by this call if no endpoint has needed them yet.
    ///
    /// ```no_run
    /// use freight::{BackendKind, Context};
    /// let ctx = Context::new()?;
    /// if let Err(e) = ctx.backend_available(BackendKind::Cuda) {
    ///     eprintln!("no GPU path: {e}");
    /// }
    /// # Ok::<_, freight::ContextError>(())
    /// ```
    pub fn backend_available(&self, kind: BackendKind) -> Result<(), BackendUnavailable> {
        self.inner.backend(kind).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_parse_with_or_without_dashes() {
        let u = parse_uuid("3f2a0102-0304-0506-0708-090a0b0c0d0e").unwrap();
        assert_eq!(u[..4], [0x3f, 0x2a, 1, 2]);
        assert_eq!(u[15], 0x0e);
        assert_eq!(parse_uuid("3F2A0102030405060708090A0B0C0D0E"), Some(u));
        for bad in ["", "3f2a", "3f2a0102-0304-0506-0708-090a0b0c0d0e0f", "g f2a0102030405060708090a0b0c0d0e"] {
            assert_eq!(parse_uuid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_unavailable_backend_says_why_and_keeps_saying_it() {
        let ctx = Context::builder().local_only().create().unwrap();
        assert!(ctx.backend_available(BackendKind::Shm).is_ok());
        let first = ctx.inner.backend(BackendKind::Cuda).err();
        if let Some(e) = &first {
            assert_eq!(e.backend, BackendKind::Cuda);
            if let Err(why) = freight_backend::cuda::available() {
                assert_eq!(e.reason, format!("cuda: {why}"), "the reason is CUDA's own");
            }
            assert_eq!(ctx.inner.backend(BackendKind::Cuda).err().as_ref(), Some(e), "the reason is kept");
            assert_eq!(ctx.inner.device_uuid(BackendKind::Cuda), None);
        }
    }

    #[test]
    fn the_fake_device_has_a_default_uuid_unless_given_one() {
        let ctx = Context::builder().local_only().create().unwrap();
        let default = freight_backend::FakeDeviceBackend::DEFAULT_DEVICE_UUID;
        if std::env::var_os(FAKE_DEVICE_UUID_ENV).is_none() {
            assert_eq!(ctx.inner.device_uuid(BackendKind::FakeDevice), Some(default));
        }
    }

    #[test]
    fn the_fake_device_has_the_uuid_the_context_gave_it() {
        let uuid = [7u8; 16];
        let ctx = Context::builder().local_only().fake_device_uuid(uuid).create().unwrap();
        assert_eq!(ctx.inner.device_uuid(BackendKind::FakeDevice), Some(uuid));
        assert_eq!(ctx.inner.device_tag(BackendKind::FakeDevice), Some(DeviceTag([7; 8])));
        assert_eq!(ctx.inner.device_uuid(BackendKind::Shm), None);
        let d = ctx.inner.devices_of(BackendSet::of(&[BackendKind::Shm, BackendKind::FakeDevice]));
        assert_eq!(d, Devices { cuda: None, fake_device: Some(DeviceTag([7; 8])) });
    }
}
