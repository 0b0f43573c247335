"""One-way latency of freight's Python API, with the iceoryx2 Python binding as baseline.

Usage::

    python -m freight.bench latency [--sizes 8B,64KiB,1MiB,8MiB,32MiB,128MiB]
                                    [--iterations 5000] [--duration-per-row 2]
                                    [--json FILE] [--baseline auto|iceoryx2|none] [--user-type]

``freight bench latency --lang python`` runs this module with the same options. The table
goes to stdout, ready for BENCHMARKS.md; progress goes to stderr. Sizes take the units of
the Rust CLI (B, KiB, MiB, GiB as powers of 2; KB, MB, GB as powers of 10) and K, M, G as
short forms of KiB, MiB, GiB.

Measurement protocol: that of the Rust harness (crates/freight-cli/src/bench/mod.rs), in
Python, with freight and iceoryx2 driven by the same loops:

* Two processes. This one publishes; the subscriber is a child started as
  ``python -m freight.bench peer`` with the same interpreter. When at least two CPUs are
  allowed, the publisher is pinned to the first and the subscriber to the second.
* Ping-pong, one message in flight. The publisher loans a buffer of the row's size in shared
  memory, writes the 16-byte header ``{seq: u64, t_send_ns: u64}`` (little-endian;
  ``t_send_ns`` is ``time.monotonic_ns()`` read just before the send) into its first bytes,
  and sends. Only the header is written, as a zero-copy publisher filling its buffer in place
  would not copy the payload either; a row smaller than 16 bytes still carries the header.
  The subscriber busy-polls a non-blocking receive, reads the header through a zero-copy
  view, reads the clock, records ``now - t_send_ns`` and acks ``seq`` on a return topic. The
  publisher busy-polls for that ack before it sends the next message. CLOCK_MONOTONIC is
  system-wide on Linux, so timestamps of the two processes compare.
* The first 50 round trips (at most 0.5 s of them) are warm-up and discarded. A row ends
  after ``--iterations`` round trips or ``--duration-per-row`` seconds, whichever comes first,
  never with fewer than 20 samples. p50 and p99 are nearest-rank percentiles.
* Every row is bounded by 60 s. The child gives up by itself at that deadline and is killed
  by the kernel if this process dies (PR_SET_PDEATHSIG). It reports on stdout, one JSON
  object per line (ready, then its samples, or a failure), and exits when this process
  closes its stdin.
* Each library is used through its public API, the way a careful user would write it.
  freight: ``std_msgs/UInt8MultiArray`` on a ``local_only`` context, ``Publisher.loan`` and
  ``publish``, ``Subscription.take(timeout_sec=0)``, the header read from the numpy view
  ``msg.data``; acks are 8-byte messages of the same type. iceoryx2: an ipc
  publish-subscribe service of ``Slice[c_uint8]``, ``loan_slice_uninit`` then
  ``assume_init().send()``, ``receive()``, the header read at ``payload_ptr``; acks on a
  ``c_uint64`` service. Both iceoryx2 services are configured as in the Rust baseline: one
  publisher, one subscriber, buffer 2, no history. With ``--user-type``, "freight-user" rows
  do what the freight rows do with a type of a user's package (``message_class``) holding
  UInt8MultiArray's fields.
* Rows alternate between the libraries size by size, so that the slow drifts of a noisy
  machine affect both alike: the figure of merit is the ratio of p50s within one run, and
  the target is freight <= 2x iceoryx2 at every size.

Baseline: ``--baseline auto`` (the default) measures iceoryx2 when it can be imported and
otherwise measures freight alone, saying on stderr how to install it; ``--baseline iceoryx2``
makes a missing iceoryx2 an error, for runs where the comparison is the point (the numbers
in BENCHMARKS.md); ``--baseline none`` measures freight alone.

Errors are printed as ``error: <what went wrong>; <what to do>`` and exit with status 1.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import platform
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

import freight
from freight.msgs.std_msgs import UInt8MultiArray

HEADER = struct.Struct("<QQ")
HEADER_LEN = HEADER.size
ACK = struct.Struct("<Q")
#: The publisher's last message, acked like any other; the subscriber then reports its samples.
STOP_SEQ = 2**64 - 1

WARMUP_ITERATIONS = 50
WARMUP_MAX_S = 0.5
#: A p99 of fewer samples would be meaningless.
MIN_SAMPLES = 20
ROW_TIMEOUT_S = 60.0
#: Busy-poll loops look at the clock only every this many empty polls: the deadline is a
#: safety net, and a clock read per poll would slow the loop down for nothing.
POLLS_PER_CHECK = 256
#: How often the publisher checks, while waiting for an ack, whether the subscriber failed.
PEER_CHECK_S = 0.2
#: Shared memory is allocated in full (several times over); beyond this a typo would eat
#: the machine. Same limit as the Rust CLI.
MAX_SIZE = 4 << 30
DEFAULT_SIZES = "8B,64KiB,1MiB,8MiB,32MiB,128MiB"
TARGET_RATIO = 2.0
#: The baseline version BENCHMARKS.md was measured with (scripts/requirements-test.txt).
ICEORYX2_PIN = "iceoryx2==0.10.0"
#: Keep at most this much of a failed child's output for the error message.
DIAGNOSTICS_MAX = 4000


class BenchError(Exception):
    """A failure the user can act on: what went wrong and what to do about it."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"{what}; {fix}")
        self.what = what
        self.fix = fix


