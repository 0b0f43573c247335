//! How each kind of message field lives in a Python message object, and how it
//! converts to and from the field of the Rust message.
//!
//! Nested messages are stored as Python objects, so `msg.header.stamp.sec = 1`
//! changes `msg` as it does in rclpy. Buffer fields are stored as numpy arrays
//! or device objects: on receipt a read-only view of the memory the buffer
//! arrived in (a [`DeviceArray`](crate::arrays::DeviceArray) for device
//! memory); on publish whatever the user set (copied once, unless it is a
//! loan: a numpy array, a [`LoanedBuffer`] or a tensor over one).

use std::marker::PhantomData;

use freight::msgs::__freight_msg_gen::FixedArray;
use freight::Buffer;
use freight_msg::{Element, ElementInfo, Message};
use numpy::{dtype, PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use pyo3::{Borrowed, IntoPyObjectExt, PyClass};

use crate::arrays::{host_source, received_value, DeviceArray, LoanedBuffer};
use crate::dlpack::KDL_CPU;

/// What happens to buffer fields when a Python message is written into a Rust one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buffers {
    /// Copied into heap buffers (`serialize()`).
    Copy,
    /// Left alone: a loan already holds them.
    Keep,
}

/// A field type of a Rust message, as a Python message object holds it.
pub(crate) trait PyField: Sized {
    /// The value in the Python object.
    type Stored;
    /// The value of a field not given to the constructor, from the field of
    /// the message's `Default` (which holds the `.msg` file's defaults).
    fn from_default(value: Self, py: Python<'_>) -> PyResult<Self::Stored> {
        Self::read(value, py)
    }
    /// Writes the Python value into the Rust field.
    fn write(stored: &Self::Stored, py: Python<'_>, target: &mut Self, buffers: Buffers) -> PyResult<()>;
    /// The Python value of a received Rust field.
    fn read(value: Self, py: Python<'_>) -> PyResult<Self::Stored>;
    /// The Python value as an object, for `==` and `repr`.
    fn object<'py>(stored: &Self::Stored, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
    /// Whether two values are equal.
    fn equal(a: &Self::Stored, b: &Self::Stored, py: Python<'_>) -> PyResult<bool> {
        Self::object(a, py)?.eq(Self::object(b, py)?)
    }
    /// Appends the values of buffer fields (numpy arrays or device objects),
    /// in declaration order.
    fn arrays<'py>(_stored: &Self::Stored, _py: Python<'py>, _out: &mut Vec<Bound<'py, PyAny>>) {}
    /// Appends the element types of buffer fields, in declaration order.
    fn buffer_elements(_out: &mut Vec<ElementInfo>) {}
}

macro_rules! plain_fields {
    ($($t:ty),*) => {$(
        impl PyField for $t {
            type Stored = $t;
            fn write(stored: &$t, _: Python<'_>, target: &mut $t, _: Buffers) -> PyResult<()> {
                target.clone_from(stored);
                Ok(())
            }
            fn read(value: $t, _: Python<'_>) -> PyResult<$t> {
                Ok(value)
            }
            fn object<'py>(stored: &$t, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                stored.into_bound_py_any(py)
            }
            fn equal(a: &$t, b: &$t, _: Python<'_>) -> PyResult<bool> {
                Ok(a == b)
            }
        }
    )*};
}

plain_fields!(bool, i8, u8, i16, u16, i32, u32, i64, u64, f32, f64, String);

/// A Rust message with a Python class (implemented by `messages!`).
pub(crate) trait PyMessage: Message {
    /// The Python class.
    type Class: PyClass + Into<pyo3::PyClassInitializer<Self::Class>>;
    /// Writes every field of a Python message into `target`.
    fn write_fields(obj: &Self::Class, py: Python<'_>, target: &mut Self, buffers: Buffers) -> PyResult<()>;
    /// The Python message of a received one.
    fn read_fields(self, py: Python<'_>) -> PyResult<Self::Class>;
    /// Appends the values of the message's buffer fields, in declaration order.
    fn arrays_of<'py>(obj: &Self::Class, py: Python<'py>, out: &mut Vec<Bound<'py, PyAny>>);
    /// Appends the element types of the message's buffer fields.
    fn elements(out: &mut Vec<ElementInfo>);
}

impl<M: PyMessage> PyField for M {
    type Stored = Py<M::Class>;
    fn write(stored: &Self::Stored, py: Python<'_>, target: &mut M, buffers: Buffers) -> PyResult<()> {
        M::write_fields(&*stored.bind(py).try_borrow()?, py, target, buffers)
    }
    fn read(value: M, py: Python<'_>) -> PyResult<Self::Stored> {
        Py::new(py, value.read_fields(py)?)
    }
    fn object<'py>(stored: &Self::Stored, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(stored.bind(py).clone().into_any())
    }
    fn arrays<'py>(stored: &Self::Stored, py: Python<'py>, out: &mut Vec<Bound<'py, PyAny>>) {
        M::arrays_of(&stored.bind(py).borrow(), py, out)
    }
    fn buffer_elements(out: &mut Vec<ElementInfo>) {
        M::elements(out)
    }
}

/// A sequence field: a Python list held by reference, as rclpy holds it, so
/// `msg.layout.dim.append(d)` changes `msg`.
/// Elements are checked on assignment, as rclpy checks them, and again when
/// the message is published or serialized (after an `append`).
pub(crate) struct List<T>(Py<PyList>, PhantomData<fn() -> T>);

impl<'a, 'py, T: ListItem> FromPyObject<'a, 'py> for List<T> {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(list) = obj.cast::<PyList>() {
            for item in list.iter() {
                T::write_item(&item, Buffers::Keep)?;
            }
            return Ok(List(list.to_owned().unbind(), PhantomData));
        }
        if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err("a sequence field takes a list, not a string"));
        }
        let items = obj.try_iter().map_err(|_| {
            PyTypeError::new_err(format!("a sequence field takes a list, not {}", crate::errors::type_name(&obj)))
        })?;
        let list = PyList::empty(obj.py());
        for item in items {
            let item = item?;
            T::write_item(&item, Buffers::Keep)?;
            list.append(item)?;
        }
        Ok(List(list.unbind(), PhantomData))
    }
}

