//! psa::Error: the one conversion of a psa_status into a Rust error (`check`), carrying the
//! library's thread-local message read right after the failing call.
use std::ffi::CStr;
use std::fmt;

use psa_sys as sys;

/// A failed libpsa call: its status (`psa::sys::PSA_ERR_*`) and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: sys::psa_status,
    message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error raised by this crate's own checks, with a status of the same table.
    pub fn new(status: sys::psa_status, message: String) -> Error {
        Error { status, message }
    }

    /// The psa_status, e.g. `psa::sys::PSA_ERR_INVALID_SHAPE`.
    pub fn status(&self) -> sys::psa_status {
        self.status
    }

    /// The library's message, e.g. "k: shape[3] (head_dim) = 96; ...".
    pub fn message(&self) -> &str {
        &self.message
    }

    /// "PSA_ERR_INVALID_SHAPE", ...
    pub fn status_name(&self) -> &'static str {
        // SAFETY: static storage, never NULL (psa.h).
        unsafe { CStr::from_ptr(sys::psa_status_name(self.status)) }.to_str().unwrap_or("?")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Ok for PSA_OK, else the error with the thread's last message. Must run right after the
/// call that returned `status`, on the same thread, before any other libpsa call.
pub(crate) fn check(status: sys::psa_status) -> Result<()> {
    if status == sys::PSA_OK {
        return Ok(());
    }
    // SAFETY: never NULL, valid until the next libpsa call on this thread; copied here.
    let message = unsafe { CStr::from_ptr(sys::psa_last_error_message()) }
        .to_string_lossy()
        .into_owned();
    Err(Error { status, message })
}
