//! `freight msg cpp` and `freight msg python`: the C++ and Python types of a
//! user's own `.msg` packages (`freight/msgs/<package>.hpp`, as the built-in
//! ones are made; a Python package `<package>` with `msg` and `srv` modules).

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// What `freight msg` does.
#[derive(Debug, Subcommand)]
pub enum MsgCommand {
    /// Generate C++ headers for message packages: OUT/freight/msgs/<package>.hpp for each.
    #[command(long_about = "\
Generate the C++ types of ROS 2 message packages (directories holding msg/*.msg and
srv/*.srv; each directory's name is the package's) for freight's C++ API: one header
OUT/freight/msgs/<package>.hpp per package, declaring freight::msgs::<package>::<Name>.
Messages of freight's built-in packages (std_msgs, sensor_msgs, ...) that the files use
come from freight's installed headers. Unbounded sequences of numbers become buffer
fields, as in the built-in types; each type carries its definition, which freight reads
when the C++ API makes the type's first endpoint.

Example: freight msg cpp --out build/generated src/my_msgs")]
    Cpp(GenArgs),
    /// Generate Python modules for message packages: OUT/<package>/msg.py and srv.py for each.
    #[command(long_about = "\
Generate the Python classes of ROS 2 message packages (directories holding msg/*.msg and
srv/*.srv; each directory's name is the package's) for freight's Python API: a package
OUT/<package>/ with msg.py and, if it has services, srv.py (and .pyi stubs of both, for
editors and type checkers). With OUT on sys.path (or
PYTHONPATH), `from my_msgs.msg import Scan` works as with rclpy. Each module carries its
types' definitions, which freight reads at import; fields of freight's built-in types
(std_msgs/Header, sensor_msgs/Image, ...) hold the built-in classes.

Example: freight msg python --out build/python src/my_msgs")]
    Python(GenArgs),
}

/// Arguments of `freight msg cpp` and `freight msg python`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// The directory the files go under (OUT/freight/msgs/<package>.hpp, OUT/<package>/msg.py).
    #[arg(long)]
    out: PathBuf,
    /// Package directories.
    #[arg(required = true)]
    packages: Vec<PathBuf>,
}

pub fn run(cmd: &MsgCommand) -> Result<(), String> {
    match cmd {
        MsgCommand::Cpp(args) => cpp(args),
        MsgCommand::Python(args) => python(args),
    }
}

fn python(args: &GenArgs) -> Result<(), String> {
    let builder = args.packages.iter().fold(freight_msg_gen::Builder::new(), |b, dir| b.package_dir(dir));
    for package in builder.python_packages().map_err(|e| e.to_string())? {
        for (relative, source) in &package.files {
            write_if_changed(&args.out.join(relative), source)?;
        }
    }
    Ok(())
}

/// Writes `source` to `path` (and prints the path) unless it holds it
/// already, so that a build does not redo what uses it.
fn write_if_changed(path: &std::path::Path, source: &str) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    if std::fs::read_to_string(path).ok().as_deref() != Some(source) {
        std::fs::write(path, source).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    println!("{}", path.display());
    Ok(())
}

fn cpp(args: &GenArgs) -> Result<(), String> {
    let builder = args.packages.iter().fold(freight_msg_gen::Builder::new(), |b, dir| b.package_dir(dir));
    let headers = builder.cpp_headers().map_err(|e| e.to_string())?;
    let wanted: Vec<String> = args
        .packages
        .iter()
        .map(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
        .collect();
    // The built-in packages the files use are generated too; their headers are installed already.
    for header in headers.iter().filter(|h| wanted.contains(&h.package)) {
        write_if_changed(&args.out.join(format!("freight/msgs/{}.hpp", header.package)), &header.source)?;
    }
    Ok(())
}
