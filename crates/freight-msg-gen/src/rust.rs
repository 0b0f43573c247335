//! The Rust back end: one `message!` declaration per message, in a private
//! module per message under `pub mod <package> { pub mod msg { ... } }`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::parse::{ArrayKind, BaseType, DefaultValue, FieldType, Interface, MsgSpec, Primitive, Value};
use super::{Resolved, Services};

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

/// The `Message::DEFINITION` of the Rust type generated from `spec`: what
/// `freight_msg::message!` makes of its name and fields, each type spelled
/// as the generated code spells it (and as `stringify!` prints it). Its
/// FNV-1a hash is the type's `Message::TYPE_HASH`, which endpoints match on,
/// so a type described at run time from the same `.msg` file (a C++ type's)
/// meets the Rust one.
///
/// ```
/// let spec = freight_msg_gen::parse_str("my_msgs", "Scan", "uint32 id\nfloat32[] ranges\n", "Scan.msg".as_ref()).unwrap();
/// assert_eq!(freight_msg_gen::rust_definition(&spec), "my_msgs/msg/Scan{id:u32;ranges:Buffer<f32>;}");
/// ```
pub fn rust_definition(spec: &MsgSpec) -> String {
    let ros = spec.type_name();
    if spec.fields.is_empty() {
        return format!("{ros}{{structure_needs_at_least_one_member:u8;}}");
    }
    let sp = Spelling::new(spec);
    let fields: String = spec.fields.iter().map(|f| format!("{}:{};", rust_ident(&f.name), sp.field(&f.ty))).collect();
    format!("{ros}{{{fields}}}")
}

/// The `where (...)` of a field with `.msg` bounds, which `message!` checks
/// on encode; empty for a field without.
fn bounds_clause(ty: &FieldType) -> String {
    let mut checks = Vec::new();
    if let ArrayKind::Bounded(n) = ty.array {
        checks.push(format!("sequence({n})"));
    }
    if let BaseType::String { bound: Some(n) } = ty.base {
        checks.push(match ty.array {
            ArrayKind::Single => format!("string({n})"),
            _ => format!("strings({n})"),
        });
    }
    if checks.is_empty() {
        return String::new();
    }
    format!(" where ({})", checks.join(", "))
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

pub(crate) fn value_literal(v: &Value, ty: &BaseType) -> (String, String) {
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

pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::String(s) => format!("{s:?}"),
    }
}

