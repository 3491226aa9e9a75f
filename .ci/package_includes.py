#!/usr/bin/env python3
"""Every file a crate's source embeds (`include_str!`, `include_bytes!`) ships in its package.

A workspace build reads such files from the checkout, so a file left out of a package by its
`include` / `exclude` lists builds here and breaks for everyone who depends on the published
crate. This check lists each workspace package's files (`cargo package --list`) and fails on any
embedded path that is not among them. It stands in for the compile in `cargo publish --dry-run`'s
verification, which costs minutes on a two-core machine and catches little else a workspace build
has not already caught (manifests are still checked by the dry-run itself).
"""
import pathlib
import re
import subprocess
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
manifest = tomllib.loads((root / "Cargo.toml").read_text())
packages = {manifest["package"]["name"]: root}
for member in manifest["workspace"]["members"]:
    directory = root / member
    packages[tomllib.loads((directory / "Cargo.toml").read_text())["package"]["name"]] = directory

embed = re.compile(r'include_(?:str|bytes)!\(\s*"([^"]+)"\s*\)')
failures = []
for name, directory in packages.items():
    listed = subprocess.run(
        ["cargo", "package", "-p", name, "--list", "--allow-dirty"],
        cwd=root, check=True, capture_output=True, text=True,
    ).stdout.split()
    shipped = {pathlib.PurePosixPath(p) for p in listed}
    for source in sorted((directory / "src").rglob("*.rs")):
        for path in embed.findall(source.read_text(encoding="utf-8")):
            target = (source.parent / path).resolve()
            try:
                relative = pathlib.PurePosixPath(target.relative_to(directory.resolve()).as_posix())
            except ValueError:
                failures.append(f"{name}: {source.relative_to(root)} embeds {path}, outside the crate")
                continue
            if relative not in shipped:
                failures.append(f"{name}: {source.relative_to(root)} embeds {relative}, not in the package")
if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"{len(packages)} packages: every embedded file ships")
