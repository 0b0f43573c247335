//! `freight bench pipeline`: the experiment of seed 002 (Verona, CPU–iGPU
//! pipelines under ROS 2) as one command.
//!
//! # Protocol
//!
//! * **Topology.** A scheduler node and workers: 2 nodes = scheduler + 1 CPU
//!   worker; 3 = + 1 GPU worker; 5 = + 2 CPU + 2 GPU workers. The matrix
//!   (`--rows` × `--cols` `f32`) is split by rows among the workers.
//! * **A run** is `--frames` frames from the same initial matrix: the
//!   scheduler sends the frame, each worker runs its kernel on its rows
//!   (`work::kernel`) and sends them back, the scheduler merges them into
//!   the next frame. Its time is the wall time of the frames.
//! * **Native.** The same kernels on the same rows with one thread per
//!   worker over two buffers swapped after each frame, no middleware
//!   (`work::native`). A row alternates native runs and pipeline runs
//!   (`--runs` each, after one warm-up of each), so both see the same
//!   machine; overhead = (mean − native mean) / native mean.
//! * **Check.** Every run's final matrix must equal the native program's bit
//!   for bit, or the row fails.
//! * **Paradigms, modes**: see `nodes`. `intra` runs the workers as threads
//!   of this process, `copy` and `shm` as processes.
//! * **GPU workers** run their kernels on CUDA device 0 when there is one
//!   (`--gpu`, `gpu.rs`): each copies its rows to the device and back (the
//!   paper's CUDA-SC) or, in `cuda-host` rows, works on them where they lie
//!   in mapped memory (CUDA-ZC); the native program's GPU threads do the
//!   same as the row's workers. Before the rows, one frame of each workload
//!   on the device is compared with a reference (the CPU's kernel, or
//!   float64). Without CUDA they run the same computation on a CPU thread
//!   (the "GPU stand-in"): the communication overhead is still what is
//!   measured. In `cuda` rows the frames are in device memory (the
//!   simulated device's with the stand-in, which tests the path without a
//!   GPU).
//!
//! The paper's overheads (Jetson TX2, CUDA-SC, its Tables 2 and 3) are shown
//! beside each row it has.

mod gpu;
mod nodes;
mod plot;
mod work;

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::report::{render_grid, write_json};
use super::sys::{print_stdout, quiet_iceoryx2_logs};
use super::{check_output_path, BenchError};
use nodes::Scheduler;
pub use nodes::{worker_main, WorkerSpec};
pub use work::Workload;
use work::{engines, initial, native, roles, Engine, Gpu, Memory, Role, Shape};

/// How the scheduler and the workers talk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Paradigm {
    /// One send topic for all workers, one result topic per worker.
    Topic,
    /// One service per worker.
    Service,
}

impl Paradigm {
    pub fn name(self) -> &'static str {
        match self {
            Paradigm::Topic => "topic",
            Paradigm::Service => "service",
        }
    }
}

/// How the data moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Every hop copies the data in and out (processes; the paper's ROS-SC).
    Copy,
    /// Threads of one process, freight's in-process zero copy (ROS-ZC).
    Intra,
    /// Processes sharing frames in shared memory (ROS-SHM-ZC).
    Shm,
    /// As `shm`, the frames page-locked and mapped for the GPU (freight's
    /// `cuda-host` backend): GPU workers' kernels read their rows and write
    /// their results where they lie (ROS-SHM-ZC with CUDA-ZC); service
    /// requests and replies are lent from mapped memory too. Needs CUDA.
    CudaHost,
    /// As `shm`, the frames in device memory (freight's `cuda` backend; the
    /// simulated `fake-device` with the GPU stand-in): GPU workers' kernels
    /// read their rows and write their results there; CPU workers and the
    /// scheduler receive host copies, which freight makes once per message.
    Cuda,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Copy => "copy",
            Mode::Intra => "intra",
            Mode::Shm => "shm",
            Mode::CudaHost => "cuda-host",
            Mode::Cuda => "cuda",
        }
    }

    /// Where the native program of this mode's rows keeps the matrix.
    fn memory(self) -> Memory {
        if self == Mode::CudaHost {
            Memory::Mapped
        } else {
            Memory::Pageable
        }
    }

    fn placement(self) -> &'static str {
        if self == Mode::Intra {
            "threads"
        } else {
            "processes"
        }
    }
}

