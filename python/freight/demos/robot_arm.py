"""The robot arm demo: GPU frames between two processes, zero copy vs copies.

A **renderer** process draws an animated robot arm from signed distance
functions and publishes each frame as a BGRA ``sensor_msgs/Image``; a
**display** process receives the frames, reads every pixel (a checksum on its
own GPU stream, compared with the one the renderer sent in ``frame_id``) and
reports frames per second and the one-way transport latency (from the stamp
set just before ``publish`` to the moment ``take`` returned the frame).

On a machine with a CUDA GPU, torch and freight's ``cuda`` backend, the arm is
rendered on the GPU with torch, as ROS 2's ``robot_arm_demo`` does, and three
transports are compared:

* ``cuda``: the renderer draws into ``loan_tensor`` (device memory of the
  publisher's pool); the display imports it with ``torch.from_dlpack``, its
  stream ordered after the renderer's. No byte is copied;
* ``cuda-host``: the frame is copied once into page-locked host memory, which
  the display's GPU reads in place (``freight.as_cuda``);
* ``cpu``: the frame is copied to the host, copied into the message, copied
  again for the subscriber and uploaded to the GPU: the path of a stock
  middleware.

Elsewhere (no GPU, no torch) the arm is drawn with numpy (at a lower
resolution, then scaled up) and the transports are ``shm`` (the renderer draws
into a loan of shared memory; the display reads it in place) and ``cpu``
(copies). ``--device auto`` (the default) picks and says why.

``compare`` measures two views. **End to end**: each frame is drawn as it is
sent, so a slow renderer (numpy on a few cores) sets the pace and the
transports may tie on frames per second. **Transport only**: a few frames are
drawn before measuring and sent in turn as fast as the display keeps up, so
the transport sets the pace; it adds each side's CPU time per frame and the
display's time inside freight (``take`` until the pixels are readable), each
against the ``cpu`` path, and ends with the headline in one sentence. In both
the display reads and checksums every pixel.

    python -m freight.demos.robot_arm                      # compare: the tables and the headline
    python -m freight.demos.robot_arm compare --seconds 3 --resolutions 1920x1080,3840x2160
    python -m freight.demos.robot_arm display --save-png arm.png &   # one pair by hand
    python -m freight.demos.robot_arm renderer
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings

import numpy as np

import freight
from freight._native import wait
from freight.msgs.sensor_msgs import Image

RESOLUTIONS = [(1920, 1080), (2560, 1440), (3840, 2160)]
#: What the headline calls a resolution.
RESOLUTION_NAMES = {(1920, 1080): "1080p", (2560, 1440): "1440p", (3840, 2160): "4K"}
#: Distinct frames the transport-only view draws before measuring and sends in turn.
REPLAY_FRAMES = 4
#: The display starts measuring this long after its first frame (CUDA
#: contexts, pools and caches warm up meanwhile).
WARMUP_S = 0.5
#: How long a process waits for its peer before giving up.
PEER_TIMEOUT_S = 60.0
#: Every frame is delivered: the renderer waits for the display (up to this long).
QOS = freight.QoSProfile(depth=2, reliability=freight.ReliabilityPolicy.RELIABLE, max_blocking_time=5.0)


class Transport:
    """How one transport moves a frame: the publisher's backend, what the
    subscription accepts, and its name in the table."""

    def __init__(self, name, label, backend, accept, zero_copy):
        self.name, self.label, self.backend, self.accept, self.zero_copy = name, label, backend, accept, zero_copy


TRANSPORTS = {
    "cuda": Transport("cuda", "CUDA", "cuda", ["cuda"], True),
    "cuda-host": Transport("cuda-host", "CUDA host", "cuda-host", ["cuda-host"], False),
    "shm": Transport("shm", "shm", "shm", ["shm"], True),
    "cpu": Transport("cpu", "CPU", "shm", ["cpu"], False),
}
TRANSPORTS_BY_DEVICE = {"cuda": ["cuda", "cuda-host", "cpu"], "cpu": ["shm", "cpu"]}


# ---------------------------------------------------------------------------------------- the scene


class Ops:
    """The few array operations the scene needs, from torch or numpy."""

    def __init__(self, xp):
        self.xp = xp
        self.is_torch = xp.__name__ == "torch"

    def clip(self, a, lo, hi):
        return self.xp.clamp(a, lo, hi) if self.is_torch else np.clip(a, lo, hi)

    def minimum(self, a, b):
        if self.is_torch and not isinstance(b, self.xp.Tensor):
            return self.xp.clamp(a, max=b)
        return self.xp.minimum(a, b)

    def maximum(self, a, b):
        if self.is_torch and not isinstance(b, self.xp.Tensor):
            return self.xp.clamp(a, min=b)
        return self.xp.maximum(a, b)

    def sqrt(self, a):
        return self.xp.sqrt(a)

    def sin(self, a):
        return self.xp.sin(a)

    def abs(self, a):
        return self.xp.abs(a)


def arm_pose(t):
    """The arm at time ``t`` (seconds): capsules ``(ax, ay, bx, by, radius)``,
    joints ``(x, y, radius)``, in a frame where y points up and the picture
    spans -1..1 vertically."""
    shoulder = (0.0, -0.55)
    angles = [
        math.pi / 2 - 0.5 + 0.45 * math.sin(0.9 * t),
        -0.9 + 0.7 * math.sin(1.3 * t + 1.0),
        -0.6 + 0.9 * math.sin(2.1 * t + 2.0),
    ]
    lengths = [0.62, 0.5, 0.22]
    radii = [0.075, 0.06, 0.045]
    capsules, joints = [], [(shoulder[0], shoulder[1], 0.1)]
    x, y, heading = shoulder[0], shoulder[1], 0.0
    for angle, length, radius in zip(angles, lengths, radii):
        heading += angle
        nx, ny = x + length * math.cos(heading), y + length * math.sin(heading)
        capsules.append((x, y, nx, ny, radius))
        joints.append((nx, ny, radius * 1.25))
        x, y = nx, ny
    # The gripper: two fingers that open and close.
    opening = 0.35 + 0.25 * math.sin(3.0 * t)
    for side in (-1, 1):
        a = heading + side * opening
        capsules.append((x, y, x + 0.16 * math.cos(a), y + 0.16 * math.sin(a), 0.025))
    return capsules, joints[:-1]


def render(ops, xs, ys, t, out):
    """Draws the arm at time ``t`` as BGRA into ``out`` ((h, w, 4) uint8),
    ``xs``/``ys`` being each pixel's coordinates ((h, w) float32)."""
    capsules, joints = arm_pose(t)
    dist = None
    for ax, ay, bx, by, r in capsules:
        px, py, bax, bay = xs - ax, ys - ay, bx - ax, by - ay
        h = ops.clip((px * bax + py * bay) / (bax * bax + bay * bay), 0.0, 1.0)
        dx, dy = px - bax * h, py - bay * h
        d = ops.sqrt(dx * dx + dy * dy) - r
        dist = d if dist is None else ops.minimum(dist, d)
    for jx, jy, r in joints:
        d = ops.sqrt((xs - jx) ** 2 + (ys - jy) ** 2) - r
        dist = ops.minimum(dist, d)
    # The base: a box on the floor.
    qx, qy = ops.abs(xs) - 0.32, ops.abs(ys + 0.75) - 0.12
    box = ops.sqrt(ops.maximum(qx, 0.0) ** 2 + ops.maximum(qy, 0.0) ** 2) + ops.minimum(ops.maximum(qx, qy), 0.0)
    dist = ops.minimum(dist, box)
    floor = ys + 0.87
    # Pencil sketch: paper, graphite outlines, hatching inside, a soft shadow.
    line = 1.0 - ops.clip(ops.abs(dist) / 0.008, 0.0, 1.0)
    hatch = ops.clip(ops.sin((xs + ys) * 160.0) * 4.0 - 2.5, 0.0, 1.0) * (dist < 0) * 0.35
    shadow = ops.clip(0.12 - ops.abs(floor) * 2.0, 0.0, 0.12) * ops.clip(1.0 - ops.abs(xs) * 0.8, 0.0, 1.0)
    floor_line = 1.0 - ops.clip(ops.abs(floor) / 0.004, 0.0, 1.0)
    grid = ops.clip(ops.sin(xs * 40.0) * ops.sin(ys * 40.0) * 8.0 - 7.6, 0.0, 1.0) * 0.08
    ink = ops.clip(line + hatch + shadow + floor_line * 0.7 + grid, 0.0, 1.0)
    paper = (226.0, 238.0, 246.0)  # B, G, R: warm paper
    graphite = (60.0, 58.0, 62.0)
    for c in range(3):
        channel = paper[c] + (graphite[c] - paper[c]) * ink
        out[..., c] = channel if not ops.is_torch else channel.to(out.dtype)
    out[..., 3] = 255


