//! The pipeline over freight: a scheduler node and worker nodes, talking by
//! topics or by services, as threads of this process or as processes.
//!
//! * **topic**: the scheduler publishes each frame of the matrix on one send
//!   topic that every worker subscribes to; each worker publishes its rows'
//!   next state on a result topic of its own.
//! * **service**: each worker serves a service; for each frame the scheduler
//!   calls every worker with the worker's rows and waits for all replies.
//!
//! How the data moves (`Mode`):
//! * **copy**: every hop copies: the sender copies its data into the message
//!   (`publish_copy`), the receiver copies it out before using it — what a
//!   serializing middleware does (the paper's ROS-SC);
//! * **intra** (threads) and **shm** (processes): the scheduler writes the
//!   merged frame into a loan, workers read it where it lies and write their
//!   rows into loans of their own: nothing else is copied. In the service
//!   paradigm the scheduler writes each worker's rows into a request loan,
//!   and workers answer with loans.
//!
//! After the last frame the scheduler has the matrix the native program
//! computes; `run` compares the two bit for bit.

use std::io::{BufRead, BufReader, Write};
use std::mem::MaybeUninit;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight::{
    BackendKind, BackendSet, Buffer, Client, Context, Loan, Node, Publisher, PublisherOptions, QoS, ServiceOptions,
    ServiceType, Subscription, SubscriptionOptions,
};

use freight::backend::DeviceView;

use super::work::{initial, Engine, Gpu, Mapped, Role, Shape, Workload};
use super::{Mode, Paradigm};
use crate::bench::BenchError;

freight::message! {
    /// The matrix (topic) or one worker's rows of it (service) at frame `frame`.
    pub struct Frame = "freight_bench/msg/PipelineFrame" {
        pub frame: u64,
        pub data: Buffer<f32>,
    }
}

freight::message! {
    /// A worker's rows after its kernel.
    pub struct Part = "freight_bench/msg/PipelinePart" {
        pub frame: u64,
        pub worker: u32,
        pub data: Buffer<f32>,
    }
}

/// A worker's service: its rows of a frame in, their next state out.
pub struct Step;

impl ServiceType for Step {
    const TYPE_NAME: &'static str = "freight_bench/srv/PipelineStep";
    type Request = Frame;
    type Response = Part;
}

/// The frame number that ends a worker.
const STOP: u64 = u64::MAX;
/// How long a wait lasts before a worker looks whether it should stop.
const POLL: Duration = Duration::from_millis(100);
/// How long anything may take before the row fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// Everything a worker needs to know, passed to a worker process as arguments.
#[derive(Debug, Clone)]
pub struct WorkerSpec {
    pub prefix: String,
    pub index: usize,
    pub role: Role,
    pub workload: Workload,
    pub paradigm: Paradigm,
    pub mode: Mode,
    pub shape: Shape,
    pub gpu: Gpu,
}

impl WorkerSpec {
    fn send_topic(prefix: &str) -> String {
        format!("{prefix}/send")
    }

    fn result_topic(prefix: &str, i: usize) -> String {
        format!("{prefix}/result_{i}")
    }

    fn service(prefix: &str, i: usize) -> String {
        format!("{prefix}/worker_{i}")
    }

    /// How a worker's endpoints lend and take memory: in a cuda-host row a
    /// GPU worker takes its rows mapped for its device and lends its results
    /// from mapped memory; every other worker uses the defaults.
    fn endpoint_options(&self) -> ServiceOptions {
        if self.mode == Mode::CudaHost && self.role == Role::Gpu {
            ServiceOptions {
                backend: BackendKind::CudaHost,
                accepted_backends: Some(BackendSet::of(&[BackendKind::CudaHost])),
            }
        } else {
            ServiceOptions::default()
        }
    }
}

/// The device's addresses of a GPU worker's rows in a received buffer
/// (`input`'s view, `start` f32s in) and of its loan's buffer (`output`'s),
/// both mapped for its device.
///
/// # Safety
/// The engine is given those very rows and that buffer with the result.
unsafe fn mapped(input: Option<DeviceView>, start: usize, output: Option<DeviceView>) -> Result<Mapped, BenchError> {
    let unmapped = || err("a cuda-host buffer without a device address");
    let input = input.ok_or_else(unmapped)?.ptr + (start * std::mem::size_of::<f32>()) as u64;
    let output = output.ok_or_else(unmapped)?.ptr;
    // SAFETY: as the caller guarantees.
    Ok(unsafe { Mapped::new(input, output) })
}