impl<'py, T> IntoPyObject<'py> for &List<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = std::convert::Infallible;
    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(self.0.bind(py).clone().into_any())
    }
}

/// An element type of sequence fields.
pub(crate) trait ListItem: Sized {
    fn write_item(item: &Bound<'_, PyAny>, buffers: Buffers) -> PyResult<Self>;
    fn read_item(self, py: Python<'_>) -> PyResult<Py<PyAny>>;
}

impl ListItem for i64 {
    fn write_item(item: &Bound<'_, PyAny>, _: Buffers) -> PyResult<i64> {
        item.extract()
    }
    fn read_item(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.into_bound_py_any(py)?.unbind())
    }
}

impl ListItem for String {
    fn write_item(item: &Bound<'_, PyAny>, _: Buffers) -> PyResult<String> {
        item.extract()
    }
    fn read_item(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.into_bound_py_any(py)?.unbind())
    }
}

impl<M: PyMessage> ListItem for M {
    fn write_item(item: &Bound<'_, PyAny>, buffers: Buffers) -> PyResult<M> {
        let obj = item.cast::<M::Class>().map_err(|_| {
            PyTypeError::new_err(format!("a sequence of {} holds a {}", M::TYPE_NAME, crate::errors::type_name(item)))
        })?;
        let mut m = M::default();
        M::write_fields(&*obj.try_borrow()?, item.py(), &mut m, buffers)?;
        Ok(m)
    }
    fn read_item(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, self.read_fields(py)?)?.into_any())
    }
}

