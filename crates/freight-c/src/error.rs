//! Status codes, the last error of each thread, and the guard every exported
//! function runs its body in.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call of the C ABI came to (`freight_status` in C). New codes are
/// added at the end; a value never changes meaning.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// A null pointer where a handle or a string is required, or a string that
    /// is not UTF-8.
    InvalidArgument = 1,
    /// A node name or namespace breaks ROS 2's naming rules.
    Name = 2,
    /// An environment variable freight reads (`ROS_DOMAIN_ID`, ...) has a value
    /// it cannot use.
    Environment = 3,
    /// The shared-memory plane refused (a full or unwritable `/dev/shm`, too
    /// many open files, ...).
    SharedMemory = 4,
    /// A configuration (a large-data stream, a DDS setting) cannot be applied.
    Configuration = 5,
    /// A bug in freight: a panic, caught at the boundary.
    Internal = 6,
    /// A message type freight does not know by that name.
    Type = 7,
    /// A publisher or subscription could not be made (another type on the
    /// topic, a limit, a backend that is not there, ...).
    Create = 8,
    /// A loan could not be made (no room in `/dev/shm`, a wrong buffer count, ...).
    Loan = 9,
    /// A message could not be published.
    Publish = 10,
    /// A message could not be taken.
    Take = 11,
    /// The CDR of a message's fields does not decode as its type.
    Decode = 12,
    /// A callback reported a failure (a C++ exception); the spin stopped.
    Callback = 13,
    /// A service call got no reply in time; a pending call stays pending.
    Timeout = 14,
    /// A service has no server, or every server went away before it answered.
    NoServer = 15,
}

impl Status {
    /// Every status, in the order of their values (the header is checked against it).
    pub const ALL: [Status; 16] = [
        Status::Ok,
        Status::InvalidArgument,
        Status::Name,
        Status::Environment,
        Status::SharedMemory,
        Status::Configuration,
        Status::Internal,
        Status::Type,
        Status::Create,
        Status::Loan,
        Status::Publish,
        Status::Take,
        Status::Decode,
        Status::Callback,
        Status::Timeout,
        Status::NoServer,
    ];

    /// The constant's name in `freight.h`.
    pub const fn name(self) -> &'static CStr {
        match self {
            Status::Ok => c"FREIGHT_OK",
            Status::InvalidArgument => c"FREIGHT_ERROR_INVALID_ARGUMENT",
            Status::Name => c"FREIGHT_ERROR_NAME",
            Status::Environment => c"FREIGHT_ERROR_ENVIRONMENT",
            Status::SharedMemory => c"FREIGHT_ERROR_SHARED_MEMORY",
            Status::Configuration => c"FREIGHT_ERROR_CONFIGURATION",
            Status::Internal => c"FREIGHT_ERROR_INTERNAL",
            Status::Type => c"FREIGHT_ERROR_TYPE",
            Status::Create => c"FREIGHT_ERROR_CREATE",
            Status::Loan => c"FREIGHT_ERROR_LOAN",
            Status::Publish => c"FREIGHT_ERROR_PUBLISH",
            Status::Take => c"FREIGHT_ERROR_TAKE",
            Status::Decode => c"FREIGHT_ERROR_DECODE",
            Status::Callback => c"FREIGHT_ERROR_CALLBACK",
            Status::Timeout => c"FREIGHT_ERROR_TIMEOUT",
            Status::NoServer => c"FREIGHT_ERROR_NO_SERVER",
        }
    }
}

/// A failed call: its status and the text for [`freight_last_error`].
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: Status,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Self {
        Failure { status, message: message.into() }
    }
}

impl From<freight::ContextError> for Failure {
    fn from(e: freight::ContextError) -> Self {
        use freight::ContextError as E;
        let status = match &e {
            E::BadDomainId(_) | E::BadEnvironment { .. } => Status::Environment,
            E::Name(_) => Status::Name,
            E::SharedMemory(_) => Status::SharedMemory,
            E::Tune(_) => Status::Configuration,
            // A variant added later: its text still says what happened.
            _ => Status::Internal,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<freight::CreateError> for Failure {
    fn from(e: freight::CreateError) -> Self {
        let status = match &e {
            freight::CreateError::Name(_) => Status::Name,
            _ => Status::Create,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<freight::LoanError> for Failure {
    fn from(e: freight::LoanError) -> Self {
        Failure::new(Status::Loan, e.to_string())
    }
}

impl From<freight::PublishError> for Failure {
    fn from(e: freight::PublishError) -> Self {
        Failure::new(Status::Publish, e.to_string())
    }
}

impl From<freight::TakeError> for Failure {
    fn from(e: freight::TakeError) -> Self {
        Failure::new(Status::Take, e.to_string())
    }
}

impl From<freight::CallError> for Failure {
    fn from(e: freight::CallError) -> Self {
        use freight::CallError as E;
        let status = match &e {
            E::Timeout { .. } => Status::Timeout,
            E::NoServer { .. } | E::ServerGone { .. } => Status::NoServer,
            E::Request(_) => Status::Publish,
            E::Reply(_) => Status::Take,
            // A variant added later: its text still says what happened.
            _ => Status::Internal,
        };
        Failure::new(status, e.to_string())
    }
}

impl From<freight_msg::DecodeError> for Failure {
    fn from(e: freight_msg::DecodeError) -> Self {
        Failure::new(Status::Decode, format!("the message's fields: {e}"))
    }
}

thread_local! {
    /// The message of this thread's last failed call.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs `body`, the whole of an exported function: a failure or a panic
/// becomes its status, with the message kept as this thread's last error.
pub(crate) fn guard(body: impl FnOnce() -> Result<(), Failure>) -> Status {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return Status::Ok,
        Ok(Err(f)) => f,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Failure::new(Status::Internal, format!("freight panicked (a bug; please report it): {what}"))
        }
    };
    // A message with a NUL in it is cut there rather than lost.
    let bytes: Vec<u8> = failure.message.into_bytes().into_iter().take_while(|b| *b != 0).collect();
    let text = CString::new(bytes).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
    failure.status
}

/// `ptr` as a `&str`: `what` names the argument in the error.
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated string that lives for `'a`.
pub(crate) unsafe fn str_arg<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::new(Status::InvalidArgument, format!("{what} is a null pointer")));
    }
    // SAFETY: non-null, and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|e| Failure::new(Status::InvalidArgument, format!("{what} is not UTF-8: {e}")))
}

/// `ptr` as a shared reference to a handle: `what` names it in the error.
///
/// # Safety
/// `ptr` is null or a live handle of this type.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: null is checked; otherwise a live handle by the caller's contract.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::new(Status::InvalidArgument, format!("{what} is a null pointer")))
}

/// Writes `value` to the out pointer `out`, boxed: the caller owns it.
///
/// # Safety
/// `out` is null or valid for a write.
pub(crate) unsafe fn hand_out<T>(out: *mut *mut T, value: T) -> Result<(), Failure> {
    if out.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "the out pointer is a null pointer"));
    }
    // SAFETY: non-null and writable by the caller's contract.
    unsafe { out.write(Box::into_raw(Box::new(value))) };
    Ok(())
}

