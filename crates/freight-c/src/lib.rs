//! freight's C ABI: the functions declared in `include/freight/freight.h`, and
//! the ground of the C++17 API in `include/freight/freight.hpp`.
//!
//! The rules every function keeps, so that C and C++ callers can rely on them:
//!
//! * Objects are opaque handles (`freight_context *`, `freight_node *`, ...) that
//!   the caller owns from the `*_create` that returned them to the
//!   `*_destroy` that frees them. A handle keeps what it needs alive: a node
//!   outlives the destruction of its context's handle.
//! * A function that can fail returns a [`Status`]; its result goes to an out
//!   pointer, written only on success. On failure the calling thread's last
//!   error ([`freight_last_error`]) says what went wrong.
//! * No Rust panic crosses the boundary: one is caught and returned as
//!   [`Status::Internal`].
//! * Strings are NUL-terminated UTF-8; a null pointer where a handle or a
//!   string is required is [`Status::InvalidArgument`], never a crash.
//! * A message crosses as its small fields in CDR, each buffer field written
//!   as its ordinal (a `u32`), plus its buffers as memory ranges: what the
//!   generated C++ types of `freight/msgs/` write and read. Endpoints are of
//!   the built-in message types, named as ROS 2 names them
//!   (`"sensor_msgs/msg/Image"`), or of a type registered with its
//!   definition first ([`freight_type_register`]: a user's own `.msg`).
//!
//! ```
//! use freight_c::*;
//! let mut ctx = std::ptr::null_mut();
//! let options = FreightContextOptions { domain_id: FREIGHT_DOMAIN_FROM_ENV, local_only: true };
//! assert_eq!(unsafe { freight_context_create_with(&options, &mut ctx) }, Status::Ok);
//! let mut node = std::ptr::null_mut();
//! assert_eq!(unsafe { freight_node_create(ctx, c"camera".as_ptr(), std::ptr::null(), &mut node) }, Status::Ok);
//! unsafe { freight_node_destroy(node) };
//! unsafe { freight_context_destroy(ctx) };
//! ```
#![deny(missing_docs)]

mod context;
mod error;
mod executor;
mod message_types;
mod node;
mod publisher;
mod qos;
mod service;
mod subscription;
mod types;

pub use context::{
    freight_context_create, freight_context_create_with, freight_context_destroy, freight_context_domain_id,
    FreightContext, FreightContextOptions, FREIGHT_DOMAIN_FROM_ENV,
};
pub use error::{freight_last_error, freight_status_name, freight_version, Status};
pub use executor::{
    freight_callback_subscription_destroy, freight_executor_add_node, freight_executor_create,
    freight_executor_destroy, freight_executor_spin, freight_executor_spin_once, freight_executor_stop,
    freight_node_create_subscription_callback, freight_node_create_subscription_callback_with_options,
    FreightCallbackSubscription, FreightExecutor, FreightSampleCallback,
};
pub use message_types::{freight_type_register, message_layout};
pub use node::{freight_node_create, freight_node_destroy, freight_node_name, freight_node_namespace, FreightNode};
pub use publisher::{
    freight_loan_backend, freight_loan_buffer, freight_loan_destroy, freight_loan_device_buffer,
    freight_loan_set_write_stream, freight_publisher_create, freight_publisher_create_with_backend,
    freight_publisher_destroy, freight_publisher_loan, freight_publisher_publish_copy, freight_publisher_publish_loan,
    freight_publisher_subscription_count, FreightBuffer, FreightLoan, FreightPublisher,
};
pub use qos::{freight_qos_keep_last, freight_qos_sensor_data, FreightQos};
pub use service::{
    freight_callback_service_destroy, freight_client_call, freight_client_call_async, freight_client_call_loaned,
    freight_client_create, freight_client_create_with_options, freight_client_destroy, freight_client_loan_request,
    freight_client_server_count, freight_client_wait_for_service, freight_node_create_service_callback,
    freight_node_create_service_callback_with_options, freight_pending_call_destroy, freight_pending_call_wait,
    freight_service_server_create, freight_service_server_create_with_options, freight_service_server_destroy,
    freight_service_server_loan_response, freight_service_server_send_loaned_response,
    freight_service_server_send_response, freight_service_server_take_request, FreightCallbackService, FreightClient,
    FreightPendingCall, FreightRequestCallback, FreightRequestId, FreightServiceOptions, FreightServiceServer,
};
pub use subscription::{
    freight_sample_buffer, freight_sample_buffer_count, freight_sample_destroy, freight_sample_device_buffer,
    freight_sample_fields, freight_sample_info, freight_sample_order_on_stream, freight_sample_view,
    freight_subscription_create, freight_subscription_create_with_options, freight_subscription_destroy,
    freight_subscription_publisher_count, freight_subscription_take, FreightMessageInfo, FreightSample,
    FreightSampleContents, FreightSubscription, FreightSubscriptionOptions, FreightWaitMode, FREIGHT_WAIT_BLOCK,
    FREIGHT_WAIT_SPIN,
};
pub use types::FreightSampleBuffer;