def _row_timeout(waiting_for: str) -> BenchError:
    return BenchError(
        f"gave up waiting for {waiting_for}: a row may take at most {ROW_TIMEOUT_S:.0f} s",
        "the machine is overloaded or a transport is stuck; retry with fewer or smaller --sizes",
    )


def _bug(what: str) -> BenchError:
    return BenchError(what, "this is a bug in the benchmark; please report it")


# --- Arguments ---------------------------------------------------------------------------

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
}


def parse_size(text: str) -> int:
    """Parses one size such as ``8B``, ``64KiB``, ``1M`` or ``4096`` into bytes."""
    stripped = text.strip()
    digits = stripped[: len(stripped) - len(stripped.lstrip("0123456789"))]
    unit = stripped[len(digits) :]
    hint = "write sizes like 8B, 64KiB, 1MiB or 1MB"
    if not digits:
        raise ValueError(f"`{text}` is not a size; {hint}")
    if unit.startswith((".", ",")):
        raise ValueError(f"`{text}` is not a whole number; use a smaller unit (1536KiB, not 1.5MiB)")
    multiplier = _UNITS.get(unit.strip().lower())
    if multiplier is None:
        raise ValueError(f"`{text}` has an unknown unit `{unit.strip()}`; {hint}")
    size = int(digits) * multiplier
    if size == 0:
        raise ValueError(f"`{text}` is zero bytes; sizes must be at least 1B")
    if size > MAX_SIZE:
        raise ValueError(f"`{text}` is too large; sizes go up to 4GiB")
    return size


def _sizes_arg(text: str) -> list[int]:
    try:
        sizes = [parse_size(part) for part in text.split(",")]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return list(dict.fromkeys(sizes))  # without repeats, in the order given


def _iterations_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a whole number") from None
    if n < MIN_SAMPLES:
        raise argparse.ArgumentTypeError(f"{n} is too small to compute a p99; use at least {MIN_SAMPLES}")
    return n


def _seconds_arg(text: str) -> float:
    try:
        secs = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not a number of seconds; write e.g. 2 or 0.5") from None
    if not 0 < secs <= 3600:
        raise argparse.ArgumentTypeError(f"`{text}` is out of range; use a duration between 0 and 3600 seconds")
    return secs


def format_size(size: int) -> str:
    """``64 KiB``, ``31.6 MiB``, ``8 B``: the largest binary unit the size reaches."""
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if size >= scale:
            return f"{size // scale} {unit}" if size % scale == 0 else f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _wire_len(size: int) -> int:
    return max(size, HEADER_LEN)


# --- CPUs and process lifetime -----------------------------------------------------------


