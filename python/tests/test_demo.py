"""The robot arm demo (``python -m freight.demos.robot_arm``), headless and bounded."""

import itertools
import re
import subprocess
import sys

import pytest

from freight.demos import robot_arm


def run(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "freight.demos.robot_arm", *args], capture_output=True, text=True, timeout=timeout
    )


#: (resolution, transport) of each row, in order, for the CPU demo at two small resolutions.
CELLS = [("320x240", "shm"), ("320x240", "CPU"), ("640x480", "shm"), ("640x480", "CPU")]


@pytest.fixture(scope="module")
def cpu_compare():
    """One run of ``compare`` on the CPU at two small resolutions, both views."""
    result = run("compare", "--device", "cpu", "--seconds", "0.5", "--resolutions", "320x240,640x480", timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def tables(out):
    """Each table of ``out`` as ``(header cells, rows of cells)``, cut where the dashes under the header are."""
    found, lines = [], out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Resolution"):
            spans = [m.span() for m in re.finditer(r"-+", lines[i + 1])]
            rows = itertools.takewhile(lambda x: x.startswith(("320x240", "640x480")), lines[i + 2 :])
            header, *cells = ([row[a:b].strip() for a, b in spans] for row in (line, *rows))
            found.append((header, cells))
    return found


def test_the_cpu_demo_compares_shm_and_copies_and_prints_the_table(cpu_compare):
    assert "device: cpu (asked for with --device cpu" in cpu_compare
    header, rows = tables(cpu_compare)[0]
    for column in ("Image size", "Transport", "FPS", "Speedup", "Latency p50"):
        assert column in header
    assert [(r[0], r[2]) for r in rows] == CELLS
    assert all(r[-1] == "ok" for r in rows)  # every frame's checksum matched
    assert all(float(r[3]) > 0 for r in rows)  # frames per second


def test_the_transport_only_view_reports_cpu_time_and_time_in_freight_against_copies(cpu_compare):
    assert "transport only: 4 frames drawn before measuring" in cpu_compare
    assert "the display still reads and checksums every pixel" in cpu_compare
    header, rows = tables(cpu_compare)[1]
    costs = ["Renderer CPU/frame", "Display CPU/frame", "Display in freight/frame"]
    assert header == ["Resolution", "Image size", "Transport", "FPS", "Speedup", "Latency p50", *costs, "Checksums"]
    assert [(r[0], r[2]) for r in rows] == CELLS
    for r in rows:
        assert r[-1] == "ok" and float(r[3]) > 0
        assert all(float(cell.split(" ms")[0]) > 0 for cell in r[5:9])  # latency, then time per frame
    for shm, cpu in (rows[0], rows[1]), (rows[2], rows[3]):
        assert re.fullmatch(r"\d+\.\dx", shm[4]) and cpu[4] == ""  # speedup against the copies
        assert all(re.fullmatch(r"[\d.]+ ms \([\d.]+x (less|more)\)", cell) for cell in shm[6:9])
        assert all(re.fullmatch(r"[\d.]+ ms", cell) for cell in cpu[6:9])


def test_the_demo_ends_with_the_headline_and_its_ratios(cpu_compare):
    last = cpu_compare.rstrip().splitlines()[-1]
    m = re.fullmatch(
        r"freight moved 640x480 frames ([\d.]+)x (faster|slower) than copying them \(([\d.]+) vs ([\d.]+) frames/s, "
        r"transport only: shm vs cpu\), at ([\d.]+)x (less|more) CPU per frame \(([\d.]+) vs ([\d.]+) ms, "
        r"renderer and display together\)\.",
        last,
    )
    assert m, last
    assert all(float(m[i]) > 0 for i in (1, 3, 4, 5, 7, 8))


def test_auto_says_which_device_it_chose_and_why():
    device, why = robot_arm.choose_device("auto")
    assert device in ("cuda", "cpu") and why


def test_the_display_saves_a_received_frame_as_png(tmp_path):
    png = tmp_path / "arm.png"
    result = robot_arm.run_pair("cpu", "shm", 320, 240, 0.3, save_png=str(png))
    assert result["frames"] > 0 and result["mismatches"] == 0
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and b"IHDR" in data[:16 + 8]
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (320, 240)


def test_the_scene_renders_the_same_pixels_every_time_for_a_time():
    np = pytest.importorskip("numpy")
    a, b = (np.empty((240, 320, 4), np.uint8) for _ in range(2))
    r = robot_arm.NumpyRenderer(320, 240)
    r.draw(1.25, a)
    r.draw(1.25, b)
    assert (a == b).all() and (a[..., 3] == 255).all() and len(np.unique(a[..., 0])) > 2


def test_replayed_frames_are_drawn_once_and_sent_in_turn():
    frame = robot_arm.replayed_frames(None, robot_arm.TRANSPORTS["cpu"], "cpu", 320, 240, 3)
    sent = [frame(seq * 0.01, seq) for seq in range(4)]
    assert len({csum for _, csum in sent[:3]}) == 3  # three frames that differ
    assert sent[3][0] is sent[0][0] and sent[3][1] == sent[0][1]  # then the first again, not redrawn
    assert sent[0][1] == robot_arm.checksum_numpy(sent[0][0])


def test_on_the_gpu_the_headline_is_cuda_against_copies():
    def cell(transport, fps, renderer_ms, display_ms):
        cpu = {"renderer_cpu_ms_per_frame": renderer_ms, "cpu_ms_per_frame": display_ms}
        return {"transport": transport, "width": 3840, "height": 2160, "fps": fps, **cpu}

    results = [cell("cuda", 300.0, 1.0, 1.0), cell("cuda-host", 200.0, 2.0, 2.0), cell("cpu", 100.0, 4.0, 4.0)]
    assert robot_arm.headline(results, "cuda") == (
        "freight moved 4K frames 3.0x faster than copying them (300.0 vs 100.0 frames/s, transport only: cuda vs cpu), "
        "at 4.0x less CPU per frame (2.00 vs 8.00 ms, renderer and display together)."
    )
    assert robot_arm.headline(results[:2], "cuda") is None  # no copies to compare with
