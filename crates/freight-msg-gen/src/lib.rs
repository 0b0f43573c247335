//! Build-time code generation: ROS 2 `.msg` files → Rust message types built on
//! [`freight_msg::message!`](https://docs.rs/freight-msg).
//!
//! Use it from a `build.rs` with [`Builder`]; the output is one Rust file with a
//! `pub mod <package> { pub mod msg { ... } }` per package, to `include!`.
//!
//! # Type mapping
//!
//! | `.msg`                              | Rust                                   |
//! |-------------------------------------|----------------------------------------|
//! | `bool`                              | `bool`                                 |
//! | `byte`, `char`, `uint8`             | `u8`                                   |
//! | `int8` .. `int64`, `uint16` .. `uint64` | `i8` .. `i64`, `u16` .. `u64`      |
//! | `float32`, `float64`                | `f32`, `f64`                           |
//! | `string`, `string<=N`               | `String` (the bound is not checked)    |
//! | `Name`, `pkg/Name`, `Header`        | the generated struct                   |
//! | `T[N]`                              | `[T; N]` (N > 32: `FixedArray<T, N>`, see below) |
//! | `T[<=N]`                            | `Vec<T>` (the bound is not checked)    |
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
//! Constants become associated constants (`&'static str` for strings). Field
//! names that are Rust keywords become raw identifiers (`r#type`); `self`,
//! `super`, `crate` (which cannot be raw) get a trailing underscore (`self_`).
//!
//! Default values in `.msg` files (`float64 w 1`) are parsed and checked but **not
//! applied yet**: `Default` gives zeros, empty strings and empty sequences. They
//! are listed in the field's documentation.
//!
//! The Rust spelling of types follows the hand-written types of `freight_msg::msgs`
//! (`String`, `Vec<T>`, `Buffer<T>`, bare message names), so a generated type
//! has the same `Message::TYPE_HASH` as the built-in type with the same layout.
#![deny(missing_docs)]

pub mod parse;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub use parse::{
    parse_file, parse_str, ArrayKind, BaseType, Constant, DefaultValue, Field, FieldType, MsgSpec, ParseError,
    ParseErrorKind, Primitive, Value,
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
    /// A package directory without a `msg/` directory.
    #[error("{}: no `msg` directory in the package", path.display())]
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

/// The messages of one package.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// The package name (its directory's name).
    pub name: String,
    /// Its messages, sorted by name.
    pub messages: Vec<MsgSpec>,
}