def grid_coordinates(xp, width, height, **kwargs):
    """Each pixel's (x, y): y up, -1..1 vertically, x scaled by the aspect ratio."""
    ys = (xp.arange(height, **kwargs).reshape(-1, 1) * -2.0 + (height - 1)) / height
    xs = (xp.arange(width, **kwargs).reshape(1, -1) * 2.0 - (width - 1)) / height
    return xs + ys * 0, ys + xs * 0


class NumpyRenderer:
    """The arm drawn with numpy at 1/scale of the frame, then scaled up (nearest)."""

    def __init__(self, width, height):
        self.scale = next(s for s in (8, 4, 2, 1) if width % s == 0 and height % s == 0)
        w, h = width // self.scale, height // self.scale
        self.ops = Ops(np)
        self.xs, self.ys = (a.astype(np.float32) for a in grid_coordinates(np, w, h))
        self.small = np.empty((h, w, 4), np.uint8)

    def draw(self, t, out):
        render(self.ops, self.xs, self.ys, t, self.small)
        s, (h, w, _) = self.scale, self.small.shape
        out.reshape(h, s, w, s, 4)[...] = self.small[:, None, :, None, :]


class TorchRenderer:
    """The arm drawn with torch on the GPU, at full resolution."""

    def __init__(self, torch, width, height):
        self.torch = torch
        self.ops = Ops(torch)
        self.xs, self.ys = grid_coordinates(torch, width, height, device="cuda", dtype=torch.float32)

    def draw(self, t, out):
        render(self.ops, self.xs, self.ys, t, out)


