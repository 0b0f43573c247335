//! `freight`: the command-line tool of the freight transport.
//!
//! Subcommands: `bench latency` (the latency benchmark; `--lang python` hands it to the Python
//! benchmark, `python -m freight.bench`), `bench throughput` (a publisher in a tight loop to N
//! subscriber processes), `bench ros2` (freight against stock ROS 2), `demo`
//! (the headline comparison), `topic` (inspection and a test publisher, as `ros2 topic`), `view`
//! (a live Foxglove WebSocket server), `dds
//! config` (the network plane's configuration), `tune` (DDS profiles for large data over a
//! lossy link), `lab` (network experiments in namespaces), `bench soak` (a chaos soak), and
//! the hidden `bench peer`, `bench ros2-peer` and `bench soak-worker` (the processes the
//! benchmarks start).

mod bag;
mod bench;
mod dds;
mod demo;
mod doctor;
mod dynamic;
mod lab;
mod msg;
mod private_dir;
mod raw;
mod resources;
mod ros_args;
mod service;
mod stop;
mod subscribe;
mod topic;
mod tune;
mod values;
mod view;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

const ABOUT: &str = "Zero-copy transport for large robot data (ROS 2), on iceoryx2";

const LONG_ABOUT: &str = "\
freight moves large robot data (camera frames, point clouds, tensors) between ROS 2 nodes
without copying it, on top of iceoryx2 shared memory. This tool measures and demonstrates it.";