impl<T: ListItem> PyField for Vec<T> {
    type Stored = List<T>;
    fn write(stored: &List<T>, py: Python<'_>, target: &mut Vec<T>, buffers: Buffers) -> PyResult<()> {
        *target = stored.0.bind(py).iter().map(|item| T::write_item(&item, buffers)).collect::<PyResult<_>>()?;
        Ok(())
    }
    fn read(value: Vec<T>, py: Python<'_>) -> PyResult<List<T>> {
        let items = value.into_iter().map(|v| v.read_item(py)).collect::<PyResult<Vec<_>>>()?;
        Ok(List(PyList::new(py, items)?.unbind(), PhantomData))
    }
    fn object<'py>(stored: &List<T>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(stored.0.bind(py).clone().into_any())
    }
}

/// The value of a buffer field whose elements are `E`: a numpy array, or an
/// object in device memory (a received [`DeviceArray`], a [`LoanedBuffer`],
/// a CUDA tensor of torch or CuPy).
pub(crate) struct Data<E> {
    array: Py<PyAny>,
    element: PhantomData<fn() -> E>,
}

/// An element type of buffer fields that numpy knows.
pub(crate) trait DataElement: Element + numpy::Element {}
impl<E: Element + numpy::Element> DataElement for E {}

impl<E: DataElement> Data<E> {
    /// Takes any array-like object as the field's value.
    ///
    /// * a numpy array is kept as it is: for a byte field any dtype but
    ///   `object` (its bytes are sent), else the field's own dtype;
    /// * a buffer-protocol object (`bytes`, `bytearray`, `memoryview`,
    ///   `array.array`, `mmap`) is viewed, not copied;
    /// * a [`DeviceArray`], a [`LoanedBuffer`] and any DLPack producer (a
    ///   torch tensor, CPU or CUDA) are kept as they are: `publish` adopts
    ///   the loan under one, or copies host memory;
    /// * a sequence of numbers becomes a new array.
    fn from_object(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        let element = ElementInfo::of::<E>();
        if obj.is_instance_of::<DeviceArray>() || obj.is_instance_of::<LoanedBuffer>() {
            return Ok(Data { array: obj.clone().unbind(), element: PhantomData });
        }
        if let Ok(array) = obj.cast::<PyUntypedArray>() {
            let given = array.dtype();
            if given.has_object() {
                return Err(PyTypeError::new_err(format!(
                    "an array of Python objects cannot be a {}[] field; use a numeric dtype",
                    element.ros_name
                )));
            }
            if element.size != 1 && !given.is_equiv_to(&dtype::<E>(py)) {
                return Err(PyTypeError::new_err(format!(
                    "this field holds {}; got an array of {}: convert it with arr.astype(numpy.{})",
                    element.ros_name,
                    given.repr()?,
                    element.ros_name
                )));
            }
            return Ok(Data { array: array.clone().into_any().unbind(), element: PhantomData });
        }
        let numpy = py.import("numpy")?;
        if obj.hasattr("__dlpack_device__")? {
            // Kept as it is, so that `publish` can recognise a loan under it;
            // host memory is checked now as the array it will be copied as.
            let (device_type, _): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
            if device_type != KDL_CPU {
                return Ok(Data { array: obj.clone().unbind(), element: PhantomData });
            }
            if let Ok(array) = numpy.call_method1("from_dlpack", (obj,)) {
                Data::<E>::from_object(&array)?;
                return Ok(Data { array: obj.clone().unbind(), element: PhantomData });
            }
        }
        let dt = dtype::<E>(py);
        if element.size != 1 {
            // A buffer of another element type (array.array('d'), ...) must not
            // be reinterpreted as this one: numpy reads its format, the array
            // check above compares it.
            // Plain bytes are words in the machine's order, as on the wire.
            if let Ok(view) = py.get_type::<pyo3::types::PyMemoryView>().call1((obj,)) {
                let typed = numpy.call_method1("asarray", (view,))?;
                if typed.cast::<PyUntypedArray>()?.dtype().itemsize() != 1 {
                    return Data::from_object(&typed);
                }
            }
        }
        match numpy.call_method1("frombuffer", (obj, &dt)) {
            Ok(array) => Ok(Data { array: array.unbind(), element: PhantomData }),
            Err(e) if e.is_instance_of::<PyTypeError>(py) => {
                let array = numpy.call_method1("array", (obj, &dt)).map_err(|e| {
                    PyTypeError::new_err(format!(
                        "a {}[] field takes a numpy array, a bytes-like object or a sequence of numbers: {e}",
                        element.ros_name
                    ))
                })?;
                Ok(Data { array: array.unbind(), element: PhantomData })
            }
            Err(e) => Err(PyValueError::new_err(format!("as {}[]: {e}", element.ros_name))),
        }
    }

