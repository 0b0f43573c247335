"""Private networks for the tests that talk DDS with stock ROS 2 nodes: no test
traffic ever reaches this machine's real interfaces.

* :func:`host` — one "host": a network namespace whose loopback is up and routes
  multicast (what DDS discovery needs), and nothing else;
* :func:`two_hosts` — two namespaces joined by a veth pair, each direction shaped
  to a link rate with ``tc tbf`` and losing packets at random by an nftables
  rule on the ingress hook (this kernel has no netem);
* :func:`container` — one "host" whose ``/dev/shm`` is as small as Docker makes a
  container's (64 MB unless told otherwise), shared by every process started in it.

Both are context managers yielding namespace names and delete the namespaces on
exit; :func:`argv` runs a command inside one. Creating them needs root and
``ip``/``tc``/``nft``; :func:`unavailable` says why not, so that a test can skip
with a printed reason where the machine truly lacks them.
"""

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid

_PREFIX = "freight-pytest-"


def _run(*args, stdin=None):
    out = subprocess.run(args, input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed: {out.stderr.strip()}")
    return out.stdout


def unavailable():
    """Why network namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    for tool in ("ip", "tc", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is missing (apt-get install iproute2 nftables)"
    return None


def _remove_stale():
    """Namespaces of earlier runs whose pytest process is gone."""
    for line in _run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(_PREFIX):
            pid = name[len(_PREFIX) :].split("-")[0]
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def _new_namespace():
    name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
    _run("ip", "netns", "add", name)
    _run("ip", "-n", name, "link", "set", "lo", "up", "multicast", "on")
    return name


def argv(namespace, command):
    """``command`` (a list) run inside ``namespace``."""
    return ["ip", "netns", "exec", namespace, *map(str, command)]


@contextlib.contextmanager
def host():
    """A namespace with a multicast-capable loopback and no other interface."""
    _remove_stale()
    name = _new_namespace()
    try:
        _run("ip", "-n", name, "route", "add", "224.0.0.0/4", "dev", "lo")
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


@contextlib.contextmanager
def two_hosts(rate="1gbit", loss=0.0, mtu=1500):
    """Two namespaces (yielded as a pair) joined by a veth pair of ``mtu``, each
    direction shaped to ``rate``, each packet dropped with probability ``loss``
    on arrival. Addresses 10.232.0.1 and 10.232.0.2 exist only inside them."""
    _remove_stale()
    names = []
    try:
        for _ in range(2):
            names.append(_new_namespace())
        a, b = names
        _run("ip", "link", "add", "v0", "netns", a, "type", "veth", "peer", "name", "v0", "netns", b)
        ppm = round(loss * 1_000_000)
        drop = f"  numgen random mod 1000000 < {ppm} drop\n" if ppm else ""
        for i, ns in enumerate(names, start=1):
            _run("ip", "-n", ns, "addr", "add", f"10.232.0.{i}/24", "dev", "v0")
            _run("ip", "-n", ns, "link", "set", "v0", "mtu", str(mtu), "up")
            _run("ip", "-n", ns, "route", "add", "224.0.0.0/4", "dev", "v0")
            # A 64 KiB burst and a 50 ms queue: the shaper queues a frame's burst
            # instead of dropping its tail.
            _run("tc", "-n", ns, "qdisc", "add", "dev", "v0", "root", "tbf", "rate", rate, "burst", "64kb", "latency", "50ms")
            rules = (
                "table netdev loss {\n chain ingress {\n"
                "  type filter hook ingress device v0 priority 0; policy accept;\n"
                f"{drop} }}\n}}\n"
            )
            _run("ip", "netns", "exec", ns, "nft", "-f", "-", stdin=rules)
        yield a, b
    finally:
        for ns in names:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


@contextlib.contextmanager
def container(shm_size="64m"):
    """A "container": a namespace as :func:`host` makes, and a mount namespace
    whose ``/dev/shm`` is a tmpfs of ``shm_size`` and whose ``/tmp/iceoryx2``
    is empty, kept in a file so that every process started in it shares them.
    Yields a function that turns a command (a list) into one run inside."""
    with host() as net:
        root = tempfile.mkdtemp(prefix=_PREFIX)
        mounts = os.path.join(root, "mnt")
        # A mount namespace is kept by bind-mounting it on a file, which must
        # not lie on a shared mount (or it would propagate back).
        _run("mount", "--bind", root, root)
        try:
            _run("mount", "--make-private", root)
            open(mounts, "w").close()
            _run(
                "unshare",
                f"--mount={mounts}",
                "--propagation",
                "private",
                "sh",
                "-c",
                f"mount -t tmpfs -o size={shm_size} tmpfs /dev/shm && mkdir -p /tmp/iceoryx2 && "
                "mount -t tmpfs tmpfs /tmp/iceoryx2",
            )
            try:
                # `ip netns exec` copies the mount namespace it starts in.
                yield lambda command: ["nsenter", f"--mount={mounts}", *argv(net, command)]
            finally:
                subprocess.run(["umount", mounts], capture_output=True)
        finally:
            subprocess.run(["umount", root], capture_output=True)
            shutil.rmtree(root, ignore_errors=True)
