//! How a pool is sized and when it gives idle memory back: [`PoolOptions`]
//! and [`DEFAULT_IDLE_TIME`], the public knobs of the device backends
//! (re-exported at the crate root). Nothing here knows the pool's protocol.

use std::time::Duration;

/// How long an idle block keeps its memory by default.
pub const DEFAULT_IDLE_TIME: Duration = Duration::from_secs(1);

/// How a pool is sized and when it gives idle memory back.
///
/// ```
/// use std::time::Duration;
/// use freight_backend::PoolOptions;
///
/// let options = PoolOptions::new(64 << 20).max_blocks(256).idle_time(Duration::from_millis(200));
/// assert_eq!(options.capacity, 64 << 20);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolOptions {
    /// Bytes the pool may have carved at once (in use or idle).
    pub capacity: usize,
    /// Block records: at most this many blocks are in use or idle at once.
    pub max_blocks: u32,
    /// How long a freed block keeps its memory for reuse before it is given back.
    pub idle_time: Duration,
}

impl PoolOptions {
    /// Block records by default.
    pub const DEFAULT_MAX_BLOCKS: u32 = 1024;

    /// A pool of `capacity` bytes, [`DEFAULT_MAX_BLOCKS`](Self::DEFAULT_MAX_BLOCKS)
    /// records, idle blocks given back after one second.
    pub fn new(capacity: usize) -> Self {
        PoolOptions { capacity, max_blocks: Self::DEFAULT_MAX_BLOCKS, idle_time: DEFAULT_IDLE_TIME }
    }

    /// With room for `n` blocks.
    pub fn max_blocks(self, n: u32) -> Self {
        PoolOptions { max_blocks: n, ..self }
    }

    /// Giving idle blocks back after `t`.
    pub fn idle_time(self, t: Duration) -> Self {
        PoolOptions { idle_time: t, ..self }
    }
}