pub(crate) fn doc_lines(out: &mut String, indent: &str, lines: &[String]) {
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

    impl<T, const N: usize> ::freight_msg::bounds::Items<T> for FixedArray<T, N> {
        fn items(&self) -> &[T] {
            &self.0
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

        fn set_from(&mut self, value: &::freight_msg::FieldValue) -> ::core::result::Result<(), ::freight_msg::FieldError> {
            ::freight_msg::YamlField::set_from(&mut self.0, value)
        }
    }
}
"#;

pub(crate) fn emit(packages: &Resolved, services: &Services) -> String {
    let mut out = String::from("// @generated by freight-msg-gen from ROS 2 `.msg` and `.srv` files. Do not edit.\n\n");
    let halves = services.values().flat_map(|p| p.values()).flat_map(|s| [&s.request, &s.response]);
    let needs_support = packages
        .values()
        .flat_map(|p| p.values())
        .chain(halves)
        .flat_map(|m| &m.fields)
        .any(|f| matches!(f.ty.array, ArrayKind::Fixed(n) if n > 32));
    if needs_support {
        out.push_str(SUPPORT);
        out.push('\n');
    }
    let names: BTreeSet<&String> = packages.keys().chain(services.keys()).collect();
    for package in names {
        let _ = writeln!(out, "/// The ROS 2 package `{package}`.");
        let _ = writeln!(out, "pub mod {package} {{");
        if let Some(messages) = packages.get(package) {
            let _ = writeln!(out, "    /// The messages of `{package}`.");
            let _ = writeln!(out, "    pub mod msg {{");
            for (name, spec) in messages {
                emit_message(&mut out, name, spec);
            }
            let _ = writeln!(out, "    }}");
        }
        if let Some(services) = services.get(package) {
            let _ = writeln!(out, "    /// The services of `{package}`.");
            let _ = writeln!(out, "    pub mod srv {{");
            for (name, srv) in services {
                emit_message(&mut out, &srv.request.name, &srv.request);
                emit_message(&mut out, &srv.response.name, &srv.response);
                let mut doc = srv.request.doc.clone();
                if !doc.is_empty() {
                    doc.push(String::new());
                }
                let file = srv.request.file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                doc.push(format!("`{}`, generated from `{file}`.", srv.type_name()));
                doc_lines(&mut out, "        ", &doc);
                let _ = writeln!(out, "        pub struct {name};\n");
                let _ = writeln!(out, "        impl ::freight_msg::ServiceType for {name} {{");
                let _ = writeln!(out, "            const TYPE_NAME: &'static str = {:?};", srv.type_name());
                let _ = writeln!(out, "            type Request = {};", srv.request.name);
                let _ = writeln!(out, "            type Response = {};", srv.response.name);
                let _ = writeln!(out, "        }}\n");
            }
            let _ = writeln!(out, "    }}");
        }
        let _ = writeln!(out, "}}\n");
    }
    out
}

/// One `message!` declaration, in a private module of its own, re-exported
/// under its name.
fn emit_message(out: &mut String, name: &str, spec: &MsgSpec) {
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
    doc_lines(out, "                ", &doc);
    if spec.interface == Interface::Srv {
        // `SetBool_Request`: ROS 2's name, as rclrs spells it too.
        let _ = writeln!(out, "                #[allow(non_camel_case_types)]");
    }
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
            let default = f.default.as_ref().map(|d| {
                let text = match d {
                    DefaultValue::Scalar(v) => value_text(v),
                    DefaultValue::Array(vs) => {
                        format!("[{}]", vs.iter().map(value_text).collect::<Vec<_>>().join(", "))
                    }
                };
                doc.push(format!("Default (from the `.msg` file): `{text}`."));
                format!(" = {}", default_expr(&f.ty, d))
            });
            doc_lines(out, "                    ", &doc);
            let default = default.unwrap_or_default();
            let bounds = bounds_clause(&f.ty);
            let _ = writeln!(out, "                    pub {}: {ty}{bounds}{default},", rust_ident(&f.name));
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
            doc_lines(out, "                ", &doc);
            let (ty, lit) = value_literal(&c.value, &c.ty);
            let _ = writeln!(out, "                pub const {}: {ty} = {lit};", c.name);
        }
        let _ = writeln!(out, "            }}");
    }
    let _ = writeln!(out, "        }}\n");
}

/// `macro_name! { ::freight::msgs::<package>::<Name>, ... }` for every message.
pub(crate) fn emit_type_list(packages: &Resolved, macro_name: &str) -> String {
    let names = packages.iter().flat_map(|(package, messages)| messages.keys().map(move |name| (package, name)));
    emit_list("`.msg`", names, macro_name)
}

pub(crate) fn emit_service_list(services: &Services, macro_name: &str) -> String {
    let names = services.iter().flat_map(|(package, services)| services.keys().map(move |name| (package, name)));
    emit_list("`.srv`", names, macro_name)
}

fn emit_list<'a>(files: &str, names: impl Iterator<Item = (&'a String, &'a String)>, macro_name: &str) -> String {
    let mut out =
        format!("// @generated by freight-msg-gen from ROS 2 {files} files. Do not edit.\n\n{macro_name}! {{\n");
    for (package, name) in names {
        let _ = writeln!(out, "    ::freight::msgs::{package}::{name},");
    }
    out.push_str("}\n");
    out
}

/// The Rust expression of a field's `.msg` default, for `message!`'s
/// `field: Type = expr` (the field's type infers the literals' types).
fn default_expr(ty: &FieldType, default: &DefaultValue) -> String {
    let one = |v: &Value| match (&ty.base, v) {
        (BaseType::String { .. }, Value::String(s)) => format!("::std::string::String::from({s:?})"),
        (BaseType::Primitive(Primitive::Float32 | Primitive::Float64), Value::Int(i)) => format!("{i}.0"),
        (base, v) => value_literal(v, base).1,
    };
    match default {
        DefaultValue::Scalar(v) => one(v),
        DefaultValue::Array(vs) => {
            let items = vs.iter().map(one).collect::<Vec<_>>().join(", ");
            match (ty.array, &ty.base) {
                (ArrayKind::Fixed(n), _) if n <= 32 => format!("[{items}]"),
                (ArrayKind::Fixed(_), _) => format!("::core::convert::From::from([{items}])"),
                (ArrayKind::Unbounded, BaseType::Primitive(p)) if p.is_numeric() => {
                    format!("::freight_msg::Buffer::from(::std::vec![{items}])")
                }
                _ => format!("::std::vec![{items}]"),
            }
        }
    }
}
