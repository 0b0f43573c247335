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
use std::ops::Range;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use freight::{
    BackendKind, BackendSet, Buffer, Client, Context, Loan, LoanUninit, Node, Publisher, PublisherOptions, QoS,
    ServiceOptions, ServiceType, Subscription, SubscriptionOptions,
};

use super::work::{as_bytes, initial, DeviceRows, Engine, Gpu, Role, Shape, Workload};
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

    /// Where the scheduler's frames (topic) or requests (service) live.
    fn frame_backend(&self) -> BackendKind {
        match self.mode {
            Mode::CudaHost => BackendKind::CudaHost,
            // The simulated device stands in for the GPU's memory.
            Mode::Cuda if self.gpu == Gpu::Cuda => BackendKind::Cuda,
            Mode::Cuda => BackendKind::FakeDevice,
            Mode::Copy | Mode::Intra | Mode::Shm => BackendKind::Shm,
        }
    }

    /// Where this worker's rows must arrive: in cuda-host and cuda rows a
    /// GPU worker takes them where the scheduler put them; `None` for every
    /// other worker (which receives host copies of device memory).
    fn rows_backend(&self) -> Option<BackendKind> {
        matches!((self.mode, self.role), (Mode::CudaHost | Mode::Cuda, Role::Gpu)).then(|| self.frame_backend())
    }

    /// How a worker's endpoints lend and take memory: a worker with a
    /// [`rows_backend`](Self::rows_backend) takes it and lends its results
    /// from it; the others use the defaults.
    fn endpoint_options(&self) -> ServiceOptions {
        match self.rows_backend() {
            Some(backend) => ServiceOptions { backend, accepted_backends: Some(BackendSet::of(&[backend])) },
            None => ServiceOptions::default(),
        }
    }
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
    let mut engine = Engine::new(spec.role, spec.gpu)?;
    let options = spec.endpoint_options();
    let worker = spec.index as u32;
    match spec.paradigm {
        Paradigm::Topic => {
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
            let span = spec.shape.span_of(spec.index);
            while !stop.load(Ordering::Acquire) {
                let Some(frame) = frames.take(POLL).map_err(err)? else { continue };
                if frame.frame == STOP {
                    break;
                }
                if spec.mode == Mode::Copy {
                    let data = Buffer::from(work_copying(&mut engine, spec, &frame.data, span.clone())?);
                    results.publish_copy(&Part { frame: frame.frame, worker, data }).map_err(err)?;
                } else {
                    let mut loan = results.loan(span.len() * 4).map_err(err)?;
                    work_into(&mut engine, spec, &frame.data, span.clone(), &mut loan)?;
                    // SAFETY: `work_into` wrote every element.
                    let mut loan: Loan<Part> = unsafe { loan.assume_init() };
                    (loan.frame, loan.worker) = (frame.frame, worker);
                    results.publish(loan).map_err(err)?;
                }
            }
        }
        Paradigm::Service => {
            let server = node
                .create_service_server_with_options::<Step>(&WorkerSpec::service(&spec.prefix, spec.index), options)
                .map_err(err)?;
            ready();
            while !stop.load(Ordering::Acquire) {
                let Some((request, id)) = server.take_request(POLL).map_err(err)? else { continue };
                if request.frame == STOP {
                    break;
                }
                // A request holds this worker's rows and nothing else.
                let rows = 0..request.data.len();
                if spec.mode == Mode::Copy {
                    let data = Buffer::from(work_copying(&mut engine, spec, &request.data, rows)?);
                    server.send_response(id, Part { frame: request.frame, worker, data }).map_err(err)?;
                } else {
                    let mut loan = server.loan_response(&[rows.len() * 4]).map_err(err)?;
                    work_into(&mut engine, spec, &request.data, rows, &mut loan)?;
                    // SAFETY: `work_into` wrote every element.
                    let mut loan = unsafe { loan.assume_init() };
                    (loan.frame, loan.worker) = (request.frame, worker);
                    server.send_loaned_response(id, loan).map_err(err)?;
                }
            }
        }
    }
    Ok(())
}