def checksum_numpy(frame):
    """The frame's bytes summed as int64 words, wrapping (every byte is read)."""
    return int(np.asarray(frame).reshape(-1).view(np.int64).sum(dtype=np.int64))


def checksum_torch(frame):
    """As :func:`checksum_numpy`, on the GPU, on the current stream; waits for it."""
    return int(frame.reshape(-1).view(_torch().int64).sum().item())


def _torch():
    import torch  # noqa: PLC0415 (optional)

    return torch


# ---------------------------------------------------------------------------------------- choosing


def choose_device(requested):
    """``(device, why)``: ``"cuda"`` when torch, a CUDA device and freight's
    cuda backend are all there (or asked for and not there: SystemExit), else ``"cpu"``."""
    if requested == "cpu":
        return "cpu", "asked for with --device cpu: rendering with numpy"
    reason = None
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        reason = "torch is not installed"
    else:
        if not torch.cuda.is_available():
            reason = f"torch {torch.__version__} sees no CUDA device"
        else:
            ctx = freight.Context(local_only=True)
            try:
                node = freight.Node("robot_arm_probe", context=ctx)
                node.create_publisher(Image, f"/robot_arm_probe_{os.getpid()}", 1, backend="cuda")
            except freight.BackendUnavailableError as e:
                reason = f"freight's cuda backend is unavailable: {e}"
            finally:
                ctx.shutdown()
            if reason is None:
                return "cuda", f"{torch.cuda.get_device_name()}, torch {torch.__version__}: rendering with torch on the GPU"
    if requested == "cuda":
        raise SystemExit(f"--device cuda: {reason}")
    return "cpu", f"{reason}: rendering with numpy on the CPU"


def _context_and_node(name):
    ctx = freight.Context(local_only=True)
    return ctx, freight.Node(name, context=ctx)


# ---------------------------------------------------------------------------------------- renderer


class CpuMeter:
    """This process's CPU time (all threads, ``time.process_time``) per frame
    over a measured window: ``begin`` at its start, ``frame`` after each frame."""

    def __init__(self):
        self.started, self.frames, self.cpu0, self.cpu1 = False, 0, 0.0, 0.0

    def begin(self):
        self.started, self.frames = True, 0
        self.cpu0 = self.cpu1 = time.process_time()

    def frame(self):
        self.frames += 1
        self.cpu1 = time.process_time()

    def ms_per_frame(self):
        return (self.cpu1 - self.cpu0) * 1e3 / self.frames if self.frames else float("nan")


def _renderer(device, width, height):
    return TorchRenderer(_torch(), width, height) if device == "cuda" else NumpyRenderer(width, height)


