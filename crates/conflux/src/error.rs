//! One error type for the whole library: a MIOpen status code plus a readable reason.

use std::fmt;

/// `miopenStatus_t`, with MIOpen's numeric values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
    Success = 0,
    NotInitialized = 1,
    InvalidValue = 2,
    BadParm = 3,
    AllocFailed = 4,
    InternalError = 5,
    NotImplemented = 6,
    UnknownError = 7,
    UnsupportedOp = 8,
    GpuOperationsSkipped = 9,
    VersionMismatch = 10,
}

impl Status {
    /// The enumerator's name, as `miopenGetErrorString` returns it.
    pub fn name(self) -> &'static str {
        match self {
            Status::Success => "miopenStatusSuccess",
            Status::NotInitialized => "miopenStatusNotInitialized",
            Status::InvalidValue => "miopenStatusInvalidValue",
            Status::BadParm => "miopenStatusBadParm",
            Status::AllocFailed => "miopenStatusAllocFailed",
            Status::InternalError => "miopenStatusInternalError",
            Status::NotImplemented => "miopenStatusNotImplemented",
            Status::UnknownError => "miopenStatusUnknownError",
            Status::UnsupportedOp => "miopenStatusUnsupportedOp",
            Status::GpuOperationsSkipped => "miopenStatusGpuOperationsSkipped",
            Status::VersionMismatch => "miopenStatusVersionMismatch",
        }
    }

    pub fn from_i32(v: i32) -> Option<Status> {
        use Status::*;
        Some(match v {
            0 => Success,
            1 => NotInitialized,
            2 => InvalidValue,
            3 => BadParm,
            4 => AllocFailed,
            5 => InternalError,
            6 => NotImplemented,
            7 => UnknownError,
            8 => UnsupportedOp,
            9 => GpuOperationsSkipped,
            10 => VersionMismatch,
            _ => return None,
        })
    }
}

/// A failure: the status a MIOpen client sees and the reason a person reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    pub status: Status,
    pub reason: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.reason)
    }
}

impl Error {
    pub fn new(status: Status, reason: impl Into<String>) -> Error {
        Error { status, reason: reason.into() }
    }
    pub fn bad_parm(reason: impl Into<String>) -> Error {
        Error::new(Status::BadParm, reason)
    }
    pub fn invalid_value(reason: impl Into<String>) -> Error {
        Error::new(Status::InvalidValue, reason)
    }
    pub fn not_implemented(reason: impl Into<String>) -> Error {
        Error::new(Status::NotImplemented, reason)
    }
    pub fn unsupported(reason: impl Into<String>) -> Error {
        Error::new(Status::UnsupportedOp, reason)
    }
    pub fn internal(reason: impl Into<String>) -> Error {
        Error::new(Status::InternalError, reason)
    }
    pub fn unknown(reason: impl Into<String>) -> Error {
        Error::new(Status::UnknownError, reason)
    }
    pub fn alloc(reason: impl Into<String>) -> Error {
        Error::new(Status::AllocFailed, reason)
    }

    /// Prefix the reason with the operation it happened in, keeping the status.
    pub fn context(mut self, what: impl fmt::Display) -> Error {
        self.reason = format!("{what}: {}", self.reason);
        self
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `ensure!(cond, Status, "fmt", args)`: return an `Error` with that status when `cond` is false.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $status:ident, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::Error::new($crate::Status::$status, format!($($fmt)+)));
        }
    };
}

/// `bail!(Status, "fmt", args)`: return an `Error` with that status.
#[macro_export]
macro_rules! bail {
    ($status:ident, $($fmt:tt)+) => {
        return Err($crate::Error::new($crate::Status::$status, format!($($fmt)+)))
    };
}
