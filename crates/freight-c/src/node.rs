//! `freight_node`: a named participant of the ROS graph.

use std::ffi::{c_char, CString};

use crate::context::FreightContext;
use crate::error::{destroy, guard, hand_out, handle, str_arg, Failure, Status};
use crate::executor::Callbacks;
use crate::qos::FreightQos;
use crate::types::{maker, EndpointMaker};

/// A node (`freight_node` in C): a [`freight::Node`] the caller owns, and its
/// names as C strings.
pub struct FreightNode {
    node: freight::Node,
    callbacks: Callbacks,
    name: CString,
    namespace: CString,
}

impl FreightNode {
    pub(crate) fn node(&self) -> &freight::Node {
        &self.node
    }

    /// Its callback subscriptions, which executors it was added to run.
    pub(crate) fn callbacks(&self) -> &Callbacks {
        &self.callbacks
    }
}

/// What every publisher and subscription is made of, from C: the node, the
/// maker of the type `type_name`, the topic, and the QoS (null: keep last
/// 10, reliable).
///
/// # Safety
/// `node` is null or live; `type_name` and `topic` are null or
/// NUL-terminated; `qos` is null or points to a `freight_qos`.
pub(crate) unsafe fn endpoint_args<'a>(
    node: *const FreightNode,
    type_name: *const c_char,
    topic: *const c_char,
    qos: *const FreightQos,
) -> Result<(&'a FreightNode, EndpointMaker, &'a str, freight::QoS), Failure> {
    // SAFETY (all): as the caller promised.
    let node = unsafe { handle(node, "the node") }?;
    let type_name = unsafe { str_arg(type_name, "the type name") }?;
    let topic = unsafe { str_arg(topic, "the topic") }?;
    let qos = unsafe { qos.as_ref() }.copied().unwrap_or(crate::qos::freight_qos_keep_last(10));
    Ok((node, maker(type_name)?, topic, qos.into()))
}

/// Creates the node `name` in `namespace_` (null or `""`: the root, `/`) on
/// `ctx`; `*out` receives it. Names follow ROS 2's rules
/// ([`Status::Name`] otherwise).
///
/// # Safety
/// `ctx` is null or a live context; `name` and `namespace_` are null or
/// NUL-terminated strings; `out` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn freight_node_create(
    ctx: *const FreightContext,
    name: *const c_char,
    namespace_: *const c_char,
    out: *mut *mut FreightNode,
) -> Status {
    guard(|| {
        // SAFETY (all three): as the caller promised.
        let ctx = unsafe { handle(ctx, "the context") }?;
        let name = unsafe { str_arg(name, "the node name") }?;
        let namespace = if namespace_.is_null() { "" } else { unsafe { str_arg(namespace_, "the namespace") }? };
        let node = if namespace.is_empty() {
            ctx.0.create_node(name)?
        } else {
            ctx.0.create_node_with_namespace(name, namespace)?
        };
        let c = |s: &str| CString::new(s).map_err(|e| Failure::new(Status::Internal, e.to_string()));
        let (name, namespace) = (c(node.name())?, c(node.namespace())?);
        // SAFETY: as the caller promised.
        unsafe { hand_out(out, FreightNode { node, callbacks: Callbacks::default(), name, namespace }) }
    })
}

/// The node's name; null for a null handle. Valid while the node lives.
///
/// # Safety
/// `node` is null or a live node.
#[no_mangle]
pub unsafe extern "C" fn freight_node_name(node: *const FreightNode) -> *const c_char {
    // SAFETY: as the caller promised.
    unsafe { node.as_ref() }.map_or(std::ptr::null(), |n| n.name.as_ptr())
}

/// The node's namespace (`"/"` for the root); null for a null handle. Valid
/// while the node lives.
///
/// # Safety
/// `node` is null or a live node.
#[no_mangle]
pub unsafe extern "C" fn freight_node_namespace(node: *const FreightNode) -> *const c_char {
    // SAFETY: as the caller promised.
    unsafe { node.as_ref() }.map_or(std::ptr::null(), |n| n.namespace.as_ptr())
}

/// Frees a node (null is ignored): it leaves the ROS graph.
///
/// # Safety
/// `node` is null or a live node, not used again.
#[no_mangle]
pub unsafe extern "C" fn freight_node_destroy(node: *mut FreightNode) {
    // SAFETY: as the caller promised.
    unsafe { destroy(node) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{freight_context_create_with, freight_context_destroy, FreightContextOptions};
    use std::ffi::CStr;

    fn context() -> *mut FreightContext {
        let options = FreightContextOptions { domain_id: crate::FREIGHT_DOMAIN_FROM_ENV, local_only: true };
        let mut ctx = std::ptr::null_mut();
        // SAFETY: live pointers.
        assert_eq!(unsafe { freight_context_create_with(&options, &mut ctx) }, Status::Ok);
        ctx
    }

    #[test]
    fn a_node_outlives_its_context_handle_and_reports_its_names() {
        let ctx = context();
        let mut node = std::ptr::null_mut();
        // SAFETY: live handles, each destroyed once.
        unsafe {
            assert_eq!(freight_node_create(ctx, c"lidar".as_ptr(), c"/front".as_ptr(), &mut node), Status::Ok);
            freight_context_destroy(ctx);
            assert_eq!(CStr::from_ptr(freight_node_name(node)), c"lidar");
            assert_eq!(CStr::from_ptr(freight_node_namespace(node)), c"/front");
            freight_node_destroy(node);
        }
    }

    #[test]
    fn a_bad_name_is_a_name_error_with_the_reason() {
        let ctx = context();
        let mut node = std::ptr::null_mut();
        // SAFETY: live handles; the error string is read before the next call.
        unsafe {
            assert_eq!(freight_node_create(ctx, c"2fast".as_ptr(), std::ptr::null(), &mut node), Status::Name);
            assert!(node.is_null());
            let why = CStr::from_ptr(crate::freight_last_error()).to_str().unwrap();
            assert!(why.contains("2fast"), "{why}");
            assert_eq!(
                freight_node_create(ctx, std::ptr::null(), std::ptr::null(), &mut node),
                Status::InvalidArgument
            );
            let bad_utf8 = [0xffu8, 0];
            assert_eq!(
                freight_node_create(ctx, bad_utf8.as_ptr().cast(), std::ptr::null(), &mut node),
                Status::InvalidArgument
            );
            freight_context_destroy(ctx);
        }
    }
}
