#!/usr/bin/env bash
# The distribution is whole: the man pages are generated into man/, `python -m
# build` makes an sdist and a wheel, `twine
# check` accepts their metadata, the wheel holds py.typed and the man pages, and
# installed in a fresh venv (core dependencies only) elvind and ec run and
# `man elvind` finds its page under the venv's share/man.
# Run by `make package-check` (and CI); about a minute with a warm pip cache.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "package check: $*" >&2; exit 1; }

# -- the man pages (generated, not committed) go into the sdist, then the wheel -------
"$PYTHON" scripts/manpages.py > /dev/null || fail "generating the man pages failed"

# -- build: the sdist, then the wheel from the sdist (what an installer does) --------
"$PYTHON" -m build --sdist --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log"; fail "python -m build --sdist failed"; }
SDIST=$(ls "$WORK"/dist/*.tar.gz)
"$PYTHON" -m build --wheel --outdir "$WORK/dist" "$SDIST" >> "$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log"; fail "building the wheel from the sdist failed"; }
WHEEL=$(ls "$WORK"/dist/*.whl)
"$PYTHON" -m twine check --strict "$SDIST" "$WHEEL" || fail "twine check refused the files"

# -- what the files hold ---------------------------------------------------------------
"$PYTHON" - "$SDIST" "$WHEEL" <<'PY' || fail "a file is missing from the distribution"
import sys, tarfile, zipfile
sdist, wheel = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(wheel).namelist()
need = ["elvin/py.typed", "elvin/_version.py", "elvin/subscription/grammar.lark"]
data = [n for n in names if ".data/data/share/man/" in n]
missing = [n for n in need if n not in names]
if missing or not any(n.endswith("/man8/elvind.8") for n in data) \
        or not any(n.endswith("/man1/ec.1") for n in data):
    sys.exit(f"wheel lacks {missing or 'the man pages'}")
members = tarfile.open(sdist).getnames()
for name in ("LICENSE", "CHANGELOG.md", "SECURITY.md", "man/man8/elvind.8", "examples/publish.py"):
    if not any(m.endswith("/" + name) for m in members):
        sys.exit(f"sdist lacks {name}")
print(f"wheel: {len(names)} files, {len(data)} man pages; sdist: {len(members)} members")
PY

# -- a fresh venv with the wheel and its core dependencies -----------------------------
"${BASE_PYTHON:-python3}" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet "$WHEEL" || fail "pip install of the wheel failed"
cd "$WORK"      # not the source tree: the installed package must be what runs
version=$("$WORK/venv/bin/elvind" --version) || fail "elvind --version failed"
expected=$("$WORK/venv/bin/python" -c 'import elvin; print(elvin.__version__)')
[[ "$version" == *"$expected"* ]] || fail "elvind --version said '$version', not $expected"
"$WORK/venv/bin/ec" --help > /dev/null || fail "ec --help failed"
"$WORK/venv/bin/python" -c 'import elvin, pathlib; assert (pathlib.Path(elvin.__file__).parent / "py.typed").exists()' \
    || fail "py.typed is not installed"
[ -f "$WORK/venv/share/man/man8/elvind.8" ] || fail "share/man/man8/elvind.8 is not installed"
if command -v man > /dev/null; then
    MANPATH="$WORK/venv/share/man" MANWIDTH=80 man elvind 2>/dev/null | grep -q "Elvin 4 router" \
        || fail "man elvind did not show the page from the venv"
fi
echo "package check passed: $(basename "$SDIST"), $(basename "$WHEEL"); $version"