/// Loads `<dir>/msg/*.msg`; the package name is the directory's name.
pub fn load_package(dir: &Path) -> Result<Package, GenError> {
    let name = dir
        .canonicalize()
        .map_err(|e| GenError::Io { path: dir.to_path_buf(), source: e })?
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let msg_dir = dir.join("msg");
    if !msg_dir.is_dir() {
        return Err(GenError::NoMsgDir { path: dir.to_path_buf() });
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&msg_dir).map_err(|e| GenError::Io { path: msg_dir.clone(), source: e })? {
        let path = entry.map_err(|e| GenError::Io { path: msg_dir.clone(), source: e })?.path();
        if path.extension().is_some_and(|e| e == "msg") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    let messages = files.iter().map(|f| parse_file(&name, f)).collect::<Result<Vec<_>, _>>()?;
    Ok(Package { name, messages })
}

/// The `interfaces/` directory of the `.msg` definitions freight ships
/// (`builtin_interfaces`, `std_msgs`, `sensor_msgs`, `geometry_msgs`).
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

    /// Adds a package directory (holding `msg/*.msg`; its name is the package name).
    pub fn package_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.packages.push(dir.as_ref().to_path_buf());
        self
    }

    /// Generates every message of a shipped package (e.g. `"sensor_msgs"`), not only
    /// the ones the given packages use.
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
        let out_file = out_file.as_ref();
        let (code, inputs) = self.run()?;
        for input in &inputs {
            println!("cargo:rerun-if-changed={}", input.display());
        }
        if std::fs::read_to_string(out_file).ok().as_deref() != Some(code.as_str()) {
            if let Some(parent) = out_file.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| GenError::Io { path: parent.to_path_buf(), source: e })?;
            }
            std::fs::write(out_file, code).map_err(|e| GenError::Io { path: out_file.to_path_buf(), source: e })?;
        }
        Ok(())
    }

    /// Generates the code as a string.
    pub fn generate_string(&self) -> Result<String, GenError> {
        Ok(self.run()?.0)
    }

    /// The code and the files and directories it was made from.
    fn run(&self) -> Result<(String, Vec<PathBuf>), GenError> {
        let mut inputs = Vec::new();
        let mut given: BTreeMap<String, Package> = BTreeMap::new();
        for dir in &self.packages {
            let pkg = load_package(dir)?;
            inputs.push(dir.join("msg"));
            inputs.extend(pkg.messages.iter().map(|m| m.file.clone()));
            given.insert(pkg.name.clone(), pkg);
        }
        let mut shipped: BTreeMap<String, Package> = BTreeMap::new();
        if self.use_shipped && self.interfaces_dir.is_dir() {
            let dir = &self.interfaces_dir;
            inputs.push(dir.clone());
            for entry in std::fs::read_dir(dir).map_err(|e| GenError::Io { path: dir.clone(), source: e })? {
                let path = entry.map_err(|e| GenError::Io { path: dir.clone(), source: e })?.path();
                if path.join("msg").is_dir() {
                    let pkg = load_package(&path)?;
                    shipped.insert(pkg.name.clone(), pkg);
                }
            }
        }
        let lookup = |package: &str, name: &str| -> Option<&MsgSpec> {
            let pkg = given.get(package).or_else(|| shipped.get(package))?;
            pkg.messages.iter().find(|m| m.name == name)
        };

        let mut todo: Vec<&MsgSpec> = given.values().flat_map(|p| &p.messages).collect();
        for name in &self.shipped {
            let pkg = given
                .get(name)
                .or_else(|| shipped.get(name))
                .ok_or_else(|| GenError::UnknownPackage { name: name.clone(), dir: self.interfaces_dir.clone() })?;
            todo.extend(&pkg.messages);
        }
        let mut emitted: BTreeMap<String, BTreeMap<String, &MsgSpec>> = BTreeMap::new();
        while let Some(spec) = todo.pop() {
            let slot = emitted.entry(spec.package.clone()).or_default();
            if slot.insert(spec.name.clone(), spec).is_some() {
                continue;
            }
            if !given.contains_key(&spec.package) {
                inputs.push(spec.file.clone());
            }
            for field in &spec.fields {
                if let BaseType::Message { package, name } = &field.ty.base {
                    let dep = lookup(package, name).ok_or_else(|| GenError::UnknownType {
                        file: spec.file.clone(),
                        line: field.line,
                        ty: field.ty.base.ros_name(),
                    })?;
                    todo.push(dep);
                }
            }
        }
        Ok((emit(&emitted), inputs))
    }
}

/// Names the generated code spells bare and that a message must not shadow.
const RESERVED: [&str; 3] = ["String", "Vec", "Buffer"];

/// How one message spells types. Each message is declared in a private module of
/// its own that imports exactly the names it uses, so that e.g. `std_msgs/String`
/// does not shadow `String` in `std_msgs/Header`.
struct Spelling<'a> {
    /// The message's own name.
    own: &'a str,
    /// Message types imported by name: name → package.
    imported: BTreeMap<&'a str, &'a str>,
}

impl<'a> Spelling<'a> {
    fn new(spec: &'a MsgSpec) -> Self {
        let mut used: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for f in &spec.fields {
            if let BaseType::Message { package, name } = &f.ty.base {
                used.entry(name.as_str()).or_default().insert(package.as_str());
            }
        }
        let own = spec.name.as_str();
        let imported = used
            .into_iter()
            .filter(|(name, pkgs)| pkgs.len() == 1 && *name != own && !RESERVED.contains(name))
            .map(|(name, pkgs)| (name, *pkgs.iter().next().expect("one package")))
            .collect();
        Spelling { own, imported }
    }

    fn std(&self, name: &str, full: &str) -> String {
        if self.own == name {
            full.to_string()
        } else {
            name.to_string()
        }
    }

    fn element(&self, base: &BaseType) -> String {
        match base {
            BaseType::Primitive(p) => p.rust_type().to_string(),
            BaseType::String { .. } => self.std("String", "::std::string::String"),
            BaseType::Message { package, name } => {
                if self.imported.get(name.as_str()) == Some(&package.as_str()) {
                    name.clone()
                } else {
                    format!("super::super::super::{package}::msg::{name}")
                }
            }
        }
    }

