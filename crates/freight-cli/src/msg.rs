//! `freight msg cpp`: the C++ types of a user's own `.msg` packages, for the
//! C++ API (`freight/msgs/<package>.hpp`, as the built-in ones are made).

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
    Cpp(CppArgs),
}

/// Arguments of `freight msg cpp`.
#[derive(Debug, Args)]
pub struct CppArgs {
    /// The directory the headers go under (as OUT/freight/msgs/<package>.hpp).
    #[arg(long)]
    out: PathBuf,
    /// Package directories.
    #[arg(required = true)]
    packages: Vec<PathBuf>,
}

pub fn run(cmd: &MsgCommand) -> Result<(), String> {
    match cmd {
        MsgCommand::Cpp(args) => cpp(args),
    }
}

fn cpp(args: &CppArgs) -> Result<(), String> {
    let builder = args.packages.iter().fold(freight_msg_gen::Builder::new(), |b, dir| b.package_dir(dir));
    let headers = builder.cpp_headers().map_err(|e| e.to_string())?;
    let wanted: Vec<String> = args
        .packages
        .iter()
        .map(|dir| dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
        .collect();
    let dir = args.out.join("freight/msgs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The built-in packages the files use are generated too; their headers are installed already.
    for header in headers.iter().filter(|h| wanted.contains(&h.package)) {
        let path = dir.join(format!("{}.hpp", header.package));
        // Rewritten only when it changed, so that a build does not recompile what uses it.
        if std::fs::read_to_string(&path).ok().as_deref() != Some(header.source.as_str()) {
            std::fs::write(&path, &header.source).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        println!("{}", path.display());
    }
    Ok(())
}
