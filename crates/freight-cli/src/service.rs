//! `freight service`: `list` and `type`, as `ros2 service` does: this host's
//! shared-memory plane and, over DDS, every other ROS 2 service of the domain.

use clap::Subcommand;

use crate::topic::{inspector, shown, DomainArg};

/// `freight service ...`
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// List the services of the domain.
    List {
        /// Show each service's type.
        #[arg(short = 't', long)]
        show_types: bool,
        #[command(flatten)]
        domain: DomainArg,
    },
    /// Print a service's type.
    Type {
        /// The service.
        service: String,
        #[command(flatten)]
        domain: DomainArg,
    },
}

pub fn run(cmd: ServiceCommand) -> Result<(), String> {
    match cmd {
        ServiceCommand::List { show_types, domain } => {
            for s in inspector(&domain)?.service_names_and_types().map_err(|e| e.to_string())? {
                if show_types {
                    println!("{} [{}]", shown(&s.name), shown(&s.type_name));
                } else {
                    println!("{}", shown(&s.name));
                }
            }
            Ok(())
        }
        ServiceCommand::Type { service, domain } => {
            let node = inspector(&domain)?;
            let name = node.resolve_topic_name(&service).map_err(|e| e.to_string())?;
            let services = node.service_names_and_types().map_err(|e| e.to_string())?;
            let types: Vec<_> = services.iter().filter(|s| s.name == name).collect();
            if types.is_empty() {
                return Err(format!(
                    "no service {name} in this domain; `freight service list` shows the services there are"
                ));
            }
            for s in types {
                println!("{}", shown(&s.type_name));
            }
            Ok(())
        }
    }
}
