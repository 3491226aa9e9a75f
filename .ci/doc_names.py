#!/usr/bin/env python3
"""Every name the docs give a reader exists in the code.

Scans README.md, docs/**/*.md and every crate's README.md for
- `memloop::...` paths: each must resolve through the facade (src/lib.rs): its modules, its
  `pub use` lists and the crates it re-exports (`memloop::core` is memloop-core, ...); past a
  re-exported crate, each segment must be a public module, item or re-export of that crate;
- `MEMLOOP_*` variables: each must be named in code: a crate's or the facade's src/, tests/ or
  examples/ (a test's model dir, `MEMLOOP_TEST_*`, is documented too), or a CI script in .ci/;
- CLI flags (`--flag`) on a line or in a code block that runs `memloop`: each must be a flag the
  real CLI accepts (read from `memloop help` of every subcommand, so clap's own naming decides).

Exit 1 listing every unknown name with its file and line. Usage: .ci/doc_names.py [memloop-binary]
(default: target/debug/memloop, built with `cargo build -p memloop-cli --all-features` when
missing).
"""
import pathlib
import re
import subprocess
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
docs = [root / "README.md", *sorted((root / "docs").rglob("*.md")), *sorted(root.glob("crates/*/README.md"))]


def rel(p: pathlib.Path) -> str:
    return str(p.relative_to(root))


# --- the crates: name (with underscores) -> src dir ------------------------------------------
crates: dict[str, pathlib.Path] = {}
manifest = tomllib.loads((root / "Cargo.toml").read_text())
for member in manifest["workspace"]["members"]:
    name = tomllib.loads((root / member / "Cargo.toml").read_text())["package"]["name"]
    crates[name.replace("-", "_")] = root / member / "src"

ITEM = r"(?:pub(?:\([^)]*\))?\s+)(?:async\s+)?(?:unsafe\s+)?(?:struct|enum|trait|fn|type|const|static|mod|union|macro_rules!)\s+(\w+)"


def crate_names(src: pathlib.Path) -> set[str]:
    """Every public item, module and re-exported name anywhere in a crate (a loose superset)."""
    names: set[str] = set()
    for f in src.rglob("*.rs"):
        text = f.read_text()
        names.update(re.findall(ITEM, text))
        names.update(re.findall(r"\bmod\s+(\w+)", text))
        names.update(re.findall(r"macro_rules!\s+(\w+)", text))
        for block in re.findall(r"pub\s+use\s+([^;]+);", text):
            names.update(re.findall(r"\bas\s+(\w+)", block))
            names.update(w for w in re.findall(r"\b(\w+)\b", block) if w not in {"crate", "self", "super", "as"})
        # Enum variants and associated items are reached as `Type::Name`.
        names.update(re.findall(r"^\s+(?:pub\s+)?(?:async\s+)?fn\s+(\w+)", text, re.M))
        names.update(re.findall(r"^\s+([A-Z]\w*)\s*[({,]", text, re.M))
        names.update(re.findall(r"^\s+([A-Z]\w*),?\s*$", text, re.M))
    return names


crate_index = {c: crate_names(src) for c, src in crates.items()}

# --- the facade: module path -> names, and names that are whole crates -------------------------
facade = (root / "src" / "lib.rs").read_text()
setup = (root / "src" / "setup.rs").read_text()
modules: dict[str, set[str]] = {"": set()}
aliases: dict[str, str] = {}  # facade path -> crate
stack: list[str] = []
depth_of: list[int] = []
depth = 0
for line in facade.splitlines():
    code = line.split("//")[0]
    m = re.match(r"\s*pub\s+mod\s+(\w+)\s*\{", code)
    if m:
        path = "::".join([*stack, m.group(1)])
        modules.setdefault("::".join(stack), set()).add(m.group(1))
        modules.setdefault(path, set())
        stack.append(m.group(1))
        depth_of.append(depth)
    depth += code.count("{") - code.count("}")
    while depth_of and depth <= depth_of[-1]:
        stack.pop()
        depth_of.pop()
# `pub use` statements (possibly over several lines), with the module they sit in.
stack, depth_of, depth = [], [], 0
statement = ""
for line in facade.splitlines():
    code = line.split("//")[0]
    m = re.match(r"\s*pub\s+mod\s+(\w+)\s*\{", code)
    if m:
        stack.append(m.group(1))
        depth_of.append(depth)
    if statement or re.match(r"\s*pub\s+use\b", code):
        statement += code
        if ";" in code:
            here = "::".join(stack)
            body = re.sub(r"\s+", " ", statement.strip())[len("pub use "):].rstrip(";")
            for target, alias in re.findall(r"([\w:]+)\s+as\s+(\w+)", body):
                modules.setdefault(here, set()).add(alias)
                if target in crates:
                    aliases["::".join([*stack, alias]) if stack else alias] = target
            body = re.sub(r"[\w:]+\s+as\s+\w+", "", body)
            if "{" in body:
                prefix, items = body.split("{", 1)
                for item in re.findall(r"\b(\w+)\b", items):
                    modules.setdefault(here, set()).add(item)
                    if prefix.strip(": ") == "" and item in crates:
                        aliases["::".join([*stack, item])] = item
            else:
                modules.setdefault(here, set()).add(body.split("::")[-1])
            statement = ""
    depth += code.count("{") - code.count("}")
    while depth_of and depth <= depth_of[-1]:
        stack.pop()
        depth_of.pop()
