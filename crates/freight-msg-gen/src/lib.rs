//! Build-time code generation: ROS 2 `.msg` and `.srv` files → Rust message
//! and service types (C++ ones with [`Builder::cpp_headers`]) built on [`freight_msg::message!`](https://docs.rs/freight-msg).
//!
//! Use it from a `build.rs` with [`Builder`]; the output is one Rust file with a
//! `pub mod <package> { pub mod msg { ... } pub mod srv { ... } }` per package, to `include!`.
//!
//! [`Builder::schemas`] gives what a rosbag2 MCAP recorder records about each
//! type: its `ros2msg` schema text and RIHS01 type hash ([`TypeSchema`]).
//!
//! A service `pkg/srv/Name.srv` becomes the messages `Name_Request` and
//! `Name_Response` (ROS 2's names, `pkg/srv/Name_Request`) and a unit struct
//! `Name` implementing `freight_msg::ServiceType`.
//!
//! # Type mapping
//!
//! | `.msg`                              | Rust                                   |
//! |-------------------------------------|----------------------------------------|
//! | `bool`                              | `bool`                                 |
//! | `byte`, `char`, `uint8`             | `u8`                                   |
//! | `int8` .. `int64`, `uint16` .. `uint64` | `i8` .. `i64`, `u16` .. `u64`      |
//! | `float32`, `float64`                | `f32`, `f64`                           |
//! | `string`, `string<=N`               | `String` (bound checked on encode)     |
//! | `Name`, `pkg/Name`, `Header`        | the generated struct                   |
//! | `T[N]`                              | `[T; N]` (N > 32: `FixedArray<T, N>`, see below) |
//! | `T[<=N]`                            | `Vec<T>` (bound checked on encode)     |
//! | `T[]`, `T` a number (not `bool`)    | `freight_msg::Buffer<T>`               |
//! | `T[]`, anything else                | `Vec<T>`                               |
//!
//! Unbounded sequences of numbers are where large data lives (images, point
//! clouds, tensors), so they are [`Buffer`](https://docs.rs/freight-msg)s whose
//! bytes stay in a memory backend, as ROS 2's `rosidl::Buffer` does for `uint8[]`.
//! On the wire they are plain CDR sequences either way.
//!
//! Fixed arrays longer than 32 (`float64[36] covariance`) cannot be `[T; N]`
//! because the standard library implements `Default` for arrays up to 32 only;
//! they become a `FixedArray<T, N>` newtype (`Deref` to `[T; N]`, same wire form)
//! emitted once in the generated file, in a hidden module `__freight_msg_gen`.
//!
//! Bounds (`string<=N`, in bytes of UTF-8, and `T[<=N]`) are checked when a
//! message is encoded (the field's `where (...)` in `message!`, see
//! `freight_msg::bounds`), as ROS 2 checks them when it serializes; a
//! received message is not held to them.
//!
//! Constants become associated constants (`&'static str` for strings). Field
//! names that are Rust keywords become raw identifiers (`r#type`); `self`,
//! `super`, `crate` (which cannot be raw) get a trailing underscore (`self_`).
//!
//! Default values in `.msg` files (`float64 w 1`) are applied by `Default` and
//! listed in the field's documentation; fields without one default to zeros,
//! empty strings and empty sequences.
//!
//! The Rust spelling of types follows the hand-written types of `freight_msg::msgs`
//! (`String`, `Vec<T>`, `Buffer<T>`, bare message names), so a generated type
//! has the same `Message::TYPE_HASH` as the built-in type with the same layout.
#![deny(missing_docs)]

mod cpp;
pub mod parse;
mod python;
mod rust;
mod schema;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use cpp::CppHeader;
pub use python::{PythonModule, PythonPackage};
pub use rust::{rust_definition, rust_ident};
pub use schema::{parse_ros2msg, TypeSchema};

pub use parse::{
    parse_file, parse_srv_file, parse_srv_str, parse_str, ArrayKind, BaseType, Constant, DefaultValue, Field,
    FieldType, Interface, MsgSpec, ParseError, ParseErrorKind, Primitive, SrvSpec, Value,
};

