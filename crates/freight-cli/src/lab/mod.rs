//! `freight lab wireless`: the paper's loss and outage experiments on one machine. Two
//! network namespaces joined by a shaped veth pair stand for two hosts on a WiFi link
//! ([`netns`]); a publisher in one and a subscriber in the other ([`peer`], or the stock
//! Python peer) exchange 30 Hz reliable samples for each condition, payload and profile;
//! the lab reports reception rate, latency, losses and IP fragments ([`result`]), as a
//! table, JSON and a plot ([`plot`]).

mod netns;
pub mod peer;

mod plot;
mod result;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use freight::clock::monotonic_ns;
use freight_tune::units::{parse_bitrate, parse_duration};

use self::netns::{Impairment, Link};
use self::peer::PeerArgs;
use self::result::{OutageResult, RunResult};
use crate::private_dir::PrivateDir;
use crate::stop;

/// The stock peer: stock Cyclone DDS from Python, no freight code.
const STOCK_PEER: &str = include_str!("cyclonedds_peer.py");

/// `freight lab ...`.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Large samples over an emulated lossy WiFi link: default vs tuned DDS profiles.
    #[command(long_about = WIRELESS_ABOUT)]
    Wireless(WirelessArgs),
    /// Internal: a publisher or subscriber the lab starts inside a namespace.
    #[command(hide = true)]
    Peer(PeerArgs),
}

const WIRELESS_ABOUT: &str = "\
Large samples over an emulated lossy WiFi link: default vs tuned DDS profiles.

Needs root. Creates two network namespaces joined by a veth pair, shapes each direction to
--link with tc tbf, and drops packets with an nftables rule on the netdev ingress hook (single
IP fragments, as a radio loses them). For each condition (ideal, 1 % loss, 20 % loss, an
outage that cuts the link), payload and profile, a publisher in one namespace sends --rate
reliable samples to a subscriber in the other for --seconds, and the lab reports reception
rate, mean and p99 one-way latency, samples lost, IP fragments, and around the outage the
samples received per second, the time to the first fresh sample after the link returns and
the stale samples that arrive after it.

Profiles: default = Cyclone DDS's defaults, reliable KEEP_ALL; tuned = freight tune's profile
for the stream (freight applies it itself through QoS::large_data_lossy; the stock peer is
fed the generated cyclonedds.xml and depth). The tuner is told the condition: 1 % loss and a
20 s outage (its defaults) for ideal, 1 % and outage; 20 % loss and no outage for 20 %.
Peers: freight = freight's DDS plane on both ends; cyclonedds-py = stock Python Cyclone DDS
(the `cyclonedds` package) on both ends.

Everything stays inside the namespaces, every run is bounded in time, and the namespaces are
removed at the end, on Ctrl-C, and (if the lab was killed) by the next lab.";

