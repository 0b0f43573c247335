//! Message types of a user's own packages: a [`MessageType`] read from a
//! type's definition (the `ros2msg` text `freight msg python` writes into the
//! generated module), over the core's generic endpoints. The Python class of
//! the type is made in `freight/msgs/__init__.py` (`message_class`); this
//! module gives it its fields, converts its instances to and from CDR, and
//! makes its endpoints.
//!
//! A field's value is what the built-in classes hold (see [`crate::fields`]):
//! numbers, `str`, nested instances, numpy arrays for numbers in fixed-size
//! arrays, lists for other arrays and sequences, and for buffer
//! fields (unbounded sequences of numbers) whatever the user set, viewed in
//! place on receipt. Values are checked when a message is converted (publish,
//! `serialize()`), not on assignment; a bound (`string<=8` in bytes of
//! UTF-8, `T[<=4]`) is checked then too, as ROS 2 refuses to serialize what
//! exceeds one (the core's walk checks them again: `freight_msg::bounds`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration as StdDuration;

use freight::generic::{
    buffer_element, is_buffer_field, layout_from_specs, GenericClient, GenericLoan, GenericLoanUninit, GenericMessage,
    GenericPendingCall, GenericPublisher, GenericServiceServer, GenericSubscription, MessageLayout,
};
use freight::{
    CreateError, Node as RustNode, PublisherOptions, QoS, RequestId, ServiceOptions, SubscriptionOptions, WaitSet,
};
use freight_msg::bounds::OverBound;
use freight_msg::message::InlineBuffers;
use freight_msg::{Buffer, CdrReader, CdrWriter, ElementInfo, RawBuffer};
use freight_msg_gen::{parse_ros2msg, rust_definition, ArrayKind, BaseType, DefaultValue, MsgSpec, Primitive, Value};
use numpy::PyArrayDescr;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyType};

use crate::arrays::{host_source, received_value, DeviceArray, LoanedBuffer};
use crate::endpoints::{
    adopt_loan, copy_arrays, lend_array, lend_buffer, order_device_writes, single_element, take_waiting, AnyPublisher,
    AnySubscription, Endpoints, Placement, Publisher,
};
use crate::errors::{error, from_publish, from_take, type_name, Kind};
use crate::messages;
use crate::services::{answered, from_call, lock, wait_for_replies, AnyClient, AnyServer, PyRequest, ServiceEndpoints};

/// The classes of users' types made in this process, by type name, with
/// their hashes: one class per type, whichever definition names it.
static CLASSES: Mutex<Option<Classes>> = Mutex::new(None);

/// Each type name's hash and class.
type Classes = HashMap<String, (u64, Py<PyType>)>;

fn classes() -> std::sync::MutexGuard<'static, Option<Classes>> {
    // Each change is one insert: a panic while held left the map whole.
    CLASSES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A message type of a user's package, read from its definition: the
/// `_freight_type` of its Python class.
#[pyclass(frozen, module = "freight._native", name = "MessageType")]
pub(crate) struct MessageType {
    layout: Arc<MessageLayout>,
    root: Arc<Struct>,
    /// What the definition holds, for [`MessageType::nested`].
    specs: Vec<MsgSpec>,
}

/// One message type of a definition, as the conversions walk it.
struct Struct {
    type_name: String,
    hash: u64,
    fields: Vec<Field>,
    /// The built-in class when the type is one of freight's, else the
    /// user's class, found in [`CLASSES`] at first use.
    class: OnceLock<Class>,
}

enum Class {
    /// Made with its constructor (a PyO3 class).
    BuiltIn(Py<PyType>),
    /// Made empty (`cls.__new__(cls)`), its fields then set.
    User(Py<PyType>),
}

struct Field {
    name: Py<PyString>,
    slot: Slot,
    array: ArrayKind,
    default: Option<DefaultValue>,
}

/// What one element of a field is.
enum Slot {
    Bool,
    Number(Primitive),
    /// `string`, its bound if any.
    Str(Option<usize>),
    Message(Arc<Struct>),
    /// An unbounded sequence of numbers: a buffer.
    Buffer(BufferSlot),
}

/// A buffer field's element, in Rust and as numpy's dtype (made once: a
/// dtype from its name costs a parse).
struct BufferSlot {
    primitive: Primitive,
    element: ElementInfo,
    dtype: Py<PyArrayDescr>,
}

impl MessageType {
    /// The type of `specs[0]`, the types it uses among the rest.
    fn of_specs(py: Python<'_>, specs: Vec<MsgSpec>) -> PyResult<Self> {
        let layout = layout_from_specs(&specs).map_err(|e| PyTypeError::new_err(e.to_string()))?;
        let by_name: HashMap<String, &MsgSpec> = specs.iter().map(|s| (s.type_name(), s)).collect();
        let mut made = HashMap::new();
        let root = build(py, &specs[0], &by_name, &mut made)?;
        Ok(MessageType { layout: Arc::new(layout), root, specs })
    }

