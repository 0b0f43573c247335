#!/usr/bin/env python3
"""Independent ROS 2-compatible DDS peer for freight's interop tests.

Built only on the PyPI `cyclonedds` package (Cyclone DDS 11) with its own IDL
declaration of sensor_msgs/Image, speaking the wire conventions of
rmw_cyclonedds: DDS topic "rt/<topic>", type names "<pkg>::msg::dds_::<T>_",
XCDR1 (plain CDR) data representation.

    peer.py sub --topic /t --count N --timeout S [--domain D]
    peer.py pub --topic /t --count N --width W --height H [--wait-readers K] [--period-ms P]
    peer.py selftest

stdout carries JSON lines only (flushed per line); diagnostics go to stderr.
Exit codes: 0 ok, 1 selftest mismatch, 2 sub timeout, 3 pub found no reader.
"""
import argparse
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass

# Loopback only, without relying on multicast (`lo` here lacks the MULTICAST
# flag): unicast SPDP to 127.0.0.1 on the ports of participant indices 0..50.
# 64 kB datagrams and a 4 MiB socket receive buffer make multi-MB frames ~20x
# faster than the defaults (1344 B fragments, 1 MiB). Used only when the caller
# did not set CYCLONEDDS_URI; must be in the environment before Cyclone starts.
LOOPBACK_CONFIG = (
    '<CycloneDDS><Domain><General><Interfaces><NetworkInterface name="lo"/></Interfaces>'
    '<AllowMulticast>false</AllowMulticast><MaxMessageSize>65500B</MaxMessageSize>'
    '<FragmentSize>64000B</FragmentSize></General><Discovery><Peers><Peer address="127.0.0.1"/>'
    '</Peers><ParticipantIndex>auto</ParticipantIndex><MaxAutoParticipantIndex>50'
    '</MaxAutoParticipantIndex></Discovery><Internal><SocketReceiveBufferSize max="4MiB"/>'
    '</Internal></Domain></CycloneDDS>'
)
os.environ.setdefault("CYCLONEDDS_URI", LOOPBACK_CONFIG)

import numpy as np  # noqa: E402
from cyclonedds.core import ReadCondition, SampleState, ViewState, InstanceState, WaitSet  # noqa: E402
from cyclonedds.domain import Domain, DomainParticipant  # noqa: E402
from cyclonedds.idl import IdlStruct, annotations as annotate, types  # noqa: E402
from cyclonedds.idl._machinery import BytesMachine  # noqa: E402
from cyclonedds.pub import DataWriter  # noqa: E402
from cyclonedds.qos import Policy, Qos  # noqa: E402
from cyclonedds.sub import DataReader  # noqa: E402
from cyclonedds.topic import Topic  # noqa: E402
from cyclonedds.util import duration  # noqa: E402


