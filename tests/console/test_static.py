"""The console page's files: all local (no CDN), every import resolvable, vendored code
pinned with its licence."""

from __future__ import annotations

import re

from kaflite.console.app import STATIC


def test_the_page_loads_only_its_own_files() -> None:
    html = (STATIC / "index.html").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs, "index.html references nothing"
    for ref in refs:
        if ref.startswith(("data:", "#")):
            continue
        assert ref.startswith("/static/"), f"{ref} is not served by the console"
        assert (STATIC / ref.removeprefix("/static/")).is_file(), f"{ref} is missing"


def test_every_module_import_resolves() -> None:
    modules = sorted((STATIC / "js").glob("*.js"))
    assert len(modules) >= 8
    found = 0
    for module in modules:
        text = module.read_text()
        specs = re.findall(r'^import\s[^;]*?\sfrom\s+"([^"]+)";', text, flags=re.M | re.S)
        specs += re.findall(r'\bimport\("([^"]+)"\)', text)
        found += len(specs)
        for spec in specs:
            assert spec.startswith("./"), f"{module.name} imports {spec} (not a local file)"
            assert (module.parent / spec).is_file(), f"{module.name} imports a missing {spec}"
    assert found >= 20     # the router's eight panels and every panel's own imports


def test_vendored_libraries_are_pinned_with_their_licences() -> None:
    vendor = STATIC / "vendor"
    readme = (vendor / "README.md").read_text()
    libraries = [d for d in vendor.iterdir() if d.is_dir()]
    assert libraries
    for lib in libraries:
        assert (lib / "LICENSE").is_file(), f"{lib.name} has no licence file"
        for f in lib.iterdir():
            if f.name != "LICENSE":
                assert f"{lib.name}/{f.name}" in readme, f"{f.name} is not listed in the README"
    assert re.search(r"\| uPlot \| \d+\.\d+\.\d+ \|", readme)
