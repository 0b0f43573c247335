//! The Python classes of freight's built-in messages.
//!
//! Each class mirrors its Rust message field by field, with rclpy's behaviour:
//! keyword-only constructor arguments defaulting to the field's zero value,
//! attribute access that type-checks assignments, `==`, a `repr` in rclpy's
//! form, `serialize()` / `deserialize()` in ROS 2 CDR, and pickling.

use freight::msgs::builtin_interfaces::{Duration, Time};
use freight::msgs::sensor_msgs::{Image, PointCloud2, PointField};
use freight::msgs::std_msgs::{Header, MultiArrayDimension, MultiArrayLayout, UInt64MultiArray, UInt8MultiArray};
use freight::msgs::tensor_msgs::Tensor;
use freight::Buffer;
use freight_msg::{ElementInfo, Message};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple, PyType};

use crate::endpoints::{Endpoints, Typed};
use crate::errors::{error, Kind};
use crate::fields::{one_tuple, Buffers, PyField, PyMessage};

/// The bytes of a `bytes`-like object (`bytes` itself without a copy).
fn cdr_bytes<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    match data.cast::<PyBytes>() {
        Ok(b) => Ok(b.clone()),
        Err(_) => Ok(data.py().get_type::<PyBytes>().call1((data,))?.cast_into()?),
    }
}

