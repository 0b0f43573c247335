//! The device pool: the protocol that every backend with memory outside the
//! frame shares (`fake-device`, `cuda`), generic over the memory under its
//! blocks ([`PoolMemory`]).
//!
//! * **export a handle**: the writer's pool hands out blocks; exporting one
//!   yields a descriptor that names the pool, the block, its generation, the
//!   block's allocation, the device, and the handle bytes the memory needs to
//!   open it in another process. Never a host pointer;
//! * **import once and cache**: a reader maps the pool's records the first
//!   time a descriptor names the pool, and opens a block's memory once per
//!   allocation of the block (as `cuIpcOpenMemHandle` results are cached); a
//!   process importing from a pool of its own uses the block's memory directly;
//! * **holds per reader process**: `export(block, readers)` records one hold
//!   per entry of `readers` (a process id) in the block's reader slots. A
//!   reader's import claims one hold recorded for its own process, and
//!   dropping the buffer gives it back (once the memory says the reader's work
//!   on it is done); `release_unimported` gives back a hold the reader will not
//!   import; the last hold frees the block to its pool. A process that was not
//!   named cannot import ([`ImportError::NotAReader`](crate::ImportError::NotAReader));
//! * **dead readers**: the creator releases the holds, imported or not, of
//!   readers whose process no longer exists ([`Backend::reclaim_dead_readers`](crate::Backend::reclaim_dead_readers),
//!   also run by `stats` and before `allocate` reports [`AllocError::Exhausted`](crate::AllocError::Exhausted));
//! * **staleness by generation**: freeing a block bumps its generation, so a
//!   descriptor of a block that was freed (and perhaps reused) is refused with
//!   [`ImportError::Stale`](crate::ImportError::Stale);
//! * **devices by UUID**: a descriptor names the device its memory is on; a
//!   backend on another device refuses it with [`ImportError::Unreachable`](crate::ImportError::Unreachable)
//!   (the subscriber then takes host bytes);
//! * **bounded, and given back when idle**: blocks are carved up to the pool's
//!   capacity; a freed block is reused by the next allocation of its size
//!   class, and its memory is given back when nobody reused it for the idle
//!   time (1 s by default), checked by the next `allocate`, `stats` or
//!   `reclaim_dead_readers`;
//! * **dead pools**: creating a pool removes the pool files that processes of
//!   this user left behind when they died without dropping their backend: a
//!   living creator holds its file's `flock`, whatever its pid namespace.
//!
//! # Pool file layout
//!
//! The pool's records live in a shared-memory file
//! (`/dev/shm/<prefix><uid>-<pid>-<random>`, mode 0600). All integers
//! little-endian; every field of the header and of the block records is
//! accessed as an atomic, because other processes map the same file.
//!
//! ```text
//! header (64 bytes)
//!   0  u64  magic "FRFDPOOL"
//!   8  u32  layout version (4)
//!  12  u32  number of block records
//!  16  u64  capacity: bytes the pool may carve
//!  24  u64  offset of the data area in the file
//!  32  u64  next generation (a pool-wide counter)
//!  40  u8 × 16  the device's UUID
//!  56  u32  h: bytes of handle per block (a multiple of 8)
//!  60  u32  1 once the creator dropped the pool: readers close what they opened
//! block record i (248 + h bytes, at 64 + (248 + h) * i)
//!   0  u32  state: 0 unused, 1 idle, 2 being written, 3 exported, 4 idle and to be trimmed
//!   4  u32  holds: occupied reader slots, counted off after a slot is cleared
//!   8  u64  generation
//!  16  u64  length in bytes
//!  24  u64  location of the memory, as the memory names it (fake-device: offset in the data area)
//!  32  u64  bytes the block occupies (its size class)
//!  40  u64  allocation serial: changes whenever the block gets new memory
//!  48  u64  when the block was last freed (CLOCK_MONOTONIC, nanoseconds)
//!  56  u64 × 16  reader slots, one per hold: 0 when empty, else
//!                  bits  0..32  process id of the reader
//!                  bit  32      1 (occupied, so that no hold reads as 0)
//!                  bit  33      imported: a buffer in that process holds it
//!                  bits 34..64  low 30 bits of the generation it was exported at
//! 184  u64 × 8   opener slots, one per reader process that has the block's
//!                memory open (cached): pid, bit 32 set, low 30 bits of the
//!                allocation serial from bit 34
//! 248  u8 × h    the block's handle, as descriptors carry it
//! data area (memory kinds that keep the blocks in the file: capacity bytes,
//!            at a page-aligned offset; empty otherwise)
//! ```
//!
//! Generations and allocation serials come from the pool-wide counter, so no
//! two allocations (of any block) ever share one: a descriptor whose block
//! index is changed never names a live block.
//!
//! # Holds
//!
//! Each hold lives in one reader slot, and is given back by whoever changes
//! that slot to 0 with a compare-exchange against the exact value it expects:
//!
//! | who | slot before | slot after |
//! |---|---|---|
//! | `export` | 0 | reader, generation |
//! | `import` by the reader | reader, generation | reader, generation, imported |
//! | dropping the imported buffer | reader, generation, imported | 0 |
//! | `release_unimported` for the reader | reader, generation | 0 |
//! | `reclaim_dead_readers`, reader gone | any value of a dead reader | 0 |
//!
//! Only the one compare-exchange that empties a slot succeeds, and only its
//! caller decrements `holds` (the one that reaches 0 frees the block), so each
//! hold is released exactly once, whichever of a dropping reader, a releasing
//! subscriber and the reclaiming creator comes first. The generation in the
//! slot keeps a descriptor or buffer of an earlier export of the block from
//! matching a slot of a later one. Every slot is empty when a block is freed.
//!
//! A reader is dead when `kill(pid, 0)` fails with `ESRCH`; a zombie counts as
//! alive until it is reaped. Process ids are those of the creator's pid
//! namespace: readers in another pid namespace (a container sharing `/dev/shm`
//! but not the pid namespace) must not share a pool.
//!
//! # Opened blocks
//!
//! Device memory opened in another process must not be freed by its creator
//! while that process has it open (CUDA: "calling `cudaFree` on an exported
//! memory region before calling `cudaIpcCloseMemHandle` in the importing
//! context will result in undefined behavior"). So a reader that opens a
//! block records itself in an opener slot of the block first, and clears the
//! slot after it closed the block. The creator trims an idle block only when
//! no living process has it open; otherwise it marks the block "to be
//! trimmed" (state 4) and readers close their cached opening of it on their
//! next import from a pool of another process (or when their backend is
//! dropped, or their process ends). A reader that never imports again keeps
//! such a block's memory until it exits; the block stays reusable meanwhile.
//!
//! Dropping the pool is the same promise for every block at once: the creator
//! marks the pool closed in its header, so that readers forget all of its
//! blocks at their next import, and frees the memory of a block that a living
//! reader still has open only once that reader closed it or died (a thread of
//! the creator's process waits for that; should the creator exit first, its
//! memory goes with it, as the driver frees everything of a process).
//!
//! # Allocator
//!
//! Blocks are carved in power-of-two size classes (64 bytes and up, capped
//! at the capacity) while the bytes carved stay within the capacity. A freed
//! block stays with its class as an idle block and is reused by the next
//! allocation of that class; it is trimmed (its memory given back) once idle
//! for the pool's idle time, or at once when an allocation finds no room.
//! Only the creating backend allocates; any process may free (by dropping the
//! last hold), and the creator notices freed blocks by polling the records of
//! the blocks it lent.
//!
//! # Pools of dead processes
//!
//! The creator holds an exclusive `flock` on its pool file as long as the pool
//! exists. Creating a pool removes every file of the pool directory with a pool
//! name of its kind that carries this user's uid, owned by this user, whose
//! creator (the pid in the name) does not exist and whose lock nobody holds.
//!
//! # Files
//!
//! Each file uses only those listed above it, and each type has all its
//! `impl` blocks in one file:
//!
//! * `options.rs`: [`PoolOptions`] and [`DEFAULT_IDLE_TIME`], the public knobs;
//! * `files.rs`: pool files on disk: names, creation under a lock, dead pools removed;
//! * `layout.rs`: the pool file's layout, slot encoding, [`Mapping`] and its atomics;
//! * `memory.rs`: [`PoolMemory`] and [`BlockView`], the seam to `fake-device` and `cuda`;
//! * `holds.rs`: taking and emptying reader and opener slots; the last hold frees a block;
//! * `descriptor.rs`: [`Handle`](descriptor::Handle), descriptors encoded and checked;
//! * `pool.rs`: the creator's [`Pool`](pool::Pool) and allocator, dead readers' holds reclaimed;
//! * `block.rs`: a block lent to its writer until export;
//! * `reader.rs`: opened blocks, a reader's holds and buffer, its cache of other pools;
//! * `backend.rs`: [`DevicePool`] and [`backend_over_pool!`], the backend over all of these.

mod backend;
mod block;
mod descriptor;
mod files;
mod holds;
mod layout;
mod memory;
mod options;
mod pool;
mod reader;

pub(crate) use backend::{backend_over_pool, DevicePool};
pub(crate) use descriptor::format_uuid;
// Only the tests of `fake_device.rs` and `cuda/pool.rs` take descriptors apart.
#[cfg(test)]
pub(crate) use descriptor::{decode, descriptor_len, encode, Handle};
pub(crate) use layout::Mapping;
pub use layout::READER_SLOTS;
pub(crate) use memory::{BlockView, PoolMemory};
pub use options::{PoolOptions, DEFAULT_IDLE_TIME};
