#!/usr/bin/env python3
"""Keep the crate tables of README.md and docs/ARCHITECTURE.md in step with the workspace.

Every workspace package (the root facade and each member of `[workspace] members`) must have
exactly one row in the crate table of README.md's "## Architecture" section and of
docs/ARCHITECTURE.md's "## Crates" section, and those tables may name no other crate. A row
names its crate in the first cell as `name`; its directory (`crates/...` or `.`, in backticks, in
the first or second cell) must then be the member's real directory.
"""
import pathlib
import re
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
manifest = tomllib.loads((root / "Cargo.toml").read_text())
packages = {manifest["package"]["name"]: "."}
for member in manifest["workspace"]["members"]:
    name = tomllib.loads((root / member / "Cargo.toml").read_text())["package"]["name"]
    packages[name] = member


def table_rows(doc: str, heading: str) -> dict[str, list[str]]:
    text = (root / doc).read_text()
    match = re.search(rf"^{re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not match:
        sys.exit(f"{doc}: no section `{heading}`")
    rows: dict[str, list[str]] = {}
    for line in match.group(1).splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = line.split("|")[1:3]
        ticks = re.findall(r"`([^`]+)`", cells[0])
        if ticks and re.fullmatch(r"memloop(-[a-z0-9-]+)?", ticks[0]):
            dirs = [t for t in ticks[1:] + re.findall(r"`([^`]+)`", "".join(cells[1:]))
                    if t == "." or t.startswith("crates/")]
            rows.setdefault(ticks[0], []).append(dirs[0] if dirs else "")
    return rows


errors = []
for doc, heading in [("README.md", "## Architecture"), ("docs/ARCHITECTURE.md", "## Crates")]:
    rows = table_rows(doc, heading)
    for name, member in sorted(packages.items()):
        if name not in rows:
            errors.append(f"{doc} ({heading}): no row for workspace crate `{name}` ({member})")
        elif len(rows[name]) > 1:
            errors.append(f"{doc} ({heading}): {len(rows[name])} rows for `{name}`")
        elif rows[name][0] and rows[name][0].rstrip("/") != member:
            errors.append(
                f"{doc} ({heading}): `{name}` is said to live in `{rows[name][0]}`, "
                f"but the workspace has it in `{member}`"
            )
    for name in sorted(set(rows) - set(packages)):
        errors.append(f"{doc} ({heading}): row for `{name}`, which is not a workspace crate")

if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"crate tables match the workspace: {', '.join(sorted(packages))}")