def _blank_frame(device, width, height):
    """An uninitialized BGRA frame where ``device`` draws."""
    if device == "cuda":
        return _torch().empty((height, width, 4), dtype=_torch().uint8, device="cuda")
    return np.empty((height, width, 4), np.uint8)


def live_frames(pub, transport, device, width, height):
    """``frame(t, seq) -> (data, checksum)``: each frame drawn as it is sent,
    where the transport wants it (into the loan where there is one)."""
    renderer, scratch = _renderer(device, width, height), _blank_frame(device, width, height)
    shape = (height, width, 4)

    def frame(t, seq):
        del seq
        if device == "cuda" and transport.name == "cuda":
            data = pub.loan_tensor(shape, _torch().uint8)  # the pool's device memory
            renderer.draw(t, data)
            return data, checksum_torch(data)
        if device == "cuda":
            renderer.draw(t, scratch)
            csum = checksum_torch(scratch)
            if transport.name == "cuda-host":
                data = pub.loan_tensor(shape, _torch().uint8)  # page-locked host memory, GPU-mapped
                data.copy_(scratch)  # one copy, by the GPU; readers wait for it on their stream
                return data, csum
            return scratch.cpu().numpy(), csum  # to the host, then copied into the message by publish
        if transport.zero_copy:
            data = pub.loan(shape, np.uint8)  # shared memory
            renderer.draw(t, data)
            return data, checksum_numpy(data)
        renderer.draw(t, scratch)
        return scratch, checksum_numpy(scratch)  # copied into the message by publish

    return frame


def replayed_frames(pub, transport, device, width, height, count):
    """``frame(t, seq) -> (data, checksum)``: ``count`` frames drawn (and
    checksummed) once, before anything is measured, then sent in turn, so the
    loop holds only what the transport costs. Each side makes the one copy a
    sender of ready frames makes: into the loan (``shm``, ``cuda``,
    ``cuda-host``), or by ``publish`` (``cpu``, after the GPU's copy to the host)."""
    renderer, shape = _renderer(device, width, height), (height, width, 4)
    drawn = [_blank_frame(device, width, height) for _ in range(count)]
    for i, out in enumerate(drawn):
        renderer.draw(i * 0.1, out)  # a tenth of a second apart: frames that differ
    sums = [checksum_torch(f) if device == "cuda" else checksum_numpy(f) for f in drawn]

    def frame(t, seq):
        del t
        src = drawn[seq % count]
        if device == "cuda" and transport.name in ("cuda", "cuda-host"):
            data = pub.loan_tensor(shape, _torch().uint8)
            data.copy_(src)  # by the GPU; readers wait for it on their stream
        elif device == "cuda":
            data = src.cpu().numpy()  # to the host, then copied into the message by publish
        elif transport.zero_copy:
            data = pub.loan(shape, np.uint8)
            data[...] = src
        else:
            data = src  # copied into the message by publish
        return data, sums[seq % count]

    return frame


def _wait_for_display(pub, topic):
    deadline = time.monotonic() + PEER_TIMEOUT_S
    while pub.get_subscription_count() == 0:
        if time.monotonic() > deadline:
            raise SystemExit(f"renderer: no display subscribed to {topic} in {PEER_TIMEOUT_S:.0f} s")
        time.sleep(0.01)


def run_renderer(args):
    transport = TRANSPORTS[args.transport]
    width, height = args.width, args.height
    if (width * height) % 2:
        raise SystemExit("width * height must be even (frames are checksummed as 8-byte words)")
    _, node = _context_and_node("renderer")
    pub = node.create_publisher(Image, args.topic, QOS, backend=transport.backend)
    if args.replay:
        frame = replayed_frames(pub, transport, args.device, width, height, args.replay)
    else:
        frame = live_frames(pub, transport, args.device, width, height)
    _wait_for_display(pub, args.topic)
    how = f", replaying {args.replay} frames" if args.replay else ""
    print(f"renderer: {width}x{height} over {transport.name} ({args.device}{how})", file=sys.stderr, flush=True)
    # The display's window starts WARMUP_S after its first frame; this one
    # after the first frame sent, so the two cover about the same frames.
    start = time.monotonic()
    stop = start + args.seconds if args.seconds else math.inf
    window = (start + WARMUP_S, start + WARMUP_S + args.measure_seconds)
    meter, reported = CpuMeter(), False
    seq = 0
    while (now := time.monotonic()) < stop:
        if not meter.started and now >= window[0]:
            meter.begin()
        # At least one frame measured: a send that outlasted the whole window
        # (the display paused, say) widens it rather than reporting nothing.
        if not reported and now >= window[1] and meter.frames:
            report_renderer(meter)
            reported = True
        data, csum = frame(now - start, seq)
        msg = Image(height=height, width=width, encoding="bgra8", step=width * 4, data=data)
        msg.header.frame_id = f"{seq} {csum}"
        msg.header.stamp = node.get_clock().now().to_msg()
        try:
            pub.publish(msg)
        except freight.QueueFullError:
            pass  # the display is slow or gone: checked below
        del msg, data
        seq += 1
        if meter.started and not reported:
            meter.frame()
        if seq % 16 == 0 and pub.get_subscription_count() == 0:
            break  # the display finished
    if not reported:
        report_renderer(meter)


