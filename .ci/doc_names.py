#!/usr/bin/env python3
"""Every name the docs give a reader exists in the code.

Scans README.md, docs/**/*.md and every crate's README.md for
- `memloop::...` paths (and `memloop::a::{b, c::d}` groups): each must resolve against the real
  module tree, read from the sources of the facade (src/lib.rs) and of every workspace crate:
  each segment must be a public name of the module the segment before it names, where a module's
  public names are its `pub mod`s (inline or in `x.rs` / `x/mod.rs` / a `#[path]` file), its
  public items (`#[macro_export]` macros at the crate root) and its `pub use` re-exports (groups,
  `self`, renames, globs, whole crates), followed into the crate they come from. `pub(crate)` and
  `pub(super)` are not public; cfg-gated items count (features), `#[cfg(test)]` ones do not. Past
  a struct, enum, union or trait, a segment must be one of its public fields, variants, trait
  items, or the items of its impl blocks in its crate (public ones of inherent impls, all of
  trait impls, with the trait's provided items); past a type alias, those of the aliased type,
  or, when that type is not the workspace's, a name defined in the alias's crate;
- `MEMLOOP_*` variables: each must be named in code: a crate's or the facade's src/, tests/ or
  examples/ (a test's model dir, `MEMLOOP_TEST_*`, is documented too), or a CI script in .ci/;
- CLI flags (`--flag`) on a line or in a code block that runs `memloop`: each must be a flag the
  real CLI accepts (read from `memloop help` of every subcommand, so clap's own naming decides).

A self-test runs first: a small workspace written to a temp dir exercises each rule of the
resolver, and planted wrong paths of the real facade must be reported while right ones resolve.

Exit 1 listing every unknown name with its file and line.
Usage: .ci/doc_names.py [memloop-binary]   (default: target/debug/memloop, under
       $CARGO_TARGET_DIR when set, built with `cargo build -p memloop-cli --all-features` when
       missing)
       .ci/doc_names.py --self-test        (the self-test alone)
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent


def rel(p: pathlib.Path) -> str:
    return str(p.relative_to(root))


# --- Rust sources as tokens ----------------------------------------------------------------------
TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<line>//[^\n]*)
    | (?P<block>/\*)
    | (?P<raw>[bc]?r(?P<hashes>\#*)")
    | (?P<str>[bc]?"(?:[^"\\]|\\.)*")
    | (?P<char>b?'(?:[^'\\\n]|\\(?:u\{[0-9a-fA-F_]+\}|x[0-9a-fA-F]{2}|.))')
    | (?P<life>'[A-Za-z_]\w*)
    | (?P<ident>(?:r\#)?[A-Za-z_]\w*)
    | (?P<num>\d\w*)
    | (?P<punct>::|->|=>|.)
    """,
    re.X | re.S,
)


def tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) of each token of `text`: comments and whitespace dropped, a string's kind is
    `str` and its text the literal with its quotes."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        m = TOKEN.match(text, i)
        kind = m.lastgroup if m.lastgroup != "hashes" else "raw"
        if m.group("block"):
            depth, j = 1, m.end()
            while depth and j < len(text):
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            i = j
            continue
        if m.group("raw"):
            close = '"' + m.group("hashes")
            j = text.find(close, m.end())
            j = len(text) if j < 0 else j + len(close)
            out.append(("str", text[i:j]))
            i = j
            continue
        if kind not in ("ws", "line"):
            value = m.group(0)
            out.append((kind, value[2:] if kind == "ident" and value.startswith("r#") else value))
        i = m.end()
    return out


OPEN = {"(": ")", "[": "]", "{": "}"}