macro_rules! messages {
    ($(
        $(#[$doc:meta])*
        $class:ident = $rust:ident as $name:literal in $module:literal, $ros:literal {
            $($field:ident: $fty:ty),* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[pyclass(module = $module, name = $name)]
            pub(crate) struct $class {
                $(#[pyo3(get, set)] $field: <$fty as PyField>::Stored,)*
            }

            #[pymethods]
            impl $class {
                #[new]
                #[pyo3(signature = (*, $($field = None),*))]
                // One keyword argument per field, as rclpy's constructors take.
                #[allow(clippy::too_many_arguments)]
                fn new(py: Python<'_>, $($field: Option<<$fty as PyField>::Stored>),*) -> PyResult<Self> {
                    Ok($class {
                        $($field: match $field {
                            Some(v) => v,
                            None => <$fty as PyField>::default_stored(py)?,
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
                    let mut m = $rust::default();
                    <$rust as PyMessage>::write_fields(self, py, &mut m, Buffers::Copy)?;
                    let bytes = m.to_cdr().map_err(|e| error(Kind::Limit, e.to_string()))?;
                    Ok(PyBytes::new(py, &bytes))
                }

                /// The message from ROS 2 CDR bytes; raises
                /// `freight.MalformedMessageError` for bytes that are not one.
                #[staticmethod]
                fn deserialize(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
                    let bytes = cdr_bytes(data)?;
                    let m = $rust::from_cdr(bytes.as_bytes())
                        .map_err(|e| error(Kind::Malformed, format!("not a {}: {e}", $rust::TYPE_NAME)))?;
                    m.read_fields(py)
                }

                fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
                    let data = slf.borrow().serialize(slf.py())?;
                    Ok((slf.get_type().getattr("deserialize")?, one_tuple(data.into_any())?))
                }
            }

            impl PyMessage for $rust {
                type Class = $class;
                fn write_fields(obj: &$class, py: Python<'_>, target: &mut Self, buffers: Buffers) -> PyResult<()> {
                    $(<$fty as PyField>::write(&obj.$field, py, &mut target.$field, buffers)?;)*
                    Ok(())
                }
                fn read_fields(self, py: Python<'_>) -> PyResult<$class> {
                    Ok($class { $($field: <$fty as PyField>::read(self.$field, py)?,)* })
                }
                #[allow(unused_variables)]
                fn arrays_of<'py>(obj: &$class, py: Python<'py>, out: &mut Vec<Bound<'py, PyAny>>) {
                    $(<$fty as PyField>::arrays(&obj.$field, py, out);)*
                }
                #[allow(unused_variables)]
                fn elements(out: &mut Vec<ElementInfo>) {
                    $(<$fty as PyField>::buffer_elements(out);)*
                }
            }
        )*

        /// Adds every message class to `module` (`freight._native`); the
        /// `freight.msgs.<package>` modules re-export them.
        pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
            $(module.add_class::<$class>()?;)*
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

        /// The names of the classes `typed` knows, for error messages.
        pub(crate) const NAMES: &[&str] = &[$($ros),*];
    };
}

messages! {
    /// `builtin_interfaces/msg/Time`: seconds and nanoseconds.
    PyTime = Time as "Time" in "freight.msgs.builtin_interfaces", "builtin_interfaces.msg.Time" {
        sec: i32,
        nanosec: u32,
    }
    /// `builtin_interfaces/msg/Duration`: seconds and nanoseconds.
    PyDuration = Duration as "Duration" in "freight.msgs.builtin_interfaces", "builtin_interfaces.msg.Duration" {
        sec: i32,
        nanosec: u32,
    }
    /// `std_msgs/msg/Header`: a time stamp and a coordinate frame.
    PyHeader = Header as "Header" in "freight.msgs.std_msgs", "std_msgs.msg.Header" {
        stamp: Time,
        frame_id: String,
    }
    /// `std_msgs/msg/MultiArrayDimension`.
    PyMultiArrayDimension = MultiArrayDimension as "MultiArrayDimension" in "freight.msgs.std_msgs",
        "std_msgs.msg.MultiArrayDimension" {
        label: String,
        size: u32,
        stride: u32,
    }
    /// `std_msgs/msg/MultiArrayLayout`.
    PyMultiArrayLayout = MultiArrayLayout as "MultiArrayLayout" in "freight.msgs.std_msgs",
        "std_msgs.msg.MultiArrayLayout" {
        dim: Vec<MultiArrayDimension>,
        data_offset: u32,
    }
    /// `std_msgs/msg/UInt8MultiArray`: bytes with a layout.
    PyUInt8MultiArray = UInt8MultiArray as "UInt8MultiArray" in "freight.msgs.std_msgs",
        "std_msgs.msg.UInt8MultiArray" {
        layout: MultiArrayLayout,
        data: Buffer<u8>,
    }
    /// `std_msgs/msg/UInt64MultiArray`: 64-bit words with a layout.
    PyUInt64MultiArray = UInt64MultiArray as "UInt64MultiArray" in "freight.msgs.std_msgs",
        "std_msgs.msg.UInt64MultiArray" {
        layout: MultiArrayLayout,
        data: Buffer<u64>,
    }
    /// `sensor_msgs/msg/Image`: an uncompressed image.
    PyImage = Image as "Image" in "freight.msgs.sensor_msgs", "sensor_msgs.msg.Image" {
        header: Header,
        height: u32,
        width: u32,
        encoding: String,
        is_bigendian: u8,
        step: u32,
        data: Buffer<u8>,
    }
    /// `sensor_msgs/msg/PointField`: one field of a point cloud's points.
    PyPointField = PointField as "PointField" in "freight.msgs.sensor_msgs", "sensor_msgs.msg.PointField" {
        name: String,
        offset: u32,
        datatype: u8,
        count: u32,
    }
    /// `sensor_msgs/msg/PointCloud2`: points as rows of packed fields.
    PyPointCloud2 = PointCloud2 as "PointCloud2" in "freight.msgs.sensor_msgs", "sensor_msgs.msg.PointCloud2" {
        header: Header,
        height: u32,
        width: u32,
        fields: Vec<PointField>,
        is_bigendian: bool,
        point_step: u32,
        row_step: u32,
        data: Buffer<u8>,
        is_dense: bool,
    }
    /// `tensor_msgs/msg/ExperimentalTensor`: an n-dimensional tensor described
    /// the DLPack way.
    PyTensor = Tensor as "Tensor" in "freight.msgs.tensor_msgs", "tensor_msgs.msg.Tensor" {
        dtype_code: u8,
        dtype_bits: u8,
        dtype_lanes: u16,
        shape: Vec<i64>,
        strides: Vec<i64>,
        byte_offset: u64,
        data: Buffer<u8>,
    }
}