def report_renderer(meter):
    """Prints the renderer's ``RESULT`` line, which ``run_pair`` reads."""
    result = {"frames": meter.frames, "cpu_ms_per_frame": meter.ms_per_frame()}
    print("RESULT " + json.dumps(result), flush=True)
    return True


# ---------------------------------------------------------------------------------------- display


class FrameReader:
    """Reads every pixel of a received frame where the display works: on its
    own CUDA stream (GPU mode) or with numpy."""

    def __init__(self, device):
        self.gpu = device == "cuda"
        if self.gpu:
            self.torch = _torch()
            self.stream = self.torch.cuda.Stream()

    def checksum(self, data):
        """``(checksum, where the bytes were read)``."""
        if not self.gpu:
            host = data.to_numpy() if isinstance(data, freight.DeviceArray) else data
            return checksum_numpy(host), "numpy"
        torch = self.torch
        with torch.cuda.stream(self.stream):
            if isinstance(data, freight.DeviceArray):
                frame = torch.from_dlpack(data)  # in place; this stream waits for the renderer's
                where = "in place"
            elif data.base.backend == "cuda-host":
                frame = torch.from_dlpack(freight.as_cuda(data))  # host memory, read by the GPU
                where = "mapped"
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # read-only: torch has no such flag
                    frame = torch.from_numpy(data).to("cuda")  # uploaded
                where = "uploaded"
            return checksum_torch(frame), where

    def host_pixels(self, data):
        if isinstance(data, freight.DeviceArray):
            return data.to_numpy()
        return np.array(data)


def run_display(args):
    transport = TRANSPORTS[args.transport]
    _, node = _context_and_node("display")
    sub = node.create_subscription(Image, args.topic, None, QOS, accepted_backends=transport.accept)
    reader = FrameReader(args.device)
    print("READY", flush=True)
    first = sub.take(timeout_sec=PEER_TIMEOUT_S)
    if first is None:
        raise SystemExit(f"display: no frame on {args.topic} in {PEER_TIMEOUT_S:.0f} s")
    del first
    warm_until = time.monotonic() + WARMUP_S
    frames = mismatches = 0
    latencies, backends, reads = [], set(), set()
    saved = None
    start = end = None
    meter, in_freight_s = CpuMeter(), 0.0
    # Waiting for a frame apart from taking it, so the time inside freight
    # (take, until the pixels are readable) leaves out the wait for the renderer.
    while wait([sub], 5.0):
        took = time.perf_counter()
        msg = sub.take(timeout_sec=0)
        received_ns = time.time_ns()
        if msg is None:
            continue
        data = msg.data
        took = time.perf_counter() - took
        now = time.monotonic()
        if now < warm_until:
            continue
        if start is None:
            start = now
        in_freight_s += took
        seq, sent_sum = (int(x) for x in msg.header.frame_id.split())
        csum, where = reader.checksum(data)
        mismatches += csum != sent_sum
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        latencies.append(received_ns - stamp_ns)
        backends.add(data.backend if isinstance(data, freight.DeviceArray) else data.base.backend)
        reads.add(where)
        frames += 1
        if args.save_png and saved is None:
            pixels = reader.host_pixels(data).reshape(msg.height, msg.width, 4)
            from freight.demos.png import write_png  # noqa: PLC0415

            size = write_png(args.save_png, pixels[..., [2, 1, 0, 3]])  # BGRA -> RGBA
            saved = f"{args.save_png} ({size:,} bytes)"
        del msg, data
        # As the frame rate, the CPU time counts the frames after the first.
        if meter.started:
            meter.frame()
        else:
            meter.begin()
        end = time.monotonic()
        if end - start >= args.seconds:
            break
    elapsed = (end - start) if frames > 1 else float("nan")
    result = {
        "transport": transport.name,
        "width": args.width,
        "height": args.height,
        "frames": frames,
        "seconds": round(elapsed, 3),
        "fps": (frames - 1) / elapsed if frames > 1 else 0.0,
        "latency_p50_ms": float(np.median(latencies)) / 1e6 if latencies else float("nan"),
        "cpu_ms_per_frame": meter.ms_per_frame(),
        "in_freight_ms_per_frame": in_freight_s * 1e3 / frames if frames else float("nan"),
        "mismatches": mismatches,
        "backends": sorted(backends),
        "reads": sorted(reads),
        "saved": saved,
    }
    print("RESULT " + json.dumps(result), flush=True)
    print(
        f"display: {frames} frames of {args.width}x{args.height} via {', '.join(result['backends'])} in "
        f"{elapsed:.2f} s: {result['fps']:.1f} frames/s, transport latency p50 {result['latency_p50_ms']:.3f} ms, "
        f"{mismatches} checksum mismatches" + (f"; saved {saved}" if saved else ""),
        file=sys.stderr,
        flush=True,
    )
    return 1 if mismatches or frames == 0 else 0