/// `copy` rows: the rows `span` of `data` copied out of the message, the
/// kernel, and the result to copy into the next.
fn work_copying(
    engine: &mut Engine,
    spec: &WorkerSpec,
    data: &Buffer<f32>,
    span: Range<usize>,
) -> Result<Vec<f32>, BenchError> {
    let input = host(data)?.get(span).ok_or_else(|| err("a message shorter than the rows"))?.to_vec();
    let mut output = vec![0f32; input.len()];
    engine.run(spec.workload, spec.shape.cols, &input, &mut output)?;
    Ok(output)
}

/// One frame of work from the rows `span` of `data` into the one buffer of
/// `loan` (lent for as many), wherever both lie: a CUDA engine works on them
/// in place when its device reaches both (cuda-host, cuda); otherwise the
/// CPU reads and writes them in place, through a host copy where it cannot
/// (the simulated device's memory).
fn work_into<M: freight::Message>(
    engine: &mut Engine,
    spec: &WorkerSpec,
    data: &Buffer<f32>,
    span: Range<usize>,
    loan: &mut LoanUninit<M>,
) -> Result<(), BenchError> {
    let (workload, cols) = (spec.workload, spec.shape.cols);
    if span.end > data.len() {
        return Err(err("a message shorter than the rows"));
    }
    // A row that did not move its data as its mode says measures nothing.
    if let Some(expected) = spec.rows_backend().filter(|&b| b != data.backend()) {
        return Err(BenchError::new(
            format!(
                "pipeline: a {} row's GPU worker received {} memory, not {expected}",
                spec.mode.name(),
                data.backend()
            ),
            "this is a bug in freight: please report it with the command line",
        ));
    }
    if let (true, Some(input), Some(output)) = (engine.is_cuda(), data.device_view(), loan.device_view(0)) {
        // The kernels read after the writer's writes (its stream's event)...
        data.order_on_stream(0).map_err(err)?;
        let input = input.ptr + (span.start * std::mem::size_of::<f32>()) as u64;
        // SAFETY: the device's addresses of the rows (in `data`, checked
        // above) and of the loan's buffer, lent for as many; both outlive
        // the call.
        let rows = unsafe { DeviceRows::new(input, output.ptr, span.len()) };
        engine.run_on_device(workload, cols, rows)?;
        // ...and the loan's readers after the kernels' writes.
        loan.set_write_stream(0);
        return Ok(());
    }
    let copied;
    let input = match data.as_slice() {
        Some(all) => &all[span],
        None => {
            copied = data.to_vec().map_err(err)?;
            &copied[span]
        }
    };
    fill(loan, input.len(), |output| engine.run(workload, cols, input, output))
}

/// Writes the one buffer of `loan` (`len` f32s) with `write`: in place
/// where the CPU addresses it, through a host copy where it does not
/// (device memory).
fn fill<M: freight::Message>(
    loan: &mut LoanUninit<M>,
    len: usize,
    write: impl FnOnce(&mut [f32]) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    if loan.buffer_uninit_mut(0).is_some() {
        return write(loan_as_f32(loan)?);
    }
    let mut host = vec![0f32; len];
    write(&mut host)?;
    loan.write_buffer_from_host(0, 0, as_bytes(&host)).map_err(err)
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
                    let options = PublisherOptions { backend: spec.frame_backend(), ..Default::default() };
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
                clients: (0..n)
                    .map(|i| {
                        let options = ServiceOptions { backend: spec.frame_backend(), ..Default::default() };
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
                        fill(&mut loan, shape.len(), merge)?;
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
                        fill(&mut loan, r.len(), |dst| {
                            dst.copy_from_slice(host(r)?);
                            Ok(())
                        })?;
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
