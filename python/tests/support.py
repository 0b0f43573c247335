"""Helpers of the cross-process tests: start child processes that die with the
test, talk to them through lines, find where an address lies in shared memory,
and write and check the content pattern every peer uses.

A child writes one line per event on stdout (``READY``, ``SENT ...``,
``GOT ...``) and reads commands from stdin; it exits when stdin closes, so a
child never outlives the test that started it even if the test is killed
before its ``finally`` runs (the kernel also kills it when the parent dies:
``PR_SET_PDEATHSIG``).
"""

import ctypes
import os
import pathlib
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from pattern import PERIOD, fill_pattern, first_mismatch  # noqa: F401 (the tests import them from here)

# The peers import this module too, without pytest: conftest is not imported.
TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parents[1]
PEERS = TESTS / "peers"
#: Cyclone DDS on the loopback interface only: children with a DDS plane
#: (the `freight` CLI's default) reach no other host.
LOOPBACK_DDS = f"file://{REPO / 'crates' / 'freight-dds' / 'loopback.xml'}"
#: How long any single expected event may take: generous, to stay clear of
#: slow or loaded machines; nothing here measures speed.
TIMEOUT = 10.0

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(sigint_default):
    # Runs in the child between fork and exec. The kernel sends SIGKILL when
    # the *thread* that forked exits: start children from the test's thread.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if sigint_default:
        # Processes started from some sandboxes and CI runners inherit SIGINT
        # as *ignored*, and Python then installs no KeyboardInterrupt handler;
        # an interactive shell starts programs with the default disposition,
        # which is what the Ctrl-C tests need.
        signal.signal(signal.SIGINT, signal.SIG_DFL)


class Child:
    """A child process spoken to in lines. Use as a context manager: leaving it
    closes stdin, waits a moment, then kills."""

    def __init__(self, argv, *, env=None, sigint_default=False, name=None, clean_env=False):
        self.name = name or pathlib.Path(argv[0]).name
        if clean_env:
            # What a user's shell gives a node and nothing else: no DDS or ROS
            # configuration of the test run's own reaches the child.
            full_env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        else:
            full_env = dict(os.environ)
            full_env.setdefault("CYCLONEDDS_URI", LOOPBACK_DDS)
        full_env["PYTHONUNBUFFERED"] = "1"
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            text=True,
            bufsize=1,
            preexec_fn=lambda: _die_with_parent(sigint_default),
        )
        self.pid = self.proc.pid
        self.lines = queue.Queue()
        self.stdout = []  # every line, for error messages
        self.stderr = []
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr, None), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    @staticmethod
    def _pump(stream, log, lines):
        for line in stream:
            line = line.rstrip("\n")
            log.append(line)
            if lines is not None:
                lines.put(line)
        if lines is not None:
            lines.put(None)  # end of output

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix, timeout=TIMEOUT):
        """The next line, split in words; fails when it does not start with
        ``prefix``, when output ends first, or after ``timeout`` seconds."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.name}: no {prefix!r} line within {timeout} s{self.transcript()}") from None
        if line is None:
            self.lines.put(None)
            raise AssertionError(f"{self.name}: exited before {prefix!r}{self.transcript()}")
        if line.startswith(prefix):
            return line.split()
        raise AssertionError(f"{self.name}: expected {prefix!r}, got {line!r}{self.transcript()}")

    def wait(self, timeout=TIMEOUT):
        """The exit status, once the child exited and all its output was read."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name}: still running after {timeout} s{self.transcript()}") from None
        for pump in self._pumps:
            pump.join(timeout)  # a grandchild holding the pipe open could keep it going
        return status

    def transcript(self):
        out = "\n".join(self.stdout[-40:])
        err = "\n".join(self.stderr[-40:])
        return f"\n--- {self.name} (pid {self.pid}) stdout:\n{out}\n--- stderr:\n{err}"

    def close(self, grace=2.0):
        """Closes stdin (peers exit on EOF), then kills what is left."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def stdin_closed():
    """An event set once stdin closes: the test is done with this peer (or
    died). A peer ends its loop on it and returns, so that freight's objects
    are dropped as in any program (a device pool removes its file) instead of
    being cut short by ``os._exit``."""
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    return closed


def peer(script, *args, **kwargs):
    """A Python peer from ``peers/``, run by this interpreter."""
    return Child([sys.executable, PEERS / script, *args], name=script, **kwargs)


def shm_location(address, pid="self"):
    """``(path, offset in file)`` of the shared-memory file mapped at ``address``
    in process ``pid``, or None when the address is not in a /dev/shm mapping."""
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 6:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if start <= address < end:
                path = fields[5].strip()
                if not path.startswith("/dev/shm/"):
                    return None
                return path, int(fields[2], 16) + (address - start)
    return None


def array_address(array):
    """Address of an array's first byte."""
    return array.__array_interface__["data"][0]


