//! freight's errors as Python exceptions.
//!
//! The exception classes are declared in Python (`freight/errors.py`), where
//! they can derive from both `freight.FreightError` and the built-in class a
//! Python user expects to catch (`ValueError`, `TypeError`, `OSError`). This
//! module maps each Rust error variant to one of them, keeping the Rust
//! message, which already says what to do.

use freight::{ContextError, CreateError, LoanError, PublishError, TakeError, WaitError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The name of `obj`'s type, for messages that say what was given instead.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
}

/// The exception classes of `freight.errors`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Context,
    InvalidName,
    TypeMismatch,
    Limit,
    TooManyHeld,
    QueueFull,
    Loan,
    Malformed,
    Backend,
    BackendUnavailable,
    SharedMemory,
    Network,
    NoServer,
    ServerGone,
    Bag,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Context => "ContextError",
            Kind::InvalidName => "InvalidNameError",
            Kind::TypeMismatch => "TypeMismatchError",
            Kind::Limit => "LimitError",
            Kind::TooManyHeld => "TooManyHeldError",
            Kind::QueueFull => "QueueFullError",
            Kind::Loan => "LoanError",
            Kind::Malformed => "MalformedMessageError",
            Kind::Backend => "BackendError",
            Kind::BackendUnavailable => "BackendUnavailableError",
            Kind::SharedMemory => "SharedMemoryError",
            Kind::Network => "NetworkError",
            Kind::NoServer => "NoServerError",
            Kind::ServerGone => "ServerGoneError",
            Kind::Bag => "BagError",
        }
    }
}

/// A `freight.errors` exception of `kind` with `message`.
pub(crate) fn error(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
        let class = MODULE
            .get_or_try_init(py, || PyModule::import(py, "freight.errors").map(Bound::unbind))
            .and_then(|m| m.bind(py).getattr(kind.class_name()));
        match class {
            Ok(class) => PyErr::from_type(class.cast_into().expect("freight.errors holds exception classes"), message),
            // Only when the package is broken (the module imports nothing else).
            Err(e) => PyRuntimeError::new_err(format!("{message} (freight.errors is unavailable: {e})")),
        }
    })
}

pub(crate) fn from_context(e: ContextError) -> PyErr {
    let kind = match &e {
        ContextError::Name(_) => Kind::InvalidName,
        ContextError::SharedMemory(_) => Kind::SharedMemory,
        _ => Kind::Context,
    };
    error(kind, e.to_string())
}

pub(crate) fn from_create(e: CreateError) -> PyErr {
    if let CreateError::OverLimit { what, asked, limit } = &e {
        // The Rust message's fix names the Rust API.
        return error(Kind::Limit, format!("{what} {asked} is over the limit of {limit}"));
    }
    let kind = match &e {
        CreateError::Name(_) => Kind::InvalidName,
        CreateError::WrongType { .. } => Kind::TypeMismatch,
        CreateError::OverLimit { .. } => Kind::Limit,
        // Its message names the backend and why this process cannot use it.
        CreateError::BackendUnavailable { .. } => Kind::BackendUnavailable,
        CreateError::Network { .. } => Kind::Network,
        _ => Kind::SharedMemory,
    };
    error(kind, e.to_string())
}

pub(crate) fn from_loan(e: LoanError) -> PyErr {
    let kind = match &e {
        LoanError::TooLarge { .. } => Kind::Limit,
        LoanError::Backend(_) => Kind::Backend,
        LoanError::SharedMemory(_) | LoanError::SharedMemoryFull { .. } => Kind::SharedMemory,
        _ => Kind::Loan,
    };
    error(kind, e.to_string())
}

pub(crate) fn from_publish(e: PublishError) -> PyErr {
    let kind = match e {
        PublishError::Loan(e) => return from_loan(e),
        // A wrong value, as Python says it.
        PublishError::OverBound { .. } => return pyo3::exceptions::PyValueError::new_err(e.to_string()),
        PublishError::QueueFull { .. } => Kind::QueueFull,
        PublishError::MetaTooLarge { .. } => Kind::Limit,
        PublishError::BufferNotFromLoan { .. } | PublishError::ForeignLoan => Kind::Loan,
        PublishError::Export(_) | PublishError::HostCopy(_) => Kind::Backend,
        PublishError::Network(_) | PublishError::Spill(_) => Kind::Network,
        PublishError::SharedMemory(_) | PublishError::Reroute(_) => Kind::SharedMemory,
        _ => Kind::Malformed,
    };
    error(kind, e.to_string())
}

/// A take error as a Python exception.
pub(crate) fn from_take(e: TakeError) -> PyErr {
    let kind = match &e {
        TakeError::WrongType { .. } => Kind::TypeMismatch,
        TakeError::Malformed(_) | TakeError::MalformedCdr(_) => Kind::Malformed,
        TakeError::Unusable { .. } | TakeError::Import { .. } => Kind::Backend,
        TakeError::TooManyHeld(_) => {
            return error(
                Kind::TooManyHeld,
                format!(
                    "{e}: in Python a received message stays held while it or any array of its data is \
                     referenced; delete them (del msg), or copy what you keep (arr.copy())"
                ),
            )
        }
        TakeError::Network(_) => Kind::Network,
        _ => Kind::SharedMemory,
    };
    error(kind, e.to_string())
}

pub(crate) fn from_wait(e: WaitError) -> PyErr {
    match e {
        WaitError::Take(e) => from_take(e),
        other => error(Kind::SharedMemory, other.to_string()),
    }
}
