//! `freight_context`: one process's freight, on one ROS domain.

use crate::error::{destroy, guard, hand_out, handle, Failure, Status};

/// A context (`freight_context` in C): a [`freight::Context`] the caller owns.
pub struct FreightContext(pub(crate) freight::Context);

/// `domain_id` value that reads `ROS_DOMAIN_ID` (default 0), as
/// [`freight::Context::new`] does.
pub const FREIGHT_DOMAIN_FROM_ENV: u32 = u32::MAX;

/// Settings of a new context (`freight_context_options` in C).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FreightContextOptions {
    /// The ROS domain, or [`FREIGHT_DOMAIN_FROM_ENV`].
    pub domain_id: u32,
    /// Shared memory only, no network plane (DDS): nothing leaves the host, and
    /// stock ROS 2 nodes do not see this context's topics.
    pub local_only: bool,
}

/// Creates a context on the domain of `ROS_DOMAIN_ID` with the network plane
/// on, as rclcpp's default context does; `*out` receives it.
///
/// # Safety
/// `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn freight_context_create(out: *mut *mut FreightContext) -> Status {
    let options = FreightContextOptions { domain_id: FREIGHT_DOMAIN_FROM_ENV, local_only: false };
    // SAFETY: `options` is a live local; `out` as the caller promised.
    unsafe { freight_context_create_with(&options, out) }
}

/// Creates a context with `options`; `*out` receives it.
///
/// # Safety
/// `options` is null or points to a `freight_context_options`; `out` is null
/// or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn freight_context_create_with(
    options: *const FreightContextOptions,
    out: *mut *mut FreightContext,
) -> Status {
    guard(|| {
        // SAFETY: as the caller promised.
        let options = *unsafe { handle(options, "options") }?;
        let mut builder = freight::Context::builder();
        if options.domain_id != FREIGHT_DOMAIN_FROM_ENV {
            if options.domain_id > 232 {
                return Err(Failure::new(
                    Status::InvalidArgument,
                    format!("domain_id {} is not a ROS domain (0..=232)", options.domain_id),
                ));
            }
            builder = builder.domain_id(options.domain_id);
        }
        if options.local_only {
            builder = builder.local_only();
        }
        let ctx = builder.create()?;
        // SAFETY: as the caller promised.
        unsafe { hand_out(out, FreightContext(ctx)) }
    })
}

/// The context's ROS domain; `UINT32_MAX` for a null handle.
///
/// # Safety
/// `ctx` is null or a live context.
#[no_mangle]
pub unsafe extern "C" fn freight_context_domain_id(ctx: *const FreightContext) -> u32 {
    // SAFETY: as the caller promised.
    unsafe { ctx.as_ref() }.map_or(u32::MAX, |c| c.0.domain_id())
}

/// Frees a context handle (null is ignored). Nodes created from it stay valid:
/// each keeps what it needs of the context.
///
/// # Safety
/// `ctx` is null or a live context, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_context_destroy(ctx: *mut FreightContext) {
    // SAFETY: as the caller promised.
    unsafe { destroy(ctx) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_beyond_232_is_refused_and_nothing_is_written() {
        let options = FreightContextOptions { domain_id: 233, local_only: true };
        let mut out = std::ptr::dangling_mut();
        let before = out;
        // SAFETY: a live options struct and out pointer.
        assert_eq!(unsafe { freight_context_create_with(&options, &mut out) }, Status::InvalidArgument);
        assert_eq!(out, before);
    }

    #[test]
    fn null_arguments_are_errors_not_crashes() {
        let mut out = std::ptr::null_mut();
        // SAFETY: null pointers are what is tested.
        unsafe {
            assert_eq!(freight_context_create_with(std::ptr::null(), &mut out), Status::InvalidArgument);
            let options = FreightContextOptions { domain_id: 3, local_only: true };
            assert_eq!(freight_context_create_with(&options, std::ptr::null_mut()), Status::InvalidArgument);
            assert_eq!(freight_context_domain_id(std::ptr::null()), u32::MAX);
            freight_context_destroy(std::ptr::null_mut());
        }
    }

    #[test]
    fn an_explicit_domain_is_kept() {
        let options = FreightContextOptions { domain_id: 42, local_only: true };
        let mut ctx = std::ptr::null_mut();
        // SAFETY: live pointers; the context is destroyed once.
        unsafe {
            assert_eq!(freight_context_create_with(&options, &mut ctx), Status::Ok);
            assert_eq!(freight_context_domain_id(ctx), 42);
            freight_context_destroy(ctx);
        }
    }
}