// Hard-wrapped on purpose: clap prints help text as written (no `wrap_help` feature).
const MANUAL: &str = "\
COMMANDS IN DETAIL

  freight bench latency
      Measures the one-way latency of freight's transports (intra: two threads of one
      process; shm-loan: zero-copy shared memory; shm-copy: shared memory with one copy) and
      of two baselines (iceoryx2: a raw iceoryx2 program written the way freight uses it;
      memcpy: one copy of the payload), for each message size and wait mode (spin:
      busy-polling; block: sleeping in the OS). Publisher and subscriber run in two processes
      pinned to two CPUs and play ping-pong. The table on stdout shows p50, p99 and max latency
      in microseconds, round trips per second, and each row's p50 relative to its baseline
      (iceoryx2 for intra and shm-loan, memcpy for shm-copy). --json and --plot also write the
      rows as JSON and as a log-log PNG. See `freight bench latency --help` for the options.
      --subscribers 1,8 measures fan-out: N subscriber processes per row, latency to the last
      one and the publisher's time per publish, against raw iceoryx2 with the same N.

  freight bench throughput [--subscribers 1,8] [--sizes ..] [--transports shm-loan,iceoryx2]
      A publisher in a tight loop to N subscriber processes that take as fast as they can:
      messages/s and payload GB/s of the slowest subscriber, against raw iceoryx2.

  freight bench latency --lang python [--python PATH]
      The same measurement through the Python APIs, Python to Python, busy-polling: freight's
      Python API against the iceoryx2 Python binding (pip install iceoryx2==0.10.0), with the
      ratio of their p50 per size. It runs `PATH -m freight.bench latency` (PATH: --python,
      else $FREIGHT_PYTHON, else python3) with --sizes, --iterations, --duration-per-row and
      --json, and exits with its status. That interpreter needs freight's Python package
      (`pip install .` or `make wheel`).

  freight bench ros2 [--quick] [--messages 1080p,4k,cloud] [--stacks ..] [--json FILE]
      Needs root. freight against stock ROS 2 in the same run: Image 1920x1080 and 3840x2160
      and a 55 MB PointCloud2 from a publisher process to a subscriber process, stock rclpy
      on Jazzy's and Kilted's defaults (Fast DDS) against freight's Python and Rust APIs;
      p50/p99 one-way latency, frames/s and each row's speedup over stock Jazzy. Runs in a
      private network namespace. Interpreters: --ros-jazzy, --ros-kilted, --python
      (defaults: .venv-ros-jazzy/bin/python, .venv-ros-kilted/bin/python, $FREIGHT_PYTHON or
      .venv/bin/python, relative to the current directory).

  freight bench paused [--stacks jazzy,kilted,freight-py] [--seconds 8] [--json FILE]
      Needs root. A subscriber process stopped (SIGSTOP) and continued beside one that is
      not, publisher at 100 Hz of 1 MiB messages on rclpy's default profile: what the
      publisher published, its errors and slowest publish, what each subscriber received;
      stock rclpy against freight's Python API. Runs in a private network namespace.

  freight bench record [--dir DIR] [--streams 4k,cloud] [--rates 5,10,20,30,45,60] [--json FILE]
      `freight bag record` against the disk: first the output directory's sustained write
      rate (the limit), then 4K BGRA images and 55 MB messages at rising rates, each recorded
      by a recorder process: published, recorded, lost, the rate as a fraction of the disk's,
      the recorder's CPU and peak memory, and the highest rate recorded with nothing lost.

  freight bench soak [--duration 60s|10m|1h] [--processes N] [--seed N] [--json FILE]
      Needs root. A chaos soak: publishers and subscriptions in separate processes over
      shared memory, between two threads, from a fake-device pool, and over DDS between two
      hosts (mount namespaces of their own), with loans and copies of 64 B to 64 MiB, while
      a controller SIGKILLs and restarts, or SIGSTOPs and continues, random workers. It
      checks: no survivor crashed, no reliable message lost between live processes, every
      byte of every message right and fresh, no growth of /dev/shm files, fds or memory once
      settled, every device hold returned. Prints a table and PASS/FAIL per check; exit
      status 1 if any fails. Runs in a private network namespace with shared memory of its
      own. The seed is printed; --seed replays the same choices. --processes above 7 adds
      witnesses: shared-memory subscribers that are stopped but never killed, whose fds are
      compared from the warm-up to the end. `make soak` runs it for an hour.

  freight bench pipeline [--nodes 2,3,5] [--paradigms topic,service] [--modes copy,intra,shm,cuda-host,cuda]
                         [--gpu auto|cuda|stand-in] [--runs N]
      The Verona paper's CPU-GPU pipelines (seed 002): a scheduler node and CPU and GPU
      workers (GPU kernels on CUDA device 0, or on CPU threads, \"gpu-stand-in\", without one)
      compute frames of a matrix split by rows, talking by topics or services, copying every
      hop (copy), as threads sharing frames by pointer (intra) or as processes sharing them in
      shared memory (shm), mapped for the GPU too (cuda-host) or in device memory (cuda). Mean and SD of the run time over --runs runs, against the same
      kernels as one native program measured in the same row, the overhead, and the paper's
      overhead beside each row it has; every run's result is checked bit for bit against the
      native program's. --json FILE writes the rows, --plot FILE.png draws them beside the
      paper's. See docs/pipeline.md.

  freight demo
      The headline comparison: one 3840x2160 BGRA camera frame (33,177,600 bytes) from a
      publisher process to a subscriber process over each transport, spinning and blocking,
      printed as one titled table. It is `freight bench latency` with fixed arguments.

  freight demo robot-arm [--python PATH] [-- ARGS]
      GPU frames from a renderer process to a display process that checksums every pixel:
      the `cuda`, `cuda-host` and `cpu` transports at 1920x1080, 2560x1440 and 3840x2160,
      frames per second, speedup and one-way latency (torch on a CUDA GPU; numpy with `shm`
      vs `cpu` without one). Two tables: end to end (each frame drawn as it is sent), then
      transport only (frames drawn before measuring and replayed), which adds each side's
      CPU time per frame and the display's time inside freight; the last line is the
      headline, the zero-copy transport against copies.
      Runs `PATH -m freight.demos.robot_arm ARGS` (PATH as for `bench latency --lang python`).

  freight topic list [-t] | info TOPIC [-v] | echo TOPIC [--once|--count N] [-f] | hz TOPIC | bw TOPIC
      As `ros2 topic`, for the topics of this host. `info -v` shows each endpoint's node,
      host, process id, QoS, the backends a subscription accepts, the memory a publisher's
      buffers live in, and for each publisher/subscription pair the transport and the memory
      the subscription receives buffers in. echo, hz and bw decode the built-in message
      types; echo prints YAML as `ros2 topic echo` does, arrays cut at 128 elements (-f:
      all of them, --no-arr: none). --duration SECS bounds hz and bw.

  freight topic pub TOPIC TYPE [--size BYTES | --width W --height H] [--rate HZ] [--count N]
      Publishes generated std_msgs/msg/UInt8MultiArray or sensor_msgs/msg/Image messages,
      written straight into shared memory; message k has data byte i = (k + i) % 251, so
      receivers can check them. stdout: `published <k> <bytes> bytes` per message (above
      10 Hz once a second, with the rate). --wait-for-subscribers N holds the first message
      back; --qos sensor publishes best effort. It runs until --count or Ctrl-C.

  freight view [TOPIC ...] [--all] [--host 127.0.0.1] [--port 8765] [--max-bandwidth BYTES_PER_S]
      A live view in the Foxglove app: a Foxglove WebSocket server (foxglove.sdk.v1),
      one channel per topic (CDR, ros2msg schema). Open connection..., Foxglove WebSocket, and
      the URL of the first line. Messages are encoded only while a client subscribes, over a
      byte budget (default 20 MB/s) they are skipped and counted, and no publisher ever waits
      for a client. See docs/view.md.

  freight service list [-t] | type SERVICE
      As `ros2 service`: the services of this host's freight nodes and, over DDS, those of
      every other ROS 2 node of the domain, with their types (-t).

  freight doctor
      What to check first when messages do not arrive or a publisher fails, in a container
      or on a shared host: /dev/shm's size, free space and what iceoryx2 and device pools
      hold there, the local plane's directory and its owner (another user's means DDS),
      this process's namespaces against pid 1's, the locked-memory and open-files limits.

  freight dds config [--xml]
      The Cyclone DDS configuration the network plane joins a domain with here: ROS 2's
      discovery variables as rcl reads them, the interface datagrams are sized for, each
      setting freight chooses for large samples with its reason, and CYCLONEDDS_URI, which
      overrides them. --xml prints what Cyclone gets. See docs/network.md.

  freight tune --rate HZ --payload SIZE --link RATE [--loss P] [--outage T] [--latency-budget T] [--out DIR]
      Cyclone DDS and Fast DDS settings and ROS 2 QoS for large samples over a lossy link:
      one RTPS message per IP packet, repair at 2x the publish rate, a writer history whose
      backlog after an outage drains within the budget. Prints each derived value with its
      reason; --out writes cyclonedds.xml, fastdds.xml and ros2_qos.yaml. See docs/tuning.md.

  freight lab wireless [--quick] [--payloads KB,..] [--conditions ..] [--json F] [--plot F.png]
      Needs root. The paper's experiment on one machine: two network namespaces joined by a
      veth pair shaped to the link rate, packet loss (1 %, 20 %) and a 20 s outage made by
      nftables; 30 Hz reliable samples of 32 to 512 KB with Cyclone's defaults and with the
      tuned profile, freight's DDS plane and stock Python Cyclone DDS. Reports reception rate,
      latency, losses, IP fragments and the recovery after the outage. --quick: < 5 minutes.

