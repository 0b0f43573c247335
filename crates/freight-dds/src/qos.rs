//! ROS 2 QoS as DDS QoS, mapped the way rmw_cyclonedds maps it.

use std::time::Duration;

use cyclors as dds;

/// The QoS of one DDS writer or reader.
///
/// ```
/// use std::time::Duration;
/// use freight_dds::EndpointQos;
/// let qos = EndpointQos { depth: Some(5), ..EndpointQos::reliable(Duration::from_millis(100)) };
/// assert!(qos.reliable);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointQos {
    /// Reliable (repairs losses) or best effort.
    pub reliable: bool,
    /// How long a reliable writer may block for room in its history.
    pub max_blocking_time: Duration,
    /// Transient local (late joiners get the writer's history) or volatile.
    pub transient_local: bool,
    /// Keep-last depth; `None` is keep-all.
    pub depth: Option<u32>,
    /// With keep-all, the most samples the endpoint holds (RESOURCE_LIMITS
    /// `max_samples`): a full reliable reader accepts no more until some are
    /// taken, and the writer repairs them later, so a remote writer cannot
    /// grow it without bound. `None`: unbounded, DDS's default. Ignored with
    /// keep-last, whose depth bounds it.
    pub max_samples: Option<u32>,
    /// Opaque bytes other participants see in discovery (the DDS USER_DATA policy).
    pub user_data: Vec<u8>,
}

impl EndpointQos {
    /// Reliable, volatile, keep last 10 (ROS 2's default profile).
    pub fn reliable(max_blocking_time: Duration) -> Self {
        EndpointQos {
            reliable: true,
            max_blocking_time,
            transient_local: false,
            depth: Some(10),
            max_samples: None,
            user_data: Vec::new(),
        }
    }
}

/// An owned `dds_qos_t`.
pub(crate) struct Qos(*mut dds::dds_qos_t);

impl Qos {
    pub(crate) fn new() -> Self {
        // SAFETY: dds_create_qos allocates a fresh, empty QoS object.
        Qos(unsafe { dds::dds_create_qos() })
    }

    pub(crate) fn as_ptr(&self) -> *const dds::dds_qos_t {
        self.0
    }

    pub(crate) fn set_user_data(&mut self, bytes: &[u8]) {
        if !bytes.is_empty() {
            // SAFETY: the QoS is valid; Cyclone copies `bytes`.
            unsafe { dds::dds_qset_userdata(self.0, bytes.as_ptr().cast(), bytes.len()) }
        }
    }

    /// The QoS of an endpoint. Beyond the four ROS 2 policies:
    /// * the data representation is XCDR1 only, the plain CDR ROS 2 speaks;
    /// * endpoints of this process are ignored: freight delivers to them
    ///   itself, by pointer or shared memory.
    pub(crate) fn endpoint(q: &EndpointQos) -> Self {
        let mut qos = Qos::new();
        let max_blocking = i64::try_from(q.max_blocking_time.as_nanos()).unwrap_or(i64::MAX);
        // SAFETY: every call below writes one policy into a valid QoS object.
        unsafe {
            let p = qos.0;
            if q.reliable {
                dds::dds_qset_reliability(p, dds::dds_reliability_kind_DDS_RELIABILITY_RELIABLE, max_blocking);
            } else {
                dds::dds_qset_reliability(p, dds::dds_reliability_kind_DDS_RELIABILITY_BEST_EFFORT, 0);
            }
            let durability = if q.transient_local {
                dds::dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL
            } else {
                dds::dds_durability_kind_DDS_DURABILITY_VOLATILE
            };
            dds::dds_qset_durability(p, durability);
            match q.depth {
                Some(n) => dds::dds_qset_history(
                    p,
                    dds::dds_history_kind_DDS_HISTORY_KEEP_LAST,
                    i32::try_from(n).unwrap_or(i32::MAX),
                ),
                None => {
                    dds::dds_qset_history(p, dds::dds_history_kind_DDS_HISTORY_KEEP_ALL, 0);
                    if let Some(n) = q.max_samples {
                        let n = i32::try_from(n).unwrap_or(i32::MAX);
                        dds::dds_qset_resource_limits(p, n, dds::DDS_LENGTH_UNLIMITED, n);
                    }
                }
            }
            let xcdr1 = [dds::DDS_DATA_REPRESENTATION_XCDR1 as dds::dds_data_representation_id_t];
            dds::dds_qset_data_representation(p, 1, xcdr1.as_ptr());
            dds::dds_qset_ignorelocal(p, dds::dds_ignorelocal_kind_DDS_IGNORELOCAL_PROCESS);
        }
        qos.set_user_data(&q.user_data);
        qos
    }
}