def _cpu_plan() -> tuple[int | None, int | None]:
    """CPUs for the publisher and the subscriber: the first two allowed ones. With a single
    CPU, pinning both sides to it would only add scheduler noise, so nothing is pinned."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


def _pin(cpu: int | None) -> None:
    if cpu is None:
        return
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass  # a cpuset may forbid it; the numbers stay valid, only noisier


def _die_with_parent(parent_pid: int) -> None:
    """Asks the kernel to kill this process when its parent dies: a busy-polling orphan would
    burn a CPU until its deadline."""
    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the row deadline still ends this process
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


# --- The two libraries -------------------------------------------------------------------
#
# Each library has a publisher side ("ping": sends data, polls acks) and a subscriber side
# ("pong": polls data, sends acks). The loops that drive them, and so everything around the
# library calls, are shared.


# The fields of std_msgs/UInt8MultiArray as a type of a user's own package, with the
# definition a module of `freight msg python` would carry: the "freight-user" rows measure
# what such a type costs per message (user_types.rs converts it field by field) beside the
# built-in class.
USER_TYPE = "freight_bench_msgs/msg/Bytes"
USER_DEFINITION = "\n".join(
    ["std_msgs/MultiArrayLayout layout", "uint8[] data", "=" * 80, "MSG: std_msgs/MultiArrayLayout",
     "std_msgs/MultiArrayDimension[] dim", "uint32 data_offset", "=" * 80, "MSG: std_msgs/MultiArrayDimension",
     "string label", "uint32 size", "uint32 stride", ""]
)  # fmt: skip


def _message_type(library: str):
    if library == "freight-user":
        return freight.msgs.message_class(USER_TYPE, USER_DEFINITION)
    return UInt8MultiArray


class FreightPing:
    """Publisher side over freight's Python API."""

    def __init__(self, channel: str, size: int, library: str = "freight") -> None:
        self._type = _message_type(library)
        self._context = freight.Context(local_only=True)
        self._node = freight.Node("freight_bench_ping", context=self._context)
        self._publisher = self._node.create_publisher(self._type, f"{channel}/ping", 1)
        self._acks = self._node.create_subscription(self._type, f"{channel}/ack", None, 1)
        self._shape = (_wire_len(size),)

    def peer_connected(self) -> bool:
        return self._publisher.get_subscription_count() >= 1

    def send(self, seq: int) -> None:
        data = self._publisher.loan(self._shape, np.uint8)
        HEADER.pack_into(data, 0, seq, time.monotonic_ns())
        self._publisher.publish(self._type(data=data))

    def poll_ack(self) -> int | None:
        msg = self._acks.take(timeout_sec=0)
        return None if msg is None else ACK.unpack_from(msg.data)[0]

    def close(self) -> None:
        self._node.destroy_node()
        self._context.shutdown()


class FreightPong:
    """Subscriber side over freight's Python API."""

    def __init__(self, channel: str, size: int, library: str = "freight") -> None:
        self._type = _message_type(library)
        self._context = freight.Context(local_only=True)
        self._node = freight.Node("freight_bench_pong", context=self._context)
        self._subscription = self._node.create_subscription(self._type, f"{channel}/ping", None, 1)
        self._acks = self._node.create_publisher(self._type, f"{channel}/ack", 1)

    def peer_connected(self) -> bool:
        return self._acks.get_subscription_count() >= 1

    def poll(self) -> tuple[int, int, int] | None:
        msg = self._subscription.take(timeout_sec=0)
        if msg is None:
            return None
        seq, t_send = HEADER.unpack_from(msg.data)
        now = time.monotonic_ns()
        return seq, t_send, now

    def ack(self, seq: int) -> None:
        data = self._acks.loan((ACK.size,), np.uint8)
        ACK.pack_into(data, 0, seq)
        self._acks.publish(self._type(data=data))


def _import_iceoryx2():
    # Imported when first needed: without it, freight can still be measured alone.
    import iceoryx2

    # Its info-level lines would interleave with the table; warnings still show.
    iceoryx2.set_log_level(iceoryx2.LogLevel.Warn)
    return iceoryx2


def _iceoryx2_error(what: str, e: Exception) -> BenchError:
    return BenchError(
        f"{what}: {e!r}",
        "check that /dev/shm is mounted and has free space (df -h /dev/shm); stale files of a "
        "killed run can be removed by deleting /dev/shm/iox2_*",
    )