    /// The class of the type's instances.
    fn class<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        self.root.class(py)
    }

    /// What a name (or names) that is no field of the type is told.
    fn no_field(&self, names: &str) -> String {
        let known: Vec<String> = self.root.fields.iter().map(|f| f.name.to_string()).collect();
        format!("{} has no field {names}; its fields are {}", self.layout.type_name(), known.join(", "))
    }

    /// The small fields of `obj` as CDR (buffer fields as ordinals), and its
    /// buffer fields' values in order.
    fn write<'py>(&self, obj: &Bound<'py, PyAny>) -> PyResult<(CdrWriter, Vec<Bound<'py, PyAny>>)> {
        let class = self.class(obj.py())?;
        if !obj.is_instance(&class)? {
            return Err(PyTypeError::new_err(format!(
                "expected a {}, not {}",
                self.layout.type_name(),
                type_name(obj)
            )));
        }
        let mut w = CdrWriter::new();
        let mut buffers = Vec::new();
        write_struct(&self.root, obj, &mut w, &mut buffers).map_err(|e| e.of(obj.py(), &self.root))?;
        Ok((w, buffers))
    }

    /// `obj` as a message whose buffers are copies of its values.
    fn copied(&self, obj: &Bound<'_, PyAny>) -> PyResult<GenericMessage> {
        let (w, values) = self.write(obj)?;
        self.with_copies(w, &values)
    }

    /// The message of the small fields `w` with copies of the buffer
    /// fields' `values` in heap memory.
    fn with_copies(&self, w: CdrWriter, values: &[Bound<'_, PyAny>]) -> PyResult<GenericMessage> {
        let buffers = values.iter().map(|v| heap_copy(v)).collect::<PyResult<Vec<_>>>()?;
        GenericMessage::new(self.layout.clone(), w.finish(), buffers)
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", self.layout.type_name())))
    }

    /// The elements of the buffer fields outside sequences, in order: what
    /// a loan has buffers for.
    fn fixed_elements(&self) -> Vec<ElementInfo> {
        fn walk(s: &Struct, out: &mut Vec<ElementInfo>) {
            for f in &s.fields {
                match (&f.slot, f.array) {
                    (Slot::Buffer(b), _) => out.push(b.element),
                    (Slot::Message(nested), ArrayKind::Single) => walk(nested, out),
                    (Slot::Message(nested), ArrayKind::Fixed(n)) => (0..n).for_each(|_| walk(nested, out)),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// The Python message of `msg`, its buffer fields viewing its buffers.
    fn read<'py>(&self, py: Python<'py>, msg: &GenericMessage) -> PyResult<Bound<'py, PyAny>> {
        let malformed =
            |e: freight_msg::DecodeError| error(Kind::Malformed, format!("{}: {e}", self.layout.type_name()));
        let mut r = CdrReader::new(msg.fields()).map_err(malformed)?;
        read_struct(py, &self.root, &mut r, msg.buffers()).map_err(|e| match e {
            Read::Python(e) => e,
            Read::Cdr(e) => malformed(e),
        })
    }
}

#[pymethods]
impl MessageType {
    /// The type `type_name` (`"my_msgs/msg/Scan"`) of the `ros2msg`
    /// `definition`. A type of a package freight has built in must match
    /// freight's definition of it.
    #[new]
    fn new(py: Python<'_>, type_name: &str, definition: &str) -> PyResult<Self> {
        let specs = parse_ros2msg(type_name, definition)
            .map_err(|e| PyTypeError::new_err(format!("the definition of {type_name}: {e}")))?;
        MessageType::of_specs(py, specs)
    }

    #[getter]
    fn type_name(&self) -> &str {
        self.layout.type_name()
    }

    /// The hash endpoints match on: the generated Rust type's `TYPE_HASH`.
    #[getter]
    fn hash(&self) -> u64 {
        self.root.hash
    }

    /// The built-in class of the type, if it is one of freight's.
    #[getter]
    fn built_in(&self, py: Python<'_>) -> Option<Py<PyType>> {
        match self.root.class.get() {
            Some(Class::BuiltIn(c)) => Some(c.clone_ref(py)),
            _ => None,
        }
    }

    /// The field names, in order.
    #[getter]
    fn field_names(&self, py: Python<'_>) -> Vec<Py<PyString>> {
        self.root.fields.iter().map(|f| f.name.clone_ref(py)).collect()
    }

    /// `{field: ROS type}`, as rclpy's `get_fields_and_field_types()`.
    fn field_types(&self) -> Vec<(String, String)> {
        let spec = &self.specs[0];
        spec.fields.iter().map(|f| (f.name.clone(), f.ty.ros_name())).collect()
    }

    /// The constants, `(name, value)`.
    fn constants<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let spec = &self.specs[0];
        spec.constants.iter().map(|c| Ok((c.name.clone(), value_object(py, &c.value)?))).collect()
    }

    /// The types of users' packages among the fields, each with its own
    /// `MessageType`, the innermost first: the classes to make before this one's.
    fn nested(&self, py: Python<'_>) -> PyResult<Vec<MessageType>> {
        let mut order = Vec::new();
        collect_user_structs(&self.root, &mut order);
        order.pop(); // the root itself
        order
            .iter()
            .map(|name| {
                let mut specs = self.specs.clone();
                let at = specs.iter().position(|s| &s.type_name() == name).unwrap_or(0);
                specs.swap(0, at);
                MessageType::of_specs(py, specs)
            })
            .collect()
    }

    /// Makes `cls` the class of this type in this process. Fails when a
    /// class of another definition has the name already; the class made
    /// first stays (and is returned) when one of the same definition has.
    fn register(&self, py: Python<'_>, cls: Bound<'_, PyType>) -> PyResult<Py<PyType>> {
        let mut classes = classes();
        let classes = classes.get_or_insert_with(HashMap::new);
        if let Some((hash, known)) = classes.get(&self.root.type_name) {
            if *hash != self.root.hash {
                return Err(PyTypeError::new_err(format!(
                    "{} has a class of another definition in this process (two versions of the type)",
                    self.root.type_name
                )));
            }
            return Ok(known.clone_ref(py));
        }
        classes.insert(self.root.type_name.clone(), (self.root.hash, cls.clone().unbind()));
        Ok(cls.unbind())
    }

    /// The class registered for this type's name, if any; a class of another
    /// definition raises `TypeError`.
    fn registered(&self, py: Python<'_>) -> PyResult<Option<Py<PyType>>> {
        match classes().as_ref().and_then(|c| c.get(&self.root.type_name)) {
            Some((hash, _)) if *hash != self.root.hash => Err(PyTypeError::new_err(format!(
                "{} has a class of another definition in this process (two versions of the type)",
                self.root.type_name
            ))),
            Some((_, cls)) => Ok(Some(cls.clone_ref(py))),
            None => Ok(None),
        }
    }

    /// Sets every field of the new message `obj`: from `kwargs`, else the
    /// definition's default, else zero (an empty string, an empty sequence,
    /// a default nested message). Unknown keywords raise `TypeError`.
    #[pyo3(signature = (obj, kwargs=None))]
    fn init(&self, obj: &Bound<'_, PyAny>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
        let py = obj.py();
        let mut given = 0;
        for f in &self.root.fields {
            let name = f.name.bind(py);
            let value = match kwargs.map(|k| k.get_item(name)).transpose()?.flatten() {
                Some(v) => {
                    given += 1;
                    checked(&self.root, f, v)?
                }
                None => default_value(py, f)?,
            };
            set_field(obj, name, &value)?;
        }
        if let Some(kwargs) = kwargs.filter(|k| k.len() > given) {
            let unknown: Vec<String> = kwargs
                .keys()
                .iter()
                .map(|k| k.to_string())
                .filter(|k| !self.root.fields.iter().any(|f| f.name.to_string() == *k))
                .collect();
            return Err(PyTypeError::new_err(self.no_field(&unknown.join(", "))));
        }
        Ok(())
    }

    /// `value` as the field `name` holds it, checked as a publish checks it
    /// (its type, range, length and bounds): what an assignment stores.
    /// `AttributeError` for a name that is no field, as rclpy's classes (slots).
    fn checked<'py>(&self, name: &str, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = value.py();
        let field = self.root.fields.iter().find(|f| f.name.bind(py).to_cow().is_ok_and(|n| n == name));
        match field {
            Some(f) => checked(&self.root, f, value),
            None => Err(pyo3::exceptions::PyAttributeError::new_err(self.no_field(name))),
        }
    }

    /// `obj` in ROS 2 CDR (encapsulation header included).
    fn serialize<'py>(&self, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let msg = self.copied(obj)?;
        let bytes = msg.to_cdr().map_err(|e| error(Kind::Limit, e.to_string()))?;
        Ok(PyBytes::new(obj.py(), &bytes))
    }

    /// The message of the CDR bytes `data`; `freight.MalformedMessageError`
    /// for bytes that are not one.
    fn deserialize<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let msg = GenericMessage::read(self.layout.clone(), data, &mut InlineBuffers)
            .map_err(|e| error(Kind::Malformed, format!("not a {}: {e}", self.layout.type_name())))?;
        self.read(py, &msg)
    }
}