impl Drop for Qos {
    fn drop(&mut self) {
        // SAFETY: the pointer came from dds_create_qos and is freed once.
        unsafe { dds::dds_delete_qos(self.0) }
    }
}

/// Reads the USER_DATA policy of a QoS Cyclone owns.
///
/// # Safety
/// `qos` is null or a valid QoS object.
pub(crate) unsafe fn user_data(qos: *const dds::dds_qos_t) -> Vec<u8> {
    if qos.is_null() {
        return Vec::new();
    }
    let mut value: *mut std::ffi::c_void = std::ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: `qos` is valid (caller); Cyclone returns a copy we free below.
    if !unsafe { dds::dds_qget_userdata(qos, &mut value, &mut size) } || value.is_null() {
        return Vec::new();
    }
    // SAFETY: Cyclone allocated `size` bytes at `value`.
    let bytes = unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec();
    // SAFETY: the copy was allocated by Cyclone and is freed once.
    unsafe { dds::dds_free(value) };
    bytes
}

/// Reads one property (PROPERTY policy) of a QoS Cyclone owns.
///
/// # Safety
/// `qos` is null or a valid QoS object.
pub(crate) unsafe fn property(qos: *const dds::dds_qos_t, name: &std::ffi::CStr) -> Option<String> {
    if qos.is_null() {
        return None;
    }
    let mut value: *mut std::os::raw::c_char = std::ptr::null_mut();
    // SAFETY: `qos` is valid (caller); Cyclone returns a copy we free below.
    if !unsafe { dds::dds_qget_prop(qos, name.as_ptr(), &mut value) } || value.is_null() {
        return None;
    }
    // SAFETY: Cyclone returns a NUL-terminated string.
    let s = unsafe { std::ffi::CStr::from_ptr(value) }.to_string_lossy().into_owned();
    // SAFETY: the copy was allocated by Cyclone and is freed once.
    unsafe { dds::dds_free(value.cast()) };
    Some(s)
}

/// Reads reliability and durability of a QoS Cyclone owns.
///
/// # Safety
/// `qos` is null or a valid QoS object.
pub(crate) unsafe fn reliability_durability(qos: *const dds::dds_qos_t) -> (bool, bool) {
    if qos.is_null() {
        return (false, false);
    }
    let mut rel: dds::dds_reliability_kind_t = 0;
    let mut blocking: dds::dds_duration_t = 0;
    let mut dur: dds::dds_durability_kind_t = 0;
    // SAFETY: `qos` is valid (caller); the out-pointers are locals.
    unsafe {
        dds::dds_qget_reliability(qos, &mut rel, &mut blocking);
        dds::dds_qget_durability(qos, &mut dur);
    }
    (
        rel == dds::dds_reliability_kind_DDS_RELIABILITY_RELIABLE,
        dur == dds::dds_durability_kind_DDS_DURABILITY_TRANSIENT_LOCAL,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RESOURCE_LIMITS policy Cyclone holds for `q`: (max_samples, max_instances,
    /// max_samples_per_instance), or `None` when it is not set.
    fn resource_limits(q: &EndpointQos) -> Option<(i32, i32, i32)> {
        let qos = Qos::endpoint(q);
        let (mut samples, mut instances, mut per_instance) = (0, 0, 0);
        // SAFETY: a valid QoS object and three places to write to.
        let set = unsafe { dds::dds_qget_resource_limits(qos.0, &mut samples, &mut instances, &mut per_instance) };
        set.then_some((samples, instances, per_instance))
    }

    #[test]
    fn keep_all_is_bounded_when_asked_and_keep_last_by_its_depth() {
        let keep_all = EndpointQos { depth: None, max_samples: Some(16), ..EndpointQos::reliable(Duration::ZERO) };
        assert_eq!(resource_limits(&keep_all), Some((16, dds::DDS_LENGTH_UNLIMITED, 16)));
        let unbounded = EndpointQos { depth: None, ..EndpointQos::reliable(Duration::ZERO) };
        assert_eq!(resource_limits(&unbounded), None);
        let keep_last = EndpointQos { max_samples: Some(16), ..EndpointQos::reliable(Duration::ZERO) };
        assert_eq!(resource_limits(&keep_last), None);
    }
}