modules[""].update(re.findall(ITEM, facade))


def resolves(path: str) -> bool:
    segs = path.split("::")[1:]
    here = ""
    for i, seg in enumerate(segs):
        full = f"{here}::{seg}" if here else seg
        if full in aliases:
            crate = aliases[full]
            return all(s in crate_index[crate] for s in segs[i + 1:])
        if seg in modules.get(here, set()):
            if full in modules:
                here = full
                continue
            # An item: what follows is its variants or associated items, in its crate.
            rest = segs[i + 1:]
            return not rest or any(all(s in names for s in rest) for names in crate_index.values()) \
                or all(s in re.findall(r"\b(\w+)\b", setup) for s in rest)
        return False
    return True


# --- MEMLOOP_* variables the code names ------------------------------------------------------
code_dirs = [root / "src", root / "tests", root / "examples", *crates.values(), *(c.parent / "tests" for c in crates.values())]
code_text = "\n".join(f.read_text() for d in code_dirs if d.exists() for f in d.rglob("*.rs"))
code_text += "\n".join(f.read_text() for f in (root / ".ci").glob("*") if f.is_file())
variables = set(re.findall(r"MEMLOOP_[A-Z0-9_]+", code_text))
# Read by the shared local model server script the docs tell developers to run, not by memloop.
variables.add("MEMLOOP_LLM_CTX")

# --- CLI flags, from the real CLI ----------------------------------------------------------------
binary = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else root / "target" / "debug" / "memloop"
if not binary.exists():
    subprocess.run(["cargo", "build", "-q", "-p", "memloop-cli", "--all-features"], cwd=root, check=True)


def help_of(args: list[str]) -> str:
    return subprocess.run([str(binary), *args, "--help"], capture_output=True, text=True).stdout


flags: set[str] = set()
seen_cmds: set[tuple[str, ...]] = set()
todo: list[list[str]] = [[]]
while todo:
    cmd = todo.pop()
    if tuple(cmd) in seen_cmds or len(cmd) > 3:
        continue
    seen_cmds.add(tuple(cmd))
    text = help_of(cmd)
    flags.update(re.findall(r"(--[a-z0-9][a-z0-9-]*)", text))
    section = re.search(r"^Commands:\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    if section:
        for sub in re.findall(r"^  ([a-z][\w-]*)", section.group(1), re.M):
            if sub != "help":
                todo.append([*cmd, sub])
flags.update({"--help", "--version"})

# --- the docs ----------------------------------------------------------------------------------
targets = set(re.findall(r'"(memloop::[\w:]+)"', code_text))  # tracing targets the code names
subcommands = {c[0] for c in seen_cmds if c}


def memloop_segments(line: str, in_block: bool) -> list[str]:
    """The parts of `line` that are arguments of a `memloop SUBCOMMAND` command."""
    out = []
    for m in re.finditer(r"(?<![\w/.-])memloop\s+([a-z][\w-]*)", line):
        if m.group(1) not in subcommands:
            continue
        rest = line[m.end():]
        cut = re.search(r"`|\||&&|;|\s#|\)" if not in_block else r"\||&&|;|\s#", rest)
        out.append(rest[: cut.start()] if cut else rest)
    return out


problems: list[str] = []
for doc in docs:
    in_block = False
    continuing = False
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continuing = False
            continue
        for path in re.findall(r"\bmemloop(?:::[A-Za-z_]\w*)+", line):
            if path not in targets and not resolves(path):
                problems.append(f"{rel(doc)}:{n}: `{path}` is not a public path of the facade")
        for var in re.findall(r"\bMEMLOOP_[A-Z0-9_]*[A-Z0-9]\b", line):
            if var not in variables:
                problems.append(f"{rel(doc)}:{n}: `{var}` is read by no code")
        segments = memloop_segments(line, in_block)
        if continuing:
            segments.append(line)
        continuing = in_block and bool(segments) and line.rstrip().endswith("\\")
        for segment in segments:
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])(?![\w*-])", segment):
                if flag not in flags:
                    problems.append(f"{rel(doc)}:{n}: `{flag}` is not a flag of the memloop CLI")

if problems:
    print("\n".join(problems))
    print(f"{len(problems)} unknown names in the docs", file=sys.stderr)
    sys.exit(1)
print(f"docs name {len(flags)} known CLI flags, {len(variables)} MEMLOOP_* variables; all resolve")