/// The [`Struct`] of `spec`, nested ones from `by_name`, each built once.
fn build(
    py: Python<'_>,
    spec: &MsgSpec,
    by_name: &HashMap<String, &MsgSpec>,
    made: &mut HashMap<String, Arc<Struct>>,
) -> PyResult<Arc<Struct>> {
    let type_name = spec.type_name();
    if let Some(done) = made.get(&type_name) {
        return Ok(done.clone());
    }
    let mut fields = Vec::with_capacity(spec.fields.len());
    for f in &spec.fields {
        let slot = match &f.ty.base {
            BaseType::Primitive(p) if is_buffer_field(&f.ty) => Slot::Buffer(BufferSlot {
                primitive: *p,
                element: buffer_element(*p),
                dtype: PyArrayDescr::new(py, dtype_name(*p))?.unbind(),
            }),
            BaseType::Primitive(Primitive::Bool) => Slot::Bool,
            BaseType::Primitive(p) => Slot::Number(*p),
            BaseType::String { bound } => Slot::Str(*bound),
            BaseType::Message { package, name } => {
                // `layout_from_specs` found every nested type, and no cycle.
                let nested = by_name.get(&format!("{package}/msg/{name}")).ok_or_else(|| {
                    PyTypeError::new_err(format!("{package}/msg/{name} (a field of {type_name}) is not defined"))
                })?;
                Slot::Message(build(py, nested, by_name, made)?)
            }
        };
        fields.push(Field {
            name: PyString::new(py, &f.name).unbind(),
            slot,
            array: f.ty.array,
            default: f.default.clone(),
        });
    }
    let hash = freight_msg::message::fnv1a(rust_definition(spec).as_bytes());
    let class = OnceLock::new();
    if let Some((built_in, built_in_hash)) = messages::built_in(py, &type_name) {
        if built_in_hash != hash {
            return Err(PyTypeError::new_err(format!(
                "this definition of {type_name} differs from freight's built-in one (freight.msgs); \
                 generate the types from the same .msg files"
            )));
        }
        let _ = class.set(Class::BuiltIn(built_in.unbind()));
    }
    let done = Arc::new(Struct { type_name: type_name.clone(), hash, fields, class });
    made.insert(type_name, done.clone());
    Ok(done)
}

/// The names of the users' types `s` is made of, innermost first, `s` last
/// when it is a user's type.
fn collect_user_structs(s: &Struct, out: &mut Vec<String>) {
    for f in &s.fields {
        if let Slot::Message(nested) = &f.slot {
            collect_user_structs(nested, out);
        }
    }
    if !matches!(s.class.get(), Some(Class::BuiltIn(_))) && !out.contains(&s.type_name) {
        out.push(s.type_name.clone());
    }
}