class Toks:
    def __init__(self, text: str):
        toks = tokens(text)
        self.kinds = [k for k, _ in toks]
        self.vals = [v for _, v in toks]
        self.n = len(toks)

    def v(self, i: int) -> str | None:
        return self.vals[i] if 0 <= i < self.n else None

    def kind(self, i: int) -> str | None:
        return self.kinds[i] if 0 <= i < self.n else None

    def ident(self, i: int) -> str | None:
        return self.vals[i] if 0 <= i < self.n and self.kinds[i] == "ident" else None

    def close(self, i: int) -> int:
        """The index of the bracket closing the one at `i`."""
        depth = 0
        for j in range(i, self.n):
            if self.vals[j] in OPEN and self.kinds[j] == "punct":
                depth += 1
            elif self.vals[j] in (")", "]", "}") and self.kinds[j] == "punct":
                depth -= 1
                if depth == 0:
                    return j
        return self.n - 1

    def angle(self, i: int) -> int:
        """The index after the generics `<...>` starting at `i` (`->` is one token, not a `>`)."""
        depth = 0
        j = i
        while j < self.n:
            val = self.vals[j]
            if val in OPEN:
                j = self.close(j)
            elif val == "<":
                depth += 1
            elif val == ">":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return j

    def find(self, i: int, stops: set[str]) -> int:
        """The first index from `i` whose token is in `stops`, bracket groups not in `stops`
        stepped over."""
        j = i
        while j < self.n and self.vals[j] not in stops:
            j = self.close(j) + 1 if self.vals[j] in OPEN else j + 1
        return j

    def split(self, start: int, end: int) -> list[tuple[int, int]]:
        """The ranges of [start, end) between commas outside brackets and `<...>`."""
        parts, j, begin, angle = [], start, start, 0
        while j < end:
            val = self.vals[j]
            if val in OPEN:
                j = self.close(j)
            elif val == "<":
                angle += 1
            elif val == ">":
                angle = max(0, angle - 1)
            elif val == "," and angle == 0:
                parts.append((begin, j))
                begin = j + 1
            j += 1
        if begin < end:
            parts.append((begin, end))
        return parts


# --- the module tree -----------------------------------------------------------------------------
class Module:
    def __init__(self, crate: str, path: tuple[str, ...], parent: Module | None):
        self.crate, self.path, self.parent = crate, path, parent
        # name -> [(scope, Module | Item)]; a scope is where a name is seen: None everywhere (`pub`),
        # else in that module and the modules inside it.
        self.defs: dict[str, list[tuple[Module | None, object]]] = {}
        self.uses: list[Use] = []

    def define(self, name: str, scope: Module | None, entity: object) -> None:
        self.defs.setdefault(name, []).append((scope, entity))

    def within(self, scope: Module) -> bool:
        """Whether this module is `scope` or inside it."""
        m: Module | None = self
        while m is not None and m is not scope:
            m = m.parent
        return m is scope

    def __repr__(self) -> str:
        return "::".join((self.crate, *self.path))


class Item:
    def __init__(self, kind: str, name: str, crate: str):
        self.kind, self.name, self.crate = kind, name, crate
        self.members: set[str] = set()  # fields, variants, or a trait's items
        self.alias: str | None = None  # the type a type alias names

    def __repr__(self) -> str:
        return f"{self.kind} {self.crate}::{self.name}"


class Member:
    """A variant, field or associated item: nothing follows it in a path."""

    def __init__(self, owner: Item, name: str):
        self.owner, self.name = owner, name


class Extern:
    """A name from a crate outside the workspace: its items are not read."""

    def __init__(self, path: str):
        self.path = path


class Use:
    def __init__(self, scope: Module | None, segs: list[str], binding: str | None):
        self.scope, self.segs, self.binding = scope, segs, binding  # binding None: a glob


def visible(scope: Module | None, viewer: Module | None) -> bool:
    """Whether a name of `scope` is seen from `viewer` (None: from outside its crate)."""
    return scope is None or (viewer is not None and viewer.within(scope))


# The associated items a `#[derive]` of a standard trait gives a type.
DERIVED = {
    "Default": ("default",), "Clone": ("clone", "clone_from"), "Debug": ("fmt",),
    "PartialEq": ("eq", "ne"), "PartialOrd": ("partial_cmp", "lt", "le", "gt", "ge"),
    "Ord": ("cmp", "max", "min", "clamp"), "Hash": ("hash",),
    "Serialize": ("serialize",), "Deserialize": ("deserialize",), "Error": ("source",),
}


def is_test_only(attr: list[str]) -> bool:
    return attr in (["cfg", "(", "test", ")"], ["cfg", "(", "doctest", ")"])