    fn field(&self, ty: &FieldType) -> String {
        let elem = self.element(&ty.base);
        let vec = || format!("{}<{elem}>", self.std("Vec", "::std::vec::Vec"));
        match ty.array {
            ArrayKind::Single => elem,
            ArrayKind::Fixed(n) if n <= 32 => format!("[{elem}; {n}]"),
            ArrayKind::Fixed(n) => format!("super::super::super::__freight_msg_gen::FixedArray<{elem}, {n}>"),
            ArrayKind::Bounded(_) => vec(),
            ArrayKind::Unbounded => match ty.base {
                BaseType::Primitive(p) if p.is_numeric() => {
                    format!("{}<{elem}>", self.std("Buffer", "::freight_msg::Buffer"))
                }
                _ => vec(),
            },
        }
    }
}

/// A field name as a Rust identifier.
pub fn rust_ident(name: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
        "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type",
        "unsafe", "use", "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final",
        "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
    ];
    match name {
        "self" | "super" | "crate" | "_" => format!("{name}_"),
        n if KEYWORDS.contains(&n) => format!("r#{n}"),
        n => n.to_string(),
    }
}

fn value_literal(v: &Value, ty: &BaseType) -> (String, String) {
    match (ty, v) {
        (BaseType::String { .. }, Value::String(s)) => ("&'static str".into(), format!("{s:?}")),
        (BaseType::Primitive(p), Value::Float(f)) => {
            let t = p.rust_type();
            let lit = if f.is_nan() {
                format!("{t}::NAN")
            } else if f.is_infinite() {
                format!("{t}::{}INFINITY", if *f < 0.0 { "NEG_" } else { "" })
            } else if *p == Primitive::Float32 {
                format!("{:?}", *f as f32)
            } else {
                format!("{f:?}")
            };
            (t.into(), lit)
        }
        (BaseType::Primitive(p), Value::Int(i)) => (p.rust_type().into(), i.to_string()),
        (BaseType::Primitive(p), Value::Bool(b)) => (p.rust_type().into(), b.to_string()),
        (_, v) => ("()".into(), format!("{v:?}")),
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::String(s) => format!("{s:?}"),
    }
}

fn doc_lines(out: &mut String, indent: &str, lines: &[String]) {
    for l in lines {
        let l = if l.is_empty() { String::new() } else { format!(" {l}") };
        let _ = writeln!(out, "{indent}#[doc = {l:?}]");
    }
}

const SUPPORT: &str = r#"/// Support types of the generated messages.
#[doc(hidden)]
pub mod __freight_msg_gen {
    /// A fixed-size array `T[N]` with N > 32, which `[T; N]` cannot be (no `Default`).
    #[derive(Clone, Debug, PartialEq)]
    pub struct FixedArray<T, const N: usize>(pub [T; N]);

    impl<T: Default, const N: usize> Default for FixedArray<T, N> {
        fn default() -> Self {
            FixedArray(::core::array::from_fn(|_| T::default()))
        }
    }

    impl<T, const N: usize> ::core::ops::Deref for FixedArray<T, N> {
        type Target = [T; N];
        fn deref(&self) -> &[T; N] {
            &self.0
        }
    }

    impl<T, const N: usize> ::core::ops::DerefMut for FixedArray<T, N> {
        fn deref_mut(&mut self) -> &mut [T; N] {
            &mut self.0
        }
    }

    impl<T, const N: usize> ::core::convert::From<[T; N]> for FixedArray<T, N> {
        fn from(a: [T; N]) -> Self {
            FixedArray(a)
        }
    }

    impl<T: ::freight_msg::CdrField + Default, const N: usize> ::freight_msg::CdrField for FixedArray<T, N> {
        const MIN_SIZE: usize = <[T; N] as ::freight_msg::CdrField>::MIN_SIZE;

        fn write(
            &self,
            w: &mut ::freight_msg::CdrWriter,
            bufs: &mut dyn ::freight_msg::BufferEncoder,
        ) -> ::core::result::Result<(), ::freight_msg::EncodeError> {
            ::freight_msg::CdrField::write(&self.0, w, bufs)
        }

        fn read(
            r: &mut ::freight_msg::CdrReader<'_>,
            bufs: &mut dyn ::freight_msg::BufferDecoder,
        ) -> ::core::result::Result<Self, ::freight_msg::DecodeError> {
            ::core::result::Result::Ok(FixedArray(<[T; N] as ::freight_msg::CdrField>::read(r, bufs)?))
        }

        fn visit_buffers<'a>(&'a self, f: &mut dyn FnMut(&'a ::freight_msg::RawBuffer)) {
            ::freight_msg::CdrField::visit_buffers(&self.0, f)
        }

        fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&mut ::freight_msg::RawBuffer)) {
            ::freight_msg::CdrField::visit_buffers_mut(&mut self.0, f)
        }
    }

    impl<T: ::freight_msg::YamlField, const N: usize> ::freight_msg::YamlField for FixedArray<T, N> {
        const IDL_NAME: &'static str = <[T; N] as ::freight_msg::YamlField>::IDL_NAME;

        fn write_yaml(&self, w: &mut ::freight_msg::YamlWriter<'_>) {
            ::freight_msg::YamlField::write_yaml(&self.0, w)
        }
    }
}
"#;

fn emit(packages: &BTreeMap<String, BTreeMap<String, &MsgSpec>>) -> String {
    let mut out = String::from("// @generated by freight-msg-gen from ROS 2 `.msg` files. Do not edit.\n\n");
    let needs_support = packages
        .values()
        .flat_map(|p| p.values())
        .flat_map(|m| &m.fields)
        .any(|f| matches!(f.ty.array, ArrayKind::Fixed(n) if n > 32));
    if needs_support {
        out.push_str(SUPPORT);
        out.push('\n');
    }
    for (package, messages) in packages {
        let _ = writeln!(out, "/// The ROS 2 package `{package}`.");
        let _ = writeln!(out, "pub mod {package} {{");
        let _ = writeln!(out, "    /// The messages of `{package}`.");
        let _ = writeln!(out, "    pub mod msg {{");
        for (name, spec) in messages {
            let sp = Spelling::new(spec);
            let module = format!("msg_{}", name.to_ascii_lowercase());
            let types: Vec<String> = spec.fields.iter().map(|f| sp.field(&f.ty)).collect();
            let _ = writeln!(out, "        #[allow(unused_imports)]\n        pub use self::{module}::{name};\n");
            let _ = writeln!(out, "        mod {module} {{");
            if types.iter().any(|t| t.starts_with("Buffer<")) {
                let _ = writeln!(out, "            use ::freight_msg::Buffer;");
            }
            for (n, p) in &sp.imported {
                let _ = writeln!(out, "            use super::super::super::{p}::msg::{n};");
            }
            let _ = writeln!(out, "            ::freight_msg::message! {{");
            let mut doc = spec.doc.clone();
            if !doc.is_empty() {
                doc.push(String::new());
            }
            let file = spec.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            doc.push(format!("`{}`, generated from `{file}`.", spec.type_name()));
            doc_lines(&mut out, "                ", &doc);
            let ros = spec.type_name();
            if spec.fields.is_empty() {
                let _ = writeln!(out, "                pub struct {name} = {ros:?} {{}}");
            } else {
                let _ = writeln!(out, "                pub struct {name} = {ros:?} {{");
                for (f, ty) in spec.fields.iter().zip(&types) {
                    let mut doc = f.doc.clone();
                    if !doc.is_empty() {
                        doc.push(String::new());
                    }
                    doc.push(format!("`.msg` type: `{}`.", f.ty.ros_name()));
                    if let Some(d) = &f.default {
                        let text = match d {
                            DefaultValue::Scalar(v) => value_text(v),
                            DefaultValue::Array(vs) => {
                                format!("[{}]", vs.iter().map(value_text).collect::<Vec<_>>().join(", "))
                            }
                        };
                        doc.push(format!("Default in the `.msg` file (not applied yet): `{text}`."));
                    }
                    doc_lines(&mut out, "                    ", &doc);
                    let _ = writeln!(out, "                    pub {}: {ty},", rust_ident(&f.name));
                }
                let _ = writeln!(out, "                }}");
            }
            let _ = writeln!(out, "            }}");
            if !spec.constants.is_empty() {
                let _ = writeln!(out, "            impl {name} {{");
                for c in &spec.constants {
                    let mut doc = c.doc.clone();
                    if doc.is_empty() {
                        doc.push(format!("`{}`", c.name));
                    }
                    doc_lines(&mut out, "                ", &doc);
                    let (ty, lit) = value_literal(&c.value, &c.ty);
                    let _ = writeln!(out, "                pub const {}: {ty} = {lit};", c.name);
                }
                let _ = writeln!(out, "            }}");
            }
            let _ = writeln!(out, "        }}\n");
        }
        let _ = writeln!(out, "    }}");
        let _ = writeln!(out, "}}\n");
    }
    out
}