impl Struct {
    fn class<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        Ok(match self.made_as(py)? {
            Class::BuiltIn(c) | Class::User(c) => c.bind(py).clone(),
        })
    }

    fn made_as(&self, py: Python<'_>) -> PyResult<&Class> {
        if let Some(class) = self.class.get() {
            return Ok(class);
        }
        let found = classes().as_ref().and_then(|c| c.get(&self.type_name)).map(|(h, c)| (*h, c.clone_ref(py)));
        match found {
            Some((hash, class)) if hash == self.hash => Ok(self.class.get_or_init(|| Class::User(class))),
            Some(_) => Err(PyTypeError::new_err(format!(
                "{} has a class of another definition in this process (two versions of the type)",
                self.type_name
            ))),
            None => Err(PyTypeError::new_err(format!(
                "{} has no class yet: make it with freight.msgs.message_class()",
                self.type_name
            ))),
        }
    }

    /// A new instance whose fields are set next.
    fn instance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.made_as(py)? {
            Class::BuiltIn(c) => c.bind(py).call0(),
            Class::User(c) => c.bind(py).call_method1(pyo3::intern!(py, "__new__"), (c.bind(py),)),
        }
    }
}

fn write_struct<'py>(
    s: &Struct,
    obj: &Bound<'py, PyAny>,
    w: &mut CdrWriter,
    buffers: &mut Vec<Bound<'py, PyAny>>,
) -> Result<(), Refused> {
    for f in &s.fields {
        let value = obj.getattr(f.name.bind(obj.py()))?;
        write_field(f, &value, w, buffers).map_err(|e| e.within(|| f.name.to_string()))?;
    }
    Ok(())
}

/// A value a message's field may not hold, found while writing it: the
/// field's path in the message and why, said once at the top as the core's
/// layouts say it (`my_msgs/msg/Scan: field `inner.label`: a string<=8 ...`).
struct Refused {
    /// From the message down: `inner.label`, `names[2]`.
    path: String,
    why: PyErr,
}

impl From<PyErr> for Refused {
    fn from(why: PyErr) -> Self {
        Refused { path: String::new(), why }
    }
}

impl Refused {
    /// Refused inside `segment` (a field, or an element of one).
    fn within(self, segment: impl FnOnce() -> String) -> Refused {
        Refused { path: freight_msg::bounds::within(&segment(), &self.path), ..self }
    }

    /// The exception for a message of `s`: the cause's type, with the path.
    fn of(self, py: Python<'_>, s: &Struct) -> PyErr {
        let Refused { path, why } = self;
        let message = format!("{}: field `{path}`: {}", s.type_name, why.value(py));
        why.get_type(py).call1((message,)).map_or(why, PyErr::from_value)
    }
}

/// `value`, given for the field `f` of `s`, as the field holds it, checked
/// by writing it where nothing keeps it.
fn checked<'py>(s: &Struct, f: &Field, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    let refused = |e: Refused| e.within(|| f.name.to_string()).of(py, s);
    let value = assigned(f, value).map_err(|e| refused(e.into()))?;
    write_field(f, &value, &mut CdrWriter::new(), &mut Vec::new()).map_err(refused)?;
    Ok(value)
}

/// Sets the field `name` of `obj` past its class's `__setattr__` (which
/// checks what a user assigns): for values freight read or checked itself.
fn set_field(obj: &Bound<'_, PyAny>, name: &Bound<'_, PyString>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    // SAFETY: the three pointers are live objects held by the `Bound`s for
    // the call; `PyObject_GenericSetAttr` borrows them (what
    // `object.__setattr__` does) and returns -1 with an exception set.
    let set = unsafe { pyo3::ffi::PyObject_GenericSetAttr(obj.as_ptr(), name.as_ptr(), value.as_ptr()) };
    if set == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(obj.py()))
    }
}

fn write_field<'py>(
    f: &Field,
    value: &Bound<'py, PyAny>,
    w: &mut CdrWriter,
    buffers: &mut Vec<Bound<'py, PyAny>>,
) -> Result<(), Refused> {
    if let Slot::Buffer(b) = &f.slot {
        // Its ordinal; the value is copied or lent as a whole later.
        w.write_u32(u32::try_from(buffers.len()).map_err(|_| PyValueError::new_err("too many buffer fields"))?);
        buffers.push(buffer_value(value, b)?);
        return Ok(());
    }
    let each = |items: Vec<Bound<'py, PyAny>>, w: &mut CdrWriter, buffers: &mut Vec<Bound<'py, PyAny>>| {
        items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| write_one(&f.slot, item, w, buffers).map_err(|e| e.within(|| format!("[{i}]"))))
    };
    match f.array {
        ArrayKind::Single => write_one(&f.slot, value, w, buffers),
        ArrayKind::Fixed(n) => {
            let items = items(value)?;
            if items.len() != n {
                return Err(PyValueError::new_err(format!("takes {n} elements, not {}", items.len())).into());
            }
            each(items, w, buffers)
        }
        ArrayKind::Bounded(_) | ArrayKind::Unbounded => {
            let items = items(value)?;
            if let Some(over) = bounded_len(f.array).and_then(|b| OverBound::sequence(items.len(), b)) {
                return Err(PyValueError::new_err(over.to_string()).into());
            }
            w.write_len(items.len()).map_err(|e| error(Kind::Limit, e.to_string()))?;
            each(items, w, buffers)
        }
    }
}

/// The bound of a `T[<=N]` field.
fn bounded_len(array: ArrayKind) -> Option<usize> {
    match array {
        ArrayKind::Bounded(n) => Some(n),
        _ => None,
    }
}

