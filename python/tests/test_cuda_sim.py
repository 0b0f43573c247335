"""The ``cuda`` backend from Python, across processes, on the simulated CUDA
driver (``crates/freight-backend/tests/sim_cuda/libcuda_sim.c``, a test
double: it runs freight's CUDA logic -- IPC handles, events, copies -- but
cannot check real stream order or memory placement; a GPU run remains the
final check).

The driver is built with ``cc`` and put first on ``LD_LIBRARY_PATH`` of the
peer processes (the loader reads it at process start, so this test process,
which may have loaded no driver or a real one, is not used for CUDA).

Without torch, a ``cuda`` publisher's ``loan_buffer(device="cuda")`` can only
be written by a GPU library; on the simulation its device address is a host
address of the publisher's process, so the peer writes it with
``ctypes.memmove`` (a simulation-only shortcut). Publishing a numpy array
from a ``cuda`` publisher (freight copies it into device memory) needs no
such shortcut and is tested too.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

from support import REPO, peer

SIM_SOURCE = REPO / "crates" / "freight-backend" / "tests" / "sim_cuda" / "libcuda_sim.c"
GPU_A = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a01"
GPU_B = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"
#: Messages: (k, bytes, how the publisher writes them).
MESSAGES = [(1, 1, "loan"), (2, 4093, "copy"), (3, 65536, "loan"), (4, 100_003, "copy"), (5, 1 << 20, "loan")]
MESSAGES += [(k, n, how) for k, (n, how) in enumerate([(777, "loan"), (1 << 20, "copy")] * 6, start=6)]


@pytest.fixture(scope="module")
def sim_driver(tmp_path_factory):
    """A directory holding the simulated driver as ``libcuda.so.1`` (and
    ``libcuda.so``, which cudarc tries first)."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) to build the simulated CUDA driver")
    out = tmp_path_factory.mktemp("sim_cuda")
    lib = out / "libcuda.so.1"
    flags = ["-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared"]
    built = subprocess.run([cc, *flags, "-o", str(lib), str(SIM_SOURCE), "-lpthread"], capture_output=True, text=True)
    assert built.returncode == 0, f"building {SIM_SOURCE} failed:\n{built.stderr}"
    (out / "libcuda.so").symlink_to("libcuda.so.1")
    return out


def sim_env(driver: pathlib.Path, uuid: str):
    old = os.environ.get("LD_LIBRARY_PATH")
    return {
        "LD_LIBRARY_PATH": f"{driver}:{old}" if old else str(driver),
        "FREIGHT_SIM_CUDA_UUID": uuid,
        "FREIGHT_SIM_CUDA_TRACE": "1",
    }


def start(driver, uuid, *args):
    return peer("cuda_sim_peer.py", *args, env=sim_env(driver, uuid))


def no_context_errors(*children):
    for c in children:
        err = "\n".join(c.stderr)
        assert "CUDA_ERROR_INVALID_CONTEXT" not in err, f"a driver call without a current context{c.transcript()}"
        assert "Traceback" not in err, c.transcript()


def test_cuda_publisher_reaches_cuda_cpu_and_other_device_subscribers_across_processes(sim_driver, topic):
    pub = start(sim_driver, GPU_A, "publish", topic)
    subs = [
        start(sim_driver, GPU_A, "subscribe", topic, "--accept", "cuda"),
        start(sim_driver, GPU_A, "subscribe", topic, "--accept", "cpu"),
        start(sim_driver, GPU_B, "subscribe", topic, "--accept", "cuda,shm"),
    ]
    try:
        for c in [pub, *subs]:
            c.expect("READY")
        pub.send(f"WAIT {len(subs)}")
        assert pub.expect("SUBS") == ["SUBS", str(len(subs))], pub.transcript()
        for k, n, how in MESSAGES:
            pub.send(f"SEND {k} {n} {how}")
            assert pub.expect("") == ["SENT", str(k)], pub.transcript()
            same, cpu, other = (s.expect("GOT") for s in subs)
            # k, type, backend, dlpack device, device, bytes, what __dlpack__(stream=1) returned
            # (DLPack 1.0: a received buffer is read-only, which only 1.0 can say)
            assert same == ["GOT", str(k), "DeviceArray", "cuda", "2,0", "cuda:0", "ok", "PyCapsule:dltensor_versioned"], (
                how,
                subs[0].transcript(),
            )
            assert cpu == ["GOT", str(k), "ndarray", "cpu", "1,0", "host", "ok", "-"], (how, subs[1].transcript())
            assert other == ["GOT", str(k), "ndarray", "shm", "1,0", "host", "ok", "-"], (how, subs[2].transcript())
    finally:
        for c in [pub, *subs]:
            c.close()
    assert pub.proc.returncode == 0, pub.transcript()
    no_context_errors(pub, *subs)
    # Why the subscriber on the other device gets host copies was said.
    said = "\n".join(pub.stderr + subs[2].stderr)
    assert "GPU-b0b0b0b0" in said, pub.transcript() + subs[2].transcript()