class Tree:
    """The public module tree of a workspace: `crates` maps each crate's name (underscores) to its
    root source file."""

    def __init__(self, crates: dict[str, pathlib.Path]):
        self.crates = crates
        self.roots: dict[str, Module] = {}
        self.impls: dict[tuple[str, str], set[str]] = {}  # (crate, type) -> associated names
        self.impl_traits: dict[tuple[str, str], set[str]] = {}  # (crate, type) -> traits
        self.types: dict[tuple[str, str], list[Item]] = {}  # (crate, name) -> items
        self.traits: dict[str, list[Item]] = {}  # name -> traits, every crate
        self.names: dict[str, set[str]] = {}  # crate -> every name it defines
        for crate, lib in crates.items():
            self.names[crate] = set()
            module = Module(crate, (), None)
            self.roots[crate] = module
            self.load(module, lib, lib.parent)

    # ... reading
    def load(self, module: Module, file: pathlib.Path, children: pathlib.Path) -> None:
        """Read the items of `module` from `file`; its `mod x;` files are under `children`."""
        t = Toks(file.read_text())
        self.items(t, 0, t.n, module, file, children, inline=False)

    def items(self, t: Toks, i: int, end: int, module: Module, file: pathlib.Path,
              children: pathlib.Path, inline: bool) -> None:
        """Read the items of `module` from tokens [i, end) of `file` (`inline`: the body of an
        inline `mod x { ... }`)."""
        crate = module.crate
        while i < end:
            attrs: list[list[str]] = []
            while t.v(i) == "#":
                j = i + 2 if t.v(i + 1) == "!" else i + 1
                if t.v(j) != "[":
                    break
                k = t.close(j)
                attrs.append(t.vals[j + 1 : k])
                i = k + 1
            record = not any(is_test_only(a) for a in attrs)
            scope: Module | None = module  # private: this module and the modules inside it
            if t.v(i) == "pub":
                if t.v(i + 1) == "(":
                    restricted = t.v(i + 2)
                    scopes = {"self": module, "super": module.parent or module}
                    scope = scopes.get(restricted, self.roots[crate])  # `crate`, `in path`
                    i = t.close(i + 1) + 1
                else:
                    scope, i = None, i + 1
            while t.v(i) in ("default", "unsafe", "async", "auto", "safe") or (
                t.v(i) == "const" and t.v(i + 1) in ("fn", "unsafe", "async", "extern")) or (
                t.v(i) == "extern" and t.kind(i + 1) == "str" and t.v(i + 2) != "{"
            ):
                i += 2 if t.v(i) == "extern" else 1
            kw, name = t.v(i), t.ident(i + 1)
            if kw is None:
                break
            if kw == "mod" and name:
                sub = Module(crate, (*module.path, name), module)
                path_attr = next((a[2] for a in attrs if len(a) == 3 and a[:2] == ["path", "="]), None)
                if t.v(i + 2) == "{":
                    k = t.close(i + 2)
                    if record:
                        self.items(t, i + 3, k, sub, file, children / name, inline=True)
                    i = k + 1
                else:
                    i += 3
                    if record:
                        if path_attr:  # relative to the file's dir, or to an inline module's
                            target = ((children if inline else file.parent) / path_attr.strip('"')).resolve()
                            self.load(sub, target, target.parent)
                        else:
                            for target in (children / f"{name}.rs", children / name / "mod.rs"):
                                if target.exists():
                                    self.load(sub, target, children / name)
                                    break
                            else:
                                sys.exit(f"doc_names: no file for `mod {name};` in {file}")
                if record:
                    module.define(name, scope, sub)
                    self.names[crate].add(name)
                continue
            if kw == "use":
                k = t.find(i + 1, {";"})
                if record:
                    self.use_tree(t, i + 1, k, [], scope, module)
                i = k + 1
                continue
            if kw == "macro_rules" and t.v(i + 1) == "!":
                name = t.ident(i + 2)
                k = t.close(i + 3)
                i = k + 2 if t.v(k + 1) == ";" else k + 1
                if record and name:
                    self.names[crate].add(name)
                    if any(a == ["macro_export"] for a in attrs):
                        self.roots[crate].define(name, None, Item("macro", name, crate))
                continue
            if kw == "impl":
                i = self.impl(t, i + 1, crate, record)
                continue
            if kw in ("struct", "union", "enum", "trait", "fn", "type", "const", "static") and (
                name or t.v(i + 1) == "mut"
            ):
                if kw == "static" and t.v(i + 1) == "mut":
                    i, name = i + 1, t.ident(i + 2)
                item = Item(kw, name, crate)
                i = self.item_body(t, i + 2, item)
                if record:
                    for attr in attrs:  # `#[derive(Default, Clone)]`: what the derived traits give
                        if attr[:2] == ["derive", "("]:
                            for trait in attr[2:]:
                                item.members.update(DERIVED.get(trait, ()))
                    module.define(name, scope, item)
                    self.names[crate].add(name)
                    self.names[crate].update(item.members)
                    if kw in ("struct", "union", "enum", "type"):
                        self.types.setdefault((crate, name), []).append(item)
                    if kw == "trait":
                        self.traits.setdefault(name, []).append(item)
                continue
            if kw == "extern":
                k = t.find(i + 1, {";", "{"})
                i = t.close(k) + 1 if t.v(k) == "{" else k + 1
                continue
            if t.ident(i) and t.v(i + 1) == "!":
                j = i + 2 if t.v(i + 2) in OPEN else i + 3  # `name! { }` or `name! ident { }`
                k = t.close(j) if t.v(j) in OPEN else j
                i = k + 2 if t.v(k + 1) == ";" else k + 1
                continue
            i = t.close(i) + 1 if t.v(i) in OPEN else i + 1

    def item_body(self, t: Toks, i: int, item: Item) -> int:
        """Read what follows an item's name from `i`; return the index after the item."""
        kind = item.kind
        if t.v(i) == "<":
            i = t.angle(i)
        if kind in ("fn", "const", "static"):
            k = t.find(i, {";", "{"} if kind == "fn" else {";"})
            return t.close(k) + 1 if t.v(k) == "{" else k + 1
        if kind == "type":
            k = t.find(i, {";"})
            eq = t.find(i, {"=", ";"})
            path: list[str] = []
            j = eq + 1
            while j < k and (t.v(j) in ("&", "mut", "dyn", "impl") or t.kind(j) == "life"):
                j += 1
            while j < k and (t.ident(j) or t.v(j) == "::"):
                path.append(t.vals[j])
                j += 1
            names = [p for p in path if p != "::"]
            item.alias = names[-1] if names else None
            return k + 1
        if kind in ("struct", "union") and t.v(i) == "(":
            k = t.close(i)
            return t.find(k + 1, {";"}) + 1
        k = t.find(i, {";", "{"})
        if t.v(k) == ";":
            return k + 1
        end = t.close(k)
        if any(t.vals[j : j + 4] == ["#", "[", "from", "]"] for j in range(k, end)):
            item.members.add("from")  # thiserror's `#[from]`: a `From` impl
        if kind == "trait":
            item.members.update(self.assoc(t, k + 1, end, all_public=True))
        else:
            for a, b in t.split(k + 1, end):
                j = a
                while t.v(j) == "#":
                    j = t.close(j + 1) + 1
                public = kind == "enum"
                if t.v(j) == "pub":
                    public = t.v(j + 1) != "("
                    j = t.close(j + 1) + 1 if t.v(j + 1) == "(" else j + 1
                if t.ident(j) and public:
                    item.members.add(t.vals[j])
        return end + 1

    def assoc(self, t: Toks, i: int, end: int, all_public: bool) -> set[str]:
        """The names of the associated fns, consts and types of an impl or trait body."""
        out, public = set(), all_public
        while i < end:
            val = t.v(i)
            if val == "pub":
                if t.v(i + 1) == "(":
                    i = t.close(i + 1) + 1
                    continue
                public = True
            elif val in ("fn", "const", "type") and t.ident(i + 1) not in (None, "fn", "unsafe", "async"):
                if public:
                    out.add(t.vals[i + 1])
                public = all_public
                i = t.find(i + 1, {";", "{"})
                i = t.close(i) + 1 if t.v(i) == "{" else i + 1
                continue
            elif val in OPEN:
                i = t.close(i)
            i += 1
        return out

    def impl(self, t: Toks, i: int, crate: str, record: bool) -> int:
        if t.v(i) == "<":
            i = t.angle(i)
        k = t.find(i, {"{", ";"})
        head = t.vals[i:k]
        where = head.index("where") if "where" in head else len(head)
        head, depth, cut = head[:where], 0, None
        for n, val in enumerate(head):
            depth += (val == "<") - (val == ">")
            if val == "for" and depth == 0:
                cut = n
        trait = self.last_name(head[:cut]) if cut is not None else None
        target = self.last_name(head[cut + 1 :] if cut is not None else head)
        end = t.close(k) if t.v(k) == "{" else k
        if record and target:
            names = self.assoc(t, k + 1, end, all_public=trait is not None)
            self.impls.setdefault((crate, target), set()).update(names)
            self.names[crate].update(names)
            if trait:
                self.impl_traits.setdefault((crate, target), set()).add(trait)
        return end + 1

    @staticmethod
    def last_name(head: list[str]) -> str | None:
        """The type a path names: the last segment before its generics (`&`, `dyn`, `!` ignored)."""
        names = []
        for val in head:
            if val == "<":
                break
            if re.fullmatch(r"[A-Za-z_]\w*", val) and val not in ("dyn", "mut", "impl"):
                names.append(val)
        return names[-1] if names else None

    def use_tree(self, t: Toks, i: int, end: int, prefix: list[str], scope: Module | None,
                 module: Module) -> None:
        segs = list(prefix)
        if t.v(i) == "::":
            segs, i = ["::"], i + 1
        while i < end:
            val = t.v(i)
            if val == "{":
                k = t.close(i)
                for a, b in t.split(i + 1, k):
                    self.use_tree(t, a, b, segs, scope, module)
                return
            if val == "*":
                module.uses.append(Use(scope, segs, None))
                return
            i += 1
            if t.v(i) == "::":
                segs.append(val)
                i += 1
                continue
            binding = t.v(i + 1) if t.v(i) == "as" else (segs[-1] if val == "self" else val)
            path = segs if val == "self" else [*segs, val]
            if binding != "_":
                module.uses.append(Use(scope, path, binding))
            return

    # ... resolving
    def lookup(self, module: Module, name: str, viewer: Module | None,
               guard: frozenset = frozenset()) -> list:
        """What `name` names in `module`, seen from `viewer` (None: from outside its crate, which
        sees public names only)."""
        key = (id(module), name, id(viewer))
        if key in guard:
            return []
        guard = guard | {key}
        out = [e for scope, e in module.defs.get(name, []) if visible(scope, viewer)]
        for use in module.uses:
            if use.binding == name and visible(use.scope, viewer):
                out += self.resolve_use(module, use.segs, guard)
        if out:  # a name of its own shadows what globs bring
            return out
        for use in module.uses:
            if use.binding is None and visible(use.scope, viewer):
                for target in self.resolve_use(module, use.segs, guard):
                    if isinstance(target, Module):
                        # A glob brings the names its module sees; outside the crate, public ones.
                        inner = module if viewer is not None and target.crate == module.crate else None
                        out += self.lookup(target, name, inner, guard)
                    elif isinstance(target, Item) and target.kind == "enum" and name in target.members:
                        out.append(Member(target, name))
        return out

    def resolve_use(self, module: Module, segs: list[str], guard: frozenset) -> list:
        """What the path of a `use` in `module` names."""
        first, rest = segs[0], segs[1:]
        if first == "::":
            first, rest = rest[0], rest[1:]
            found = [self.roots[first]] if first in self.roots else [Extern(first)]
        elif first == "crate":
            found = [self.roots[module.crate]]
        elif first in ("self", "super"):
            found, rest = [module], segs
        else:
            found = self.lookup(module, first, module, guard)
            if not found:
                found = [self.roots[first]] if first in self.roots else [Extern(first)]
        for seg in rest:
            step: list = []
            for e in found:
                if seg == "self":
                    step.append(e)
                elif seg == "super" and isinstance(e, Module) and e.parent:
                    step.append(e.parent)
                elif isinstance(e, Module):
                    step += self.lookup(e, seg, module if e.crate == module.crate else None, guard)
                elif isinstance(e, Item) and e.kind == "enum" and seg in e.members:
                    step.append(Member(e, seg))
                elif isinstance(e, Extern):
                    step.append(Extern(f"{e.path}::{seg}"))
            found = step
        return found

    def members(self, item: Item, name: str) -> bool:
        """Whether `Item::name` is a field, variant or associated item of `item`."""
        if item.kind == "trait":  # its items, and those of `impl dyn Trait` blocks
            return name in item.members or name in self.impls.get((item.crate, item.name), set())
        if item.kind not in ("struct", "union", "enum", "type"):
            return False
        types = [item]
        if item.kind == "type":
            types = self.types.get((item.crate, item.alias or ""), [])
            types = [t for t in types if t.kind != "type"]
            if not types:  # an alias of a type from outside the workspace
                return name in self.names[item.crate]
        for t in types:
            if name in t.members or name in self.impls.get((t.crate, t.name), set()):
                return True
            for trait in self.impl_traits.get((t.crate, t.name), set()):
                if any(name in tr.members for tr in self.traits.get(trait, [])):
                    return True
        return False

    def resolve(self, crate: str, segs: list[str]) -> str | None:
        """None when `crate::segs...` is a public path, else why not."""
        found: list = [self.roots[crate]]
        for n, seg in enumerate(segs):
            step: list = []
            for e in found:
                if isinstance(e, Module):
                    step += self.lookup(e, seg, None)
                elif isinstance(e, Item) and self.members(e, seg):
                    step.append(Member(e, seg))
            if not step:
                where = "::".join([crate, *segs[:n]])
                kinds = {type(e).__name__ for e in found}
                if kinds == {"Extern"}:
                    return f"`{where}` is from a crate outside the workspace"
                if kinds <= {"Member"}:
                    return f"`{where}` is a variant, field or associated item"
                return f"no public `{seg}` in `{where}`"
            found = step
        return None