    fn bound<'py>(&self, py: Python<'py>) -> &Bound<'py, PyAny> {
        self.array.bind(py)
    }
}

impl<'a, 'py, E: DataElement> FromPyObject<'a, 'py> for Data<E> {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Data::from_object(&obj.to_owned())
    }
}

impl<'py, E> IntoPyObject<'py> for &Data<E> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = std::convert::Infallible;
    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(self.array.bind(py).clone())
    }
}

impl<E: DataElement> PyField for Buffer<E> {
    type Stored = Data<E>;
    fn from_default(value: Buffer<E>, py: Python<'_>) -> PyResult<Data<E>> {
        // `read` views received memory, read-only; a default is a new array,
        // the user's to change.
        let items = value.as_slice().unwrap_or_default();
        Ok(Data { array: PyArray1::from_slice(py, items).into_any().unbind(), element: PhantomData })
    }
    fn write(stored: &Data<E>, py: Python<'_>, target: &mut Buffer<E>, buffers: Buffers) -> PyResult<()> {
        if buffers == Buffers::Keep {
            return Ok(());
        }
        let source = host_source(stored.bound(py))?;
        let (addr, nbytes) = source.memory();
        let mut items = vec![E::default(); nbytes / std::mem::size_of::<E>()];
        let nbytes = items.len() * std::mem::size_of::<E>();
        // SAFETY: `source` holds `nbytes` contiguous bytes and stays alive;
        // `items` has room for them (whole elements: the dtype was checked in
        // `from_object`; a trailing partial element of a foreign object is
        // not copied).
        if nbytes > 0 {
            unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, items.as_mut_ptr().cast::<u8>(), nbytes) };
        }
        *target = Buffer::from(items);
        Ok(())
    }
    fn read(value: Buffer<E>, py: Python<'_>) -> PyResult<Data<E>> {
        let array = received_value(py, value.raw().clone(), ElementInfo::of::<E>(), dtype::<E>(py))?;
        Ok(Data { array: array.unbind(), element: PhantomData })
    }
    fn object<'py>(stored: &Data<E>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(stored.array.bind(py).clone())
    }
    fn equal(a: &Data<E>, b: &Data<E>, py: Python<'_>) -> PyResult<bool> {
        if a.array.bind(py).is(b.array.bind(py)) {
            return Ok(true);
        }
        let (a, b) = (host_source(a.bound(py))?, host_source(b.bound(py))?);
        let ((pa, na), (pb, nb)) = (a.memory(), b.memory());
        // SAFETY: both sources are contiguous and alive for the comparison.
        Ok(na == nb
            && (na == 0
                || unsafe {
                    std::slice::from_raw_parts(pa as *const u8, na) == std::slice::from_raw_parts(pb as *const u8, nb)
                }))
    }
    fn arrays<'py>(stored: &Data<E>, py: Python<'py>, out: &mut Vec<Bound<'py, PyAny>>) {
        out.push(stored.bound(py).clone());
    }
    fn buffer_elements(out: &mut Vec<ElementInfo>) {
        out.push(ElementInfo::of::<E>());
    }
}

/// `PyTuple` of one object, for `__reduce__`.
pub(crate) fn one_tuple<'py>(obj: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(obj.py(), [obj])
}