/// Why code could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A `.msg` file is malformed.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A package directory with neither a `msg/` nor a `srv/` directory.
    #[error("{}: no `msg` or `srv` directory in the package", path.display())]
    NoMsgDir {
        /// The package directory.
        path: PathBuf,
    },
    /// A field whose message type is in none of the packages.
    #[error("{}:{line}: unknown message type `{ty}` (not in the given packages nor in the shipped interfaces)", file.display())]
    UnknownType {
        /// The `.msg` file.
        file: PathBuf,
        /// The field's line.
        line: usize,
        /// The type, `pkg/msg/Name`.
        ty: String,
    },
    /// [`Builder::shipped_package`] named a package freight does not ship.
    #[error("{}: no shipped package `{name}`", dir.display())]
    UnknownPackage {
        /// The package.
        name: String,
        /// The interfaces directory searched.
        dir: PathBuf,
    },
}

/// The messages and services of one package.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// The package name (its directory's name).
    pub name: String,
    /// Its messages, sorted by name.
    pub messages: Vec<MsgSpec>,
    /// Its services, sorted by name.
    pub services: Vec<SrvSpec>,
}

/// The files of `dir` whose extension is `ext`, sorted; none if `dir` is not
/// a directory.
fn files_with_extension(dir: &Path, ext: &str) -> Result<Vec<PathBuf>, GenError> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Ok(files);
    }
    for entry in std::fs::read_dir(dir).map_err(|e| GenError::Io { path: dir.to_path_buf(), source: e })? {
        let path = entry.map_err(|e| GenError::Io { path: dir.to_path_buf(), source: e })?.path();
        if path.extension().is_some_and(|e| e == ext) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Whether `dir` is a package of interfaces: it has `msg/` or `srv/`.
fn is_package_dir(dir: &Path) -> bool {
    dir.join("msg").is_dir() || dir.join("srv").is_dir()
}

/// Loads `<dir>/msg/*.msg` and `<dir>/srv/*.srv`; the package name is the directory's name.
pub fn load_package(dir: &Path) -> Result<Package, GenError> {
    let name = dir
        .canonicalize()
        .map_err(|e| GenError::Io { path: dir.to_path_buf(), source: e })?
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    if !is_package_dir(dir) {
        return Err(GenError::NoMsgDir { path: dir.to_path_buf() });
    }
    let messages = files_with_extension(&dir.join("msg"), "msg")?
        .iter()
        .map(|f| parse_file(&name, f))
        .collect::<Result<Vec<_>, _>>()?;
    let services = files_with_extension(&dir.join("srv"), "srv")?
        .iter()
        .map(|f| parse_srv_file(&name, f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Package { name, messages, services })
}

/// The packages of messages of [`shipped_interfaces_dir`], which
/// `freight_msg::msgs` holds (and Python's `freight.msgs`).
pub const BUILT_IN_PACKAGES: &[&str] =
    &["builtin_interfaces", "std_msgs", "geometry_msgs", "sensor_msgs", "rosgraph_msgs", "tensor_msgs"];

/// The packages of services of [`shipped_interfaces_dir`], which
/// `freight_msg::msgs` holds too (and Python's `freight.msgs`).
pub const BUILT_IN_SERVICE_PACKAGES: &[&str] = &["std_srvs"];

/// The `interfaces/` directory of the `.msg` definitions freight ships
/// (`builtin_interfaces`, `std_msgs`, `sensor_msgs`, `geometry_msgs`,
/// `rosgraph_msgs` as in ROS 2 Humble, and freight's own `tensor_msgs`).
pub fn shipped_interfaces_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..").join("interfaces")
}

/// Generates Rust message types from ROS 2 packages, typically in `build.rs`.
///
/// Every message of the given packages is generated, plus the messages of the
/// shipped interfaces (`std_msgs/Header`, `geometry_msgs/Point`, ...) they use.
/// A given package shadows a shipped one with the same name.
///
/// In `build.rs` (with `freight-msg-gen` a build dependency and `freight-msg` a
/// dependency):
///
/// ```no_run
/// // build.rs
/// let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("my_msgs.rs");
/// freight_msg_gen::Builder::new().package_dir("msgs/my_msgs").generate(out).unwrap();
/// ```
///
/// and in the crate: `include!(concat!(env!("OUT_DIR"), "/my_msgs.rs"));`, which
/// declares `my_msgs::msg::*` (and e.g. `std_msgs::msg::Header` if used).
///
/// The generated code can also be had as a string:
///
/// ```
/// let code = freight_msg_gen::Builder::new().shipped_package("geometry_msgs").generate_string().unwrap();
/// assert!(code.contains("pub struct Point = \"geometry_msgs/msg/Point\""));
/// assert!(code.contains("pub mod std_msgs")); // Header, used by PoseStamped
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    packages: Vec<PathBuf>,
    shipped: Vec<String>,
    interfaces_dir: PathBuf,
    use_shipped: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    /// A builder with no packages, resolving against the shipped interfaces.
    pub fn new() -> Self {
        Builder {
            packages: Vec::new(),
            shipped: Vec::new(),
            interfaces_dir: shipped_interfaces_dir(),
            use_shipped: true,
        }
    }

    /// A builder of freight's own built-in messages and services: every
    /// package of [`BUILT_IN_PACKAGES`] and [`BUILT_IN_SERVICE_PACKAGES`]
    /// (what `freight-msg` and `freight-py` generate).
    pub fn built_ins() -> Self {
        BUILT_IN_PACKAGES.iter().chain(BUILT_IN_SERVICE_PACKAGES).fold(Builder::new(), |b, p| b.shipped_package(*p))
    }

    /// Adds a package directory (holding `msg/*.msg`, `srv/*.srv` or both;
    /// its name is the package name).
    pub fn package_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.packages.push(dir.as_ref().to_path_buf());
        self
    }

    /// Generates every message and service of a shipped package (e.g.
    /// `"sensor_msgs"`), not only the messages the given packages use.
    pub fn shipped_package(mut self, name: impl Into<String>) -> Self {
        self.shipped.push(name.into());
        self
    }

    /// Resolves against another interfaces directory than [`shipped_interfaces_dir`].
    pub fn interfaces_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.interfaces_dir = dir.as_ref().to_path_buf();
        self
    }

    /// Whether to resolve types against the shipped interfaces at all (default: yes).
    pub fn use_shipped_interfaces(mut self, yes: bool) -> Self {
        self.use_shipped = yes;
        self
    }

    /// Generates the code and writes it to `out_file` (only when it changed), printing
    /// `cargo:rerun-if-changed` for every input.
    pub fn generate(&self, out_file: impl AsRef<Path>) -> Result<(), GenError> {
        let (packages, services, inputs) = self.resolve()?;
        write_generated(out_file.as_ref(), &rust::emit(&packages, &services), &inputs)
    }

    /// Generates the code as a string.
    pub fn generate_string(&self) -> Result<String, GenError> {
        let (packages, services, _) = self.resolve()?;
        Ok(rust::emit(&packages, &services))
    }

    /// Generates one invocation of the macro `macro_name` with every
    /// message's Rust type as `freight::msgs::<package>::<Name>`, in
    /// package and name order: for a tool that dispatches on a topic's type
    /// name (`freight topic echo`, whose `build.rs` calls this). Written to
    /// `out_file` only when it changed, printing `cargo:rerun-if-changed` for
    /// every input.
    ///
    /// ```
    /// let list = freight_msg_gen::Builder::new().shipped_package("builtin_interfaces").type_list("each").unwrap();
    /// assert!(list.contains("each! {\n    ::freight::msgs::builtin_interfaces::Duration,\n"));
    /// ```
    pub fn generate_type_list(&self, out_file: impl AsRef<Path>, macro_name: &str) -> Result<(), GenError> {
        let (packages, _, inputs) = self.resolve()?;
        write_generated(out_file.as_ref(), &rust::emit_type_list(&packages, macro_name), &inputs)
    }

    /// The invocation [`generate_type_list`](Builder::generate_type_list) writes, as a string.
    pub fn type_list(&self, macro_name: &str) -> Result<String, GenError> {
        Ok(rust::emit_type_list(&self.resolve()?.0, macro_name))
    }

    /// As [`generate_type_list`](Builder::generate_type_list), for the
    /// services: each one's Rust type as `freight::msgs::<package>::<Name>`
    /// (for `freight service call`, whose `build.rs` calls this).
    ///
    /// ```
    /// let list = freight_msg_gen::Builder::new().shipped_package("std_srvs").service_list("each").unwrap();
    /// assert!(list.contains("each! {\n    ::freight::msgs::std_srvs::Empty,\n"));
    /// ```
    pub fn generate_service_list(&self, out_file: impl AsRef<Path>, macro_name: &str) -> Result<(), GenError> {
        let (_, services, inputs) = self.resolve()?;
        write_generated(out_file.as_ref(), &rust::emit_service_list(&services, macro_name), &inputs)
    }

    /// The invocation [`generate_service_list`](Builder::generate_service_list) writes, as a string.
    pub fn service_list(&self, macro_name: &str) -> Result<String, GenError> {
        Ok(rust::emit_service_list(&self.resolve()?.1, macro_name))
    }

    /// Generates the Python classes of freight's own Python extension
    /// (`freight-py`, whose `build.rs` calls this): one invocation of that
    /// crate's `messages!` macro naming each message's Rust type as
    /// `freight::msgs::<package>::<Name>` and its fields, constants and Python
    /// module (a service's request and response included), then one of its
    /// `services!` macro naming each service with its two classes; written to
    /// `out_file` only when it changed, printing `cargo:rerun-if-changed`
    /// for every input.
    pub fn generate_pyo3(&self, out_file: impl AsRef<Path>) -> Result<(), GenError> {
        let (packages, services, inputs) = self.resolve()?;
        write_generated(out_file.as_ref(), &python::emit_pyo3(&packages, &services), &inputs)
    }

    /// The Python modules of the messages, one per package: the module
    /// `freight.msgs.<package>`, which re-exports the extension's classes, and
    /// its type stub. freight keeps them in `python/freight/msgs/`; a test
    /// fails when they differ from what this returns.
    ///
    /// ```
    /// let modules = freight_msg_gen::Builder::new().shipped_package("std_msgs").python_modules().unwrap();
    /// let std_msgs = modules.iter().find(|m| m.package == "std_msgs").unwrap();
    /// assert!(std_msgs.source.contains("Header = _native.Header"));
    /// assert!(std_msgs.stub.contains("class Header:"));
    /// ```
    pub fn python_modules(&self) -> Result<Vec<PythonModule>, GenError> {
        let (packages, services, _) = self.resolve()?;
        Ok(python::modules(&packages, &services))
    }

    /// The C++ headers of the messages and services, one per package:
    /// `freight/msgs/<package>.hpp`, declaring `freight::msgs::<package>::<Name>`
    /// over freight's C++ runtime (`freight/cdr.hpp`). freight keeps the
    /// built-in ones in `crates/freight-c/include/freight/msgs/`; a test fails
    /// when they differ from what this returns.
    ///
    /// ```
    /// let headers = freight_msg_gen::Builder::new().shipped_package("std_msgs").cpp_headers().unwrap();
    /// let std_msgs = headers.iter().find(|h| h.package == "std_msgs").unwrap();
    /// assert!(std_msgs.source.contains("struct UInt8MultiArray {"));
    /// assert!(std_msgs.source.contains("::freight::Buffer<std::uint8_t> data{};"));
    /// ```
    pub fn cpp_headers(&self) -> Result<Vec<CppHeader>, GenError> {
        let (packages, services, _) = self.resolve()?;
        Ok(cpp::headers(&packages, &services, &schema::schemas(&packages, &services)?))
    }

    /// The Python packages of the given package directories, for `freight
    /// msg python`: each class made at import from its type's definition
    /// (`freight.msgs.message_class`), which the module carries, so that a
    /// user's types need no build step of their own.
    ///
    /// ```no_run
    /// let packages = freight_msg_gen::Builder::new().package_dir("src/my_msgs").python_packages().unwrap();
    /// assert!(packages[0].files.iter().any(|(path, _)| path == "my_msgs/msg.py"));
    /// ```
    pub fn python_packages(&self) -> Result<Vec<PythonPackage>, GenError> {
        let wanted =
            self.packages.iter().map(|dir| load_package(dir).map(|p| p.name)).collect::<Result<Vec<_>, _>>()?;
        let (packages, services, _) = self.resolve()?;
        let schemas = schema::schemas(&packages, &services)?;
        Ok(python::user_packages(&packages, &services, &schemas, &wanted))
    }

    /// What a rosbag2 MCAP file records about each message type: the
    /// `ros2msg` schema text and the RIHS01 type hash of every message and
    /// of the request and response of every service (see [`TypeSchema`]),
    /// sorted by type name.
    ///
    /// ```
    /// let schemas = freight_msg_gen::Builder::new().shipped_package("std_srvs").schemas().unwrap();
    /// let request = schemas.iter().find(|s| s.type_name == "std_srvs/srv/SetBool_Request").unwrap();
    /// // The part of SetBool.srv before `---`, comments and all.
    /// assert!(request.ros2msg.ends_with("\nbool data\n"));
    /// assert!(request.rihs01.starts_with("RIHS01_"));
    /// ```
    pub fn schemas(&self) -> Result<Vec<TypeSchema>, GenError> {
        let (packages, services, _) = self.resolve()?;
        schema::schemas(&packages, &services)
    }

    /// Writes [`schemas`](Builder::schemas) as a Rust expression of type
    /// `&'static [(&'static str, &'static str, &'static str)]`, each entry
    /// (type name, `ros2msg`, RIHS01), to `out_file` (only when it changed),
    /// printing `cargo:rerun-if-changed` for every input. For a recorder
    /// that writes rosbag2 MCAP files, in `build.rs`:
    ///
    /// ```no_run
    /// // build.rs
    /// let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("schemas.rs");
    /// freight_msg_gen::Builder::built_ins().generate_schema_table(out).unwrap();
    /// ```
    ///
    /// and in the crate:
    /// `static SCHEMAS: &[(&str, &str, &str)] = include!(concat!(env!("OUT_DIR"), "/schemas.rs"));`.
    pub fn generate_schema_table(&self, out_file: impl AsRef<Path>) -> Result<(), GenError> {
        let (packages, services, inputs) = self.resolve()?;
        let table = schema::emit_table(&schema::schemas(&packages, &services)?);
        write_generated(out_file.as_ref(), &table, &inputs)
    }

    /// The expression [`generate_schema_table`](Builder::generate_schema_table) writes, as a string.
    ///
    /// ```
    /// let table = freight_msg_gen::Builder::new().shipped_package("builtin_interfaces").schema_table().unwrap();
    /// assert!(table.contains("(\"builtin_interfaces/msg/Duration\", \""));
    /// ```
    pub fn schema_table(&self) -> Result<String, GenError> {
        Ok(schema::emit_table(&self.schemas()?))
    }

    /// Every message and service to generate, by package and name, and the
    /// files and directories they were read from.
    fn resolve(&self) -> Result<(Resolved, Services, Vec<PathBuf>), GenError> {
        let mut inputs = Vec::new();
        let mut given: BTreeMap<String, Package> = BTreeMap::new();
        for dir in &self.packages {
            let pkg = load_package(dir)?;
            inputs.extend(["msg", "srv"].map(|d| dir.join(d)).into_iter().filter(|d| d.is_dir()));
            inputs.extend(pkg.messages.iter().map(|m| m.file.clone()));
            inputs.extend(pkg.services.iter().map(|s| s.request.file.clone()));
            given.insert(pkg.name.clone(), pkg);
        }
        let mut shipped: BTreeMap<String, Package> = BTreeMap::new();
        if self.use_shipped && self.interfaces_dir.is_dir() {
            let dir = &self.interfaces_dir;
            inputs.push(dir.clone());
            for entry in std::fs::read_dir(dir).map_err(|e| GenError::Io { path: dir.clone(), source: e })? {
                let path = entry.map_err(|e| GenError::Io { path: dir.clone(), source: e })?.path();
                if is_package_dir(&path) {
                    let pkg = load_package(&path)?;
                    shipped.insert(pkg.name.clone(), pkg);
                }
            }
        }

        let mut todo: Vec<&MsgSpec> = given.values().flat_map(|p| &p.messages).collect();
        let mut services: Services = BTreeMap::new();
        let mut add_services = |pkg: &Package, inputs: &mut Vec<PathBuf>, from_shipped: bool| {
            for srv in &pkg.services {
                if from_shipped {
                    inputs.push(srv.request.file.clone());
                }
                services.entry(pkg.name.clone()).or_default().insert(srv.name.clone(), srv.clone());
            }
        };
        for pkg in given.values() {
            add_services(pkg, &mut inputs, false);
        }
        for name in &self.shipped {
            let (pkg, from_shipped) = match given.get(name) {
                Some(p) => (p, false),
                None => (
                    shipped.get(name).ok_or_else(|| GenError::UnknownPackage {
                        name: name.clone(),
                        dir: self.interfaces_dir.clone(),
                    })?,
                    true,
                ),
            };
            todo.extend(&pkg.messages);
            add_services(pkg, &mut inputs, from_shipped);
        }
        // The messages the services' fields use, but not the requests and
        // responses themselves: those are emitted with their service.
        for srv in services.values().flat_map(|p| p.values()) {
            push_deps(&srv.request, &given, &shipped, &mut todo)?;
            push_deps(&srv.response, &given, &shipped, &mut todo)?;
        }
        let mut emitted: Resolved = BTreeMap::new();
        while let Some(spec) = todo.pop() {
            let slot = emitted.entry(spec.package.clone()).or_default();
            if slot.insert(spec.name.clone(), spec.clone()).is_some() {
                continue;
            }
            if !given.contains_key(&spec.package) {
                inputs.push(spec.file.clone());
            }
            push_deps(spec, &given, &shipped, &mut todo)?;
        }
        Ok((emitted, services, inputs))
    }
}

