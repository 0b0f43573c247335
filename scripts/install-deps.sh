#!/usr/bin/env bash
# Installs what building and testing freight needs on Debian 12, as root, and
# nothing that is already there. Safe to run again; `make` runs it first.
set -euo pipefail

MIN_RUST="1.89"   # iceoryx2 0.10's minimum

need_pkgs=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# cmake and libclang-dev: the cyclors crate builds Cyclone DDS from source and
# generates its Rust bindings with bindgen. libfastrtps-dev: Fast DDS 2.9, for
# the second independent ROS 2 DDS peer (crates/freight/tests/fastdds_interop).
# iproute2 and nftables: `freight lab wireless` (namespaces, tc tbf, packet loss).
for pkg in build-essential pkg-config cmake libclang-dev fonts-dejavu-core libfastrtps-dev iproute2 nftables; do
    have_pkg "$pkg" || need_pkgs+=("$pkg")
done

if ((${#need_pkgs[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "error: missing Debian packages: ${need_pkgs[*]}; run 'make' as root or install them with apt-get" >&2
        exit 1
    fi
    echo "installing: ${need_pkgs[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi

# Rust: use the toolchain on PATH (or in ~/.cargo/bin) if it is new enough.
export PATH="$HOME/.cargo/bin:$PATH"
version_ok() { [[ "$(printf '%s\n%s\n' "$MIN_RUST" "$1" | sort -V | head -n1)" == "$MIN_RUST" ]]; }
rust_version() { rustc --version 2>/dev/null | awk '{print $2}'; }
if ! command -v cargo >/dev/null || ! version_ok "$(rust_version)"; then
    # Debian's own rustc is older than iceoryx2 needs; Debian's rustup (where
    # the release has it) installs a current toolchain from the Rust project.
    if [[ $(id -u) -eq 0 ]] && apt-cache show rustup >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rustup
        rustup default stable
    fi
    if ! command -v cargo >/dev/null || ! version_ok "$(rust_version)"; then
        echo "error: freight needs Rust >= $MIN_RUST (found: $(rust_version || echo none));" \
             "install it with rustup (https://rustup.rs) and run make again" >&2
        exit 1
    fi
fi
# Python, for the tests that compare with independent implementations: a
# virtual environment of the project's own (Debian's system pip refuses
# global installs), with pinned packages.
if ! command -v python3 >/dev/null || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "error: tests need python3 with venv; run 'make' as root or apt-get install python3-venv" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv
fi
here="$(cd "$(dirname "$0")/.." && pwd)"
if [[ ! -x "$here/.venv/bin/python" ]]; then
    python3 -m venv "$here/.venv"
fi
if ! "$here/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/scripts/requirements-test.txt"; then
    echo "error: could not install the Python test packages (scripts/requirements-test.txt) into .venv" >&2
    exit 1
fi
# Stock ROS 2 from PyPI, the peer of the stock-interop tests and the baseline of
# `freight bench ros2`: Jazzy (Fast DDS 2.14) and Kilted (Fast DDS 3.2), each in
# a virtual environment of its own. Their wheels are for CPython 3.11 only.
ros_python=""
for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && [[ "$("$candidate" -c 'import sys; print(sys.version_info[:2] == (3, 11))')" == True ]]; then
        ros_python="$candidate"
        break
    fi
done
if [[ -z "$ros_python" ]]; then
    echo "error: the stock ROS 2 wheels (scripts/requirements-ros-*.txt) need CPython 3.11; install python3.11" >&2
    exit 1
fi
for distro in jazzy kilted; do
    venv="$here/.venv-ros-$distro"
    requirements="$here/scripts/requirements-ros-$distro.txt"
    # The stamp holds the requirements it was installed from: pip runs only when they change.
    if [[ -x "$venv/bin/python" ]] && cmp -s "$requirements" "$venv/.freight-requirements"; then
        continue
    fi
    [[ -x "$venv/bin/python" ]] || "$ros_python" -m venv "$venv"
    echo "installing stock ROS 2 $distro into $venv"
    if ! "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"; then
        echo "error: could not install stock ROS 2 $distro ($requirements) into $venv" >&2
        exit 1
    fi
    cp "$requirements" "$venv/.freight-requirements"
done
echo "dependencies ok: $(rustc --version), $("$here/.venv/bin/python" --version), stock ROS 2 jazzy and kilted"