/// The value of a fixed-size array of numbers (`float64[9] covariance`): a
/// numpy array of the field's dtype and length, as rclpy holds it, so
/// `msg.covariance[0] = 1.0` changes `msg`. Assignment takes any sequence of
/// that length and copies it.
pub(crate) struct Fixed<T, const N: usize>(Py<PyArray1<T>>);

/// An element type of fixed-size array fields.
pub(crate) trait FixedElement: Element + numpy::Element + Copy + Default + PartialEq {}
impl<T: Element + numpy::Element + Copy + Default + PartialEq> FixedElement for T {}

impl<T: FixedElement, const N: usize> Fixed<T, N> {
    fn new(py: Python<'_>, items: &[T]) -> Self {
        Fixed(PyArray1::from_slice(py, items).unbind())
    }

    /// The elements, checked to be `N` (the user may have swapped the array's
    /// contents for another shape through numpy).
    fn items(&self, py: Python<'_>) -> PyResult<[T; N]> {
        let array = self.0.bind(py).readonly();
        let slice = array.as_slice().map_err(|e| PyValueError::new_err(e.to_string()))?;
        slice.try_into().map_err(|_| {
            PyValueError::new_err(format!("a {}[{N}] field holds {N} elements, not {}", T::ROS_NAME, slice.len()))
        })
    }
}

impl<'a, 'py, T: FixedElement, const N: usize> FromPyObject<'a, 'py> for Fixed<T, N> {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err(format!("a {}[{N}] field takes numbers, not a string", T::ROS_NAME)));
        }
        let array = py.import("numpy")?.call_method1("asarray", (obj, dtype::<T>(py)))?;
        let array = array.cast_into::<PyArray1<T>>().map_err(|_| {
            PyTypeError::new_err(format!("a {}[{N}] field takes a flat sequence of {N} numbers", T::ROS_NAME))
        })?;
        let items = array.readonly();
        let items = items.as_slice().map_err(|e| PyValueError::new_err(e.to_string()))?;
        if items.len() != N {
            return Err(PyValueError::new_err(format!(
                "a {}[{N}] field takes {N} elements, not {}",
                T::ROS_NAME,
                items.len()
            )));
        }
        Ok(Fixed::new(py, items))
    }
}

impl<'py, T, const N: usize> IntoPyObject<'py> for &Fixed<T, N> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = std::convert::Infallible;
    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        Ok(self.0.bind(py).clone().into_any())
    }
}

impl<T: FixedElement, const N: usize> PyField for [T; N] {
    type Stored = Fixed<T, N>;
    fn write(stored: &Fixed<T, N>, py: Python<'_>, target: &mut [T; N], _: Buffers) -> PyResult<()> {
        *target = stored.items(py)?;
        Ok(())
    }
    fn read(value: [T; N], py: Python<'_>) -> PyResult<Fixed<T, N>> {
        Ok(Fixed::new(py, &value))
    }
    fn object<'py>(stored: &Fixed<T, N>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(stored.0.bind(py).clone().into_any())
    }
    fn equal(a: &Fixed<T, N>, b: &Fixed<T, N>, py: Python<'_>) -> PyResult<bool> {
        Ok(a.items(py)? == b.items(py)?)
    }
}

/// `T[N]` with N > 32 (`float64[36]`), which the generated Rust type wraps.
impl<T: FixedElement, const N: usize> PyField for FixedArray<T, N> {
    type Stored = Fixed<T, N>;
    fn write(stored: &Fixed<T, N>, py: Python<'_>, target: &mut Self, buffers: Buffers) -> PyResult<()> {
        <[T; N]>::write(stored, py, &mut target.0, buffers)
    }
    fn read(value: Self, py: Python<'_>) -> PyResult<Fixed<T, N>> {
        <[T; N]>::read(value.0, py)
    }
    fn object<'py>(stored: &Fixed<T, N>, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        <[T; N]>::object(stored, py)
    }
    fn equal(a: &Fixed<T, N>, b: &Fixed<T, N>, py: Python<'_>) -> PyResult<bool> {
        <[T; N]>::equal(a, b, py)
    }
}
