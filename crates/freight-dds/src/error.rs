//! Errors of the DDS layer.

use std::ffi::CStr;

/// A Cyclone DDS call failed, or its input could not be passed to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DdsError {
    /// A Cyclone DDS call returned an error code.
    #[error("Cyclone DDS {call} failed: {text} ({code})")]
    Call {
        /// The function that failed.
        call: &'static str,
        /// Cyclone's return code (`DDS_RETCODE_*`).
        code: i32,
        /// Cyclone's text for the code.
        text: String,
    },
    /// A name or configuration string contains a NUL byte.
    #[error("{what} {value:?} contains a NUL byte")]
    Nul {
        /// What the string is.
        what: &'static str,
        /// The string.
        value: String,
    },
}

impl DdsError {
    pub(crate) fn call(call: &'static str, code: i32) -> Self {
        // SAFETY: dds_strretcode returns a pointer to a static NUL-terminated string for any code.
        let text = unsafe { CStr::from_ptr(cyclors::dds_strretcode(code)) }.to_string_lossy().into_owned();
        DdsError::Call { call, code, text }
    }
}

/// Turns a negative Cyclone return value (an entity or a count) into an error.
pub(crate) fn check(call: &'static str, ret: i32) -> Result<i32, DdsError> {
    if ret < 0 {
        Err(DdsError::call(call, ret))
    } else {
        Ok(ret)
    }
}

pub(crate) fn cstring(what: &'static str, value: &str) -> Result<std::ffi::CString, DdsError> {
    std::ffi::CString::new(value).map_err(|_| DdsError::Nul { what, value: value.into() })
}