/// Where the GPU workers' kernels run, as asked on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GpuChoice {
    /// CUDA device 0 when the driver reports one, else a CPU thread.
    Auto,
    /// CUDA device 0, or an error saying why not.
    Cuda,
    /// A CPU thread (the GPU stand-in).
    StandIn,
}

impl GpuChoice {
    fn resolve(self) -> Result<Gpu, BenchError> {
        if self == GpuChoice::StandIn {
            return Ok(Gpu::StandIn); // the driver is not even loaded
        }
        match (self, freight::backend::cuda::available()) {
            (_, Ok(())) => Ok(Gpu::Cuda),
            (GpuChoice::Auto, Err(why)) => {
                eprintln!("no CUDA ({why}): the GPU workers run their kernels on CPU threads (gpu-stand-in)");
                Ok(Gpu::StandIn)
            }
            (_, Err(why)) => {
                Err(BenchError::new(format!("--gpu cuda: {why}"), "use --gpu stand-in to run without a GPU"))
            }
        }
    }
}

/// `freight bench pipeline`.
#[derive(Debug, clap::Args)]
pub struct PipelineArgs {
    /// Node counts: 2 (scheduler + 1 CPU worker), 3 (+ 1 GPU worker), 5 (+ 2 CPU and 2 GPU workers).
    #[arg(long, value_delimiter = ',', default_value = "2,3,5")]
    pub nodes: Vec<usize>,
    /// Paradigms.
    #[arg(long, value_delimiter = ',', default_value = "topic,service")]
    pub paradigms: Vec<Paradigm>,
    /// How the data moves [default: copy,intra,shm, and cuda-host,cuda with CUDA].
    #[arg(long, value_delimiter = ',')]
    pub modes: Option<Vec<Mode>>,
    /// The paper's workloads.
    #[arg(long, value_delimiter = ',', default_value = "cache,concurrent")]
    pub workloads: Vec<Workload>,
    /// Measured runs per row, and native runs beside them (the paper: 30).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Frames per run.
    #[arg(long, default_value_t = 8)]
    pub frames: usize,
    /// Matrix rows.
    #[arg(long, default_value_t = 512)]
    pub rows: usize,
    /// Matrix columns.
    #[arg(long, default_value_t = 1024)]
    pub cols: usize,
    /// Where the GPU workers' kernels run: CUDA device 0, or the same
    /// computation on a CPU thread.
    #[arg(long, value_enum, default_value = "auto")]
    pub gpu: GpuChoice,
    /// Also write every row as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw each row's run time over the native program's, beside the
    /// paper's, as a PNG.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
}

/// The hidden `freight bench pipeline-worker`: one worker process.
#[derive(Debug, clap::Args)]
pub struct PipelineWorkerArgs {
    #[arg(long)]
    pub prefix: String,
    #[arg(long)]
    pub index: usize,
    #[arg(long, value_parser = ["cpu", "gpu"])]
    pub role: String,
    #[arg(long)]
    pub workload: Workload,
    #[arg(long)]
    pub paradigm: Paradigm,
    #[arg(long)]
    pub mode: Mode,
    #[arg(long)]
    pub rows: usize,
    #[arg(long)]
    pub cols: usize,
    #[arg(long)]
    pub workers: usize,
    #[arg(long)]
    pub gpu: Gpu,
}

/// One row of the table, as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineRow {
    pub nodes: usize,
    pub paradigm: Paradigm,
    pub mode: Mode,
    pub placement: &'static str,
    pub workload: Workload,
    /// "1 cpu + 1 gpu" (CUDA), "1 cpu + 1 gpu-stand-in" and the like.
    pub workers: String,
    /// The CUDA device the GPU workers ran on; `None` for the stand-in.
    pub gpu_device: Option<String>,
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub native_mean_ms: f64,
    pub native_sd_ms: f64,
    pub overhead_pct: f64,
    /// The paper's overhead for this row (Jetson TX2, CUDA-SC), where it has one.
    pub paper_overhead_pct: Option<f64>,
    pub runs: usize,
    pub frames: usize,
    pub rows: usize,
    pub cols: usize,
}

