"""The robot arm demo (``python -m freight.demos.robot_arm``), headless and bounded."""

import subprocess
import sys

import pytest

from freight.demos import robot_arm


def run(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "freight.demos.robot_arm", *args], capture_output=True, text=True, timeout=timeout
    )


def test_the_cpu_demo_compares_shm_and_copies_and_prints_the_table():
    result = run("compare", "--device", "cpu", "--seconds", "0.5", "--resolutions", "320x240,640x480")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "device: cpu (asked for with --device cpu" in out
    header = next(line for line in out.splitlines() if line.startswith("Resolution"))
    for column in ("Image size", "Transport", "FPS", "Speedup", "Latency p50"):
        assert column in header
    rows = [line.split() for line in out.splitlines() if line.startswith(("320x240", "640x480"))]
    assert [(r[0], r[3]) for r in rows] == [("320x240", "shm"), ("320x240", "CPU"), ("640x480", "shm"), ("640x480", "CPU")]
    assert all(r[-1] == "ok" for r in rows)  # every frame's checksum matched
    assert all(float(r[4]) > 0 for r in rows)  # frames per second


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