fn err(what: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("pipeline: {what}"), "check that /dev/shm is writable and has free space (df -h /dev/shm)")
}

fn qos() -> QoS {
    // Reliable: a lost frame would stall the pipeline; two in flight at most.
    QoS::keep_last(2).with_max_blocking_time(DEADLINE)
}

/// The node of a scheduler or worker, in a context of its own (as a
/// separate program would have) on the local plane.
pub fn node(name: &str) -> Result<Node, BenchError> {
    Context::builder().local_only().create().and_then(|c| c.create_node(name)).map_err(err)
}

/// A loan's one buffer as `f32`s to write in place.
///
/// # Safety
/// As for `LoanUninit::assume_init` afterwards: the caller writes every
/// element before publishing.
fn loan_as_f32<M: freight::Message>(loan: &mut freight::LoanUninit<M>) -> Result<&mut [f32], BenchError> {
    let bytes = loan.buffer_uninit_mut(0).ok_or_else(|| err("the loan is not host memory"))?;
    let (head, floats, tail) = {
        // SAFETY: `f32` has no invalid bit patterns, and the loan's memory is
        // shared or heap memory holding zeros or an earlier message, never
        // undefined values (see `LoanUninit::assume_init`); every element is
        // written before the loan is published.
        unsafe { std::mem::transmute::<&mut [MaybeUninit<u8>], &mut [u8]>(bytes).align_to_mut::<f32>() }
    };
    if !head.is_empty() || !tail.is_empty() {
        return Err(err("a loan's buffer is not aligned for f32"));
    }
    Ok(floats)
}

/// Runs one worker until it is told to stop, or `stop` is set.
pub fn run_worker(spec: &WorkerSpec, ready: impl FnOnce(), stop: &AtomicBool) -> Result<(), BenchError> {
    let node = node(&format!("pipeline_worker_{}", spec.index))?;
    let span = spec.shape.span_of(spec.index);
    let (workload, cols) = (spec.workload, spec.shape.cols);
    let mut engine = Engine::new(spec.role, spec.gpu)?;
    // A GPU worker of a cuda-host row works on its rows where they lie.
    let mapped_rows = spec.mode == Mode::CudaHost && spec.role == Role::Gpu;
    let copy = spec.mode == Mode::Copy;
    match spec.paradigm {
        Paradigm::Topic => {
            let options = spec.endpoint_options();
            let frame_options =
                SubscriptionOptions { accepted_backends: options.accepted_backends, ..Default::default() };
            let result_options = PublisherOptions { backend: options.backend, ..Default::default() };
            let frames = node
                .create_subscription_with_options::<Frame>(&WorkerSpec::send_topic(&spec.prefix), qos(), frame_options)
                .map_err(err)?;
            let results = node
                .create_publisher_with_options::<Part>(
                    &WorkerSpec::result_topic(&spec.prefix, spec.index),
                    qos(),
                    result_options,
                )
                .map_err(err)?;
            ready();
            while !stop.load(Ordering::Acquire) {
                let Some(frame) = frames.take(POLL).map_err(err)? else { continue };
                if frame.frame == STOP {
                    break;
                }
                let all = frame.data.as_slice().ok_or_else(|| err("a frame not in host memory"))?;
                let input = all.get(span.clone()).ok_or_else(|| err("a frame shorter than the matrix"))?;
                let part = Part { frame: frame.frame, worker: spec.index as u32, data: Buffer::default() };
                if copy {
                    let input = input.to_vec();
                    let mut output = vec![0f32; input.len()];
                    engine.run(workload, cols, &input, &mut output, None)?;
                    results.publish_copy(&Part { data: Buffer::from(output), ..part }).map_err(err)?;
                } else {
                    let mut loan = results.loan(input.len() * 4).map_err(err)?;
                    // SAFETY: the engine gets this worker's rows of the
                    // frame and the loan's buffer (`loan_as_f32`).
                    let mapped = mapped_rows
                        .then(|| unsafe { mapped(frame.data.device_view(), span.start, loan.device_view(0)) })
                        .transpose()?;
                    engine.run(workload, cols, input, loan_as_f32(&mut loan)?, mapped)?;
                    // SAFETY: the kernel wrote every element.
                    let mut loan: Loan<Part> = unsafe { loan.assume_init() };
                    (loan.frame, loan.worker) = (part.frame, part.worker);
                    results.publish(loan).map_err(err)?;
                }
            }
        }
        Paradigm::Service => {
            let server = node
                .create_service_server_with_options::<Step>(
                    &WorkerSpec::service(&spec.prefix, spec.index),
                    spec.endpoint_options(),
                )
                .map_err(err)?;
            ready();
            while !stop.load(Ordering::Acquire) {
                let Some((request, id)) = server.take_request(POLL).map_err(err)? else { continue };
                if request.frame == STOP {
                    break;
                }
                let input = request.data.as_slice().ok_or_else(|| err("a request not in host memory"))?;
                let (frame, worker) = (request.frame, spec.index as u32);
                if copy {
                    let input = input.to_vec();
                    let mut output = vec![0f32; input.len()];
                    engine.run(workload, cols, &input, &mut output, None)?;
                    server.send_response(id, Part { frame, worker, data: Buffer::from(output) }).map_err(err)?;
                } else {
                    let mut loan = server.loan_response(&[input.len() * 4]).map_err(err)?;
                    // SAFETY: the engine gets the request's rows (all of it)
                    // and the loan's buffer (`loan_as_f32`).
                    let mapped = mapped_rows
                        .then(|| unsafe { mapped(request.data.device_view(), 0, loan.device_view(0)) })
                        .transpose()?;
                    engine.run(workload, cols, input, loan_as_f32(&mut loan)?, mapped)?;
                    // SAFETY: the kernel wrote every element.
                    let mut loan = unsafe { loan.assume_init() };
                    (loan.frame, loan.worker) = (frame, worker);
                    server.send_loaned_response(id, loan).map_err(err)?;
                }
            }
        }
    }
    Ok(())
}