/// Options of `freight lab wireless`.
#[derive(Debug, Clone, Args)]
pub struct WirelessArgs {
    /// The reduced matrix (64 and 512 KB; 4 s runs, a 4 s outage; the stock peer at 512 KB
    /// only): under 5 minutes.
    #[arg(long)]
    pub quick: bool,
    /// Payload sizes in KB (1024 bytes), comma-separated [default: 32,64,128,256,512].
    #[arg(long, value_delimiter = ',', value_name = "KB")]
    pub payloads: Option<Vec<u64>>,
    /// Conditions, comma-separated: ideal, loss1, loss20, outage [default: all].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub conditions: Option<Vec<String>>,
    /// Profiles, comma-separated: default, tuned [default: both].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub profiles: Option<Vec<String>>,
    /// Peers, comma-separated: freight, cyclonedds-py [default: both].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub peers: Option<Vec<String>>,
    /// Seconds of publishing per run (outage runs add the outage and the time before it)
    /// [default: 20; quick: 4].
    #[arg(long, value_name = "SECS")]
    pub seconds: Option<f64>,
    /// Length of the outage [default: 20s; quick: 4s].
    #[arg(long, value_parser = parse_duration, value_name = "TIME")]
    pub outage: Option<Duration>,
    /// Publish rate, Hz.
    #[arg(long, default_value_t = 30.0, value_name = "HZ")]
    pub rate: f64,
    /// Link rate each way.
    #[arg(long, default_value = "433Mbit", value_parser = parse_bitrate, value_name = "RATE")]
    pub link: f64,
    /// Write one JSON object per run to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the paper-style figure (reception rate per payload and condition, and the
    /// outage timeline) to FILE.png.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Python interpreter with the `cyclonedds` package, for the stock peer [default:
    /// $FREIGHT_PYTHON, else python3].
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

/// Runs a lab command.
pub fn run(cmd: LabCommand) -> Result<(), String> {
    match cmd {
        LabCommand::Wireless(args) => wireless(&args),
        LabCommand::Peer(args) => {
            if peer::run(&args) {
                Ok(())
            } else {
                Err("lab peer failed".into())
            }
        }
    }
}

/// One cell of the matrix.
#[derive(Debug, Clone)]
struct Cell {
    profile: &'static str,
    peer: &'static str,
    condition: &'static str,
    payload: u64,
}

/// The matrix and the timing of its runs.
struct Plan {
    cells: Vec<Cell>,
    seconds: f64,
    outage: Duration,
    /// Seconds of publishing before the cut.
    before_cut: f64,
    rate: f64,
    link: f64,
    python: PathBuf,
}

const CONDITIONS: [&str; 4] = ["ideal", "loss1", "loss20", "outage"];
const PROFILES: [&str; 2] = ["default", "tuned"];
const PEERS: [&str; 2] = ["freight", "cyclonedds-py"];

fn pick(given: &Option<Vec<String>>, all: &[&'static str], what: &str) -> Result<Vec<&'static str>, String> {
    let Some(given) = given else { return Ok(all.to_vec()) };
    given
        .iter()
        .map(|g| {
            all.iter()
                .copied()
                .find(|a| a == g)
                .ok_or_else(|| format!("unknown {what} `{g}`; give some of {}", all.join(", ")))
        })
        .collect()
}

impl Plan {
    fn new(args: &WirelessArgs) -> Result<Plan, String> {
        let quick = args.quick;
        let payloads = args.payloads.clone().unwrap_or(if quick { vec![64, 512] } else { vec![32, 64, 128, 256, 512] });
        if let Some(p) = payloads.iter().find(|p| **p < 1) {
            return Err(format!("--payloads {p} KB: give sizes of at least 1 KB"));
        }
        let conditions = pick(&args.conditions, &CONDITIONS, "condition")?;
        let profiles = pick(&args.profiles, &PROFILES, "profile")?;
        let peers = pick(&args.peers, &PEERS, "peer")?;
        let largest = payloads.iter().copied().max().unwrap_or(0);
        let mut cells = Vec::new();
        for &peer in &peers {
            for &condition in &conditions {
                for &payload in &payloads {
                    // --quick keeps the stock peer to the largest payload.
                    if quick && peer != "freight" && args.peers.is_none() && payload != largest {
                        continue;
                    }
                    for &profile in &profiles {
                        cells.push(Cell { profile, peer, condition, payload: payload * 1024 });
                    }
                }
            }
        }
        let seconds = args.seconds.unwrap_or(if quick { 4.0 } else { 20.0 });
        if !(seconds.is_finite() && seconds >= 1.0) {
            return Err(format!("--seconds {seconds}: give at least 1"));
        }
        if !(args.rate.is_finite() && args.rate > 0.0) {
            return Err(format!("--rate {}: give a positive rate", args.rate));
        }
        let outage = args.outage.unwrap_or(Duration::from_secs(if quick { 4 } else { 20 }));
        let python = args
            .python
            .clone()
            .or_else(|| std::env::var_os("FREIGHT_PYTHON").map(PathBuf::from))
            .unwrap_or_else(|| "python3".into());
        // Long enough before the cut for the stream to be steady.
        let before_cut = (seconds / 2.0).min(5.0);
        Ok(Plan { cells, seconds, outage, before_cut, rate: args.rate, link: args.link, python })
    }

    /// Seconds of publishing in a run of `condition`.
    fn publish_seconds(&self, condition: &str) -> f64 {
        if condition == "outage" {
            self.before_cut + self.outage.as_secs_f64() + self.seconds
        } else {
            self.seconds
        }
    }
}

fn wireless(args: &WirelessArgs) -> Result<(), String> {
    let plan = Plan::new(args)?;
    netns::check_prerequisites()?;
    if let Some(path) = &args.plot {
        crate::bench::plot::check_font().map_err(|e| e.to_string())?;
        check_writable(path)?;
    }
    if let Some(path) = &args.json {
        check_writable(path)?;
    }
    let work = tempdir()?;
    let stock = work.path().join("cyclonedds_peer.py");
    std::fs::write(&stock, STOCK_PEER).map_err(|e| format!("cannot write {}: {e}", stock.display()))?;
    if plan.cells.iter().any(|c| c.peer == "cyclonedds-py") {
        check_stock_peer(&plan.python, &stock)?;
    }
    stop::install();
    let link = Link::create(plan.link).map_err(|e| format!("cannot set up the namespaces: {e}"))?;
    let total: f64 = plan.cells.iter().map(|c| plan.publish_seconds(c.condition) + 6.0).sum();
    eprintln!(
        "lab: {} runs, about {:.0} min; namespaces {} and {} joined by a {:.0} Mbit/s veth pair",
        plan.cells.len(),
        total / 60.0,
        link.a,
        link.b,
        plan.link / 1e6
    );
    let mut results = Vec::new();
    for (i, cell) in plan.cells.iter().enumerate() {
        if stop::requested() {
            break;
        }
        eprintln!(
            "lab: [{}/{}] {} · {} · {} · {} KB",
            i + 1,
            plan.cells.len(),
            cell.profile,
            cell.peer,
            cell.condition,
            cell.payload / 1024
        );
        let result = measure(&plan, &link, cell, work.path(), &stock).unwrap_or_else(|e| failed(&plan, cell, e));
        if let Some(e) = &result.error {
            eprintln!("lab:   failed: {e}");
        }
        results.push(result);
    }
    drop(link);
    if stop::requested() {
        eprintln!("lab: interrupted; namespaces removed; {} runs measured", results.len());
    }
    print!("{}", table(&results));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        eprintln!("lab: wrote {}", path.display());
    }
    if let Some(path) = &args.plot {
        plot::write_plot(path, &results)?;
        eprintln!("lab: wrote {}", path.display());
    }
    if stop::requested() {
        return Err("interrupted".into());
    }
    Ok(())
}

fn check_writable(path: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The stock peer must be runnable: the interpreter, and its `cyclonedds` package.
fn check_stock_peer(python: &Path, script: &Path) -> Result<(), String> {
    let out = Command::new(python).arg(script).arg("selftest").stdin(Stdio::null()).output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "the stock peer does not run with {}: {}; install the package (`pip install cyclonedds==11.0.1`), \
             give --python, or leave it out with --peers freight",
            python.display(),
            String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("")
        )),
        Err(e) => Err(format!(
            "cannot run {}: {e}; give --python, or leave the stock peer out with --peers freight",
            python.display()
        )),
    }
}

