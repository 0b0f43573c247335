#!/usr/bin/env python3
"""Stock ROS 2 peer for the freight network lab: std_msgs/UInt8MultiArray over Cyclone DDS.

Stands in for a stock ROS 2 node facing freight's DDS plane: built only on the PyPI
`cyclonedds` package (Cyclone DDS 11), no freight code, with its own IDL declaration and
rmw_cyclonedds' wire conventions: DDS topic "rt/<topic>", type name
"std_msgs::msg::dds_::UInt8MultiArray_", XCDR1 (plain CDR). Cyclone is configured only
by CYCLONEDDS_URI as the caller sets it (unset: Cyclone defaults).

    cyclonedds_peer.py pub --topic T --payload BYTES --rate HZ --seconds S --depth N|all
                           [--domain D] [--max-blocking-ms 100] [--lifespan-ms MS]
    cyclonedds_peer.py sub --topic T --depth N|all [--domain D] [--seconds S]
    cyclonedds_peer.py selftest

QoS on both sides: reliable (max_blocking_time --max-blocking-ms), volatile, KEEP_LAST
depth or KEEP_ALL ("all"), Lifespan if --lifespan-ms. Message k carries in its data
bytes 0..8 k (uint64 LE) and bytes 8..16 the CLOCK_MONOTONIC send time in ns (uint64 LE),
zeros after; k is the schedule slot t0 + k/rate, so skipped slots leave gaps in k.

stdout, one line per event, flushed; diagnostics go to stderr:
  pub: `matched` once a reader matched (exit 3 after 30 s without), then waits for a
       line `go` on stdin, publishes, then `done sent=<ok writes> errors=<n> skipped=<n>`.
  sub: `ready`, then `r <seq> <send_ns> <recv_ns>` per sample; stops on stdin EOF, a
       line `stop`, or after --seconds.
SIGTERM/SIGINT end either side cleanly (pub still prints its `done` line if it had
started publishing). Exit codes: 0 ok, 1 selftest mismatch, 2 usage, 3 pub found no
reader, 4 pub stdin closed before `go`.
"""
import argparse
import math
import os
import signal
import struct
import sys
import threading
import time
from dataclasses import dataclass, field

from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct, annotations as annotate, types
from cyclonedds.idl._machinery import BytesMachine
from cyclonedds.pub import DataWriter
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

HEADER = struct.Struct("<QQ")  # seq, send_ns: the 16 bytes the lab reads back


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


@dataclass
@annotate.final
class MultiArrayDimension_(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    label: str
    size: types.uint32
    stride: types.uint32


@dataclass
@annotate.final
class MultiArrayLayout_(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    dim: types.sequence[MultiArrayDimension_] = field(default_factory=list)
    data_offset: types.uint32 = 0


@dataclass
@annotate.final
class UInt8MultiArray_(IdlStruct, typename="std_msgs::msg::dds_::UInt8MultiArray_"):
    layout: MultiArrayLayout_
    data: types.sequence[types.uint8]


# `sequence<uint8>` gives the right XTypes type information, but the package (de)serialises
# it element by element into a list of ints (far too slow at 30 Hz x 512 KiB). `bytes` has
# the identical CDR encoding (align 4, uint32 length, raw octets), so swap in the package's
# bytes codec for this member: `data` is written from bytes/bytearray and read into bytes.
UInt8MultiArray_.__idl__.populate()
for _machine in (UInt8MultiArray_.__idl__.v1_machine, UInt8MultiArray_.__idl__.v2_machine):
    _machine.members_machines["data"] = BytesMachine()


class Stop(BaseException):
    """Raised from the signal handler so blocking calls (readline, sleep) end at once;
    a BaseException so the `except Exception` around writes cannot swallow it."""


def on_signal(signum, _frame):
    raise Stop(signal.Signals(signum).name)


def emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def log(text):
    print(f"cyclonedds_peer: {text}", file=sys.stderr, flush=True)


def make_qos(args):
    history = Policy.History.KeepAll if args.depth == "all" else Policy.History.KeepLast(depth=int(args.depth))
    policies = [Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=args.max_blocking_ms)),
                Policy.Durability.Volatile, history,
                Policy.DataRepresentation(use_cdrv0_representation=True)]  # XCDR1 only, as rmw_cyclonedds
    if args.lifespan_ms is not None:
        policies.append(Policy.Lifespan(duration(milliseconds=args.lifespan_ms)))
    return Qos(*policies)


def make_topic(args):
    participant = DomainParticipant(args.domain)
    return participant, Topic(participant, "rt/" + args.topic.lstrip("/"), UInt8MultiArray_)