@dataclass
@annotate.final
class Time_(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: types.int32
    nanosec: types.uint32


@dataclass
@annotate.final
class Header_(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time_
    frame_id: str


@dataclass
@annotate.final
class Image_(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header_
    height: types.uint32
    width: types.uint32
    encoding: str
    is_bigendian: types.uint8
    step: types.uint32
    data: types.sequence[types.uint8]


# The declared type `sequence<uint8>` gives the right XTypes type information,
# but the package (de)serialises it element by element through struct and hands
# back a list of ints (~1 s per 8 MB frame). `bytes` has the identical CDR
# encoding (align 4, uint32 length, raw octets), so swap in the package's bytes
# codec for this one member: `data` is then written from and read into `bytes`.
Image_.__idl__.populate()
for _machine in (Image_.__idl__.v1_machine, Image_.__idl__.v2_machine):
    _machine.members_machines["data"] = BytesMachine()


def dds_topic(ros_topic):
    return "rt/" + ros_topic.lstrip("/")


def make_qos(args):
    if args.reliability == "reliable":
        reliability = Policy.Reliability.Reliable(max_blocking_time=duration(seconds=1))
    else:
        reliability = Policy.Reliability.BestEffort
    return Qos(reliability, Policy.Durability.Volatile, Policy.History.KeepLast(depth=args.depth),
               Policy.DataRepresentation(use_cdrv0_representation=True))  # XCDR1 only


def describe(msg):
    return {"frame_id": msg.header.frame_id, "sec": msg.header.stamp.sec,
            "nanosec": msg.header.stamp.nanosec, "height": msg.height, "width": msg.width,
            "encoding": msg.encoding, "step": msg.step, "len": len(msg.data),
            "sha256": hashlib.sha256(msg.data).hexdigest()}


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log(text):
    print(f"peer: {text}", file=sys.stderr, flush=True)


def pattern(size):
    """Bytes p with p[i] = (i * 7) % 251, 251 bytes longer than one frame."""
    return (np.arange(size + 251, dtype=np.uint32) * 7 % 251).astype(np.uint8).tobytes()


def make_image(k, width, height, pat):
    # byte i of frame k is (i*7 + k) % 251 == pat[i + j] where 7*j = k (mod 251); 7*36 = 1 (mod 251)
    j = 36 * k % 251
    data = pat[j:j + width * height * 4]
    return Image_(header=Header_(stamp=Time_(sec=k, nanosec=k * 1000), frame_id=f"frame{k}"),
                  height=height, width=width, encoding="bgra8", is_bigendian=0,
                  step=width * 4, data=data)


def run_sub(args, participant=None, out=emit, ready=None):
    participant = participant or DomainParticipant(args.domain)
    topic = Topic(participant, dds_topic(args.topic), Image_)
    reader = DataReader(participant, topic, qos=make_qos(args))
    condition = ReadCondition(reader, SampleState.NotRead | ViewState.Any | InstanceState.Any)
    waitset = WaitSet(participant)
    waitset.attach(condition)
    out({"ready": True})
    if ready:
        ready.set()
    deadline = time.monotonic() + args.timeout
    got = 0
    while got < args.count:
        for msg in reader.take(N=args.count - got, condition=condition):
            if not msg.sample_info.valid_data:
                continue
            out(describe(msg))
            got += 1
        remaining = deadline - time.monotonic()
        if got < args.count:
            if remaining <= 0:
                log(f"timeout: received {got} of {args.count}")
                return 2
            waitset.wait(duration(seconds=min(remaining, 0.5)))
    return 0


def run_pub(args, participant=None, out=emit):
    participant = participant or DomainParticipant(args.domain)
    topic = Topic(participant, dds_topic(args.topic), Image_)
    writer = DataWriter(participant, topic, qos=make_qos(args))
    deadline = time.monotonic() + 20.0
    while writer.get_publication_matched_status().current_count < args.wait_readers:
        if time.monotonic() > deadline:
            log(f"no match: {writer.get_publication_matched_status().current_count} "
                f"of {args.wait_readers} readers after 20 s")
            return 3
        time.sleep(0.01)
    out({"matched": writer.get_publication_matched_status().current_count})
    pat = pattern(args.width * args.height * 4)
    for k in range(args.count):
        if k:
            time.sleep(args.period_ms / 1000.0)
        msg = make_image(k, args.width, args.height, pat)
        writer.write(msg)
        out(describe(msg))
    if args.reliability == "reliable":
        try:  # on timeout 11.0.1 raises AttributeError (Exception.DDS_RETCODE_TIMEOUT) instead of False
            writer.wait_for_acks(duration(seconds=10))
        except Exception as exc:  # noqa: BLE001
            log(f"wait_for_acks: {exc!r}")
    time.sleep(1.0)  # keep the writer alive so reliable repair can finish
    return 0


def run_selftest(args):
    """Pub and sub in one process, sub in a thread. Cyclone short-circuits delivery
    inside one domain, so the two sides live in two local domains (ids 201, 202)
    that both appear as --domain on the wire (ExternalDomainId): data crosses lo.
    Always uses LOOPBACK_CONFIG, whatever CYCLONEDDS_URI says."""
    args.topic, args.width, args.height, args.count = "/freight/peer_selftest", 1920, 1080, 5
    args.timeout, args.wait_readers, args.period_ms = 30.0, 1, 0
    config = LOOPBACK_CONFIG.replace(
        "<Discovery>", f"<Discovery><ExternalDomainId>{args.domain}</ExternalDomainId>")
    domains = [Domain(local_id, config) for local_id in (201, 202)]  # noqa: F841 (kept alive)
    sent, received, ready, result = [], [], threading.Event(), {}

    def sub_side():
        result["sub"] = run_sub(args, DomainParticipant(202), received.append, ready)
        result["done"] = time.monotonic()

    def pub_out(line):
        result.setdefault("start", time.monotonic())  # first line: {"matched": n}
        sent.append(line)

    sub = threading.Thread(target=sub_side)
    sub.start()
    ready.wait(10)
    pub_rc = run_pub(args, DomainParticipant(201), pub_out)
    sub.join()
    sent = [m for m in sent if "sha256" in m]
    received = [m for m in received if "sha256" in m]
    ok = pub_rc == 0 and result.get("sub") == 0 and sent == received
    mbytes = sum(m["len"] for m in received) / 1e6
    elapsed = result.get("done", time.monotonic()) - result.get("start", 0.0)
    emit({"selftest": "ok" if ok else "FAIL", "frames": len(received), "MB": round(mbytes, 1),
          "MB_per_s": round(mbytes / max(elapsed, 1e-9), 1)})
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["sub", "pub", "selftest"])
    parser.add_argument("--topic", default="/camera/image")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID") or 0))
    parser.add_argument("--reliability", choices=["reliable", "best_effort"], default="reliable")
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--wait-readers", type=int, default=1)
    parser.add_argument("--period-ms", type=float, default=50.0)
    args = parser.parse_args()
    return {"sub": run_sub, "pub": run_pub, "selftest": run_selftest}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