#: Seconds an in-process test waits for a message: only "it arrived at all".
TAKE_TIMEOUT = 5.0


def take(sub):
    """The next message of `sub`, failing the test when none comes."""
    msg = sub.take(timeout_sec=TAKE_TIMEOUT)
    assert msg is not None, "no message arrived"
    return msg


def wait_for_subscriptions(pub, count):
    deadline = time.monotonic() + TAKE_TIMEOUT
    while pub.get_subscription_count() < count:
        assert time.monotonic() < deadline, f"only {pub.get_subscription_count()} of {count} subscriptions matched"
        time.sleep(0.01)


def report_subscriptions(pub, count):
    """A peer's answer to `WAIT <count>`: waits (up to TIMEOUT) for `count`
    subscriptions and prints `SUBS <matched>`."""
    deadline = time.monotonic() + TIMEOUT
    while pub.get_subscription_count() < count and time.monotonic() < deadline:
        time.sleep(0.01)
    print(f"SUBS {pub.get_subscription_count()}", flush=True)


class RemoteSubscriber:
    """A subscription in a child process. While one exists, a publisher sends
    through shared memory (iceoryx2) to every subscription, this process's too."""

    def __init__(self, msg_type, topic):
        module, name = msg_type.__module__, msg_type.__name__
        code = (
            "import sys, freight\n"
            f"from {module} import {name}\n"
            "ctx = freight.Context(local_only=True)\n"
            "node = freight.Node('remote_subscriber', context=ctx)\n"
            f"sub = node.create_subscription({name}, {topic!r}, None, freight.qos_profile_sensor_data)\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        line = self.process.stdout.readline()
        if line.strip() != "ready":
            self.close()
            pytest.fail(f"the child subscriber did not start (printed {line!r})")

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()


#: Where Fast DDS keeps its shared-memory transport's segments, and the names
#: it gives them (``fastrtps_`` up to 2.x, ``fastdds_`` from 3.0).
_SHM = pathlib.Path("/dev/shm")
_FASTDDS_PREFIXES = ("fastdds_", "fastrtps_")


def remove_dead_fastdds_segments(since):
    """Removes the shared-memory files of Fast DDS processes that died since
    ``since`` (a ``time.time()``), as a test that SIGKILLs a stock node leaves
    them. Each segment ``X`` comes with a lock file ``X_el`` that its living
    owner keeps ``flock``-ed (what ``fastdds shm clean`` looks at): only
    segments whose lock is free, and that are older than two seconds (not a
    process still starting), are removed. Returns the names removed."""
    import fcntl

    removed = []
    for lock in _SHM.glob("*_el"):
        if not lock.name.startswith(_FASTDDS_PREFIXES):
            continue
        try:
            made = lock.stat().st_mtime
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile
        try:
            if not since <= made < time.time() - 2:
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its owner lives
        finally:
            os.close(fd)
        for path in (lock.with_name(lock.name[: -len("_el")]), lock):
            try:
                path.unlink()
                removed.append(path.name)
            except FileNotFoundError:
                pass
    return removed