class _Iceoryx2Ports:
    """The node and the two services of one row, identical on both sides so that either
    may create them. Sized as in the Rust baseline: every publisher preallocates
    max_subscribers * (buffer + borrowed) + history + loaned = 1 * (2 + 1) + 0 + 1 samples of
    the row's size, so each extra slot would cost a full payload of shared memory."""

    def __init__(self, channel: str) -> None:
        iox2 = _import_iceoryx2()
        self.iox2 = iox2
        try:
            self.node = (
                iox2.NodeBuilder.new()
                # The built-in defaults, not a config file looked up in the working or home
                # directory: the baseline must not depend on where the bench is started.
                .config(iox2.config.default())
                # Otherwise iceoryx2 takes over SIGINT and Ctrl+C no longer stops the bench.
                .signal_handling_mode(iox2.SignalHandlingMode.Disabled)
                .create(iox2.ServiceType.Ipc)
            )
            self.data = self._service(f"{channel}/data", iox2.Slice[ctypes.c_uint8])
            self.acks = self._service(f"{channel}/ack", ctypes.c_uint64)
        except Exception as e:  # iceoryx2 raises a distinct class per builder step
            raise _iceoryx2_error("cannot open the iceoryx2 services", e) from e

    def _service(self, name: str, payload):
        return (
            self.node.service_builder(self.iox2.ServiceName.new(name))
            .publish_subscribe(payload)
            .max_publishers(1)
            .max_subscribers(1)
            .subscriber_max_buffer_size(2)
            .subscriber_max_borrowed_samples(1)
            .history_size(0)
            .open_or_create()
        )


class Iceoryx2Ping:
    """Publisher side over the iceoryx2 Python binding."""

    def __init__(self, channel: str, size: int) -> None:
        self._ports = _Iceoryx2Ports(channel)
        self._len = _wire_len(size)
        try:
            self._publisher = (
                self._ports.data.publisher_builder()
                .initial_max_slice_len(self._len)
                .allocation_strategy(self._ports.iox2.AllocationStrategy.PowerOfTwo)
                .max_loaned_samples(1)
                .create()
            )
            self._acks = self._ports.acks.subscriber_builder().create()
        except Exception as e:
            raise _iceoryx2_error("cannot create the iceoryx2 ports", e) from e

    def peer_connected(self) -> bool:
        return self._ports.data.dynamic_config.number_of_subscribers >= 1

    def send(self, seq: int) -> None:
        sample = self._publisher.loan_slice_uninit(self._len)
        ctypes.memmove(sample.payload_ptr, HEADER.pack(seq, time.monotonic_ns()), HEADER_LEN)
        sample.assume_init().send()

    def poll_ack(self) -> int | None:
        sample = self._acks.receive()
        return None if sample is None else ctypes.c_uint64.from_address(sample.payload_ptr).value

    def close(self) -> None:
        self._publisher.delete()
        self._acks.delete()


class Iceoryx2Pong:
    """Subscriber side over the iceoryx2 Python binding."""

    def __init__(self, channel: str, size: int) -> None:
        self._ports = _Iceoryx2Ports(channel)
        try:
            self._subscriber = self._ports.data.subscriber_builder().create()
            self._acks = self._ports.acks.publisher_builder().max_loaned_samples(1).create()
        except Exception as e:
            raise _iceoryx2_error("cannot create the iceoryx2 ports", e) from e

    def peer_connected(self) -> bool:
        return self._ports.acks.dynamic_config.number_of_subscribers >= 1

    def poll(self) -> tuple[int, int, int] | None:
        sample = self._subscriber.receive()
        if sample is None:
            return None
        seq, t_send = HEADER.unpack(ctypes.string_at(sample.payload_ptr, HEADER_LEN))
        now = time.monotonic_ns()
        return seq, t_send, now

    def ack(self, seq: int) -> None:
        self._acks.send_copy(ctypes.c_uint64(seq))


LIBRARIES = {
    "freight": (FreightPing, FreightPong),
    "freight-user": (
        lambda channel, size: FreightPing(channel, size, "freight-user"),
        lambda channel, size: FreightPong(channel, size, "freight-user"),
    ),
    "iceoryx2": (Iceoryx2Ping, Iceoryx2Pong),
}


# --- The subscriber process --------------------------------------------------------------


def _emit(event: str, **fields) -> None:
    """Reports to the parent: one JSON object per line on stdout."""
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def _wait_connected(side, deadline: float, waiting_for: str) -> None:
    while not side.peer_connected():
        if time.monotonic() >= deadline:
            raise _row_timeout(waiting_for)
        time.sleep(0.0005)