def workspace_crates(at: pathlib.Path) -> dict[str, pathlib.Path]:
    """Each crate of the workspace at `at`, the facade first: name (underscores) -> its lib.rs."""
    manifest = tomllib.loads((at / "Cargo.toml").read_text())
    out = {manifest["package"]["name"].replace("-", "_"): at / "src" / "lib.rs"}
    for member in manifest["workspace"]["members"]:
        name = tomllib.loads((at / member / "Cargo.toml").read_text())["package"]["name"]
        lib = at / member / "src" / "lib.rs"
        if lib.exists():
            out[name.replace("-", "_")] = lib
    return out


# --- `memloop::` paths in a text -----------------------------------------------------------------
def expand(text: str, i: int, prefix: list[str]) -> tuple[list[list[str]], int]:
    """The paths a path (or `{a, b::c}` group) from `text[i:]` names, each after `prefix`, and
    where it ends."""
    paths: list[list[str]] = []
    segs = list(prefix)
    while True:
        if text.startswith("{", i):
            j, depth = i, 0
            while j < len(text):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            if j == len(text):  # not a group after all
                return [segs], i
            for part in split_group(text[i + 1 : j]):
                part = part.strip()
                if part:
                    sub, _ = expand(part, 0, segs)
                    paths += sub
            return paths, j + 1
        m = re.match(r"[A-Za-z_]\w*|\*", text[i:])
        if not m:
            return [segs], i
        word, i = m.group(0), i + m.end()
        if word == "*":
            return [segs], i
        if word != "self":
            segs.append(word)
        if text.startswith("::", i) and re.match(r"::[A-Za-z_{*]", text[i:]):
            i += 2
            continue
        return [segs], i