ERRORS
      Errors are printed as `error: <what went wrong>; <what to do>`; the exit status is 1.";

/// The `freight` command line.
#[derive(Debug, Parser)]
#[command(
    name = "freight",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = MANUAL,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks (see `freight bench latency --help`).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Send one 4K BGRA frame between two processes over each transport and compare.
    #[command(long_about = "\
Send one 3840x2160 BGRA frame (33,177,600 bytes) from a publisher process to a subscriber
process over each transport, spinning and blocking, and print the comparison table.

This is `freight bench latency` with fixed arguments.")]
    Demo(demo::DemoArgs),
    /// Inspect and publish topics, as `ros2 topic` does: list, info -v, echo, hz, bw, pub.
    #[command(subcommand)]
    Topic(topic::TopicCommand),
    /// Record, inspect, play and recover bags (rosbag2 layout, MCAP), as `ros2 bag` does.
    #[command(subcommand)]
    Bag(bag::BagCommand),
    /// Serve topics live to the Foxglove app (a Foxglove WebSocket server).
    #[command(long_about = view::VIEW_ABOUT)]
    View(view::ViewArgs),
    /// Inspect and call services, as `ros2 service` does: list, type, call.
    #[command(subcommand)]
    Service(service::ServiceCommand),
    /// The DDS configuration freight's network plane uses here, each setting with its reason.
    #[command(subcommand)]
    Dds(dds::DdsCommand),
    /// DDS profiles (Cyclone, Fast DDS, ROS 2 QoS) for large data over a lossy link.
    #[command(long_about = tune::LONG_ABOUT)]
    Tune(tune::TuneArgs),
    /// What to check first when messages do not arrive or a publisher fails: /dev/shm's size
    /// and use, the local plane's directory and owner, namespaces, limits.
    Doctor,
    /// Experiments on emulated networks (needs root): `lab wireless`.
    #[command(subcommand)]
    Lab(lab::LabCommand),
    /// Generate code for your own message packages: `msg cpp` (C++ types for the C++ API).
    #[command(subcommand)]
    Msg(msg::MsgCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Measure one-way latency per transport, wait mode and message size.
    #[command(long_about = "\
Measure one-way latency per transport, wait mode and message size.

A publisher and a subscriber play ping-pong: the publisher stamps each message with
CLOCK_MONOTONIC, the subscriber computes the one-way latency on arrival and acks, and the
publisher sends the next message only after the ack. They run in two processes pinned to two
CPUs (intra: two threads; memcpy: one thread). Each row is (transport, wait, size); it ends
after --iterations round trips or --duration-per-row seconds, whichever comes first, after 50
discarded warm-up round trips. Messages smaller than 16 bytes still carry the 16-byte header;
the requested size is reported. The table goes to stdout, progress to stderr.

With --subscribers N (fan-out; shm-loan, shm-copy and iceoryx2) each row has N subscriber
processes, every message goes to all of them and the next one once all acked: latencies are
to the last subscriber, and the table adds the subscribers and the publisher's median time
inside one publish. Subscribers are pinned round robin to the CPUs after the publisher's; with
fewer CPUs than N + 1 they share cores.

With --lang python the same is measured through the Python APIs (freight's against the
iceoryx2 binding's, busy-polling) by `python -m freight.bench latency` in the interpreter
--python or $FREIGHT_PYTHON names (else python3).")]
    Latency(bench::LatencyArgs),
    /// Measure messages/s and GB/s from a publisher in a tight loop to N subscriber processes.
    #[command(long_about = "\
Measure messages/s and GB/s from a publisher in a tight loop to N subscriber processes.

The publisher loans, writes the 16-byte header and publishes for --duration-per-row seconds
without pause (shm-copy: copies the payload from a heap buffer); N subscriber processes take
as fast as they can and read only the header. Nobody waits for a slow subscriber: freight's
topic is best effort, keep last 2; raw iceoryx2 drops the oldest sample of a full queue. The
table shows the publisher's rate, the slowest subscriber's msgs/s and payload GB/s, the share
of the published messages it took, and the ratio to raw iceoryx2 with the same subscribers,
wait and size. Process transports only: shm-loan, shm-copy, iceoryx2.")]
    Throughput(bench::ThroughputArgs),
    /// Internal: the subscriber process started by `bench latency` and `bench throughput`.
    #[command(hide = true)]
    Peer(bench::PeerArgs),
    /// freight against stock ROS 2 (rclpy on Fast DDS, Jazzy and Kilted), measured in one run
    /// (needs root).
    #[command(long_about = ROS2_ABOUT)]
    Ros2(bench::Ros2Args),
    /// Internal: a process of the freight Rust stack of `bench ros2`.
    #[command(hide = true, name = "ros2-peer")]
    Ros2Peer(bench::Ros2PeerArgs),
    /// A subscriber process stopped and continued beside one that is not: stock rclpy against
    /// freight's Python API (needs root).
    #[command(long_about = PAUSED_ABOUT)]
    Paused(bench::PausedArgs),
    /// `freight bag record` against the disk, beside stock rclpy writing with the `mcap` Python
    /// writer: the highest rate each records with nothing lost, as a fraction of the disk's
    /// sustained write rate (the baseline needs root and .venv-ros-jazzy).
    Record(bench::RecordBenchArgs),
    /// A chaos soak: kill, stop and restart processes while checking every message (needs
    /// root).
    #[command(long_about = SOAK_ABOUT)]
    Soak(bench::SoakArgs),
    /// Internal: a worker process of `bench soak`.
    #[command(hide = true, name = "soak-worker")]
    SoakWorker(bench::SoakWorkerArgs),
    /// Many processes with many topics on one host: matching, `topic list`, descriptors,
    /// memory, and what a killed one leaves; one process against stock rclpy (needs root).
    #[command(long_about = SCALE_ABOUT)]
    Scale(bench::ScaleArgs),
    /// Internal: a worker process of `bench scale`.
    #[command(hide = true, name = "scale-worker")]
    ScaleWorker(bench::ScaleWorkerArgs),
    /// Multi-node CPU-GPU pipelines (seed 002): run time and overhead against the native program.
    #[command(long_about = PIPELINE_ABOUT)]
    Pipeline(bench::PipelineArgs),
    /// Internal: a worker process of `bench pipeline`.
    #[command(hide = true, name = "pipeline-worker")]
    PipelineWorker(bench::PipelineWorkerArgs),
}

const PAUSED_ABOUT: &str = "\
A subscriber process stopped and continued (Ctrl-Z and fg, a debugger's breakpoint, a
frozen container) beside one that is not, stock rclpy against freight's Python API in the
same run.

