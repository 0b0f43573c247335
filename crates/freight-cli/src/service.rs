//! `freight service`: `list`, `type` and `call`, as `ros2 service` does: this
//! host's shared-memory plane and, over DDS, every other ROS 2 service of the
//! domain.

use std::time::{Duration, Instant};

use clap::Subcommand;
use freight::{Context, Message, ServiceType};
use freight_msg::{FieldValue, YamlField, YamlOptions};

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
    /// Call a service with a request written as YAML, as `ros2 service call` does.
    #[command(long_about = CALL_ABOUT)]
    Call {
        /// The service.
        service: String,
        /// The service type: one of the built-in services (std_srvs/srv/SetBool; pkg/Type works too).
        service_type: String,
        /// The request's fields as YAML, "{data: true}"; fields not named keep their defaults.
        #[arg(default_value = "{}")]
        values: String,
        /// Call this many times a second until Ctrl-C; without it, once.
        #[arg(short = 'r', long, value_name = "HZ")]
        rate: Option<f64>,
        /// Seconds to wait for a server (this host's, or one DDS discovers), and then for each reply.
        #[arg(long, default_value_t = 10.0, value_name = "SECS")]
        timeout: f64,
        /// ROS domain id (default: ROS_DOMAIN_ID, else 0).
        #[arg(long, value_name = "ID")]
        domain: Option<u32>,
    },
}

const CALL_ABOUT: &str = "\
Call a service with a request written as YAML, as `ros2 service call` does, and print the
request and each response as YAML documents (`---` after each), with a comment line before
them:

  # request to /set_light (std_srvs/srv/SetBool)
  data: true
  ---
  # response in 1.3 ms
  success: true
  message: ''
  ---

A server anywhere in the domain answers: freight's, or a stock ROS 2 node's on
rmw_cyclonedds_cpp. The status is 1 when no server comes within --timeout, a reply does
not, or the values do not fit the request (the error names the field).";

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
        ServiceCommand::Call { service, service_type, values, rate, timeout, domain } => {
            let request = crate::values::parse(&values)?;
            let plan = Calls { rate: rate_period(rate)?, timeout: Duration::from_secs_f64(timeout.max(0.0)), domain };
            call(&service, &service_type, &request, &plan)
        }
    }
}

/// How `service call` calls.
struct Calls {
    /// Between two calls; none: call once.
    rate: Option<Duration>,
    timeout: Duration,
    domain: Option<u32>,
}

fn rate_period(rate: Option<f64>) -> Result<Option<Duration>, String> {
    match rate {
        None => Ok(None),
        Some(hz) if hz.is_finite() && hz > 0.0 => Ok(Some(Duration::from_secs_f64(1.0 / hz))),
        Some(hz) => Err(format!("--rate {hz}: give calls per second, a positive number")),
    }
}

/// Calls `service` with the built-in service type named `type_name`.
fn call(service: &str, type_name: &str, request: &FieldValue, plan: &Calls) -> Result<(), String> {
    let wanted = full_service_name(type_name);
    macro_rules! dispatch {
        ($($t:ty),* $(,)?) => {
            match wanted.as_str() {
                $(name if name == <$t as ServiceType>::TYPE_NAME => call_as::<$t>(service, request, plan),)*
                _ => Err(format!(
                    "{type_name} is not a service type this tool knows; it knows the built-in ones: {}",
                    [$(<$t as ServiceType>::TYPE_NAME),*].join(", ")
                )),
            }
        };
    }
    // Every built-in service type, generated by `build.rs`.
    include!(concat!(env!("OUT_DIR"), "/built_in_services.rs"))
}

/// `pkg/Type` as `pkg/srv/Type`, as `ros2` accepts it.
fn full_service_name(name: &str) -> String {
    match name.split('/').collect::<Vec<_>>().as_slice() {
        [package, ty] => format!("{package}/srv/{ty}"),
        _ => name.to_owned(),
    }
}

fn call_as<S: ServiceType>(service: &str, values: &FieldValue, plan: &Calls) -> Result<(), String> {
    let mut request = S::Request::default();
    request.set_from(values).map_err(|e| format!("the request ({}): {e}", S::Request::TYPE_NAME))?;
    let ctx = match plan.domain {
        Some(d) => Context::builder().domain_id(d).create(),
        None => Context::new(),
    }
    .map_err(|e| e.to_string())?;
    let node = ctx.create_node(&format!("freight_service_{}", std::process::id())).map_err(|e| e.to_string())?;
    let client = node.create_client::<S>(service).map_err(|e| e.to_string())?;
    let name = client.service_name().to_owned();
    if !client.service_is_ready() {
        eprintln!("waiting for service {name} to become available...");
        if !client.wait_for_service(plan.timeout) {
            return Err(format!(
                "no server of {name} within {:?}; `freight service list` shows the services there are",
                plan.timeout
            ));
        }
    }
    crate::stop::install();
    let yaml = YamlOptions::default();
    loop {
        let started = Instant::now();
        println!("# request to {} ({})", shown(&name), S::TYPE_NAME);
        println!("{}---", request.to_yaml(&yaml));
        let reply = client.call(request.clone(), plan.timeout).map_err(|e| e.to_string())?;
        println!("# response in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
        println!("{}---", reply.to_yaml(&yaml));
        let Some(period) = plan.rate else { return Ok(()) };
        if !crate::stop::sleep(period.saturating_sub(started.elapsed())) {
            return Ok(());
        }
    }
}
