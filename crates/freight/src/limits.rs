//! The resource limits of a context, which every endpoint of a topic shares.

/// Resource limits of a context. Every endpoint of a topic must be created with
/// the same limits (the first one creates the topic's shared-memory service).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest subscription queue; also what `KeepAll` means. Default 16.
    pub max_depth: usize,
    /// Most messages a transient-local endpoint may ask for (its depth).
    /// Default 1, what latched ROS topics (`/map`, `/robot_description`,
    /// `/tf_static`) use. Every publisher on shared memory keeps this many of
    /// its latest messages for late joiners, whatever its own durability, so
    /// they stay resident: raise it only as far as your topics need.
    pub max_history: usize,
    /// Publishers per topic. Default 16.
    pub max_publishers: usize,
    /// Subscriptions per topic. Default 16.
    pub max_subscriptions: usize,
    /// Received samples one subscription may hold at once. Default 16.
    pub max_held_samples: usize,
    /// Largest message, all buffers included. Default 4 GiB.
    pub max_message_bytes: usize,
    /// Capacity of this process's fake-device pool. Default 256 MiB.
    pub fake_device_capacity: usize,
    /// Most device memory this process's `cuda` pool holds, in bytes: blocks
    /// lent to loans plus blocks that subscribers still hold. A loan that
    /// would exceed it fails with `AllocError::Exhausted` (blocks of readers
    /// that died are reclaimed first). Default 1 GiB. Only a process that
    /// publishes from `cuda` memory has such a pool.
    pub cuda_pool_capacity: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 16,
            max_history: 1,
            max_publishers: 16,
            max_subscriptions: 16,
            max_held_samples: 16,
            max_message_bytes: 4 << 30,
            fake_device_capacity: 256 << 20,
            cuda_pool_capacity: 1 << 30,
        }
    }
}
