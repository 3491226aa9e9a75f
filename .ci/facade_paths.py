#!/usr/bin/env python3
"""Every public item of the `memloop` facade under one path, and the four memory traits at its root.

Walks the facade's public modules and re-exports (globs, renamed crates, curated modules) through
rustdoc's JSON output of the facade and of every crate it re-exports, and names each item by its
defining crate and path. Fails when one item is reachable under two facade paths (a re-export
that doubles another, as `memloop::recall::Selector` beside `memloop::memory::recall::Selector`),
or when `memloop::{MemoryStore, Selector, Extractor, SessionMemory}` is not where it must be.

The JSON needs a nightly rustdoc; this script builds it (default features) into
`target/facade-json` unless `--json-dir DIR` names a directory that already holds it:

    python3 .ci/facade_paths.py            # build the JSON, then check
    python3 .ci/facade_paths.py --list     # also print every facade path
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
TRAITS = {
    "MemoryStore": ("memloop_store", "MemoryStore"),
    "Selector": ("memloop_recall", "Selector"),
    "Extractor": ("memloop_memory", "Extractor"),
    "SessionMemory": ("memloop_session_notes", "SessionMemory"),
}


def workspace_packages() -> list[str]:
    manifest = tomllib.loads((root / "Cargo.toml").read_text())
    names = [manifest["package"]["name"]]
    for member in manifest["workspace"]["members"]:
        names.append(tomllib.loads((root / member / "Cargo.toml").read_text())["package"]["name"])
    return names


def build(json_dir: pathlib.Path, packages: list[str]) -> None:
    for package in packages:
        cmd = [
            "cargo", "+nightly", "rustdoc", "-q", "-p", package, "--lib",
            "--target-dir", str(json_dir.parent),
            "--", "-Zunstable-options", "--output-format", "json",
        ]
        subprocess.run(cmd, cwd=root, check=True)


class Crates:
    """The rustdoc JSON of each crate, loaded on demand."""

    def __init__(self, json_dir: pathlib.Path):
        self.dir = json_dir
        self.docs: dict[str, dict] = {}

    def doc(self, crate: str) -> dict | None:
        if crate not in self.docs:
            path = self.dir / f"{crate}.json"
            self.docs[crate] = json.loads(path.read_text()) if path.exists() else None
        return self.docs[crate]

    def resolve(self, crate: str, item_id) -> tuple[str, int | str] | None:
        """(crate, id) of the item `item_id` of `crate`'s JSON names, in its defining crate's JSON
        when that crate's JSON is at hand."""
        doc = self.doc(crate)
        key = str(item_id)
        if key in doc["index"] and doc["index"][key]["crate_id"] == 0:
            return crate, key
        summary = doc["paths"].get(key)
        if summary is None:
            return None
        owner = doc["external_crates"][str(summary["crate_id"])]["name"] if summary["crate_id"] else crate
        owner_doc = self.doc(owner)
        if owner_doc is None:
            return None
        want = summary["path"]
        for other_id, other in owner_doc["paths"].items():
            if other["crate_id"] == 0 and other["path"] == want and other["kind"] == summary["kind"]:
                return owner, other_id
        return None


def walk(crates: Crates, crate: str, module_id: str, prefix: list[str], out: dict, seen: set) -> None:
    if (crate, module_id, tuple(prefix)) in seen:
        return
    seen.add((crate, module_id, tuple(prefix)))
    doc = crates.doc(crate)
    module = doc["index"][module_id]
    for child_id in module["inner"]["module"]["items"]:
        child = doc["index"].get(str(child_id))
        if child is None or child["visibility"] != "public":
            continue
        kind, inner = next(iter(child["inner"].items()))
        if kind == "use":
            target = crates.resolve(crate, inner["id"]) if inner["id"] is not None else None
            if target is None:
                # An item of a crate outside the workspace (async_trait, tokio_util): its own name.
                out.setdefault(("extern", inner["source"]), []).append("::".join(prefix + [inner["name"]]))
                continue
            t_crate, t_id = target
            t_item = crates.doc(t_crate)["index"][t_id]
            t_kind = next(iter(t_item["inner"]))
            if inner["is_glob"]:
                walk(crates, t_crate, t_id, prefix, out, seen)
            elif t_kind == "module":
                walk(crates, t_crate, t_id, prefix + [inner["name"]], out, seen)
            else:
                out.setdefault((t_crate, t_id), []).append("::".join(prefix + [inner["name"]]))
        elif kind == "module":
            walk(crates, crate, str(child_id), prefix + [child["name"]], out, seen)
        elif kind in ("impl", "extern_crate"):
            continue
        else:
            out.setdefault((crate, str(child_id)), []).append("::".join(prefix + [child["name"]]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json-dir", type=pathlib.Path)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    json_dir = args.json_dir
    if json_dir is None:
        json_dir = root / "target" / "facade-json" / "doc"
        build(json_dir, workspace_packages())
    crates = Crates(json_dir)
    facade = crates.doc("memloop")
    if facade is None:
        sys.exit(f"no memloop.json in {json_dir}")
    paths: dict = {}
    walk(crates, "memloop", str(facade["root"]), ["memloop"], paths, set())
    if args.list:
        for key, where in sorted(paths.items(), key=lambda kv: kv[1][0]):
            print(", ".join(sorted(where)))
    failures = []
    for key, where in sorted(paths.items(), key=lambda kv: sorted(kv[1])[0]):
        if len(where) > 1:
            failures.append(f"two facade paths for one item: {', '.join(sorted(where))}")
    for name, (crate, _) in TRAITS.items():
        found = [w for key, where in paths.items() if key[0] == crate for w in where if w.endswith(f"::{name}")]
        if found != [f"memloop::{name}"]:
            failures.append(f"the trait {name} must be at memloop::{name} and only there: {found}")
    for failure in failures:
        print(failure, file=sys.stderr)
    total = sum(len(w) for w in paths.values())
    print(f"{total} facade paths, {len(paths)} items, {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