fn tempdir() -> Result<PrivateDir, String> {
    PrivateDir::new("freight-lab")
        .map_err(|e| format!("cannot create a private directory under {}: {e}", std::env::temp_dir().display()))
}

/// The tuner's inputs for a condition, as a user who knows the link would give them.
fn tuner_loss_outage(condition: &str) -> (f64, f64) {
    match condition {
        "loss20" => (0.20, 0.0),
        _ => (0.01, 20.0),
    }
}

/// A started peer: its stdin, and its stdout lines with their arrival time.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    name: String,
}

impl Peer {
    fn start(mut cmd: Command, name: String) -> Result<Peer, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the {name}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Peer { child, stdin, lines, name })
    }

    fn send(&mut self, line: &str) {
        if let Some(stdin) = &mut self.stdin {
            let _ = writeln!(stdin, "{line}");
            let _ = stdin.flush();
        }
    }

    /// Waits for a line starting with `prefix`, up to `timeout` or a stop request.
    fn expect(&mut self, prefix: &str, timeout: Duration) -> Result<String, String> {
        let end = Instant::now() + timeout;
        loop {
            if stop::requested() {
                return Err("interrupted".into());
            }
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) if line.starts_with(prefix) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!("the {} exited ({status}) before `{prefix}`", self.name));
                }
                Err(RecvTimeoutError::Timeout) if Instant::now() > end => {
                    return Err(format!("the {} did not say `{prefix}` within {timeout:?}", self.name));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn measure(plan: &Plan, link: &Link, cell: &Cell, work: &Path, stock: &Path) -> Result<RunResult, String> {
    link.impair(Impairment::None).map_err(|e| e.to_string())?;
    let seconds = plan.publish_seconds(cell.condition);
    let (loss, outage) = tuner_loss_outage(cell.condition);
    let data = cell.payload;
    let peer_args = PeerArgs {
        role: peer::Role::Pub,
        payload: data,
        rate: plan.rate,
        seconds,
        profile: cell.profile.into(),
        link: plan.link,
        loss,
        outage,
    };
    // Both peers take the stream as the same three options.
    let stream_args = [
        "--payload".to_string(),
        data.to_string(),
        "--rate".into(),
        plan.rate.to_string(),
        "--seconds".into(),
        seconds.to_string(),
    ];
    let command = |ns: &str, role: &str| -> Result<Command, String> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]);
        // Peers read no CYCLONEDDS_URI but the one given here.
        cmd.env_remove("CYCLONEDDS_URI");
        if cell.peer == "freight" {
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            cmd.arg(exe).args(["lab", "peer", role]).args(&stream_args).args([
                "--profile",
                cell.profile,
                "--link",
                &plan.link.to_string(),
                "--loss",
                &loss.to_string(),
                "--outage",
                &outage.to_string(),
            ]);
        } else {
            let depth = match cell.profile {
                "tuned" => {
                    let stream = tuned_stream(&peer_args)?;
                    let xml = work.join(format!("cyclonedds-{}-{}.xml", cell.condition, data));
                    std::fs::write(&xml, freight_tune::render::cyclonedds_xml(&stream))
                        .map_err(|e| format!("cannot write {}: {e}", xml.display()))?;
                    cmd.env("CYCLONEDDS_URI", format!("file://{}", xml.display()));
                    stream.history_depth.to_string()
                }
                _ => "all".into(),
            };
            cmd.arg(&plan.python).arg(stock).arg(role).args(["--topic", peer::TOPIC, "--depth", &depth]);
            if role == "pub" {
                cmd.args(&stream_args);
            }
        }
        Ok(cmd)
    };
    let mut sub = Peer::start(command(&link.b, "sub")?, "subscriber".into())?;
    sub.expect("ready", Duration::from_secs(20))?;
    let mut publisher = Peer::start(command(&link.a, "pub")?, "publisher".into())?;
    publisher.expect("matched", Duration::from_secs(35))?;
    // Let discovery settle (the subscriber's side of the match) before the clock starts.
    if !stop::sleep(Duration::from_secs(1)) {
        return Err("interrupted".into());
    }
    let frags_before = link.ip_fragments(&link.b).map_err(|e| e.to_string())?;
    match cell.condition {
        "loss1" => link.impair(Impairment::Loss(0.01)),
        "loss20" => link.impair(Impairment::Loss(0.20)),
        _ => Ok(()),
    }
    .map_err(|e| e.to_string())?;
    let t_go = monotonic_ns();
    publisher.send("go");
    let mut cut = None;
    if cell.condition == "outage" {
        stop::sleep(Duration::from_secs_f64(plan.before_cut));
        link.impair(Impairment::Down).map_err(|e| e.to_string())?;
        let t_cut = monotonic_ns();
        stop::sleep(plan.outage);
        link.impair(Impairment::None).map_err(|e| e.to_string())?;
        cut = Some((t_cut, monotonic_ns()));
    }
    let done = publisher.expect("done", Duration::from_secs_f64(seconds + 30.0))?;
    // Late repairs: give the last samples a second to arrive.
    stop::sleep(Duration::from_secs(1));
    link.impair(Impairment::None).map_err(|e| e.to_string())?;
    let ip_fragments = link.ip_fragments(&link.b).map_err(|e| e.to_string())?.saturating_sub(frags_before);
    sub.send("stop");
    let received = collect(&mut sub);
    let counter = |key: &str| -> u64 {
        done.split_whitespace().find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok()).unwrap_or(0)
    };
    let (sent, write_errors, skipped) = (counter("sent"), counter("errors"), counter("skipped"));
    Ok(summarize(cell, seconds, sent, write_errors, skipped, ip_fragments, &received, t_go, cut))
}