Per stack, two subscribers and a publisher of --bytes (1 MiB) std_msgs/UInt8MultiArray
messages at --rate (100 Hz) for --seconds (8), all on rclpy's default profile (reliable,
keep last 10); the second subscriber gets SIGSTOP --stop-after (2 s) after the publisher
matched both, and SIGCONT --stop-for (4 s) later. The table shows what the publisher
published of its target, the publishes that raised, its slowest publish, what the other
subscriber received, and what the stopped one received once continued, or the exception
that ended it. Stacks: jazzy, kilted (stock rclpy on its defaults, from --ros-jazzy,
--ros-kilted) and freight-py (--python, $FREIGHT_PYTHON or .venv/bin/python). Needs root:
everything runs in a private network namespace. --json FILE writes the rows.";

const SCALE_ABOUT: &str = "\
Many processes with many topics on one host, as a robot's whole stack runs them.

--processes (50) worker processes each create --endpoints (40) endpoints, half publishers
and half subscriptions, of std_msgs/UInt8MultiArray on --topics (1000) topics; every
subscription's publisher is in another process, and every worker has DDS on. The table
shows how long until every endpoint existed and every subscription saw its publisher, the
creation time per endpoint, descriptors and resident memory per process, how long `freight
topic list` and `topic info` take (this host's endpoints, --spin-time 0), what /dev/shm
holds, the files a worker killed with SIGKILL left once its successor started, and the files
left when all exited (both must be none; the exit status is 1 otherwise).

Then one Python process makes --per-process (300) publishers and as many subscriptions, on
freight's Python API (--python, $FREIGHT_PYTHON or .venv/bin/python) and on stock rclpy
Jazzy and Kilted (--ros-jazzy, --ros-kilted; Fast DDS on its defaults): creation time,
descriptors and resident memory of each, in the same run (0 leaves it out).

Needs root: it runs in a private host (its own loopback, /dev/shm and /tmp/iceoryx2).
--json FILE writes the result.";

const PIPELINE_ABOUT: &str = "\
Multi-node CPU-GPU pipelines, the experiment of the Verona paper (seed 002), against the
native program in the same run.

A scheduler node and workers (2 nodes: 1 CPU worker; 3: 1 CPU + 1 GPU; 5: 2 CPU + 2 GPU)
compute --frames frames over a --rows x --cols f32 matrix split by rows: the scheduler sends
each frame, every worker runs its kernel on its rows and sends them back, the scheduler
merges them into the next frame. Workloads: cache (CPU: repeated sqrt/div/mul in place;
GPU: repeated 2D reduction) and concurrent (one read and one write per element and pass).
Paradigms: topic (one send topic, one result topic per worker) and service (one service
per worker). Modes: copy (every hop copies in and out, processes: ROS-SC), intra (threads
of one process, zero copy: ROS-ZC), shm (processes sharing frames in shared memory:
ROS-SHM-ZC), cuda-host (as shm, the frames, requests and replies page-locked and mapped
for the GPU, whose workers' kernels read and write them in place: ROS-SHM-ZC with CUDA-ZC;
with CUDA only), cuda (as shm, in device memory: GPU workers work there, the others get
host copies; the simulated fake-device with the stand-in); in the zero-copy modes service
requests and replies are loans too.

The native program runs the same kernels on the same rows with a thread per worker and no
middleware. Each row alternates --runs pipeline runs and --runs native runs after one
warm-up of each, and reports mean and SD and overhead = (mean - native) / native; every
run's final matrix must equal the native one bit for bit. GPU workers run their kernels on
CUDA device 0 (--gpu auto, the default), PTX the driver compiles: they copy their rows to the
device and back (CUDA-SC), or work on them where they lie in cuda-host rows, and the native
program's GPU threads do the same; one frame of each workload is first checked against a
reference. Without CUDA (or with --gpu stand-in) they run the same computation on a CPU
thread (\"gpu-stand-in\"). The paper's overhead (Jetson TX2, Tables 2 and 3 for CUDA-SC, its
text for CUDA-ZC) is shown beside each row it has. --runs 30 is the paper's
protocol. The table goes to stdout, progress to stderr; --json FILE writes every row;
--plot FILE.png draws each row's run time over the native program's beside the paper's.";

const SOAK_ABOUT: &str = "\
A chaos soak of freight (needs root).

Worker processes publish and subscribe over shared memory (two processes), between two
threads of one process, from a fake-device pool (one subscription takes device memory, one
host copies), and over DDS to a second \"host\" (a private /dev/shm and /tmp/iceoryx2).
Messages of 64 B to 64 MiB, loans and copies, each carrying its publisher, incarnation,
sequence number, length and checksum, are verified byte for byte. Meanwhile the soak
SIGKILLs random workers (and restarts them) or SIGSTOPs them for up to 2.5 s.

It checks, and reports PASS or FAIL for each: no worker died unless killed (survivors), no
unexpected error (errors), no reliable message lost between live processes (loss), numbers
in order (order), no wrong or stale bytes (bytes), each message by its topology's transport
(path), no more /dev/shm and /tmp/iceoryx2 files at the end than after the warm-up
(shm-files), no growth of fds or heap memory between two samples once settled (fds, rss),
every fake-device hold returned (device-holds), traffic on every subscription (traffic).
The exit status is 1 when any check fails.

--duration is the whole run (default 60 s, at least 20 s): the last 11 s of a 60 s run are
recovery, settle and the final checks (68 s of an hour's, whose fd and memory samples are a
minute apart). Everything runs in a private network namespace with its own shared memory.
The seed is printed; --seed replays the same choices (victims, actions, pauses, sizes),
though not the timing between processes. The table goes to stdout, progress and problems
as they happen to stderr; --json FILE writes the report.";

const ROS2_ABOUT: &str = "\
freight against what ROS 2 users run today, measured in one run on one host (needs root).

For sensor_msgs/Image 1920x1080 and 3840x2160 bgra8 and a 55 MB sensor_msgs/PointCloud2
(3,686,400 points of x, y, z float32 and r, g, b uint8: four 1280x720 RGB-D cameras), one-way
latency p50/p99 and frames per second of four stacks, each publisher -> subscriber in two
processes pinned to two CPUs:
  stock rclpy Jazzy   rclpy -> rclpy on their defaults (rmw_fastrtps_cpp, Fast DDS 2.14;
                      shared-memory transport on one host), interpreter --ros-jazzy
  stock rclpy Kilted  the same with Kilted (Fast DDS 3.2), --ros-kilted
  freight Python      freight's Python API, shared memory (local plane only), --python
  freight Rust        freight's typed Rust API (loan, take), shared memory
Ping-pong with one message in flight: the publisher writes every byte of the payload, stamps
header.stamp with CLOCK_MONOTONIC and publishes; the subscriber checks 64 bytes of it, takes
the latency and acks on a small topic; the next message goes after the ack. Reliable,
volatile, keep last 10 (rclpy's default profile) on every topic. --warmup round trips are
discarded; a row ends after --count round trips or --duration seconds. frames/s = round
trips / wall time; \"x vs stock Jazzy\" = Jazzy's p50 / the row's p50, same message, same run.

Everything runs in a private network namespace (the command re-runs itself under unshare
--net) with a multicast loopback: no traffic reaches this machine's interfaces. Stock
processes get no DDS or ROS configuration. A stack whose interpreter is missing is reported
as \"not run: <why>\"; a peer that hangs is killed (\"timed out\"). The table goes to stdout,
progress to stderr; --json FILE writes every row with its raw latencies. The default run
takes about 2 minutes; --quick (1080p only, tiny counts) about 30 s.";

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap's own messages already read "error: ...", followed by a usage line and a
            // pointer to --help (the "what to do"). --help and --version also come this way.
            let _ = e.print();
            return if e.use_stderr() { ExitCode::FAILURE } else { ExitCode::SUCCESS };
        }
    };
    let result = match cli.command {
        // The Python benchmark prints its own errors; its exit status becomes ours.
        Command::Bench(BenchCommand::Latency(args)) if args.lang == bench::Lang::Python => {
            bench::run_python(&args).map_err(|e| e.to_string())
        }
        Command::Bench(BenchCommand::Latency(args)) => {
            bench::run_latency_args(&args).map(|_| ExitCode::SUCCESS).map_err(|e| e.to_string())
        }
        Command::Bench(BenchCommand::Throughput(args)) => {
            bench::run_throughput(&args).map(|_| ExitCode::SUCCESS).map_err(|e| e.to_string())
        }
        Command::Bench(BenchCommand::Peer(args)) => {
            return if bench::run_peer(&args) { ExitCode::SUCCESS } else { ExitCode::FAILURE };
        }
        Command::Bench(BenchCommand::Ros2(args)) => bench::run_ros2(&args).map_err(|e| e.to_string()),
        Command::Bench(BenchCommand::Paused(args)) => bench::run_paused(&args).map_err(|e| e.to_string()),
        Command::Bench(BenchCommand::Record(args)) => bench::run_record(&args).map_err(|e| e.to_string()),
        Command::Bench(BenchCommand::Ros2Peer(args)) => return bench::run_ros2_peer(&args),
        Command::Bench(BenchCommand::Soak(args)) => bench::run_soak(&args).map_err(|e| e.to_string()),
        Command::Bench(BenchCommand::SoakWorker(args)) => return bench::run_soak_worker(&args),
        Command::Bench(BenchCommand::Scale(args)) => bench::run_scale(&args).map_err(|e| e.to_string()),
        Command::Bench(BenchCommand::ScaleWorker(args)) => return bench::run_scale_worker(&args),
        Command::Bench(BenchCommand::Pipeline(args)) => {
            bench::run_pipeline(&args).map(|_| ExitCode::SUCCESS).map_err(|e| e.to_string())
        }
        Command::Bench(BenchCommand::PipelineWorker(args)) => {
            bench::run_pipeline_worker(&args).map(|()| ExitCode::SUCCESS).map_err(|e| e.to_string())
        }
        Command::Demo(args) => demo::run(&args).map_err(|e| e.to_string()),
        Command::Topic(cmd) => topic::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Service(cmd) => service::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Bag(cmd) => bag::run(&cmd),
        Command::View(args) => view::run(&args),
        Command::Dds(cmd) => dds::run(&cmd).map(|()| ExitCode::SUCCESS),
        Command::Tune(args) => tune::run(&args).map(|()| ExitCode::SUCCESS).map_err(|e| e.to_string()),
        Command::Lab(cmd) => lab::run(cmd).map(|()| ExitCode::SUCCESS),
        Command::Msg(cmd) => msg::run(&cmd).map(|()| ExitCode::SUCCESS),
        Command::Doctor => doctor::run().map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_match_the_documentation() {
        let cli = Cli::try_parse_from(["freight", "bench", "latency"]).unwrap();
        let Command::Bench(BenchCommand::Latency(args)) = cli.command else {
            panic!("expected bench latency");
        };
        assert_eq!(args.sizes, [8, 64 << 10, 1 << 20, 8 << 20, 32 << 20, 128 << 20]);
        assert_eq!(args.transports, None);
        let names: Vec<&str> = args.lang.default_transports().iter().map(|t| t.as_str()).collect();
        assert_eq!(names, ["intra", "shm-loan", "shm-copy", "iceoryx2", "memcpy"]);
        assert_eq!(args.wait.modes(), [bench::WaitMode::Spin, bench::WaitMode::Block]);
        assert_eq!(args.iterations, 5000);
        assert_eq!(args.duration_per_row, std::time::Duration::from_secs(2));
        assert_eq!(args.lang, bench::Lang::Rust);
        assert_eq!(args.python, None);
    }

    #[test]
    fn bad_arguments_are_rejected() {
        for argv in [
            &["freight", "bench", "latency", "--sizes", "8XB"][..],
            &["freight", "bench", "latency", "--transports", "carrier-pigeon"],
            &["freight", "bench", "latency", "--wait", "sometimes"],
            &["freight", "bench", "latency", "--duration-per-row", "0"],
            &["freight", "bench", "latency", "--lang", "cobol"],
        ] {
            assert!(Cli::try_parse_from(argv).is_err(), "{argv:?}");
        }
    }

    #[test]
    fn peer_is_hidden() {
        let help = Cli::command().find_subcommand_mut("bench").unwrap().render_long_help().to_string();
        assert!(help.contains("latency"));
        assert!(!help.contains("peer"));
        assert!(help.contains("ros2"));
    }
}
