//! freight's iceoryx2 service type: iceoryx2's `ipc_threadsafe` service with a
//! lighter lock around each port's state.
//!
//! freight's endpoints are `Send + Sync`, so their iceoryx2 ports must be too,
//! which rules out the single-threaded `ipc` service (its ports keep their
//! state in an `Rc`). `ipc_threadsafe` keeps it behind a recursive pthread
//! mutex (`arc_sync_policy::MutexProtected`) that is locked several times per
//! loan, send and receive, and every loaned sample creates and destroys one of
//! its own. This service is the same in every part that touches shared memory
//! (storage, segments, connections, events), so raw iceoryx2 ports on either of
//! iceoryx2's services meet freight's topics, and differs only in that policy:
//! [`Reentrant`] holds the state in an `Arc` of `parking_lot`'s reentrant
//! mutex, which locks uncontended without a system call or a pthread call,
//! and whose creation is an allocation. BENCHMARKS.md counts the instructions
//! this saves per message. Its publishers' data segments are iceoryx2's too,
//! but allow fewer reallocations ([`segments`]), which saves a publisher
//! most of its memory.

use core::fmt::Debug;
use core::ptr::NonNull;
use std::sync::Arc;

use iceoryx2_bb_elementary_traits::testing::abandonable::Abandonable;
use iceoryx2_bb_elementary_traits::zero_copy_send::ZeroCopySend;
use iceoryx2_cal::arc_sync_policy::{ArcSyncPolicy, ArcSyncPolicyCreationError, LockGuard};
use iceoryx2_cal::shm_allocator::bump_allocator::BumpAllocator;
use iceoryx2_cal::shm_allocator::pool_allocator::PoolAllocator;
use iceoryx2_cal::{
    bag, dynamic_storage, event, hash, monitoring, reactor, serialize, shared_memory, static_storage,
    zero_copy_connection,
};
use parking_lot::{ReentrantMutex, ReentrantMutexGuard};

mod segments;

/// The iceoryx2 service freight's topics and endpoints are built on: thread-safe
/// ports (see the module's documentation).
#[derive(Debug, Clone)]
pub(crate) struct Service {}

impl iceoryx2::service::Service for Service {
    type StaticStorage = static_storage::recommended::Ipc;
    type ConfigSerializer = serialize::recommended::Recommended;
    type PersistentDynamicStorage<T: Debug + Send + Sync + ZeroCopySend + 'static> =
        dynamic_storage::recommended::PersistentIpc<T>;
    type Bag = bag::recommended::Recommended;
    type DynamicStorage<T: Debug + Send + Sync + ZeroCopySend + 'static> = dynamic_storage::recommended::Ipc<T>;
    type ServiceNameHasher = hash::recommended::Recommended;
    type SharedMemory = shared_memory::recommended::Ipc<PoolAllocator>;
    type ResizableSharedMemory = segments::Segments;
    type Connection = zero_copy_connection::recommended::Ipc;
    type Event = event::recommended::Ipc;
    type Monitoring = monitoring::recommended::Ipc;
    type Reactor = reactor::recommended::Ipc;
    type ArcThreadSafetyPolicy<T: Send + Debug + Abandonable> = Reentrant<T>;
    type BlackboardMgmt<KeyType: Send + Sync + Debug + ZeroCopySend + 'static> =
        dynamic_storage::recommended::Ipc<KeyType>;
    type BlackboardPayload = shared_memory::recommended::Ipc<BumpAllocator>;
    type UniqueId = iceoryx2::unique_id_generator::unique_system_id::UniqueSystemId;
}

impl iceoryx2::service::internal::ServiceInternal<Service> for Service {}

/// A port's state shared by the port and its samples, behind a reentrant lock,
/// as `MutexProtected`'s mutex is recursive: iceoryx2 may lock a state again
/// on the thread that holds it.
#[derive(Debug)]
pub(crate) struct Reentrant<T> {
    state: Arc<ReentrantMutex<T>>,
}

impl<T> Clone for Reentrant<T> {
    fn clone(&self) -> Self {
        Self { state: Arc::clone(&self.state) }
    }
}

/// The held lock: iceoryx2 reads the state through it, and changes it only
/// through the state's own atomics and cells, as under `MutexProtected`.
pub(crate) struct Guard<'parent, T> {
    guard: ReentrantMutexGuard<'parent, T>,
}

impl<T> core::ops::Deref for Guard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<'parent, T: Send + Debug + Abandonable> LockGuard<'parent, T> for Guard<'parent, T> {}

impl<T: Send + Debug + Abandonable> Abandonable for Reentrant<T> {
    /// Abandons the state where this is its last holder, as iceoryx2's own
    /// policies do; otherwise only lets go of this holder's share.
    unsafe fn abandon_in_place(mut this: NonNull<Self>) {
        // Safety: the caller hands over `this`, valid and not used afterwards.
        let this = unsafe { this.as_mut() };
        match Arc::get_mut(&mut this.state) {
            // Safety: `state` is the only reference to the value.
            Some(state) => unsafe { T::abandon_in_place(NonNull::from_mut(state.get_mut())) },
            // Safety: `this` is not used after being abandoned.
            None => unsafe { core::ptr::drop_in_place(&mut this.state) },
        }
    }
}

impl<T: Send + Debug + Abandonable> ArcSyncPolicy<T> for Reentrant<T> {
    type LockGuard<'parent>
        = Guard<'parent, T>
    where
        Self: 'parent,
        T: 'parent;

    fn new(value: T) -> Result<Self, ArcSyncPolicyCreationError> {
        Ok(Self { state: Arc::new(ReentrantMutex::new(value)) })
    }

    fn lock(&self) -> Guard<'_, T> {
        Guard { guard: self.state.lock() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct State(u32);

    impl Abandonable for State {
        unsafe fn abandon_in_place(_: NonNull<Self>) {}
    }

    #[test]
    fn a_port_state_locks_again_on_the_thread_that_holds_it_and_is_shared_by_its_clones() {
        let state = Reentrant::new(State(7)).unwrap();
        let held = state.lock();
        // Locked again on the thread that holds it, as a recursive mutex allows.
        let clone = state.clone();
        let again = clone.lock();
        assert_eq!((held.0, again.0), (7, 7));
        drop((again, held));
        // Another thread gets it once this one has let go.
        let seen = std::thread::spawn(move || clone.lock().0).join().unwrap();
        assert_eq!(seen, 7);
    }
}