def _subscribe(pong, deadline: float) -> list[int]:
    _wait_connected(pong, deadline, "the publisher's ack subscription")
    _emit("ready")
    samples: list[int] = []
    polls = 0
    while True:
        arrival = pong.poll()
        if arrival is None:
            polls += 1
            if polls % POLLS_PER_CHECK == 0 and time.monotonic() >= deadline:
                raise _row_timeout("the next message")
            continue
        seq, t_send, t_recv = arrival
        pong.ack(seq)
        if seq == STOP_SEQ:
            return samples
        if seq != len(samples):
            raise BenchError(
                f"expected message {len(samples)} but received {seq}",
                "messages were lost or reordered; this is a bug in the transport",
            )
        samples.append(t_recv - t_send)


def run_peer(args: argparse.Namespace) -> int:
    """The hidden ``peer`` subcommand: the subscriber side of one row."""
    _die_with_parent(args.parent_pid)
    _pin(args.cpu)
    deadline = time.monotonic() + args.timeout
    try:
        pong = LIBRARIES[args.library][1](args.channel, args.size)
        samples = _subscribe(pong, deadline)
    except BenchError as e:
        _emit("failed", what=e.what, fix=e.fix)
        return 1
    except Exception as e:  # anything else is reported too, so that the parent can show it
        _emit("failed", what=f"{type(e).__name__}: {e}", fix="this is a bug; its traceback is in the output")
        raise
    _emit("samples", samples_ns=samples)
    # Our ports stay open until the parent has taken the last ack: it closes our stdin then.
    sys.stdin.read()
    return 0