def split_group(body: str) -> list[str]:
    """The parts of a group's body between commas outside inner groups."""
    parts, depth, begin = [], 0, 0
    for j, ch in enumerate(body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(body[begin:j])
            begin = j + 1
    return [*parts, body[begin:]]


def memloop_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) of each `memloop::` or `memloop_crate::` path of `text`, groups expanded."""
    out = []
    for m in re.finditer(r"(?<![\w:])(memloop(?:_\w+)?)::(?=[A-Za-z_{])", text):
        line = text.count("\n", 0, m.start()) + 1
        paths, _ = expand(text, m.end(), [m.group(1)])
        out += [(line, "::".join(p)) for p in paths]
    return out


def check_path(tree: Tree, path: str) -> str | None:
    """None when `path` is a public path of a workspace crate, else why not."""
    segs = path.split("::")
    if segs[0] not in tree.roots:
        return f"no workspace crate `{segs[0]}`"
    return tree.resolve(segs[0], segs[1:])


# --- self-test -----------------------------------------------------------------------------------
FIXTURE = {
    "Cargo.toml": '[package]\nname = "face"\n[workspace]\nmembers = ["crates/a", "crates/b"]\n',
    "src/lib.rs": """
        pub use alpha as a;
        pub use beta::Shape;
        pub mod outer {
            pub mod inner { pub use alpha::deep; }
            pub use beta::{self as b, Thing as Renamed};
        }
        mod hidden { pub struct NotReachable; }
        pub(crate) mod crate_only { pub struct Nope; }
        #[cfg(test)]
        pub mod only_in_tests {}
        #[cfg(feature = "x")]
        pub mod gated {}
        pub use beta::globbed::*;
        pub mod setup_like;
    """,
    "src/setup_like.rs": """
        #[derive(Debug, Default)]
        pub struct Setup { pub field: u8, private: u8 }
        impl Setup {
            pub fn open() -> Self { let s = "} pub fn fake() {"; Setup { field: 0, private: 0 } }
            pub(crate) fn internal(&self) {}
            fn private_fn(&self) {}
        }
        impl std::fmt::Display for Setup { fn fmt(&self) {} }
        impl beta::Trait for Setup { fn required(&self) {} }
    """,
    "crates/a/Cargo.toml": '[package]\nname = "alpha"\n',
    "crates/a/src/lib.rs": """
        pub mod deep;
        #[path = "elsewhere/odd.rs"]
        pub mod odd;
        mod private_mod;
        pub use private_mod::{Lifted, Enum::{self, VariantA}};
        /* pub mod commented_out; */
        #[macro_export]
        macro_rules! exported { () => {} }
        macro_rules! local_only { () => {} }
    """,
    "crates/a/src/deep.rs": "pub mod nested;\npub(super) fn not_public() {}\npub fn in_deep() {}\n",
    "crates/a/src/deep/nested/mod.rs": "pub const LEAF: u8 = 1;\n",
    "crates/a/src/elsewhere/odd.rs": "pub struct Odd;\n",
    "crates/a/src/private_mod.rs": """
        pub struct Lifted;
        pub enum Enum { VariantA, VariantB(u8), VariantC { x: u8 } }
        impl Enum { pub const DEFAULT: Enum = Enum::VariantA; }
    """,
    "crates/b/Cargo.toml": '[package]\nname = "beta"\n',
    "crates/b/src/lib.rs": """
        pub mod globbed { pub use crate::shapes::*; }
        mod shapes { pub struct Circle; pub(crate) struct Square; pub type Alias = Circle; }
        pub trait Trait { fn required(&self); fn provided(&self) {} type Out; }
        impl dyn Trait { pub fn checked(&self) {} }
        pub struct Thing;
        pub type Shape = std::boxed::Box<u8>;
        pub fn helper() {}
        impl shapes::Circle { pub fn radius(&self) {} }
        mod hub { pub use self::fetch::fetch; mod fetch { pub fn fetch() {} pub struct Opt; } }
        pub use hub::fetch;
    """,
}
# (path, resolves) on the fixture: each rule of the resolver, right and wrong.
FIXTURE_CASES = [
    ("face::a::deep::in_deep", True),  # `pub use crate as alias`, `pub mod x;` in x.rs
    ("face::a::deep::nested::LEAF", True),  # x/mod.rs
    ("face::a::odd::Odd", True),  # #[path]
    ("face::a::Lifted", True),  # `pub use` out of a private module
    ("face::a::Enum::VariantB", True),  # a group with `self`; a variant
    ("face::a::VariantA", True),  # a variant re-exported by name
    ("face::a::Enum::DEFAULT", True),  # an associated const
    ("face::a::Enum::VariantD", False),
    ("face::a::exported", True),  # #[macro_export] at the crate root
    ("face::a::local_only", False),
    ("face::a::commented_out", False),
    ("face::a::deep::not_public", False),  # pub(super)
    ("face::a::private_mod", False),
    ("face::outer::inner::deep::nested", True),  # a module re-exported into a nested module
    ("face::deep", False),  # a nested module is not at the root
    ("face::inner", False),
    ("face::outer::b::helper", True),  # `{self as b}`
    ("face::outer::Renamed", True),
    ("face::outer::Thing", False),  # renamed away
    ("face::Circle::radius", True),  # a glob, followed; an impl through a path
    ("face::Alias::radius", True),  # an alias of a workspace type: its impls
    ("face::Square", False),  # a glob brings public names only
    ("face::Alias::nothing", False),
    ("face::Shape::helper", True),  # an alias of an outside type: a name of its crate
    ("face::Shape::setup_like", False),  # ... of the alias's crate, not another
    ("face::hidden::NotReachable", False),
    ("face::crate_only::Nope", False),
    ("face::only_in_tests", False),
    ("face::gated", True),
    ("face::setup_like::Setup::open", True),
    ("face::setup_like::Setup::field", True),
    ("face::setup_like::Setup::private", False),
    ("face::setup_like::Setup::fake", False),  # in a string
    ("face::setup_like::Setup::internal", False),
    ("face::setup_like::Setup::private_fn", False),
    ("face::setup_like::Setup::fmt", True),  # a trait impl's item
    ("face::setup_like::Setup::provided", True),  # a provided item of an implemented trait
    ("face::setup_like::Setup::open::more", False),
    ("face::outer::b::fetch", True),
    ("face::outer::b::fetch::Opt", False),  # the private module beside the re-exported fn
    ("face::outer::b::Trait::Out", True),
    ("face::outer::b::Trait::missing", False),
    ("face::outer::b::Trait::checked", True),  # `impl dyn Trait`
    ("face::setup_like::Setup::default", True),  # derived
    ("face::setup_like::Setup::clone", False),  # not derived
]
# (path, resolves) on the real facade.
REAL_CASES = [
    ("memloop::store::conformance", False),  # the module is under memory::
    ("memloop::memory::store::conformance", True),
    ("memloop::memory::store::conformance::run", True),
    ("memloop::memory::store::NoSuchThing", False),
    ("memloop::memory::files::FileMemoryStore", True),
    ("memloop::memory::store::FileMemoryStore", False),  # the memory dir is memory::files
    ("memloop::MemorySetup::for_project", True),
    ("memloop::MemorySetup::with_resolver", True),
    ("memloop::MemorySetup::new", False),
    ("memloop::MemorySetup::no_such_method", False),
    ("memloop::core::Agent", True),
    ("memloop::core::Agent::builder", True),
    ("memloop::core::Agent::nonexistent_module_fn", False),
    ("memloop::core::Agent::write_checked", False),  # a method of another crate's trait
    ("memloop::MemorySetup::scan", False),
    ("memloop::memory::store::MemoryType::MemoriesSurfaced", False),  # another enum's variant
    ("memloop::core::tokens::embed", False),  # embed is memloop::core::embed
    ("memloop::core::embed::Prefixed", True),
    ("memloop::core::tokens::TokenCounter", True),
    ("memloop::memory::recall::RecallEvent::MemoriesSurfaced", True),  # a variant
    ("memloop::memory::store::MemoryType::Feedback", True),
    ("memloop::memory::store::MemoryType::Nonsense", False),
    ("memloop::memory::session_notes::NotesEvent", True),
    ("memloop::recall::tokens", False),
    ("memloop::memory::tools", True),
    ("memloop::memory::dream", True),
    ("memloop::Selector::select", True),  # a trait's item
    ("memloop::MemoryStore::write", True),  # `impl dyn MemoryStore`
    ("memloop::store", False),
    ("memloop::setup", False),  # a private module
    ("memloop::async_trait", True),
    ("memloop::{MemoryStore, Selector, memory::{store::MemoryHeader, paths::MemoryDirResolver}}", True),
    ("memloop::{MemoryStore, memory::{store::NoSuch}}", False),
    ("memloop_store::conformance::run", True),  # a crate's own path
    ("memloop_store::memory::store", False),
    ("memloop_recall::tokens", False),  # the analyzer is memloop_text's
    ("memloop_text::{Analyzer, tokens, detect_language}", True),
    ("memloop_nosuch::Thing", False),
]


def self_test(real: Tree) -> list[str]:
    """What the resolver gets wrong on the fixture workspace and on the real facade."""
    wrong = []
    with tempfile.TemporaryDirectory() as tmp:
        at = pathlib.Path(tmp)
        for name, text in FIXTURE.items():
            (at / name).parent.mkdir(parents=True, exist_ok=True)
            (at / name).write_text(text)
        fixture = Tree(workspace_crates(at))
        cases = [(fixture, p, ok) for p, ok in FIXTURE_CASES] + [(real, p, ok) for p, ok in REAL_CASES]
        for tree, text, ok in cases:
            found = memloop_paths(text) if text.startswith("memloop") else [(1, text)]
            if not found:
                wrong.append(f"self-test: `{text}` is not read as a path")
            failures = [why for _, path in found if (why := check_path(tree, path))]
            if ok and failures:
                wrong.append(f"self-test: `{text}` must resolve: {'; '.join(failures)}")
            if not ok and not failures:
                wrong.append(f"self-test: `{text}` must be reported")
    # How docs are read: groups, globs, `self` and prose around them.
    read = [p for _, p in memloop_paths("see `memloop::a::{b, c::{self, d as e}, f::*}`, and memloop::x.")]
    if read != ["memloop::a::b", "memloop::a::c", "memloop::a::c::d", "memloop::a::f", "memloop::x"]:
        wrong.append(f"self-test: groups read as {read}")
    return wrong


tree = Tree(workspace_crates(root))
failed = self_test(tree)
if failed:
    print("\n".join(failed))
    sys.exit(1)
if sys.argv[1:] == ["--self-test"]:
    print(f"self-test: {len(FIXTURE_CASES) + len(REAL_CASES)} paths resolve as they must")
    sys.exit(0)

docs = [root / "README.md", *sorted((root / "docs").rglob("*.md")), *sorted(root.glob("crates/*/README.md"))]
crates = {c: lib.parent for c, lib in workspace_crates(root).items() if c != "memloop"}

# --- MEMLOOP_* variables the code names ------------------------------------------------------
code_dirs = [root / "src", root / "tests", root / "examples", *crates.values(), *(c.parent / "tests" for c in crates.values())]
code_text = "\n".join(f.read_text() for d in code_dirs if d.exists() for f in d.rglob("*.rs"))
# Tracing targets: the Rust code's alone (this script's self-test names wrong paths on purpose).
targets = set(re.findall(r'"(memloop::[\w:]+)"', code_text))
code_text += "\n".join(f.read_text() for f in (root / ".ci").glob("*") if f.is_file())
variables = set(re.findall(r"MEMLOOP_[A-Z0-9_]+", code_text))
# Read by the shared local model server script the docs tell developers to run, not by memloop.
variables.add("MEMLOOP_LLM_CTX")

# --- CLI flags, from the real CLI ----------------------------------------------------------------
target_dir = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or root / "target")
binary = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else target_dir / "debug" / "memloop"
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
    text = doc.read_text()
    for n, path in memloop_paths(text):
        if path not in targets and (why := check_path(tree, path)):
            problems.append(f"{rel(doc)}:{n}: `{path}` is not a public path: {why}")
    in_block = False
    continuing = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continuing = False
            continue
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
