//! A publisher's data segments: iceoryx2's resizable shared memory, with room
//! for fewer reallocations.
//!
//! An iceoryx2 publisher keeps, for every segment it may ever reallocate
//! to, a reference counter per sample (`SegmentState`), made when the port
//! is: `max_number_of_reallocations()` × samples × 8 bytes. iceoryx2's
//! resizable memory allows 255 reallocations, which with freight's `Limits`
//! (517 samples a publisher) is 1.05 MB of a publisher's 1.4 MB. freight's
//! publishers grow by powers of two from a few KiB up to
//! `Limits::max_message_bytes` (4 GiB by default): about 20 reallocations in
//! a publisher's life at most. [`Segments`] is iceoryx2's memory as it is
//! (same files, names and layout, so raw iceoryx2 ports still meet freight's
//! topics) that says it allows [`MAX_SEGMENTS`]; subscribers size their side
//! of a connection by what the publisher says. An allocation that would
//! land in a segment beyond it fails with `OutOfMemory`, as one beyond 255
//! does in iceoryx2.

use core::alloc::Layout;
use core::fmt::Debug;
use core::ptr::NonNull;
use core::time::Duration;

use iceoryx2::prelude::AllocationStrategy;
use iceoryx2_bb_elementary_traits::allocator::{
    Allocate, AllocationError, AllocationGrowError, ContentPlacement, Deallocate, Grow,
};
use iceoryx2_bb_elementary_traits::testing::abandonable::Abandonable;
use iceoryx2_bb_posix::file::AccessMode;
use iceoryx2_cal::named_concept::{
    FileName, NamedConcept, NamedConceptBuilder, NamedConceptDoesExistError, NamedConceptListError, NamedConceptMgmt,
    NamedConceptPathHintRemoveError, NamedConceptRemoveError, Path,
};
use iceoryx2_cal::resizable_shared_memory::{
    ResizableSharedMemory, ResizableSharedMemoryBuilder, ResizableSharedMemoryForPoolAllocator,
    ResizableSharedMemoryViewBuilder,
};
use iceoryx2_cal::shared_memory::{SegmentId, SharedMemoryCreateError, SharedMemoryOpenError, ShmPointer};
use iceoryx2_cal::shm_allocator::pool_allocator::PoolAllocator;
use iceoryx2_cal::shm_allocator::PointerOffset;
use iceoryx2_cal::{resizable_shared_memory, shared_memory};

/// Segments a publisher may use in its life, the first included.
pub(crate) const MAX_SEGMENTS: usize = 32;

type Inner = resizable_shared_memory::recommended::Ipc<PoolAllocator>;
type Shm = shared_memory::recommended::Ipc<PoolAllocator>;
type Configuration = <Inner as NamedConceptMgmt>::Configuration;
type InnerBuilder = <Inner as ResizableSharedMemory<PoolAllocator, Shm>>::MemoryBuilder;
type InnerViewBuilder = <Inner as ResizableSharedMemory<PoolAllocator, Shm>>::ViewBuilder;
type View = <Inner as ResizableSharedMemory<PoolAllocator, Shm>>::View;

/// iceoryx2's resizable shared memory, allowing [`MAX_SEGMENTS`] segments.
#[derive(Debug)]
pub(crate) struct Segments(Inner);

impl Segments {
    /// Gives back `ptr` and fails when it lies in a segment beyond [`MAX_SEGMENTS`].
    fn within_bounds(&self, ptr: ShmPointer, layout: Layout) -> Result<ShmPointer, AllocationError> {
        if usize::from(ptr.offset.segment_id().value()) < MAX_SEGMENTS {
            return Ok(ptr);
        }
        // SAFETY: `ptr` was just allocated with `layout` and is not used after.
        unsafe { self.0.deallocate(ptr, layout) };
        Err(AllocationError::OutOfMemory)
    }
}

impl Abandonable for Segments {
    unsafe fn abandon_in_place(this: NonNull<Self>) {
        // SAFETY: the caller's promise for `this` holds for its only field.
        unsafe { Inner::abandon_in_place(NonNull::from_mut(&mut (*this.as_ptr()).0)) }
    }
}

impl NamedConcept for Segments {
    fn name(&self) -> &FileName {
        self.0.name()
    }
}

impl NamedConceptMgmt for Segments {
    type Configuration = Configuration;

    unsafe fn remove_cfg(name: &FileName, cfg: &Configuration) -> Result<bool, NamedConceptRemoveError> {
        // SAFETY: the caller's promise is the one `Inner::remove_cfg` asks.
        unsafe { Inner::remove_cfg(name, cfg) }
    }

    fn does_exist_cfg(name: &FileName, cfg: &Configuration) -> Result<bool, NamedConceptDoesExistError> {
        Inner::does_exist_cfg(name, cfg)
    }

    fn list_cfg(cfg: &Configuration) -> Result<Vec<FileName>, NamedConceptListError> {
        Inner::list_cfg(cfg)
    }

    fn remove_path_hint(value: &Path) -> Result<(), NamedConceptPathHintRemoveError> {
        Inner::remove_path_hint(value)
    }
}

impl Allocate<ShmPointer> for Segments {
    fn allocate(&self, layout: Layout) -> Result<ShmPointer, AllocationError> {
        let ptr = self.0.allocate(layout)?;
        self.within_bounds(ptr, layout)
    }
}

impl Deallocate<ShmPointer> for Segments {
    unsafe fn deallocate(&self, ptr: ShmPointer, layout: Layout) {
        // SAFETY: the caller's promise is the one `Inner::deallocate` asks.
        unsafe { self.0.deallocate(ptr, layout) }
    }
}