/// CPU and GPU workers of a node count.
fn topology(nodes: usize) -> Result<(usize, usize), BenchError> {
    match nodes {
        2 => Ok((1, 0)),
        3 => Ok((1, 1)),
        5 => Ok((2, 2)),
        n => Err(BenchError::new(format!("--nodes {n} is not one of the paper's topologies"), "use 2, 3 or 5")),
    }
}

/// The paper's overhead in percent (Jetson TX2: Tables 2 and 3 for CUDA-SC;
/// for CUDA-ZC, `cuda-host`, the three its text gives).
fn paper_overhead(nodes: usize, paradigm: Paradigm, mode: Mode, workload: Workload) -> Option<f64> {
    use Mode::{Copy, CudaHost, Intra, Shm};
    use Paradigm::{Service, Topic};
    let cache = workload == Workload::Cache;
    let pick = |c: f64, k: f64| Some(if cache { c } else { k });
    match (nodes, paradigm, mode) {
        (2, Topic, Copy) => pick(2640.0, 343.0),
        (2, Service, Copy) => pick(2627.0, 368.0),
        (2, Topic, Intra) => pick(27.0, 50.0),
        (2, Topic, Shm) => pick(2.0, -1.0),
        (3, Topic, Copy) => pick(660.0, 683.0),
        (3, Service, Copy) => pick(711.0, 708.0),
        (3, Topic, Intra) => pick(31.0, 115.0),
        (3, Topic, Shm) => pick(4.0, -5.0),
        (5, Topic, Copy) => pick(1369.0, 3867.0),
        (5, Topic, Shm) => pick(109.0, 131.0),
        (2, Topic, CudaHost) => pick(11.0, -9.0),
        (3, Topic, CudaHost) if !cache => Some(-11.0),
        _ => None,
    }
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = if xs.len() > 1 { xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (mean, var.sqrt())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn dedup<T: PartialEq + Copy>(xs: &[T]) -> Vec<T> {
    let mut out = Vec::new();
    for &x in xs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Runs every requested row, prints the table, writes the JSON.
pub fn run(args: &PipelineArgs) -> Result<Vec<PipelineRow>, BenchError> {
    quiet_iceoryx2_logs();
    if let Some(path) = &args.json {
        check_output_path(path, "--json")?;
    }
    if let Some(path) = &args.plot {
        check_output_path(path, "--plot")?;
        super::plot::check_font()?;
    }
    if args.runs == 0 || args.frames == 0 || args.rows == 0 || args.cols == 0 {
        return Err(BenchError::new("--runs, --frames, --rows and --cols must be at least 1", "raise them"));
    }
    let gpu = args.gpu.resolve()?;
    let gpu_device = match gpu {
        Gpu::Cuda => Some(check_cuda(args)?),
        Gpu::StandIn => None,
    };
    let modes = match &args.modes {
        Some(modes) => dedup(modes),
        None if gpu == Gpu::Cuda => vec![Mode::Copy, Mode::Intra, Mode::Shm, Mode::CudaHost, Mode::Cuda],
        None => vec![Mode::Copy, Mode::Intra, Mode::Shm],
    };
    if modes.contains(&Mode::CudaHost) && gpu != Gpu::Cuda {
        return Err(BenchError::new("--modes cuda-host needs CUDA", "leave cuda-host out on a machine without a GPU"));
    }
    let mut rows = Vec::new();
    for nodes in dedup(&args.nodes) {
        let (cpu_workers, gpu_workers) = topology(nodes)?;
        let roles = roles(cpu_workers, gpu_workers);
        let shape = Shape { rows: args.rows, cols: args.cols, workers: roles.len() };
        if shape.rows < shape.workers {
            return Err(BenchError::new(
                format!("--rows {} is fewer than the {} workers", shape.rows, shape.workers),
                "raise --rows",
            ));
        }
        let workers = match (gpu_workers, gpu) {
            (0, _) => format!("{cpu_workers} cpu"),
            (n, Gpu::Cuda) => format!("{cpu_workers} cpu + {n} gpu"),
            (n, Gpu::StandIn) => format!("{cpu_workers} cpu + {n} gpu-stand-in"),
        };
        // The native program's workers, kept across its runs (a GPU worker's
        // kernels are compiled once, as a worker node's are).
        let mut natives = engines(&roles, gpu)?;
        for workload in dedup(&args.workloads) {
            let (_, reference) = native(workload, shape, &mut natives, args.frames, Memory::Pageable)?;
            for paradigm in dedup(&args.paradigms) {
                for &mode in &modes {
                    let label = format!("{nodes} nodes, {} {}, {}", paradigm.name(), mode.name(), workload.name());
                    eprint!("{label} ... ");
                    let spec = WorkerSpec {
                        prefix: String::new(),
                        index: 0,
                        role: Role::Cpu,
                        workload,
                        paradigm,
                        mode,
                        shape,
                        gpu,
                    };
                    let row =
                        measure(args, nodes, &roles, spec, &mut natives, &reference).map_err(|e| e.context(&label))?;
                    eprintln!(
                        "{:.1} ms, native {:.1} ms, overhead {:+.1} %",
                        row.mean_ms, row.native_mean_ms, row.overhead_pct
                    );
                    rows.push(PipelineRow { workers: workers.clone(), gpu_device: gpu_device.clone(), ..row });
                }
            }
        }
    }
    print_stdout(&render(&rows));
    if let Some(path) = &args.json {
        write_json(path, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.plot {
        plot::write_plot(path, &rows)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(rows)
}

/// Checks the CUDA kernels on the initial matrix, one frame of each
/// workload (`CudaKernels::check`); the device's name.
fn check_cuda(args: &PipelineArgs) -> Result<String, BenchError> {
    let mut kernels = gpu::CudaKernels::open()?;
    let name = kernels.device_name()?;
    let matrix = initial(Shape { rows: args.rows, cols: args.cols, workers: 1 });
    for workload in dedup(&args.workloads) {
        let error = kernels.check(workload, args.cols, &matrix)?;
        eprintln!("GPU workers on {name}: the {} kernel is within {error:.1e} of its reference", workload.name());
    }
    Ok(name)
}

/// One row: `spec` names its coordinates (the prefix and worker fields are
/// filled in here and by the scheduler); `natives` run the native program.
fn measure(
    args: &PipelineArgs,
    nodes: usize,
    roles: &[Role],
    spec: WorkerSpec,
    natives: &mut [Engine],
    reference: &[f32],
) -> Result<PipelineRow, BenchError> {
    let (workload, paradigm, mode, shape) = (spec.workload, spec.paradigm, spec.mode, spec.shape);
    let prefix = format!("/freight_pipeline_{}_{}", std::process::id(), unique());
    let scheduler = Scheduler::start(WorkerSpec { prefix, ..spec }, roles.to_vec())?;
    let (mut times, mut native_times) = (Vec::new(), Vec::new());
    // One warm-up run of each (page faults, first connections), then
    // alternating measured runs.
    for i in 0..=args.runs {
        let (t, result) = scheduler.run(args.frames)?;
        if result != reference {
            let first = result.iter().zip(reference).position(|(a, b)| a.to_bits() != b.to_bits()).unwrap_or(0);
            return Err(BenchError::new(
                format!("the final matrix differs from the native program's (first at element {first})"),
                "this is a bug in freight: please report it with the command line",
            ));
        }
        let (n, _) = native(workload, shape, natives, args.frames, mode.memory())?;
        if i > 0 {
            times.push(ms(t));
            native_times.push(ms(n));
        }
    }
    scheduler.finish()?;
    let (mean_ms, sd_ms) = mean_sd(&times);
    let (native_mean_ms, native_sd_ms) = mean_sd(&native_times);
    Ok(PipelineRow {
        nodes,
        paradigm,
        mode,
        placement: mode.placement(),
        workload,
        workers: String::new(),
        gpu_device: None,
        mean_ms,
        sd_ms,
        native_mean_ms,
        native_sd_ms,
        overhead_pct: (mean_ms - native_mean_ms) / native_mean_ms * 100.0,
        paper_overhead_pct: paper_overhead(nodes, paradigm, mode, workload),
        runs: args.runs,
        frames: args.frames,
        rows: shape.rows,
        cols: shape.cols,
    })
}

/// A number unique in this process, for topic names.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn render(rows: &[PipelineRow]) -> String {
    let header = [
        "nodes",
        "workers",
        "paradigm",
        "mode",
        "placement",
        "workload",
        "mean ms",
        "sd ms",
        "native ms",
        "overhead",
        "paper (TX2)",
    ];
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.nodes.to_string(),
                r.workers.clone(),
                r.paradigm.name().into(),
                r.mode.name().into(),
                r.placement.into(),
                r.workload.name().into(),
                format!("{:.1}", r.mean_ms),
                format!("{:.1}", r.sd_ms),
                format!("{:.1}", r.native_mean_ms),
                format!("{:+.1} %", r.overhead_pct),
                r.paper_overhead_pct.map_or_else(|| "-".into(), |p| format!("{p:+.0} %")),
            ]
        })
        .collect();
    let mut out = render_grid(
        &header,
        &body,
        6,
        Some("freight bench pipeline: run time and overhead against the native program"),
    );
    match rows.iter().find_map(|r| r.gpu_device.as_deref()) {
        Some(device) => out.push_str(&format!(
            "gpu: kernels on {device}; each GPU worker copies its rows to the device and back (CUDA-SC), but in \
             cuda-host and cuda rows works on them where they lie, in mapped host memory (CUDA-ZC) or device memory; \
             the native program's GPU threads copy, or work in mapped memory in cuda-host rows. "
        )),
        None => out.push_str(
            "gpu-stand-in: the GPU worker's kernel on a CPU thread (in cuda rows, on the simulated device's memory \
             through host copies). ",
        ),
    }
    out.push_str(
        "paper: Jetson TX2, Tables 2 and 3 (CUDA-SC), its text for CUDA-ZC (cuda-host); copy = ROS-SC, \
         intra = ROS-ZC, shm and cuda-host = ROS-SHM-ZC.\n",
    );
    out
}

/// `freight bench pipeline-worker`.
pub fn run_worker(args: &PipelineWorkerArgs) -> Result<(), BenchError> {
    quiet_iceoryx2_logs();
    let role = if args.role == "gpu" { Role::Gpu } else { Role::Cpu };
    let shape = Shape { rows: args.rows, cols: args.cols, workers: args.workers };
    if args.index >= shape.workers {
        return Err(BenchError::new(format!("worker {} of {}", args.index, shape.workers), "internal command"));
    }
    let spec = WorkerSpec {
        prefix: args.prefix.clone(),
        index: args.index,
        role,
        workload: args.workload,
        paradigm: args.paradigm,
        mode: args.mode,
        shape,
        gpu: args.gpu,
    };
    worker_main(&spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_papers_rows_are_where_the_paper_has_them() {
        assert_eq!(paper_overhead(2, Paradigm::Topic, Mode::Shm, Workload::Cache), Some(2.0));
        assert_eq!(paper_overhead(5, Paradigm::Topic, Mode::Shm, Workload::Cache), Some(109.0));
        assert_eq!(paper_overhead(5, Paradigm::Topic, Mode::Intra, Workload::Cache), None);
        assert_eq!(paper_overhead(3, Paradigm::Service, Mode::Copy, Workload::Concurrent), Some(708.0));
    }

    #[test]
    fn only_the_papers_topologies() {
        assert_eq!(topology(5).unwrap(), (2, 2));
        assert!(topology(4).unwrap_err().what().contains("--nodes 4"));
    }

    #[test]
    fn mean_and_sample_sd() {
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((sd - 1.0).abs() < 1e-12);
        assert_eq!(mean_sd(&[5.0]).1, 0.0);
    }
}