/// The tuned profile of a run: what the freight peer derives for itself.
fn tuned_stream(args: &PeerArgs) -> Result<freight_tune::Profile, String> {
    peer::stream_of(args).profile(peer::TOPIC).map_err(|e| e.to_string())
}

/// (seq, send_ns, recv_ns) of every sample the subscriber printed, until it exits (bounded).
fn collect(sub: &mut Peer) -> Vec<(u64, u64, u64)> {
    let end = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while Instant::now() < end {
        match sub.lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let mut f = line.split_whitespace();
                if f.next() != Some("r") {
                    continue;
                }
                let mut num = || f.next().and_then(|v| v.parse::<u64>().ok());
                if let (Some(seq), Some(sent), Some(recv)) = (num(), num(), num()) {
                    out.push((seq, sent, recv));
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    cell: &Cell,
    seconds: f64,
    sent: u64,
    write_errors: u64,
    skipped: u64,
    ip_fragments: u64,
    received: &[(u64, u64, u64)],
    t_go: u64,
    cut: Option<(u64, u64)>,
) -> RunResult {
    let mut seqs: Vec<u64> = received.iter().map(|r| r.0).collect();
    seqs.sort_unstable();
    seqs.dedup();
    let unique = seqs.len() as u64;
    let mut lat: Vec<f64> = received.iter().map(|r| r.2.saturating_sub(r.1) as f64 / 1e6).collect();
    lat.sort_by(f64::total_cmp);
    let mean_ms = (!lat.is_empty()).then(|| lat.iter().sum::<f64>() / lat.len() as f64);
    let p99_ms = (!lat.is_empty()).then(|| lat[((lat.len() as f64 * 0.99).ceil() as usize).clamp(1, lat.len()) - 1]);
    let outage = cut.map(|(t_cut, t_back)| {
        let fresh = received.iter().filter(|r| r.1 >= t_back).map(|r| r.2).min();
        let stale: Vec<&(u64, u64, u64)> = received.iter().filter(|r| r.1 < t_back && r.2 >= t_back).collect();
        let secs = seconds.ceil() as usize;
        let mut per_second = vec![0u32; secs];
        for r in received {
            if let Some(slot) = per_second.get_mut((r.2.saturating_sub(t_go) / 1_000_000_000) as usize) {
                *slot += 1;
            }
        }
        OutageResult {
            cut_at_s: t_cut.saturating_sub(t_go) as f64 / 1e9,
            outage_s: t_back.saturating_sub(t_cut) as f64 / 1e9,
            recovery_ms: fresh.map(|f| f.saturating_sub(t_back) as f64 / 1e6),
            stale: stale.len() as u64,
            stale_max_age_ms: stale.iter().map(|r| r.2.saturating_sub(r.1) as f64 / 1e6).max_by(f64::total_cmp),
            per_second,
        }
    });
    RunResult {
        profile: cell.profile.into(),
        peer: cell.peer.into(),
        condition: cell.condition.into(),
        payload_bytes: cell.payload,
        rx_hz: unique as f64 / seconds,
        mean_ms,
        p99_ms,
        lost: sent.saturating_sub(unique),
        ip_fragments,
        sent,
        write_errors,
        skipped,
        seconds,
        outage,
        error: None,
    }
}

fn failed(plan: &Plan, cell: &Cell, error: String) -> RunResult {
    RunResult {
        profile: cell.profile.into(),
        peer: cell.peer.into(),
        condition: cell.condition.into(),
        payload_bytes: cell.payload,
        rx_hz: f64::NAN,
        mean_ms: None,
        p99_ms: None,
        lost: 0,
        ip_fragments: 0,
        sent: 0,
        write_errors: 0,
        skipped: 0,
        seconds: plan.publish_seconds(cell.condition),
        outage: None,
        error: Some(error),
    }
}

/// The results as a table; outage rows add recovery and the stale burst, then the
/// per-second rates around the cut.
fn table(results: &[RunResult]) -> String {
    let opt = |v: Option<f64>, prec: usize| v.map_or("-".into(), |v| format!("{v:.prec$}"));
    let mut t = format!(
        "{:<8} {:<14} {:<8} {:>5} {:>6} {:>6} {:>8} {:>8} {:>5} {:>9} {:>9} {:>6}\n",
        "profile",
        "peer",
        "cond.",
        "KB",
        "sent",
        "rx Hz",
        "mean ms",
        "p99 ms",
        "lost",
        "IP frags",
        "recov. ms",
        "stale"
    );
    for r in results {
        if let Some(e) = &r.error {
            t += &format!(
                "{:<8} {:<14} {:<8} {:>5} failed: {e}\n",
                r.profile,
                r.peer,
                r.condition,
                r.payload_bytes / 1024
            );
            continue;
        }
        let (recovery, stale) =
            r.outage.as_ref().map_or(("".into(), "".into()), |o| (opt(o.recovery_ms, 0), o.stale.to_string()));
        t += &format!(
            "{:<8} {:<14} {:<8} {:>5} {:>6} {:>6.1} {:>8} {:>8} {:>5} {:>9} {:>9} {:>6}\n",
            r.profile,
            r.peer,
            r.condition,
            r.payload_bytes / 1024,
            r.sent,
            r.rx_hz,
            opt(r.mean_ms, 1),
            opt(r.p99_ms, 1),
            r.lost,
            r.ip_fragments,
            recovery,
            stale
        );
    }
    for r in results.iter().filter(|r| r.outage.is_some()) {
        if let Some(o) = &r.outage {
            let per: Vec<String> = o.per_second.iter().map(u32::to_string).collect();
            t += &format!(
                "\noutage {} · {} · {} KB: link down {:.1}–{:.1} s; samples per second: {}\n",
                r.profile,
                r.peer,
                r.payload_bytes / 1024,
                o.cut_at_s,
                o.cut_at_s + o.outage_s,
                per.join(" ")
            );
            if let Some(age) = o.stale_max_age_ms {
                t += &format!("  {} stale samples after the link returned, the oldest {:.0} ms old\n", o.stale, age);
            }
        }
    }
    t
}