impl Grow<ShmPointer> for Segments {
    unsafe fn grow(
        &self,
        ptr: ShmPointer,
        old_layout: Layout,
        new_layout: Layout,
        content_placement: ContentPlacement,
    ) -> Result<ShmPointer, AllocationGrowError> {
        // SAFETY: the caller's promise is the one `Inner::grow` asks.
        let grown = unsafe { self.0.grow(ptr, old_layout, new_layout, content_placement)? };
        Ok(self.within_bounds(grown, new_layout)?)
    }
}

impl ResizableSharedMemory<PoolAllocator, Shm> for Segments {
    type ViewBuilder = SegmentsViewBuilder;
    type MemoryBuilder = SegmentsBuilder;
    type View = View;

    fn max_number_of_reallocations() -> usize {
        MAX_SEGMENTS
    }

    fn number_of_active_segments(&self) -> usize {
        self.0.number_of_active_segments()
    }

    fn allocation_strategy(&self) -> AllocationStrategy {
        self.0.allocation_strategy()
    }
}

impl ResizableSharedMemoryForPoolAllocator<Shm> for Segments {
    unsafe fn deallocate_bucket(&self, offset: PointerOffset) {
        // SAFETY: the caller's promise is the one `Inner::deallocate_bucket` asks.
        unsafe { self.0.deallocate_bucket(offset) }
    }

    fn bucket_size(&self, segment_id: SegmentId) -> usize {
        self.0.bucket_size(segment_id)
    }
}

/// Creates [`Segments`]: iceoryx2's builder.
#[derive(Debug)]
pub(crate) struct SegmentsBuilder(InnerBuilder);

impl NamedConceptBuilder<Segments> for SegmentsBuilder {
    fn new(name: &FileName) -> Self {
        SegmentsBuilder(<InnerBuilder as NamedConceptBuilder<Inner>>::new(name))
    }

    fn config(self, config: &Configuration) -> Self {
        SegmentsBuilder(self.0.config(config))
    }
}

impl ResizableSharedMemoryBuilder<PoolAllocator, Shm, Segments> for SegmentsBuilder {
    fn max_chunk_layout_hint(self, value: Layout) -> Self {
        SegmentsBuilder(self.0.max_chunk_layout_hint(value))
    }

    fn max_number_of_chunks_hint(self, value: usize) -> Self {
        SegmentsBuilder(self.0.max_number_of_chunks_hint(value))
    }

    fn allocation_strategy(self, value: AllocationStrategy) -> Self {
        SegmentsBuilder(self.0.allocation_strategy(value))
    }

    fn create(self) -> Result<Segments, SharedMemoryCreateError> {
        self.0.create().map(Segments)
    }
}

/// Opens a view of [`Segments`] (a subscriber's): iceoryx2's view builder.
#[derive(Debug)]
pub(crate) struct SegmentsViewBuilder(InnerViewBuilder);

impl NamedConceptBuilder<Segments> for SegmentsViewBuilder {
    fn new(name: &FileName) -> Self {
        SegmentsViewBuilder(<InnerViewBuilder as NamedConceptBuilder<Inner>>::new(name))
    }

    fn config(self, config: &Configuration) -> Self {
        SegmentsViewBuilder(self.0.config(config))
    }
}

impl ResizableSharedMemoryViewBuilder<PoolAllocator, Shm, Segments, View> for SegmentsViewBuilder {
    fn timeout(self, value: Duration) -> Self {
        SegmentsViewBuilder(self.0.timeout(value))
    }

    fn open(self, access_mode: AccessMode) -> Result<View, SharedMemoryOpenError> {
        self.0.open(access_mode)
    }
}

#[cfg(test)]
mod tests {
    use iceoryx2::prelude::*;

    use super::MAX_SEGMENTS;
    use crate::iox_service::Service;

    /// Each loan one size larger than the last makes the publisher move to
    /// a new segment: the first [`MAX_SEGMENTS`] arrive intact at a
    /// subscriber, and the next is refused as out of memory, where iceoryx2
    /// would look up the state of a segment it has none for.
    #[test]
    fn a_publisher_gets_its_segments_and_is_refused_the_one_beyond() {
        let node = NodeBuilder::new().config(crate::local_plane::iceoryx2_config()).create::<Service>().unwrap();
        let name = ServiceName::new(&format!("freight-test/segments/{}", std::process::id())).unwrap();
        let service = node.service_builder(&name).publish_subscribe::<[u8]>().open_or_create().unwrap();
        let publisher = service
            .publisher_builder()
            .initial_max_slice_len(64)
            .allocation_strategy(AllocationStrategy::BestFit)
            .create()
            .unwrap();
        let subscriber = service.subscriber_builder().create().unwrap();
        let mut sent = 0;
        let refused = loop {
            let len = 64 * (sent + 1);
            match publisher.loan_slice_uninit(len) {
                Ok(sample) => {
                    sample.write_from_fn(|i| (i + sent) as u8).send().unwrap();
                    let got = subscriber.receive().unwrap().expect("the sample arrived");
                    assert!(got.payload().iter().enumerate().all(|(i, &b)| b == (i + sent) as u8));
                    assert_eq!(got.payload().len(), len);
                    sent += 1;
                }
                Err(e) => break e,
            }
            assert!(sent <= MAX_SEGMENTS, "a loan in segment {sent} was granted");
        };
        assert_eq!(sent, MAX_SEGMENTS, "refused after {sent} segments: {refused:?}");
        assert_eq!(refused, iceoryx2::port::LoanError::OutOfMemory);
    }
}