/// The elements of a sequence value (a list, tuple or numpy array).
fn items<'py>(value: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if value.is_instance_of::<PyString>() || value.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!("takes a sequence, not {}", type_name(value))));
    }
    value.try_iter()?.collect()
}

fn write_one<'py>(
    slot: &Slot,
    value: &Bound<'py, PyAny>,
    w: &mut CdrWriter,
    buffers: &mut Vec<Bound<'py, PyAny>>,
) -> Result<(), Refused> {
    match slot {
        Slot::Bool => w.write_bool(value.extract()?),
        Slot::Number(p) => write_number(*p, value, w)?,
        Slot::Str(bound) => {
            let s: String = value.extract()?;
            if let Some(over) = bound.and_then(|b| OverBound::string(s.len(), b)) {
                return Err(PyValueError::new_err(over.to_string()).into());
            }
            w.write_string(&s).map_err(|e| error(Kind::Limit, e.to_string()))?;
        }
        Slot::Message(nested) => {
            let class = nested.class(value.py())?;
            if !value.is_instance(&class)? {
                return Err(
                    PyTypeError::new_err(format!("takes a {}, not {}", nested.type_name, type_name(value))).into()
                );
            }
            write_struct(nested, value, w, buffers)?;
        }
        Slot::Buffer(..) => unreachable!("buffer fields are written whole"),
    }
    Ok(())
}

fn write_number(p: Primitive, value: &Bound<'_, PyAny>, w: &mut CdrWriter) -> PyResult<()> {
    let range = |e: PyErr| {
        if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) {
            PyValueError::new_err(format!("{} is out of the range of {}", value, p.ros_name()))
        } else {
            e
        }
    };
    match p {
        Primitive::Byte | Primitive::Char | Primitive::UInt8 => w.write_u8(value.extract().map_err(range)?),
        Primitive::Int8 => w.write_i8(value.extract().map_err(range)?),
        Primitive::UInt16 => w.write_u16(value.extract().map_err(range)?),
        Primitive::Int16 => w.write_i16(value.extract().map_err(range)?),
        Primitive::UInt32 => w.write_u32(value.extract().map_err(range)?),
        Primitive::Int32 => w.write_i32(value.extract().map_err(range)?),
        Primitive::UInt64 => w.write_u64(value.extract().map_err(range)?),
        Primitive::Int64 => w.write_i64(value.extract().map_err(range)?),
        Primitive::Float32 => w.write_f32(value.extract::<f64>()? as f32),
        Primitive::Float64 => w.write_f64(value.extract()?),
        Primitive::Bool => w.write_bool(value.extract()?),
    }
    Ok(())
}

/// The numpy dtype of `p`'s elements.
fn dtype_name(p: Primitive) -> &'static str {
    match p {
        Primitive::Bool => "bool",
        Primitive::Byte | Primitive::Char => "uint8",
        other => other.ros_name(),
    }
}

/// A buffer field's value as it will be sent: a numpy array of the field's
/// dtype (a sequence of numbers or a bytes-like object becomes one), or a
/// loan or device array, kept as it is.
fn buffer_value<'py>(value: &Bound<'py, PyAny>, b: &BufferSlot) -> PyResult<Bound<'py, PyAny>> {
    use numpy::{PyArrayDescrMethods, PyUntypedArrayMethods};
    let py = value.py();
    if value.is_instance_of::<LoanedBuffer>() || value.is_instance_of::<DeviceArray>() {
        return Ok(value.clone());
    }
    let name = dtype_name(b.primitive);
    if let Ok(array) = value.cast::<numpy::PyUntypedArray>() {
        let given = array.dtype();
        if given.has_object() || given.itemsize() != b.element.size {
            return Err(PyTypeError::new_err(format!(
                "holds {name}; got an array of {}: convert it with arr.astype(numpy.{name})",
                given.repr()?
            )));
        }
        return Ok(value.clone());
    }
    if value.hasattr(pyo3::intern!(py, "__dlpack_device__"))? {
        return Ok(value.clone());
    }
    let numpy = py.import("numpy")?;
    if value.is_instance_of::<PyBytes>() || value.is_instance_of::<pyo3::types::PyByteArray>() {
        return numpy.call_method1("frombuffer", (value, b.dtype.bind(py)));
    }
    numpy.call_method1("array", (value, b.dtype.bind(py))).map_err(|e| {
        PyTypeError::new_err(format!("takes a numpy array, a bytes-like object or a sequence of numbers: {e}"))
    })
}

/// A copy of a buffer field's value in heap memory.
fn heap_copy(value: &Bound<'_, PyAny>) -> PyResult<RawBuffer> {
    let source = host_source(value)?;
    let (addr, len) = source.memory();
    // SAFETY: `source` holds `len` contiguous bytes at `addr` while it lives.
    let bytes =
        if len == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec() };
    Ok(Buffer::from(bytes).raw().clone())
}

/// Why reading a message failed.
enum Read {
    Python(PyErr),
    Cdr(freight_msg::DecodeError),
}

impl From<PyErr> for Read {
    fn from(e: PyErr) -> Self {
        Read::Python(e)
    }
}

impl From<freight_msg::DecodeError> for Read {
    fn from(e: freight_msg::DecodeError) -> Self {
        Read::Cdr(e)
    }
}

fn read_struct<'py>(
    py: Python<'py>,
    s: &Struct,
    r: &mut CdrReader<'_>,
    buffers: &[RawBuffer],
) -> Result<Bound<'py, PyAny>, Read> {
    let obj = s.instance(py)?;
    for f in &s.fields {
        let value = read_field(py, f, r, buffers)?;
        set_field(&obj, f.name.bind(py), &value)?;
    }
    Ok(obj)
}

