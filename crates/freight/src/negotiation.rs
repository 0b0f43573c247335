//! The one rule that decides which memory a subscription receives a buffer in.
//! The publisher follows it when it counts the readers of its device memory,
//! the subscription when it imports a buffer, and `freight topic info` shows
//! it per publisher/subscription pair.

use freight_msg::{BackendKind, BackendSet};

/// Whether buffers of `kind` live in a device's own memory pool (`cuda`,
/// `fake-device`), reachable only from that device, rather than in host memory
/// that travels in the frame (`cpu`, `shm`, `cuda-host`).
pub(crate) fn is_device_pool(kind: BackendKind) -> bool {
    !kind.is_host_memory()
}

/// The backend a subscription that accepts `accepts` receives a buffer in,
/// when the publisher's memory is `offered` and the frame's host bytes live in
/// `host` (`shm` between processes, `cpu` inside one). `same_device` says
/// whether both ends use the same device (by UUID) for `offered`; it matters
/// only for device pools.
///
/// In order:
/// 1. the publisher's own memory, if the subscription takes it and — for a
///    device pool (`cuda`, `fake-device`) — is on the same device (zero copy);
/// 2. else, when the host bytes are in shared memory, `cuda-host` if the
///    subscription takes it: the same shared memory, mapped for its device;
/// 3. else the host bytes if it takes those (zero copy of the host copy);
/// 4. else a private CPU copy, which every subscription takes.
///
/// A device pool's memory that a subscription does not take reaches it as the
/// host copy the publisher makes once per message for all such subscriptions.
///
/// ```
/// use freight::{negotiate, BackendKind, BackendSet};
/// use BackendKind::*;
/// let gpu_aware = BackendSet::of(&[Shm, FakeDevice]);
/// assert_eq!(negotiate(FakeDevice, Shm, gpu_aware, true), FakeDevice);
/// // Another device: the host copy, in shared memory.
/// assert_eq!(negotiate(FakeDevice, Shm, gpu_aware, false), Shm);
/// assert_eq!(negotiate(FakeDevice, Shm, BackendSet::CPU_ONLY, true), Cpu);
/// assert_eq!(negotiate(Shm, Shm, BackendSet::of(&[Shm]), false), Shm);
/// // `cuda` on another GPU: the host copy mapped for this one.
/// assert_eq!(negotiate(Cuda, Shm, BackendSet::of(&[Cuda, CudaHost, Shm]), false), CudaHost);
/// // `cuda-host` frames are shared memory for everyone else.
/// assert_eq!(negotiate(CudaHost, Shm, BackendSet::of(&[Shm]), false), Shm);
/// ```
pub fn negotiate(offered: BackendKind, host: BackendKind, accepts: BackendSet, same_device: bool) -> BackendKind {
    if accepts.contains(offered) && (same_device || !is_device_pool(offered)) {
        offered
    } else if host == BackendKind::Shm && accepts.contains(BackendKind::CudaHost) {
        BackendKind::CudaHost
    } else if accepts.contains(host) {
        host
    } else {
        BackendKind::Cpu
    }
}

/// Whether a subscription that accepts `accepts` takes device memory of
/// `kind` as is (and so holds a share of each device block the publisher
/// exports). The data path and the publisher's reader count both use this.
pub(crate) fn takes_device_memory(kind: BackendKind, accepts: BackendSet, same_device: bool) -> bool {
    is_device_pool(kind) && negotiate(kind, BackendKind::Shm, accepts, same_device) == kind
}

#[cfg(test)]
mod tests {
    use super::*;
    use BackendKind::*;

    fn set(kinds: &[BackendKind]) -> BackendSet {
        BackendSet::of(kinds)
    }

    #[test]
    fn device_pools_are_taken_only_on_the_same_device() {
        for pool in [Cuda, FakeDevice] {
            let accepts = set(&[pool, Shm]);
            assert_eq!(negotiate(pool, Shm, accepts, true), pool);
            assert_eq!(negotiate(pool, Shm, accepts, false), Shm, "{pool} on another device: the shm host copy");
            assert_eq!(negotiate(pool, Cpu, accepts, false), Cpu, "in one process the host copy is heap");
            assert_eq!(negotiate(pool, Shm, set(&[pool]), false), Cpu, "no shm: a private copy");
            assert_eq!(negotiate(pool, Shm, set(&[Shm]), true), Shm, "not accepted: the host copy");
            assert!(takes_device_memory(pool, accepts, true));
            assert!(!takes_device_memory(pool, accepts, false));
            assert!(!takes_device_memory(pool, set(&[Shm]), true));
        }
    }

    #[test]
    fn cuda_on_another_device_falls_back_to_cuda_host_then_shm_then_cpu() {
        let all = set(&[Cuda, CudaHost, Shm]);
        assert_eq!(negotiate(Cuda, Shm, all, true), Cuda);
        assert_eq!(negotiate(Cuda, Shm, all, false), CudaHost);
        assert_eq!(negotiate(Cuda, Shm, set(&[Cuda, Shm]), false), Shm);
        assert_eq!(negotiate(Cuda, Shm, set(&[Cuda]), false), Cpu);
        // cuda-host maps shared memory: a heap frame (one process) is not that.
        assert_eq!(negotiate(Cuda, Cpu, all, false), Cpu);
    }

    #[test]
    fn cuda_host_frames_are_mapped_for_those_that_accept_it_and_shm_for_the_rest() {
        // cuda-host is host memory: no device has to match.
        assert_eq!(negotiate(CudaHost, Shm, set(&[CudaHost]), false), CudaHost);
        assert_eq!(negotiate(CudaHost, Shm, set(&[Shm]), false), Shm);
        assert_eq!(negotiate(CudaHost, Shm, BackendSet::CPU_ONLY, true), Cpu);
        assert!(!takes_device_memory(CudaHost, set(&[CudaHost]), true));
    }

    #[test]
    fn host_memory_publishers_are_unaffected_by_devices() {
        for same in [true, false] {
            assert_eq!(negotiate(Shm, Shm, set(&[Shm]), same), Shm);
            assert_eq!(negotiate(Shm, Shm, BackendSet::CPU_ONLY, same), Cpu);
            assert_eq!(negotiate(Cpu, Cpu, set(&[Shm]), same), Cpu);
            assert!(!takes_device_memory(Shm, set(&[Shm]), same));
        }
        // A subscription that takes cuda-host views shm frames mapped for its device.
        assert_eq!(negotiate(Shm, Shm, set(&[CudaHost]), false), CudaHost);
        assert_eq!(negotiate(Shm, Shm, set(&[CudaHost, Shm]), false), Shm);
    }
}
