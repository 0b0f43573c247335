//! freight's C ABI: the functions declared in `include/freight/freight.h`, and
//! the ground of the C++17 API in `include/freight/freight.hpp`.
//!
//! The rules every function keeps, so that C and C++ callers can rely on them:
//!
//! * Objects are opaque handles (`freight_context *`, `freight_node *`) that
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
mod node;

pub use context::{
    freight_context_create, freight_context_create_with, freight_context_destroy, freight_context_domain_id,
    FreightContext, FreightContextOptions, FREIGHT_DOMAIN_FROM_ENV,
};
pub use error::{freight_last_error, freight_status_name, freight_version, Status};
pub use node::{freight_node_create, freight_node_destroy, freight_node_name, freight_node_namespace, FreightNode};