fn read_field<'py>(
    py: Python<'py>,
    f: &Field,
    r: &mut CdrReader<'_>,
    buffers: &[RawBuffer],
) -> Result<Bound<'py, PyAny>, Read> {
    if let Slot::Buffer(b) = &f.slot {
        let at = r.read_u32()? as usize;
        // `GenericMessage` checked the ordinals: this is a second line.
        let raw = buffers.get(at).ok_or_else(|| error(Kind::Malformed, format!("no buffer {at}")))?;
        return Ok(received_value(py, raw.clone(), b.element, b.dtype.bind(py).clone())?);
    }
    let count = match f.array {
        ArrayKind::Single => return read_one(py, &f.slot, r, buffers),
        ArrayKind::Fixed(n) => n,
        // The message was checked whole: the length is what follows.
        ArrayKind::Bounded(_) | ArrayKind::Unbounded => r.read_len(1)?,
    };
    let items = (0..count).map(|_| read_one(py, &f.slot, r, buffers)).collect::<Result<Vec<_>, _>>()?;
    let list = PyList::new(py, items)?;
    match (&f.slot, f.array) {
        // Numbers in fixed-size arrays: numpy arrays, as rclpy's and the built-in classes'.
        (Slot::Number(p), ArrayKind::Fixed(_)) => {
            Ok(py.import("numpy")?.call_method1("array", (list, dtype_name(*p)))?)
        }
        _ => Ok(list.into_any()),
    }
}

fn read_one<'py>(
    py: Python<'py>,
    slot: &Slot,
    r: &mut CdrReader<'_>,
    buffers: &[RawBuffer],
) -> Result<Bound<'py, PyAny>, Read> {
    use pyo3::IntoPyObjectExt;
    let value = match slot {
        Slot::Bool => r.read_bool()?.into_bound_py_any(py)?,
        Slot::Number(p) => match p {
            Primitive::Byte | Primitive::Char | Primitive::UInt8 => r.read_u8()?.into_bound_py_any(py)?,
            Primitive::Int8 => r.read_i8()?.into_bound_py_any(py)?,
            Primitive::UInt16 => r.read_u16()?.into_bound_py_any(py)?,
            Primitive::Int16 => r.read_i16()?.into_bound_py_any(py)?,
            Primitive::UInt32 => r.read_u32()?.into_bound_py_any(py)?,
            Primitive::Int32 => r.read_i32()?.into_bound_py_any(py)?,
            Primitive::UInt64 => r.read_u64()?.into_bound_py_any(py)?,
            Primitive::Int64 => r.read_i64()?.into_bound_py_any(py)?,
            Primitive::Float32 => f64::from(r.read_f32()?).into_bound_py_any(py)?,
            Primitive::Float64 => r.read_f64()?.into_bound_py_any(py)?,
            Primitive::Bool => r.read_bool()?.into_bound_py_any(py)?,
        },
        Slot::Str(_) => r.read_string()?.into_bound_py_any(py)?,
        Slot::Message(nested) => read_struct(py, nested, r, buffers)?,
        Slot::Buffer(..) => unreachable!("buffer fields are read whole"),
    };
    Ok(value)
}

/// A value given to the constructor, as the field holds it: numbers of
/// fixed-size arrays copied into a numpy array (so
/// that `msg.k[0] = 1.0` changes the message, as in rclpy), a buffer field's
/// value as a numpy array of its dtype unless it is one (or a loan, or a
/// device array), the rest as given.
fn assigned<'py>(f: &Field, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    match (&f.slot, f.array) {
        (Slot::Buffer(b), _) => buffer_value(&value, b),
        (Slot::Number(p), ArrayKind::Fixed(_)) => {
            value.py().import("numpy")?.call_method1("array", (value, dtype_name(*p)))
        }
        _ => Ok(value),
    }
}

/// The value of a field not given to the constructor.
fn default_value<'py>(py: Python<'py>, f: &Field) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    let one = |slot: &Slot, given: Option<&Value>| -> PyResult<Bound<'py, PyAny>> {
        if let Some(v) = given {
            return value_object(py, v);
        }
        match slot {
            Slot::Bool => false.into_bound_py_any(py),
            Slot::Number(Primitive::Float32 | Primitive::Float64) => 0.0f64.into_bound_py_any(py),
            Slot::Number(_) => 0u8.into_bound_py_any(py),
            Slot::Str(_) => "".into_bound_py_any(py),
            Slot::Message(nested) => match nested.made_as(py)? {
                Class::BuiltIn(c) | Class::User(c) => c.bind(py).call0(),
            },
            Slot::Buffer(..) => unreachable!("buffer fields are made whole"),
        }
    };
    let given: Vec<Value> = match &f.default {
        Some(DefaultValue::Array(items)) => items.clone(),
        Some(DefaultValue::Scalar(v)) => vec![v.clone()],
        None => Vec::new(),
    };
    let numpy = || py.import("numpy");
    match (&f.slot, f.array) {
        (Slot::Buffer(b), _) => {
            let items = given.iter().map(|v| value_object(py, v)).collect::<PyResult<Vec<_>>>()?;
            numpy()?.call_method1("array", (PyList::new(py, items)?, b.dtype.bind(py)))
        }
        (slot, ArrayKind::Single) => one(slot, given.first()),
        (slot, ArrayKind::Fixed(n)) => {
            let items = (0..n).map(|i| one(slot, given.get(i))).collect::<PyResult<Vec<_>>>()?;
            let list = PyList::new(py, items)?;
            match slot {
                Slot::Number(p) => numpy()?.call_method1("array", (list, dtype_name(*p))),
                _ => Ok(list.into_any()),
            }
        }
        (slot, ArrayKind::Bounded(_) | ArrayKind::Unbounded) => {
            let items = given.iter().map(|v| one(slot, Some(v))).collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
    }
}