/// The scheduler's side of one row: its endpoints and the workers.
pub struct Scheduler {
    spec: WorkerSpec,
    roles: Vec<Role>,
    ends: Ends,
    workers: Vec<Worker>,
}

enum Ends {
    Topic { send: Publisher<Frame>, results: Vec<Subscription<Part>> },
    Service { clients: Vec<Client<Step>> },
}

/// A worker thread or process.
enum Worker {
    Thread { stop: Arc<AtomicBool>, handle: Option<std::thread::JoinHandle<Result<(), BenchError>>> },
    Process { child: Child, stdin: Option<ChildStdin> },
}

impl Scheduler {
    /// Starts the workers (threads for `intra`, processes otherwise) and
    /// waits until every one is connected.
    pub fn start(spec: WorkerSpec, roles: Vec<Role>) -> Result<Self, BenchError> {
        let node = node("pipeline_scheduler")?;
        let n = roles.len();
        let ends = match spec.paradigm {
            Paradigm::Topic => Ends::Topic {
                send: {
                    // cuda-host rows: the frames page-locked and mapped for
                    // the GPU workers.
                    let backend = if spec.mode == Mode::CudaHost { BackendKind::CudaHost } else { BackendKind::Shm };
                    let options = PublisherOptions { backend, ..Default::default() };
                    node.create_publisher_with_options::<Frame>(&WorkerSpec::send_topic(&spec.prefix), qos(), options)
                        .map_err(err)?
                },
                results: (0..n)
                    .map(|i| {
                        let options = SubscriptionOptions::default();
                        node.create_subscription_with_options::<Part>(
                            &WorkerSpec::result_topic(&spec.prefix, i),
                            qos(),
                            options,
                        )
                    })
                    .collect::<Result<_, _>>()
                    .map_err(err)?,
            },
            Paradigm::Service => Ends::Service {
                // cuda-host rows: requests lent from memory mapped for the GPU.
                clients: (0..n)
                    .map(|i| {
                        let backend =
                            if spec.mode == Mode::CudaHost { BackendKind::CudaHost } else { BackendKind::Shm };
                        let options = ServiceOptions { backend, ..Default::default() };
                        node.create_client_with_options::<Step>(&WorkerSpec::service(&spec.prefix, i), options)
                    })
                    .collect::<Result<_, _>>()
                    .map_err(err)?,
            },
        };
        let mut scheduler = Scheduler { spec, roles, ends, workers: Vec::new() };
        for (i, &role) in scheduler.roles.clone().iter().enumerate() {
            let spec = WorkerSpec { index: i, role, ..scheduler.spec.clone() };
            scheduler.workers.push(if spec.mode == Mode::Intra { spawn_thread(spec) } else { spawn_process(&spec)? });
        }
        scheduler.wait_connected()?;
        Ok(scheduler)
    }