/// Queues the messages that `spec`'s fields use, found in the given
/// packages or else the shipped ones.
fn push_deps<'a>(
    spec: &MsgSpec,
    given: &'a BTreeMap<String, Package>,
    shipped: &'a BTreeMap<String, Package>,
    todo: &mut Vec<&'a MsgSpec>,
) -> Result<(), GenError> {
    for field in &spec.fields {
        if let BaseType::Message { package, name } = &field.ty.base {
            let dep = given
                .get(package)
                .or_else(|| shipped.get(package))
                .and_then(|p| p.messages.iter().find(|m| &m.name == name))
                .ok_or_else(|| GenError::UnknownType {
                    file: spec.file.clone(),
                    line: field.line,
                    ty: field.ty.base.ros_name(),
                })?;
            todo.push(dep);
        }
    }
    Ok(())
}

/// The messages to generate: package → name → definition.
type Resolved = BTreeMap<String, BTreeMap<String, MsgSpec>>;

/// The services to generate: package → name → definition.
type Services = BTreeMap<String, BTreeMap<String, SrvSpec>>;

/// Writes generated code to `out_file` unless it already holds it (so cargo
/// does not rebuild what includes it), printing `cargo:rerun-if-changed` for
/// every input.
fn write_generated(out_file: &Path, code: &str, inputs: &[PathBuf]) -> Result<(), GenError> {
    for input in inputs {
        println!("cargo:rerun-if-changed={}", input.display());
    }
    if std::fs::read_to_string(out_file).ok().as_deref() != Some(code) {
        if let Some(parent) = out_file.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| GenError::Io { path: parent.to_path_buf(), source: e })?;
        }
        std::fs::write(out_file, code).map_err(|e| GenError::Io { path: out_file.to_path_buf(), source: e })?;
    }
    Ok(())
}