class Peer:
    """The subscriber child process of one row, and the messages it reports."""

    def __init__(self, library: str, channel: str, size: int, cpu: int | None, deadline: float) -> None:
        command = [sys.executable, "-m", "freight.bench", "peer", "--library", library]
        command += ["--channel", channel, "--size", str(size), "--parent-pid", str(os.getpid())]
        command += ["--timeout", f"{max(deadline - time.monotonic(), 0.001):.3f}"]
        if cpu is not None:
            command += ["--cpu", str(cpu)]
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        except OSError as e:
            raise BenchError(
                f"cannot start the subscriber process {sys.executable}: {e}",
                "check that the system allows starting processes (ulimit -u) and retry",
            ) from e
        self._messages: queue.Queue = queue.Queue()
        self._diagnostics: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_messages, daemon=True),
            threading.Thread(target=self._read_diagnostics, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_messages(self) -> None:
        for line in self._process.stdout:
            try:
                self._messages.put(json.loads(line))
            except json.JSONDecodeError:
                # Something in the child printed to stdout; keep it rather than fail over it.
                self._diagnostics.append(line.rstrip())
        self._messages.put(None)  # end of output

    def _read_diagnostics(self) -> None:
        for line in self._process.stderr:
            self._diagnostics.append(line.rstrip())

    def _check_message(self, msg: dict | None, waiting_for: str) -> dict:
        if msg is None:
            raise BenchError(
                f"the subscriber process ended before reporting {waiting_for}",
                "see its output for the cause; rerun the same command to check it is reproducible",
            )
        if msg.get("event") == "failed":
            raise BenchError(f"the subscriber process failed: {msg.get('what')}", str(msg.get("fix")))
        return msg

    def expect(self, event: str, deadline: float) -> dict:
        """Waits for the report `event` and returns it."""
        try:
            msg = self._messages.get(timeout=max(deadline - time.monotonic(), 0))
        except queue.Empty:
            raise _row_timeout(f"the {event} report of the subscriber process") from None
        msg = self._check_message(msg, f"its {event}")
        if msg.get("event") != event:
            raise _bug(f"the subscriber process sent {msg.get('event')!r} instead of {event!r}")
        return msg

    def check(self) -> None:
        """Fails if the subscriber reported anything in the middle of the row: a failure, or
        the end of its output. Cheap; the publisher calls it while waiting for an ack."""
        try:
            msg = self._messages.get_nowait()
        except queue.Empty:
            return
        msg = self._check_message(msg, "its samples")
        raise _bug(f"the subscriber process sent {msg.get('event')!r} in the middle of the row")

    def finish(self, deadline: float) -> None:
        """Lets the child exit after its samples, and checks that it exits cleanly."""
        self._process.stdin.close()
        try:
            status = self._process.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            raise BenchError(
                "the subscriber process did not exit after reporting its samples",
                "it was killed; retry, and report a bug if it happens again",
            ) from None
        if status != 0:
            raise BenchError(
                f"the subscriber process exited with status {status}",
                "see its output; rerun the same command to check it is reproducible",
            )

    def close(self) -> str:
        """Kills the child if it still runs, reaps it, and returns what is known about its
        end: how it exited, if by itself and not cleanly, and everything it printed besides
        its reports. Idempotent."""
        was_running = self._process.poll() is None
        if was_running:
            self._process.kill()
        self._process.stdin.close()
        status = self._process.wait()
        for reader in self._readers:  # the pipes are closed now, so the readers finish
            reader.join(timeout=5)
        parts = []
        if not was_running and status < 0:
            parts.append(f"killed by {signal.Signals(-status).name}")
        elif not was_running and status > 0:
            parts.append(f"exit status {status}")
        if self._diagnostics:
            parts.append("output: " + " | ".join(self._diagnostics)[-DIAGNOSTICS_MAX:])
        return "; ".join(parts)


# --- The publisher side: rows ------------------------------------------------------------


@dataclass
class Plan:
    """Iteration and time budget of every row."""

    iterations: int
    max_duration_s: float


class RowClock:
    """Decides when the warm-up ends and when the row is complete (as the Rust harness)."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan
        self._started = time.monotonic()
        self._first: int | None = None  # first measured seq
        self._t0 = 0.0
        self.elapsed_s = 0.0

    def before_send(self, seq: int) -> bool:
        """Called before message `seq` is sent; False when the row is complete."""
        if self._first is None:
            warm = seq >= WARMUP_ITERATIONS or (seq >= 1 and time.monotonic() - self._started >= WARMUP_MAX_S)
            if not warm:
                return True
            self._first, self._t0 = seq, time.monotonic()
        measured = seq - self._first
        elapsed = time.monotonic() - self._t0
        if measured >= self._plan.iterations or (measured >= MIN_SAMPLES and elapsed >= self._plan.max_duration_s):
            self.elapsed_s = elapsed
            return False
        return True

    def warmup(self, sent: int) -> int:
        """Number of warm-up messages among the `sent` ones."""
        return sent if self._first is None else self._first


def _round_trip(ping, peer: Peer, seq: int, deadline: float) -> None:
    ping.send(seq)
    polls = 0
    next_check = 0.0
    while True:
        ack = ping.poll_ack()
        if ack is not None:
            if ack != seq:
                raise BenchError(
                    f"got the ack for message {ack} while waiting for {seq}",
                    "messages were reordered or duplicated; this is a bug in the transport",
                )
            return
        polls += 1
        if polls % POLLS_PER_CHECK == 0:
            now = time.monotonic()
            if now >= next_check:
                peer.check()
                next_check = now + PEER_CHECK_S
            if now >= deadline:
                raise _row_timeout(f"the ack for message {seq}")


@dataclass
class Row:
    """One row of results; the ``--json`` file holds a list of these (field names of the
    Rust harness's rows, plus ``lang`` and ``samples``)."""

    transport: str
    lang: str
    wait: str
    size_bytes: int
    p50_us: float
    p99_us: float
    max_us: float
    msgs_per_s: float
    samples: int


def percentile(sorted_ns: list[int], p: int) -> int:
    """Nearest-rank percentile: always a latency that was actually observed."""
    rank = -(-len(sorted_ns) * p // 100)  # ceil, in integers
    return sorted_ns[min(max(rank, 1), len(sorted_ns)) - 1]


def measure_row(library: str, size: int, channel: str, plan: Plan, cpus) -> Row:
    deadline = time.monotonic() + ROW_TIMEOUT_S
    # Our side first: the child then opens what we created.
    ping = LIBRARIES[library][0](channel, size)
    peer = Peer(library, channel, size, cpus[1], deadline)
    try:
        peer.expect("ready", deadline)
        _wait_connected(ping, deadline, "the subscriber process to connect")
        clock = RowClock(plan)
        seq = 0
        while clock.before_send(seq):
            _round_trip(ping, peer, seq, deadline)
            seq += 1
        _round_trip(ping, peer, STOP_SEQ, deadline)
        samples = peer.expect("samples", deadline)["samples_ns"]
        peer.finish(deadline)
    except BenchError as e:
        end = peer.close()
        raise BenchError(f"{e.what} (subscriber process: {end})" if end else e.what, e.fix) from e
    finally:
        peer.close()
        ping.close()
    if len(samples) != seq:
        raise BenchError(
            f"the subscriber process reported {len(samples)} samples for {seq} messages",
            "messages were lost or duplicated; this is a bug in the transport",
        )
    measured = sorted(samples[clock.warmup(seq) :])
    return Row(
        transport=library,
        lang="python",
        wait="spin",
        size_bytes=size,
        p50_us=percentile(measured, 50) / 1000,
        p99_us=percentile(measured, 99) / 1000,
        max_us=measured[-1] / 1000,
        msgs_per_s=len(measured) / clock.elapsed_s if clock.elapsed_s > 0 else 0.0,
        samples=len(measured),
    )


# --- Report ------------------------------------------------------------------------------


def _fmt_us(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def render_table(rows: list[Row], libraries: list[str], plan: Plan, nproc: int) -> str:
    by_key: dict[tuple[str, int], Row] = {(r.transport, r.size_bytes): r for r in rows}
    sizes = list(dict.fromkeys(r.size_bytes for r in rows))
    header = ["size"]
    for lib in libraries:
        header += [f"{lib} p50 µs", "p99 µs", "max µs"]
    with_ratio = "iceoryx2" in libraries
    with_user = "freight-user" in libraries
    if with_ratio:
        header.append("freight/iceoryx2 (p50)")
    if with_user:
        header.append("freight-user/freight (p50)")
    body = []
    missed = []
    for size in sizes:
        cells = [format_size(size)]
        for lib in libraries:
            r = by_key[(lib, size)]
            cells += [_fmt_us(r.p50_us), _fmt_us(r.p99_us), _fmt_us(r.max_us)]
        if with_ratio:
            ratio = by_key[("freight", size)].p50_us / by_key[("iceoryx2", size)].p50_us
            cells.append(f"{ratio:.2f}x")
            if ratio > TARGET_RATIO:
                missed.append(f"{format_size(size)} ({ratio:.2f}x)")
        if with_user:
            cells.append(f"{by_key[('freight-user', size)].p50_us / by_key[('freight', size)].p50_us:.2f}x")
        body.append(cells)
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def fmt_line(cells: list[str]) -> str:
        return " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + "\n"

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = (
        "freight bench latency --lang python: one-way latency, Python publisher process -> Python "
        "subscriber process, busy-polling\n"
        f"Date: {now}. Machine: nproc = {nproc}, {_cpu_model()}, "
        f"Linux {platform.release()}. Python {platform.python_version()}, numpy {np.__version__}, "
        f"freight {_version('freight')}, iceoryx2 {_version('iceoryx2')}.\n"
        f"Per row: {WARMUP_ITERATIONS} warm-up round trips, then {plan.iterations} round trips or "
        f"{plan.max_duration_s:g} s, whichever comes first.\n\n"
    )
    out += fmt_line(header)
    out += "-|-".join("-" * w for w in widths) + "\n"
    out += "".join(fmt_line(line) for line in body)
    if with_ratio:
        target = f"target freight p50 <= {TARGET_RATIO:g}x iceoryx2 p50"
        out += f"\n{target}: " + (f"missed at {', '.join(missed)}\n" if missed else "met at every size\n")
    return out


def _check_output_path(path: Path) -> None:
    if path.is_dir():
        raise BenchError(f"cannot write --json {path}: it is a directory", "pass a file name")
    if not path.resolve().parent.is_dir():
        raise BenchError(
            f"cannot write --json {path}: {path.parent} is not a directory",
            "create the directory first or pass another --json path",
        )


def _libraries(baseline: str, user_type: bool) -> list[str]:
    """The libraries to measure, the baseline checked up front: a missing one should fail in
    the first second, not after minutes of measuring."""
    freights = ["freight", "freight-user"] if user_type else ["freight"]
    if baseline == "none":
        return freights
    try:
        _import_iceoryx2()
    except ImportError as e:
        install = f"{sys.executable} -m pip install {ICEORYX2_PIN}"
        if baseline == "iceoryx2":
            raise BenchError(f"the iceoryx2 baseline is not installed ({e})", f"install it: {install}") from e
        print(
            f"note: iceoryx2 is not installed, so only freight is measured (no baseline); "
            f"for the comparison: {install}",
            file=sys.stderr,
        )
        return freights
    return [*freights, "iceoryx2"]


def run_latency(args: argparse.Namespace) -> int:
    if args.json is not None:
        _check_output_path(args.json)
    libraries = _libraries(args.baseline, args.user_type)
    plan = Plan(iterations=args.iterations, max_duration_s=args.duration_per_row)
    nproc = len(os.sched_getaffinity(0))  # before pinning narrows it to one
    cpus = _cpu_plan()
    # This thread is the publisher for the whole run; the reader threads it starts inherit
    # the pinning, which costs nothing as they sleep in read() while a row runs.
    _pin(cpus[0])
    # Unique per run: a crashed earlier run or a concurrent one cannot collide with this one.
    run_id = f"r{os.getpid()}_{time.monotonic_ns() & 0xFFFFFF:x}"
    work = [(size, lib) for size in args.sizes for lib in libraries]
    rows = []
    for index, (size, library) in enumerate(work):
        label = f"{library} {format_size(size)}"
        print(f"[{index + 1}/{len(work)}] {label} ... ", end="", file=sys.stderr, flush=True)
        try:
            row = measure_row(library, size, f"/freight_bench/{run_id}_{index}", plan, cpus)
        except BenchError as e:
            print("failed", file=sys.stderr)
            raise BenchError(f"{label}: {e.what}", e.fix) from e
        print(f"p50 {row.p50_us:.2f} µs ({row.samples} samples)", file=sys.stderr)
        rows.append(row)
    sys.stdout.write(render_table(rows, libraries, plan, nproc))
    sys.stdout.flush()
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m freight.bench",
        description="Latency benchmark of freight's Python API against the iceoryx2 Python binding.",
    )
    # The metavar hides the internal `peer` subcommand from --help.
    commands = parser.add_subparsers(dest="command", required=True, metavar="latency")
    latency = commands.add_parser(
        "latency",
        help="one-way latency per message size",
        description="One-way latency, Python to Python across two processes, busy-polling: freight "
        "and (as baseline, in the same run) iceoryx2. See the module docstring for the protocol.",
    )
    latency.add_argument(
        "--sizes",
        type=_sizes_arg,
        default=_sizes_arg(DEFAULT_SIZES),
        metavar="SIZES",
        help=f"comma-separated message sizes: B, KiB (K), MiB (M), GiB (G), KB, MB, GB (default {DEFAULT_SIZES})",
    )
    latency.add_argument(
        "--iterations",
        type=_iterations_arg,
        default=5000,
        metavar="N",
        help="measured round trips per row, after warm-up; at least 20 (default 5000)",
    )
    latency.add_argument(
        "--duration-per-row",
        type=_seconds_arg,
        default=2.0,
        metavar="SECS",
        help="time limit per row; a row stops at whichever limit comes first (default 2)",
    )
    latency.add_argument("--json", type=Path, metavar="FILE", help="also write the rows as a JSON list to FILE")
    latency.add_argument(
        "--baseline",
        choices=["auto", "iceoryx2", "none"],
        default="auto",
        help="auto: measure iceoryx2 if installed; iceoryx2: fail without it; none: freight only (default auto)",
    )
    latency.add_argument(
        "--user-type",
        action="store_true",
        help=f"also measure {USER_TYPE}, UInt8MultiArray's fields as a type of a user's package "
        "(freight.msgs.message_class), beside the built-in class",
    )
    # The subscriber process of a row; only run_latency starts it.
    peer = commands.add_parser("peer")
    peer.add_argument("--library", choices=sorted(LIBRARIES), required=True)
    peer.add_argument("--channel", required=True)
    peer.add_argument("--size", type=int, required=True)
    peer.add_argument("--parent-pid", type=int, required=True)
    peer.add_argument("--timeout", type=float, required=True)
    peer.add_argument("--cpu", type=int)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "peer":
        return run_peer(args)
    try:
        return run_latency(args)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
