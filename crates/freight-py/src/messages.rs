//! The Python classes of freight's built-in messages, generated at build time
//! (`build.rs`) from the same `.msg` files as the Rust types.
//!
//! Each class mirrors its Rust message field by field, with rclpy's behaviour:
//! keyword-only constructor arguments defaulting to the field's zero value,
//! attribute access that type-checks assignments, constants as class
//! attributes, `==`, a `repr` in rclpy's form, `serialize()` / `deserialize()`
//! in ROS 2 CDR, and pickling. Each package's classes are in a submodule of
//! `freight._native` named after it, which `freight.msgs.<package>` re-exports.

use freight_msg::{ElementInfo, Message};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyModule, PyTuple, PyType};

use crate::endpoints::{Endpoints, Typed};
use crate::errors::{error, Kind};
use crate::fields::{one_tuple, Buffers, PyField, PyMessage};
use crate::services::{ServiceEndpoints, TypedService};

/// The bytes of a `bytes`-like object (`bytes` itself without a copy).
fn cdr_bytes<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    match data.cast::<PyBytes>() {
        Ok(b) => Ok(b.clone()),
        Err(_) => Ok(data.py().get_type::<PyBytes>().call1((data,))?.cast_into()?),
    }
}

/// The submodule of `module` for `name`'s classes, made on first use.
fn package<'py>(module: &Bound<'py, PyModule>, name: &str) -> PyResult<Bound<'py, PyModule>> {
    if let Ok(existing) = module.getattr(name) {
        return Ok(existing.cast_into()?);
    }
    let package = PyModule::new(module.py(), name)?;
    module.add(name, &package)?;
    Ok(package)
}

macro_rules! messages {
    ($(
        $(#[$doc:meta])*
        $class:ident = $rust:ty as $name:literal in $module:literal, $package:literal, $ros:literal {
            $($field:ident: $fty:ty),* $(,)?
        } consts {
            $($constant:ident: $cty:ty),* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[pyclass(module = $module, name = $name)]
            // `Py_<package>_<Name>`: unique across packages.
            #[allow(non_camel_case_types)]
            pub(crate) struct $class {
                $(#[pyo3(get, set)] $field: <$fty as PyField>::Stored,)*
            }

            #[pymethods]
            // `std_msgs/Empty` has no fields to read or write.
            #[allow(unused_variables)]
            impl $class {
                $(
                    #[classattr]
                    #[allow(non_snake_case)]
                    fn $constant() -> $cty {
                        <$rust>::$constant
                    }
                )*

                #[new]
                #[pyo3(signature = (*, $($field = None),*))]
                // One keyword argument per field, as rclpy's constructors take.
                #[allow(clippy::too_many_arguments)]
                fn new(py: Python<'_>, $($field: Option<<$fty as PyField>::Stored>),*) -> PyResult<Self> {
                    // A field not given has the Rust message's default: the
                    // `.msg` file's default value, else zero.
                    let defaults = <$rust>::default();
                    Ok($class {
                        $($field: match $field {
                            Some(v) => v,
                            None => <$fty as PyField>::from_default(defaults.$field, py)?,
                        },)*
                    })
                }

                fn __eq__(&self, py: Python<'_>, other: PyRef<'_, Self>) -> PyResult<bool> {
                    $(
                        if !<$fty as PyField>::equal(&self.$field, &other.$field, py)? {
                            return Ok(false);
                        }
                    )*
                    Ok(true)
                }

                fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                    let fields: Vec<String> = vec![$(
                        format!("{}={}", stringify!($field), <$fty as PyField>::object(&self.$field, py)?.repr()?),
                    )*];
                    Ok(format!("{}({})", $ros, fields.join(", ")))
                }

                /// The message in ROS 2 CDR (encapsulation header included), as
                /// a stock ROS 2 node sends it.
                fn serialize<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
                    let mut m = <$rust>::default();
                    <$rust as PyMessage>::write_fields(self, py, &mut m, Buffers::Copy)?;
                    let bytes = m.to_cdr().map_err(|e| error(Kind::Limit, e.to_string()))?;
                    Ok(PyBytes::new(py, &bytes))
                }

                /// The message from ROS 2 CDR bytes; raises
                /// `freight.MalformedMessageError` for bytes that are not one.
                #[staticmethod]
                fn deserialize(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
                    let bytes = cdr_bytes(data)?;
                    let m = <$rust>::from_cdr(bytes.as_bytes())
                        .map_err(|e| error(Kind::Malformed, format!("not a {}: {e}", <$rust>::TYPE_NAME)))?;
                    m.read_fields(py)
                }

                fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
                    let data = slf.borrow().serialize(slf.py())?;
                    Ok((slf.get_type().getattr("deserialize")?, one_tuple(data.into_any())?))
                }
            }

            #[allow(unused_variables)]
            impl PyMessage for $rust {
                type Class = $class;
                fn write_fields(obj: &$class, py: Python<'_>, target: &mut Self, buffers: Buffers) -> PyResult<()> {
                    $(<$fty as PyField>::write(&obj.$field, py, &mut target.$field, buffers)?;)*
                    Ok(())
                }
                fn read_fields(self, py: Python<'_>) -> PyResult<$class> {
                    Ok($class { $($field: <$fty as PyField>::read(self.$field, py)?,)* })
                }
                fn arrays_of<'py>(obj: &$class, py: Python<'py>, out: &mut Vec<Bound<'py, PyAny>>) {
                    $(<$fty as PyField>::arrays(&obj.$field, py, out);)*
                }
                fn elements(out: &mut Vec<ElementInfo>) {
                    $(<$fty as PyField>::buffer_elements(out);)*
                }
            }
        )*

        /// Adds every message class to the submodule of `module`
        /// (`freight._native`) named after its package; the
        /// `freight.msgs.<package>` modules re-export them.
        pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
            $(package(module, $package)?.add_class::<$class>()?;)*
            Ok(())
        }

        /// The endpoints of the Rust message behind a Python message class.
        pub(crate) fn typed(class: &Bound<'_, PyType>) -> Option<&'static dyn Endpoints> {
            let py = class.py();
            $(
                if class.is(&py.get_type::<$class>()) {
                    return Some(&Typed::<$rust>::NEW);
                }
            )*
            None
        }

        /// The class and `TYPE_HASH` of the built-in message `type_name`
        /// (`"std_msgs/msg/Header"`), for a user's type that uses it.
        pub(crate) fn built_in<'py>(py: Python<'py>, type_name: &str) -> Option<(Bound<'py, PyType>, u64)> {
            $(
                if type_name == <$rust as Message>::TYPE_NAME {
                    return Some((py.get_type::<$class>(), <$rust as Message>::TYPE_HASH));
                }
            )*
            None
        }

        /// The names of the classes `typed` knows, for error messages.
        pub(crate) const NAMES: &[&str] = &[$($ros),*];
    };
}

macro_rules! services {
    ($($rust:ty as $ros:literal => $request:ident, $response:ident;)*) => {
        /// The endpoints of the Rust service whose request class is `class`
        /// (a Python service class's `Request`).
        pub(crate) fn typed_service(class: &Bound<'_, PyType>) -> Option<&'static dyn ServiceEndpoints> {
            let py = class.py();
            $(
                if class.is(&py.get_type::<$request>()) {
                    return Some(&TypedService::<$rust>::NEW);
                }
            )*
            None
        }

        /// The names of the services `typed_service` knows, for error messages.
        pub(crate) const SERVICE_NAMES: &[&str] = &[$($ros),*];
    };
}

include!(concat!(env!("OUT_DIR"), "/messages.rs"));