# ---------------------------------------------------------------------------------------- compare


def run_pair(device, transport, width, height, seconds, save_png=None, replay=0):
    """Runs a display and a renderer process (``replay``: that many frames
    drawn before measuring, then sent in turn); returns the display's result,
    with the renderer's CPU time per frame as ``renderer_cpu_ms_per_frame``."""
    view = f"replay{replay}" if replay else "live"
    topic = f"/robot_arm_{os.getpid()}_{transport.replace('-', '_')}_{width}x{height}_{view}"
    common = ["--transport", transport, "--width", str(width), "--height", str(height), "--topic", topic]
    common += ["--device", device, "--seconds", str(seconds)]
    me = [sys.executable, "-m", "freight.demos.robot_arm"]
    replaying = ["--replay", str(replay)]
    display = subprocess.Popen(
        me + ["display", *common] + (["--save-png", save_png] if save_png else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    renderer = None
    try:
        if display.stdout.readline().strip() != "READY":
            raise RuntimeError(f"the display did not start: {display.stderr.read()}")
        renderer = subprocess.Popen(
            [*me, "renderer", *common[:-2], "--seconds", "0", "--measure-seconds", str(seconds), *replaying],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = display.communicate(timeout=seconds + 2 * PEER_TIMEOUT_S)
        result = _result_line(out.splitlines())
        if result is not None:
            # The renderer reports when its window closes, about when the
            # display's does, and leaves once the display has; one that does
            # not leave is stopped rather than waited for.
            try:
                renderer_out, _ = renderer.communicate(timeout=PEER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                renderer.kill()
                renderer_out, _ = renderer.communicate()
                print(f"{transport} {width}x{height}: the renderer did not leave with the display", file=sys.stderr)
            renderer_result = _result_line(renderer_out.splitlines()) or {}
            result["renderer_cpu_ms_per_frame"] = renderer_result.get("cpu_ms_per_frame", float("nan"))
            return result
        renderer_err = ""
        if renderer.poll() is not None:
            renderer_err = renderer.stderr.read()
        raise RuntimeError(f"the display gave no result: {err.strip()} {renderer_err.strip()}")
    finally:
        for p in (renderer, display):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _result_line(lines):
    """The JSON of the first ``RESULT`` line among ``lines``, or None."""
    for line in lines:
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return None


def _by_resolution(results):
    """``{(width, height): {transport: result}}``, in the order measured."""
    by_res = {}
    for r in results:
        by_res.setdefault((r["width"], r["height"]), {})[r["transport"]] = r
    return by_res


def _aligned(header, rows):
    """``rows`` under ``header``, in columns two spaces apart."""
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(x.ljust(n) for x, n in zip(row, widths)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * n for n in widths))
    return "\n".join(lines)


def _transport_cell(name, r):
    return TRANSPORTS[name].label + ("" if r["backends"] == [name] else f" (via {','.join(r['backends'])})")


def _checksums_cell(r):
    return "ok" if r["mismatches"] == 0 and r["frames"] else f"{r['mismatches']} bad"


def _speedup_cell(name, r, base):
    return f"{r['fps'] / base['fps']:.1f}x" if name != "cpu" and base and base["fps"] > 0 else ""


def _times(ratio, above, below):
    """``ratio`` as "2.5x faster" (``above``) or, under 1, "2.5x slower" (``below``)."""
    return f"{ratio:.1f}x {above}" if ratio >= 1 else f"{1 / ratio:.1f}x {below}"


def _cost_cell(name, ms, base_ms):
    """A time per frame, and for a transport other than ``cpu`` how it compares with ``cpu``'s."""
    cell = f"{ms:.3f} ms"
    if name != "cpu" and ms > 0 and base_ms is not None and math.isfinite(ms) and math.isfinite(base_ms):
        cell += f" ({_times(base_ms / ms, 'less', 'more')})"
    return cell


def format_table(results):
    """The seed demo's table, plus the transport latency and what carried the frames."""
    header = ["Resolution", "Image size", "Transport", "FPS", "Speedup", "Latency p50", "Pixels read", "Checksums"]
    rows = []
    for (w, h), cells in _by_resolution(results).items():
        base = cells.get("cpu")
        for name, r in cells.items():
            rows.append(
                [
                    f"{w}x{h}",
                    f"{w * h * 4 / 2**20:.1f} MiB",
                    _transport_cell(name, r),
                    f"{r['fps']:.1f}",
                    _speedup_cell(name, r, base),
                    f"{r['latency_p50_ms']:.3f} ms",
                    ",".join(r["reads"]),
                    _checksums_cell(r),
                ]
            )
    return _aligned(header, rows)


def format_replay_table(results):
    """The transport-only view: frame rate, latency, CPU time per frame on each
    side and the display's time inside freight, each against ``cpu`` at the
    same resolution."""
    header = ["Resolution", "Image size", "Transport", "FPS", "Speedup", "Latency p50"]
    header += ["Renderer CPU/frame", "Display CPU/frame", "Display in freight/frame", "Checksums"]
    rows = []
    for (w, h), cells in _by_resolution(results).items():
        base = cells.get("cpu") or {}
        for name, r in cells.items():
            rows.append(
                [
                    f"{w}x{h}",
                    f"{w * h * 4 / 2**20:.1f} MiB",
                    _transport_cell(name, r),
                    f"{r['fps']:.1f}",
                    _speedup_cell(name, r, base),
                    f"{r['latency_p50_ms']:.3f} ms",
                ]
                + [
                    _cost_cell(name, r[key], base.get(key))
                    for key in ("renderer_cpu_ms_per_frame", "cpu_ms_per_frame", "in_freight_ms_per_frame")
                ]
                + [_checksums_cell(r)]
            )
    return _aligned(header, rows)


def headline(results, device):
    """One sentence: the zero-copy transport against copies in the
    transport-only view, at the largest resolution with both; None without."""
    zero_copy = TRANSPORTS_BY_DEVICE[device][0]
    by_res = _by_resolution(results)
    for w, h in sorted(by_res, key=lambda res: res[0] * res[1], reverse=True):
        fast, base = by_res[(w, h)].get(zero_copy), by_res[(w, h)].get("cpu")
        if not (fast and base and fast["fps"] > 0 and base["fps"] > 0):
            continue
        frames = RESOLUTION_NAMES.get((w, h), f"{w}x{h}")
        sentence = (
            f"freight moved {frames} frames {_times(fast['fps'] / base['fps'], 'faster', 'slower')} than copying "
            f"them ({fast['fps']:.1f} vs {base['fps']:.1f} frames/s, transport only: {zero_copy} vs cpu)"
        )
        cpu = [r["renderer_cpu_ms_per_frame"] + r["cpu_ms_per_frame"] for r in (fast, base)]
        if all(math.isfinite(x) and x > 0 for x in cpu):
            sentence += (
                f", at {_times(cpu[1] / cpu[0], 'less', 'more')} CPU per frame "
                f"({cpu[0]:.2f} vs {cpu[1]:.2f} ms, renderer and display together)"
            )
        return sentence + "."
    return None


def _measure(device, transports, resolutions, seconds, replay=0):
    """Every transport at every resolution, a line as each cell ends."""
    results = []
    for width, height in resolutions:
        for t in transports:
            r = run_pair(device, t, width, height, seconds, replay=replay)
            line = f"  {width}x{height} {t}: {r['fps']:.1f} frames/s, latency p50 {r['latency_p50_ms']:.3f} ms"
            if replay:
                line += f", CPU/frame renderer {r['renderer_cpu_ms_per_frame']:.2f} ms"
                line += f", display {r['cpu_ms_per_frame']:.2f} ms"
            print(line, flush=True)
            results.append(r)
    return results


def transport_only(device, transports, args):
    """The transport-only view: measures it, prints its table and, last, the headline."""
    print()
    print(
        f"transport only: {args.replay_frames} frames drawn before measuring, then sent in turn as fast as the "
        f"display keeps up (reliable QoS); the renderer copies each into its loan or hands it to publish, "
        f"the display still reads and checksums every pixel",
        flush=True,
    )
    results = _measure(device, transports, args.resolutions, args.seconds, replay=args.replay_frames)
    print()
    print(format_replay_table(results))
    print(
        "CPU/frame: the process's CPU time over the measured window, per frame; in freight: the display's take "
        "until the pixels are readable; (x less/more): against CPU at the same resolution; latency: from publish "
        "to take, so it includes the time a frame waits in the queue when the display is the slower side"
    )
    sentence = headline(results, device)
    if sentence:
        print()
        print(sentence)
    return results


def run_compare(args):
    device, why = choose_device(args.device)
    print(f"device: {device} ({why})", flush=True)
    transports = args.transports.split(",") if args.transports else TRANSPORTS_BY_DEVICE[device]
    for t in transports:
        if t not in TRANSPORTS_BY_DEVICE[device]:
            raise SystemExit(f"transport {t!r} is not one of {TRANSPORTS_BY_DEVICE[device]} on {device}")
    print(
        f"each cell: a renderer and a display process, {args.seconds:g} s measured after {WARMUP_S:g} s of warm-up; "
        f"every pixel read and checksummed by the display",
        flush=True,
    )
    print("end to end: each frame drawn as it is sent", flush=True)
    results = _measure(device, transports, args.resolutions, args.seconds)
    print()
    print(format_table(results))
    replayed = transport_only(device, transports, args) if args.replay_frames else []
    bad = [r for r in results + replayed if r["mismatches"] or not r["frames"]]
    return 1 if bad else 0


# ---------------------------------------------------------------------------------------- command line


def resolution_list(text):
    try:
        return [tuple(int(n) for n in item.lower().split("x")) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list like 1920x1080,3840x2160") from None


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m freight.demos.robot_arm", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command")
    compare = sub.add_parser("compare", help="every transport at every resolution: the table (the default)")
    compare.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    compare.add_argument("--seconds", type=float, default=3.0, help="measured per cell (default 3)")
    compare.add_argument(
        "--resolutions",
        type=resolution_list,
        default=RESOLUTIONS,
        help="e.g. 1920x1080,3840x2160 (default: 1080p, 1440p, 4K)",
    )
    compare.add_argument("--transports", help="a subset, e.g. cuda,cpu (default: all of the device's)")
    compare.add_argument(
        "--replay-frames",
        type=int,
        default=REPLAY_FRAMES,
        metavar="K",
        help=f"the transport-only view replays K frames drawn before measuring (default {REPLAY_FRAMES}; 0: none)",
    )
    for role in ("renderer", "display"):
        p = sub.add_parser(role, help=f"the {role} process alone")
        p.add_argument("--transport", choices=list(TRANSPORTS), default=None)
        p.add_argument("--width", type=int, default=1920)
        p.add_argument("--height", type=int, default=1080)
        p.add_argument("--topic", default="/robot_arm/image")
        p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
        p.add_argument(
            "--seconds", type=float, default=3.0 if role == "display" else 0.0, help="0: until the display leaves"
        )
        if role == "display":
            p.add_argument("--save-png", metavar="FILE", help="write the first measured frame as a PNG")
        else:
            p.add_argument(
                "--replay", type=int, default=0, metavar="K", help="draw K frames first, then send them in turn"
            )
            p.add_argument(
                "--measure-seconds", type=float, default=3.0, help="CPU time per frame over this long, after warm-up"
            )
    args = parser.parse_args(argv)
    if args.command in (None, "compare"):
        if args.command is None:
            args = parser.parse_args(["compare", *(argv or [])])
        return run_compare(args)
    if args.device == "auto":
        args.device, why = choose_device("auto")
        print(f"{args.command}: device {args.device} ({why})", file=sys.stderr, flush=True)
    if args.transport is None:
        args.transport = TRANSPORTS_BY_DEVICE[args.device][0]
    return run_renderer(args) if args.command == "renderer" else run_display(args)


if __name__ == "__main__":
    sys.exit(main())
