#!/usr/bin/env python3
"""Fails when maturin's build of freight-py would compile again a crate that
`make build` already compiled.

Cargo unifies features per invocation, and `make build` (every crate but
freight-py) and `make wheel` (freight-py alone) are two invocations: where they
enable different features of a shared dependency, that dependency and all
above it (serde, iceoryx2, Cyclone DDS, freight) is compiled twice, minutes of
`make test`. crates/freight-workspace-hack asks both for the union; this check
compares the unit graphs of the two builds (and of `cargo test`) and names the
packages whose features went apart, e.g. after a dependency update.

Needs a nightly cargo (`--unit-graph`), which scripts/fuzz-smoke.sh installs.
"""
import json
import re
import subprocess
import sys

BUILD = ["build", "--release", "--workspace", "--exclude", "freight-py"]
TEST = ["test", "--release", "--workspace", "--exclude", "freight-py"]
WHEEL = ["rustc", "--release", "-p", "freight-py", "--lib"]


def unit_graph(args):
    out = subprocess.run(
        ["cargo", "+nightly", *args, "--locked", "--unit-graph", "-Z", "unstable-options"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)["units"]


def identities(units):
    """A unit's identity is what cargo hashes into its artifact's name: the
    package, target, mode, features and profile, and its dependencies'."""
    memo = {}

    def ident(i):
        if i not in memo:
            u = units[i]
            memo[i] = (u["pkg_id"], u["target"]["name"], u["mode"], tuple(u["features"]),
                       json.dumps(u["profile"], sort_keys=True),
                       tuple(sorted(ident(d["index"]) for d in u["dependencies"])))
        return memo[i]

    return [ident(i) for i in range(len(units))]


def rebuilt(base, other):
    """Packages that `base` also compiles but `other` compiles differently,
    each with the features the two builds give it."""
    base_ids = set(identities(base))
    # Host units (build scripts, proc macros and their dependencies) have a
    # profile of their own: a package `base` compiles only for the other side
    # is a new unit, not one compiled again.
    base_features = {}
    for u in base:
        base_features.setdefault(side(u), set()).add(tuple(u["features"]))
    found = {}
    for u, ident in zip(other, identities(other)):
        if u["mode"] in ("build", "run-custom-build") and ident not in base_ids and side(u) in base_features:
            found[name(u)] = (sorted(base_features[side(u)]), u["features"])
    return found


def side(unit):
    return unit["pkg_id"], json.dumps(unit["profile"], sort_keys=True)


def name(unit):
    """`syn@3.0.9`, or `freight@0.1.0` for a crate of the workspace."""
    return re.sub(r"^.*[/#]([^/#@]+)[#@]", r"\1@", unit["pkg_id"])


def main():
    build = unit_graph(BUILD)
    failed = False
    for name, args in (("make wheel (maturin)", WHEEL), ("cargo test", TEST)):
        again = rebuilt(build, unit_graph(args))
        # The crate maturin builds is compiled as a cdylib by that build only.
        again = {pkg: v for pkg, v in again.items() if not pkg.startswith("freight-py@")}
        if again:
            failed = True
            print(f"{name} compiles {len(again)} crates of `make build` again:")
            for pkg, (base, other) in sorted(again.items()):
                print(f"  {pkg}: make build {base}, {name} {other}")
    if failed:
        print("add the missing features to crates/freight-workspace-hack/Cargo.toml "
              "(the dependencies whose features differ; the crates above them follow)")
        return 1
    print("build sharing: make wheel and cargo test reuse every crate make build compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