fn value_object<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    match v {
        Value::Bool(b) => b.into_bound_py_any(py),
        Value::Int(i) => i.into_bound_py_any(py),
        Value::Float(f) => f.into_bound_py_any(py),
        Value::String(s) => s.into_bound_py_any(py),
    }
}

/// The endpoints of a user's type.
impl Endpoints for Py<MessageType> {
    fn decode_bag_message(&self, py: Python<'_>, m: &freight_bag::Message) -> PyResult<Py<PyAny>> {
        let ty = self.get();
        let msg = GenericMessage::read(ty.layout.clone(), &m.data, &mut InlineBuffers).map_err(|e| {
            error(Kind::Malformed, format!("{} on {} is not a {}: {e}", m.type_name, m.topic, ty.layout.type_name()))
        })?;
        Ok(ty.read(py, &msg)?.unbind())
    }

    fn publisher(
        &self,
        node: &RustNode,
        topic: &str,
        qos: QoS,
        options: PublisherOptions,
    ) -> Result<Box<dyn AnyPublisher>, CreateError> {
        let inner = node.create_generic_publisher(topic, self.get().layout.clone(), qos, options)?;
        Ok(Box::new(UserPublisher { inner, ty: Python::attach(|py| self.clone_ref(py)) }))
    }

    fn subscription(
        &self,
        node: &RustNode,
        topic: &str,
        qos: QoS,
        options: SubscriptionOptions,
    ) -> Result<Box<dyn AnySubscription>, CreateError> {
        let inner = node.create_generic_subscription(topic, self.get().layout.clone(), qos, options)?;
        Ok(Box::new(UserSubscription { inner, ty: Python::attach(|py| self.clone_ref(py)) }))
    }
}

struct UserPublisher {
    inner: GenericPublisher,
    ty: Py<MessageType>,
}

impl AnyPublisher for UserPublisher {
    fn publish(
        &self,
        py: Python<'_>,
        msg: &Bound<'_, PyAny>,
        me: &Bound<'_, Publisher>,
        stream: Option<u64>,
    ) -> PyResult<()> {
        let ty = self.ty.get();
        let msg = ty
            .outgoing(py, msg, Some((me, stream)), |lens| self.inner.loan_buffers(lens))
            .map_err(|e| role_error(py, e, &format!("message (this publisher sends {})", ty.layout.type_name())))?;
        // A reliable publish can wait for a full queue (max_blocking_time).
        py.detach(|| match msg {
            Outgoing::Lent(loan, fields) => self.inner.publish(*loan, fields),
            Outgoing::Copied(msg) => self.inner.publish_copy(&msg),
        })
        .map_err(from_publish)
    }

    fn loan<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ty = self.ty.get();
        let element = single_element(ty.layout.type_name(), &ty.fixed_elements())?;
        lend_array(py, ty.layout.type_name(), element, shape, dtype, me, |len| self.inner.loan_buffers(&[len]))
    }

    fn loan_buffer<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: &Bound<'py, PyAny>,
        placement: Placement,
        me: &Bound<'py, Publisher>,
    ) -> PyResult<Bound<'py, LoanedBuffer>> {
        let ty = self.ty.get();
        let element = single_element(ty.layout.type_name(), &ty.fixed_elements())?;
        let lend = |len| self.inner.loan_buffers(&[len]);
        lend_buffer(py, ty.layout.type_name(), element, shape, dtype, placement, me, lend)
    }

    fn topic_name(&self) -> &str {
        self.inner.topic_name()
    }

    fn subscription_count(&self) -> usize {
        self.inner.subscription_count() + self.inner.network_subscription_count()
    }

    fn spilled_count(&self) -> u64 {
        self.inner.spilled_count()
    }
}

struct UserSubscription {
    inner: GenericSubscription,
    ty: Py<MessageType>,
}

impl AnySubscription for UserSubscription {
    fn take(&self, py: Python<'_>, timeout: Option<StdDuration>) -> PyResult<Option<Py<PyAny>>> {
        let taken = take_waiting(py, timeout, || self.inner.try_take(), |t| self.inner.take(t))?;
        taken.map(|sample| Ok(self.ty.get().read(py, &sample.message)?.unbind())).transpose()
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        waitset.add_generic(&self.inner);
    }

    fn topic_name(&self) -> &str {
        self.inner.topic_name()
    }

    fn publisher_count(&self) -> usize {
        self.inner.publisher_count() + self.inner.network_publisher_count()
    }

    fn network_losses(&self) -> u64 {
        self.inner.network_losses().count()
    }
}

/// A service of a user's package: its request and response types.
pub(crate) struct UserService {
    pub(crate) request: Py<MessageType>,
    pub(crate) response: Py<MessageType>,
}

/// What [`MessageType::write`] made of a request or a response: a loan
/// holding its buffers, or (buffers inside sequences, which no loan has a
/// place for) a message holding copies of them.
enum Outgoing {
    // Boxed: a loan is several times the size of a message.
    Lent(Box<GenericLoan>, Vec<u8>),
    Copied(GenericMessage),
}