    fn wait_connected(&self) -> Result<(), BenchError> {
        let n = self.roles.len();
        let deadline = Instant::now() + DEADLINE;
        loop {
            let connected = match &self.ends {
                Ends::Topic { send, results } => {
                    send.subscription_count() == n && results.iter().all(|r| r.publisher_count() == 1)
                }
                Ends::Service { clients } => clients.iter().all(|c| c.service_is_ready()),
            };
            if connected {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(err(format!("the {n} workers did not connect within {DEADLINE:?}")));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// One run: `frames` frames from the initial matrix; the time they took
    /// and the final matrix.
    pub fn run(&self, frames: usize) -> Result<(Duration, Vec<f32>), BenchError> {
        let shape = self.spec.shape;
        let n = self.roles.len();
        let copy = self.spec.mode == Mode::Copy;
        // Each worker's rows of the current frame: what it sent last (where
        // it lies: in its loan, or in the reply), or the initial matrix.
        let start = initial(shape);
        let mut rows: Vec<Buffer<f32>> = (0..n).map(|i| Buffer::from(start[shape.span_of(i)].to_vec())).collect();
        let started = Instant::now();
        for k in 0..frames as u64 {
            let parts = match &self.ends {
                Ends::Topic { send, results } => {
                    // Merge: each worker's rows into the next frame, the one
                    // copy of the zero-copy modes.
                    let merge = |dst: &mut [f32]| -> Result<(), BenchError> {
                        for (i, r) in rows.iter().enumerate() {
                            dst[shape.span_of(i)].copy_from_slice(host(r)?);
                        }
                        Ok(())
                    };
                    if copy {
                        let mut data = vec![0f32; shape.len()];
                        merge(&mut data)?;
                        send.publish_copy(&Frame { frame: k, data: Buffer::from(data) }).map_err(err)?;
                    } else {
                        let mut loan = send.loan(shape.len() * 4).map_err(err)?;
                        merge(loan_as_f32(&mut loan)?)?;
                        // SAFETY: the merge wrote every element.
                        let mut loan: Loan<Frame> = unsafe { loan.assume_init() };
                        loan.frame = k;
                        send.publish(loan).map_err(err)?;
                    }
                    results.iter().map(|r| take_part(r, k)).collect::<Result<Vec<_>, _>>()?
                }
                Ends::Service { clients } => {
                    let call = |c: &Client<Step>, r: &Buffer<f32>| -> Result<_, BenchError> {
                        if copy {
                            return c.call_async(Frame { frame: k, data: r.clone() }).map_err(err);
                        }
                        // The worker's rows into a loan: the one copy, as the
                        // topic paradigm's merge.
                        let mut loan = c.loan_request(&[r.len_bytes()]).map_err(err)?;
                        loan_as_f32(&mut loan)?.copy_from_slice(host(r)?);
                        // SAFETY: every element was copied in.
                        let mut loan = unsafe { loan.assume_init() };
                        loan.frame = k;
                        c.call_loaned(loan).map_err(err)
                    };
                    let calls = clients.iter().zip(&rows).map(|(c, r)| call(c, r)).collect::<Result<Vec<_>, _>>()?;
                    calls
                        .into_iter()
                        .map(|c| c.wait(DEADLINE).map(|s| s.into_message()))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(err)?
                }
            };
            for (i, part) in parts.into_iter().enumerate() {
                let span = shape.span_of(i);
                let len = host(&part.data)?.len();
                if part.frame != k || part.worker as usize != i || len != span.len() {
                    return Err(err(format!(
                        "worker {i} answered with worker {}'s frame {} of {len} values",
                        part.worker, part.frame
                    )));
                }
                // A serializing middleware's receiver copies what it receives.
                rows[i] = if copy { Buffer::from(part.data.to_vec().map_err(err)?) } else { part.data };
            }
        }
        let elapsed = started.elapsed();
        let mut data = vec![0f32; shape.len()];
        for (i, r) in rows.iter().enumerate() {
            data[shape.span_of(i)].copy_from_slice(host(r)?);
        }
        Ok((elapsed, data))
    }

    /// Tells the workers to stop and waits for them.
    pub fn finish(mut self) -> Result<(), BenchError> {
        let stop = Frame { frame: STOP, data: Buffer::default() };
        match &self.ends {
            Ends::Topic { send, .. } => send.publish_copy(&stop).map_err(err)?,
            Ends::Service { clients } => {
                for c in clients {
                    // A stop request is not answered.
                    drop(c.call_async(stop.clone()).map_err(err)?);
                }
            }
        }
        let mut first_error = None;
        for worker in &mut self.workers {
            if let Err(e) = worker.join() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A buffer's elements in host memory.
fn host(b: &Buffer<f32>) -> Result<&[f32], BenchError> {
    b.as_slice().ok_or_else(|| err("a buffer not in host memory"))
}

/// The part of frame `k` a worker sent, within the deadline.
fn take_part(results: &Subscription<Part>, k: u64) -> Result<Part, BenchError> {
    let part = results.take(DEADLINE).map_err(err)?.ok_or_else(|| err(format!("no result of frame {k} in time")))?;
    Ok(part.into_message())
}

fn spawn_thread(spec: WorkerSpec) -> Worker {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name(format!("pipeline-worker-{}", spec.index))
        .spawn(move || run_worker(&spec, || {}, &flag))
        .expect("spawning a thread");
    Worker::Thread { stop, handle: Some(handle) }
}

/// A worker process: this program's hidden `bench pipeline-worker`.
fn spawn_process(spec: &WorkerSpec) -> Result<Worker, BenchError> {
    let exe = std::env::current_exe().map_err(|e| err(format!("finding this program: {e}")))?;
    let mut child = Command::new(exe)
        .args(["bench", "pipeline-worker"])
        .args(["--prefix", &spec.prefix])
        .args(["--index", &spec.index.to_string()])
        .args(["--role", if spec.role == Role::Cpu { "cpu" } else { "gpu" }])
        .args(["--workload", spec.workload.name()])
        .args(["--paradigm", spec.paradigm.name()])
        .args(["--mode", spec.mode.name()])
        .args(["--gpu", spec.gpu.name()])
        .args(["--rows", &spec.shape.rows.to_string(), "--cols", &spec.shape.cols.to_string()])
        .args(["--workers", &spec.shape.workers.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| err(format!("starting a worker process: {e}")))?;
    let stdout = child.stdout.take().ok_or_else(|| err("a worker without stdout"))?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).map_err(|e| err(format!("reading a worker: {e}")))?;
    if line.trim() != "READY" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(err(format!("worker {} did not start (it said {:?})", spec.index, line.trim())));
    }
    let stdin = child.stdin.take();
    Ok(Worker::Process { child, stdin })
}

impl Worker {
    /// Waits for the worker to end (it was told to); its error if it failed.
    fn join(&mut self) -> Result<(), BenchError> {
        match self {
            Worker::Thread { stop, handle } => {
                stop.store(true, Ordering::Release);
                match handle.take().map(|h| h.join()) {
                    Some(Ok(result)) => result,
                    Some(Err(_)) => Err(err("a worker thread panicked")),
                    None => Ok(()),
                }
            }
            Worker::Process { child, stdin } => {
                drop(stdin.take());
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    match child.try_wait() {
                        Ok(Some(status)) if status.success() => return Ok(()),
                        Ok(Some(status)) => return Err(err(format!("a worker process failed ({status})"))),
                        Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                        _ => return Err(err("a worker process did not stop within 5 s")),
                    }
                }
            }
        }
    }
}

impl Drop for Worker {
    /// A worker left running (an error cut the row short) is stopped:
    /// threads by their flag, processes killed and reaped.
    fn drop(&mut self) {
        match self {
            Worker::Thread { stop, .. } => stop.store(true, Ordering::Release),
            Worker::Process { child, .. } => {
                if let Ok(None) = child.try_wait() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }
}

/// The worker process's main: runs until told to stop or its stdin closes.
pub fn worker_main(spec: &WorkerSpec) -> Result<(), BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        flag.store(true, Ordering::Release);
    });
    run_worker(
        spec,
        || {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "READY");
            let _ = out.flush();
        },
        &stop,
    )
}