def run_pub(args):
    participant, topic = make_topic(args)
    writer = DataWriter(participant, topic, qos=make_qos(args))
    deadline = time.monotonic() + 30.0
    while writer.get_publication_matched_status().current_count < 1:
        if time.monotonic() > deadline:
            log("no reader matched after 30 s")
            return 3
        time.sleep(0.01)
    emit("matched")
    for line in sys.stdin:
        if line.strip() == "go":
            break
    else:
        log("stdin closed before `go`")
        return 4

    # One buffer and one message object for the whole run: per message only the 16 header
    # bytes are patched in place; serialisation copies the buffer into the CDR stream.
    buf = bytearray(args.payload)
    msg = UInt8MultiArray_(layout=MultiArrayLayout_(), data=buf)
    period = 1.0 / args.rate
    slots = math.ceil(args.seconds * args.rate - 1e-9)
    sent = errors = skipped = 0
    try:
        t0 = time.monotonic()
        k = 0
        while k < slots:
            target = t0 + k * period
            now = time.monotonic()
            if now < target:
                time.sleep(target - now)
            elif now - target > period:
                # Fell behind (a write blocked on a full history): resume at the latest slot
                # that is due rather than bursting the missed ones, which would distort the load.
                due = min(int((now - t0) / period), slots)
                skipped += due - k
                k = due
                continue
            HEADER.pack_into(buf, 0, k, mono_ns())
            try:
                writer.write(msg)
                sent += 1
            except Exception as exc:  # noqa: BLE001  DDS timeout: KEEP_ALL history stayed full
                errors += 1
                if errors == 1:
                    log(f"write failed (counted, schedule goes on): {exc!r}")
            k += 1
        try:  # give reliable repair of the tail a moment; 11.0.1 raises on timeout
            writer.wait_for_acks(duration(seconds=2))
        except Exception:  # noqa: BLE001
            pass
    finally:  # also on SIGTERM/SIGINT mid-run, so the lab always gets the counts
        emit(f"done sent={sent} errors={errors} skipped={skipped}")
    return 0


def watch_stdin(stop):
    """Set `stop` on stdin EOF or a `stop` line. Reads fd 0 raw, not sys.stdin, so this
    daemon thread holds no lock that interpreter shutdown would wait for."""
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if any(line.strip() == b"stop" for line in lines):
            break
    stop.set()


def run_sub(args):
    participant, topic = make_topic(args)
    reader = DataReader(participant, topic, qos=make_qos(args))
    condition = ReadCondition(reader, SampleState.NotRead | ViewState.Any | InstanceState.Any)
    waitset = WaitSet(participant)
    waitset.attach(condition)
    stop = threading.Event()
    threading.Thread(target=watch_stdin, args=(stop,), daemon=True).start()
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    warned_short = False
    emit("ready")
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        # Wake at least every 100 ms to notice stdin/deadline; otherwise sleep in Cyclone.
        waitset.wait(duration(milliseconds=100))
        while True:
            # One sample per take, so recv_ns does not include deserialising later samples.
            samples = reader.take(N=1, condition=condition)
            recv_ns = mono_ns()
            if not samples:
                break
            sample = samples[0]
            if not sample.sample_info.valid_data:
                continue  # dispose/unregister notifications when a writer goes away
            if len(sample.data) < HEADER.size:
                if not warned_short:
                    log(f"ignoring samples shorter than {HEADER.size} bytes")
                warned_short = True
                continue
            seq, send_ns = HEADER.unpack_from(sample.data, 0)
            emit(f"r {seq} {send_ns} {recv_ns}")
    return 0


def run_selftest(_args):
    data = bytes(range(16)) + b"\x00" * 16
    cdr = UInt8MultiArray_(layout=MultiArrayLayout_(), data=data).serialize(use_version_2=False)
    # XCDR1 little-endian header, empty dim sequence, data_offset 0, then the octets.
    expect = b"\x00\x01\x00\x00" + struct.pack("<III", 0, 0, len(data)) + data
    back = UInt8MultiArray_.deserialize(cdr)  # the header says XCDR1
    ok = cdr == expect and back.data == data and back.layout.dim == [] and back.layout.data_offset == 0
    emit(f"selftest {'ok' if ok else 'FAIL'} cdr_len={len(cdr)}")
    if not ok:
        log(f"got    {cdr.hex()}\nexpect {expect.hex()}")
    return 0 if ok else 1


def depth_arg(text):
    if text != "all" and not (text.isdigit() and int(text) > 0):
        raise argparse.ArgumentTypeError("depth must be a positive integer or 'all'")
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    sides = {name: sub.add_parser(name) for name in ("pub", "sub")}
    for p in sides.values():
        p.add_argument("--topic", required=True)
        p.add_argument("--depth", type=depth_arg, required=True)
        p.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID") or 0))
        p.add_argument("--max-blocking-ms", type=float, default=100.0)
        p.add_argument("--lifespan-ms", type=float, default=None)
    for name, kind in (("--payload", int), ("--rate", float), ("--seconds", float)):
        sides["pub"].add_argument(name, type=kind, required=True)
    sides["sub"].add_argument("--seconds", type=float, default=None)
    sub.add_parser("selftest")
    args = parser.parse_args()
    if args.mode == "pub" and (args.payload < HEADER.size or args.rate <= 0 or args.seconds < 0):
        parser.error(f"--payload must be >= {HEADER.size}, --rate > 0, --seconds >= 0")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return {"pub": run_pub, "sub": run_sub, "selftest": run_selftest}[args.mode](args)
    except Stop as why:
        log(f"stopping on {why}")
        return 0
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