impl MessageType {
    /// `obj` to send: its one buffer field sent as it is when it is a loan
    /// of `lender` (a publisher's), else its buffers copied once, into a
    /// loan that `lend` makes where the type's buffers are all outside
    /// sequences. `stream`: the CUDA stream that wrote a device loan.
    fn outgoing(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        lender: Option<(&Bound<'_, Publisher>, Option<u64>)>,
        lend: impl FnOnce(&[usize]) -> Result<GenericLoanUninit, freight::LoanError> + Send,
    ) -> PyResult<Outgoing> {
        let (w, values) = self.write(obj)?;
        if let (Some((me, stream)), 1) = (lender, self.layout.fixed_buffer_count()) {
            if let Some(mut loan) = adopt_loan::<GenericLoanUninit>(py, &values, me)? {
                order_device_writes(py, &mut loan, stream);
                // SAFETY: as for a built-in type's loan (`AnyPublisher::publish`
                // of `endpoints.rs`): the user wrote it, and lent memory is
                // never uninitialised.
                return Ok(Outgoing::Lent(Box::new(unsafe { loan.assume_init() }), w.finish()));
            }
        }
        if values.len() != self.layout.fixed_buffer_count() {
            return Ok(Outgoing::Copied(self.with_copies(w, &values)?));
        }
        let loan = copy_arrays(py, &values, lend)?;
        // SAFETY: `copy_arrays` wrote every byte of every buffer.
        Ok(Outgoing::Lent(Box::new(unsafe { loan.assume_init() }), w.finish()))
    }
}

impl ServiceEndpoints for UserService {
    fn server(&self, node: &RustNode, name: &str) -> Result<Box<dyn AnyServer>, CreateError> {
        let (request, response) = (self.request.get().layout.clone(), self.response.get().layout.clone());
        let server = node.create_generic_service_server(name, request, response, ServiceOptions::default())?;
        let types = Python::attach(|py| UserService {
            request: self.request.clone_ref(py),
            response: self.response.clone_ref(py),
        });
        Ok(Box::new(UserServer { server, types }))
    }

    fn client(&self, node: &RustNode, name: &str) -> Result<Box<dyn AnyClient>, CreateError> {
        let (request, response) = (self.request.get().layout.clone(), self.response.get().layout.clone());
        let client = node.create_generic_client(name, request, response, ServiceOptions::default())?;
        let types = Python::attach(|py| UserService {
            request: self.request.clone_ref(py),
            response: self.response.clone_ref(py),
        });
        Ok(Box::new(UserClient { client, types, pending: Mutex::default() }))
    }
}

struct UserServer {
    server: GenericServiceServer,
    types: UserService,
}

impl AnyServer for UserServer {
    fn take_request(&self, py: Python<'_>) -> PyResult<Option<PyRequest>> {
        let taken = py.detach(|| self.server.take_request(StdDuration::ZERO)).map_err(from_take)?;
        let Some((sample, id)) = taken else { return Ok(None) };
        let request = self.types.request.get().read(py, &sample.message)?;
        Ok(Some((request.unbind(), (id.client, id.sequence))))
    }

    fn send_response(&self, py: Python<'_>, id: (u64, i64), response: &Bound<'_, PyAny>) -> PyResult<()> {
        let id = RequestId { client: id.0, sequence: id.1 };
        let ty = self.types.response.get();
        let response = ty
            .outgoing(py, response, None, |lens| self.server.loan_response(lens))
            .map_err(|e| role_error(py, e, "response"))?;
        py.detach(|| match response {
            Outgoing::Lent(loan, fields) => self.server.send_loaned_response(id, *loan, &fields),
            Outgoing::Copied(msg) => self.server.send_response(id, &msg),
        })
        .map_err(from_publish)
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        waitset.add_generic_service(&self.server);
    }

    fn service_name(&self) -> &str {
        self.server.service_name()
    }
}

/// A type error in a request or response, saying which it was.
fn role_error(py: Python<'_>, e: PyErr, role: &str) -> PyErr {
    match e.is_instance_of::<PyTypeError>(py) {
        true => PyTypeError::new_err(format!("the {role}: {}", e.value(py))),
        false => e,
    }
}

struct UserClient {
    client: GenericClient,
    types: UserService,
    pending: Mutex<HashMap<i64, GenericPendingCall>>,
}

impl AnyClient for UserClient {
    fn call_async(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<i64> {
        let ty = self.types.request.get();
        let request = ty
            .outgoing(py, request, None, |lens| self.client.loan_request(lens))
            .map_err(|e| role_error(py, e, "request"))?;
        let call = py
            .detach(|| match request {
                Outgoing::Lent(loan, fields) => self.client.call_loaned(*loan, &fields),
                Outgoing::Copied(msg) => self.client.call_async(&msg),
            })
            .map_err(from_call)?;
        let sequence = call.sequence();
        lock(&self.pending).insert(sequence, call);
        Ok(sequence)
    }

    fn take_responses(&self, py: Python<'_>, timeout: StdDuration) -> PyResult<Vec<(i64, Py<PyAny>)>> {
        wait_for_replies(py, self, timeout)?;
        let replies = py.detach(|| answered(&self.pending, GenericPendingCall::try_get)).map_err(from_call)?;
        let ty = self.types.response.get();
        replies.into_iter().map(|(sequence, reply)| Ok((sequence, ty.read(py, &reply.message)?.unbind()))).collect()
    }

    fn forget(&self, sequence: i64) {
        lock(&self.pending).remove(&sequence);
    }

    fn server_count(&self) -> usize {
        self.client.server_count()
    }

    fn add_to<'a>(&'a self, waitset: &mut WaitSet<'a>) {
        waitset.add_generic_client(&self.client);
    }

    fn service_name(&self) -> &str {
        self.client.service_name()
    }
}