/// Frees a handle that [`hand_out`] made (null is ignored); a panic in its
/// drop is caught like any other.
///
/// # Safety
/// `ptr` is null or a live handle of this type, not used again.
pub(crate) unsafe fn destroy<T>(ptr: *mut T) {
    if !ptr.is_null() {
        guard(|| {
            // SAFETY: made by `Box::into_raw` in `hand_out`, destroyed once.
            drop(unsafe { Box::from_raw(ptr) });
            Ok(())
        });
    }
}

/// Buffer `index` among `buffers` of a loan or sample (`whose`), or an
/// error that says how many it has.
pub(crate) fn nth_buffer<T: Copy>(buffers: &[T], index: usize, whose: &str) -> Result<T, Failure> {
    buffers.get(index).copied().ok_or_else(|| {
        Failure::new(Status::InvalidArgument, format!("the {whose} has {} buffer(s), not {}", buffers.len(), index + 1))
    })
}

/// Writes a memory range (`ptr`, `len`) to the out pointers `data` and `out_len`.
///
/// # Safety
/// `data` and `out_len` are null or writable.
pub(crate) unsafe fn write_range<P>(data: *mut P, out_len: *mut usize, (ptr, len): (P, usize)) -> Result<(), Failure> {
    if data.is_null() || out_len.is_null() {
        return Err(Failure::new(Status::InvalidArgument, "an out pointer is a null pointer"));
    }
    // SAFETY: non-null and writable by the caller's contract.
    unsafe {
        data.write(ptr);
        out_len.write(len);
    }
    Ok(())
}

/// The message of the calling thread's last failed call: valid until that
/// thread's next failed call, and empty before the first. Never null.
#[no_mangle]
pub extern "C" fn freight_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// The name of `status`'s constant (`"FREIGHT_ERROR_NAME"`), or `"?"` for a
/// value no version of freight returns. A static string; never null.
#[no_mangle]
pub extern "C" fn freight_status_name(status: i32) -> *const c_char {
    Status::ALL.iter().find(|s| **s as i32 == status).map_or(c"?", |s| s.name()).as_ptr()
}

/// freight's version (`"0.1.0"`), a static string.
#[no_mangle]
pub extern "C" fn freight_version() -> *const c_char {
    const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the version has a NUL in it"),
    };
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: freight_last_error never returns null and the string lives
        // until this thread's next failure.
        unsafe { CStr::from_ptr(freight_last_error()) }.to_str().unwrap().to_owned()
    }

    #[test]
    fn a_panic_is_caught_and_becomes_an_internal_error() {
        let status = guard(|| panic!("boom {}", 7));
        assert_eq!(status, Status::Internal);
        assert!(last().contains("boom 7"), "{}", last());
    }

    #[test]
    fn the_last_error_is_per_thread() {
        assert_eq!(guard(|| Err(Failure::new(Status::Name, "here"))), Status::Name);
        std::thread::spawn(|| {
            assert_eq!(last(), "", "another thread's error leaked into this one");
            assert_eq!(guard(|| Err(Failure::new(Status::Environment, "there"))), Status::Environment);
            assert_eq!(last(), "there");
        })
        .join()
        .unwrap();
        assert_eq!(last(), "here");
    }

    #[test]
    fn status_names_are_those_of_the_header() {
        // SAFETY: static strings.
        let name = |s: i32| unsafe { CStr::from_ptr(freight_status_name(s)) }.to_str().unwrap();
        assert_eq!(name(0), "FREIGHT_OK");
        assert_eq!(name(6), "FREIGHT_ERROR_INTERNAL");
        assert_eq!(name(-1), "?");
        assert_eq!(name(1000), "?");
    }
}
