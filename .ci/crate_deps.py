#!/usr/bin/env python3
"""The crate boundaries docs/ARCHITECTURE.md draws, held by the build.

1. Each library crate depends (normal dependencies, optional ones included) on exactly the memloop
   crates the "may import" column of the "## Crates" table lists: a dependency the table does not
   allow fails, and so does a listed crate the manifest no longer uses (the table stays true).
2. The storage side builds without the agent loop: `cargo tree -e normal` of `memloop-store` and
   of `memloop-pg` (no features) contains neither `memloop-core` nor `tiktoken-rs`; and a backend
   builds no file watching or locking: the tree of the contract (`memloop-store`) and of a
   backend built on it alone (the test kit's `MapStore`, feature `store`) holds neither
   `memloop-files` nor `notify`, `inotify` or `fs4`.
3. `memloop-core` holds at most 7,500 non-test lines (`#[cfg(test)]` items excluded).
4. Library code reads the process environment only in `memloop-host` (and the test kit):
   no `std::env::var*` anywhere else under `crates/*/src` or `src/`.

Exit 1 listing every breach. Usage: .ci/crate_deps.py
"""
import json
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
errors: list[str] = []

# 1. The table.
text = (root / "docs/ARCHITECTURE.md").read_text()
section = re.search(r"^## Crates\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
if not section:
    sys.exit("docs/ARCHITECTURE.md: no `## Crates` section")
allowed: dict[str, set[str] | None] = {}
for line in section.group(1).splitlines():
    if not line.startswith("|") or set(line) <= set("|-: "):
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 4:
        continue
    names = re.findall(r"`([^`]+)`", cells[0])
    if not names or not re.fullmatch(r"memloop(-[a-z0-9-]+)?", names[0]):
        continue
    may = cells[2]
    allowed[names[0]] = None if "every library crate" in may else set(
        re.findall(r"`(memloop(?:-[a-z0-9-]+)?)(?=[`\s(,])", may)
    )

meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
)
for package in meta["packages"]:
    name = package["name"]
    deps = {
        d["name"] for d in package["dependencies"]
        if d["name"].startswith("memloop") and d["kind"] is None
    }
    if name not in allowed:
        errors.append(f"{name}: no row in docs/ARCHITECTURE.md's crate table")
        continue
    rule = allowed[name]
    if rule is None:
        continue
    for extra in sorted(deps - rule):
        errors.append(f"{name} depends on {extra}, which its row in docs/ARCHITECTURE.md does not allow")
    for unused in sorted(rule - deps):
        errors.append(f"{name}: docs/ARCHITECTURE.md allows {unused}, which it does not depend on (update the table)")

# 2. The storage side without the loop.
for crate in ["memloop-store", "memloop-pg"]:
    tree = subprocess.run(
        ["cargo", "tree", "-p", crate, "-e", "normal", "--prefix", "none", "--format", "{p}"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    for banned in ["memloop-core", "tiktoken-rs"]:
        if re.search(rf"^{banned} ", tree, re.M):
            errors.append(f"{crate} builds {banned} (cargo tree -p {crate} -e normal -i {banned})")

# A backend: the contract and the test kit's in-memory backend, without files.
for crate, features in [("memloop-store", []), ("memloop-testkit", ["--no-default-features", "--features", "store"])]:
    tree = subprocess.run(
        ["cargo", "tree", "-p", crate, *features, "-e", "normal", "--prefix", "none", "--format", "{p}"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout
    for banned in ["memloop-files", "notify", "inotify", "fs4"]:
        if re.search(rf"^{banned} ", tree, re.M):
            errors.append(f"{crate} {' '.join(features)} builds {banned}: a backend must not need file watching or locking (cargo tree -p {crate} -e normal -i {banned})")


# 3. The size of core.
def non_test_lines(path: pathlib.Path) -> int:
    lines = path.read_text().split("\n")
    count, i = 0, 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]":
            j, depth, started = i + 1, 0, False
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                started = started or "{" in lines[j]
                if (started and depth <= 0) or (not started and lines[j].rstrip().endswith(";")):
                    break
                j += 1
            i = j + 1
            continue
        count += 1
        i += 1
    return count


core = sum(non_test_lines(p) for p in (root / "crates/harness-core/src").rglob("*.rs"))
if core > 7500:
    errors.append(f"memloop-core has {core} non-test lines (at most 7,500): move a job out")

# 4. The environment, read in one place.
env_read = re.compile(r"\bstd::env::(var|var_os|vars|vars_os)\b|\benv::var(_os)?\(")
sources = [*(root / "src").rglob("*.rs"), *(root / "crates").glob("*/src/**/*.rs")]
for path in sources:
    rel = path.relative_to(root).as_posix()
    if rel.startswith(("crates/host/", "crates/testkit/")):
        continue
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if env_read.search(line) and not line.lstrip().startswith("//"):
            errors.append(f"{rel}:{n}: reads the process environment (take an EnvVars from memloop-host)")

for e in errors:
    print(e)
print(f"{len(allowed)} crates, memloop-core {core} non-test lines: "
      + ("ok" if not errors else f"{len(errors)} problems"))
sys.exit(1 if errors else 0)
