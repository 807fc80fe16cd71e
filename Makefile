# The two commands: `make run` and `make test`. Each sets up what it needs
# (system packages, .venv, the suite in editable mode) and then does its job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the man pages, generated from the commands' parsers into the venv's share/man (an
# editable install leaves data files out): `man elvind` with .venv/bin on PATH, or
# MANPATH=.venv/share/man man elvind; written again when the code changes
MANSTAMP := $(VENV)/share/man/.installed
MANSOURCES := $(shell find elvin apps -name '*.py' 2>/dev/null) scripts/manpages.py

export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: run test core-check bench lint setup clean screenshots docs man package-check accel accel-remove

setup: $(STAMP) $(MANSTAMP)
	@if [ "$(ELVIN_ACCEL)" = 1 ]; then $(MAKE) --no-print-directory accel \
	    || echo "warning: the accelerator was not built (above); the pure-Python path is used"; fi

# the optional compiled accelerator (elvin/protocol/_xdrfast.c: the NameValue reader's
# happy path) into the venv's site-packages; nothing needs it (ELVIN_PURE=1 turns it
# off). `make setup ELVIN_ACCEL=1` builds it too, and goes on pure if it fails. It needs
# a C compiler and Python's headers: python3-dev is installed where they are missing.
accel: $(STAMP)
	@inc=$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])'); \
	if [ ! -f "$$inc/Python.h" ]; then \
	    echo "accel: Python.h is missing ($$inc): installing python3-dev"; \
	    apt-get install -y -q python3-dev > /dev/null || sudo apt-get install -y -q python3-dev > /dev/null; \
	fi
	$(BIN)/python scripts/build_accel.py
	@$(BIN)/python -c 'from elvin.protocol import _accel; print("accel:", _accel.describe())'

accel-remove: $(STAMP)
	$(BIN)/python scripts/build_accel.py --remove

# the suite with every extra a user can have (.[all]), and the dependency group
# `dev` (pyproject.toml: the test runner, ruff, Sphinx, build and twine), which
# `pip install --group` reads from pyproject.toml: pip 25.1 or newer, so pip is
# upgraded first (a fresh venv comes with the pip of the system's Python)
$(STAMP): pyproject.toml setup.py scripts/ensure-system-packages.sh
	bash scripts/ensure-system-packages.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade 'pip>=25.1'
	$(BIN)/python -m pip install --quiet -e '.[all]' --group dev
	touch $(STAMP)

$(MANSTAMP): $(STAMP) $(MANSOURCES)
	@$(BIN)/python scripts/manpages.py --out $(VENV)/share/man > /dev/null \
	    || echo "warning: the man pages could not be generated (make man says why); going on"
	@touch $@

run: $(STAMP) $(MANSTAMP)
	$(BIN)/python -m elvin.daemon.run

# the suite runs on two workers and the core-only check beside it (the tests mostly
# wait on sockets and child processes, so they share the cores well); the core-only
# check's result comes after. First the lint (ruff, mypy), the docs site (warnings as
# errors) and the package check (sdist + wheel, twine, a fresh venv), so that none can
# rot; a failure there is reported and fails the run, but the suite still runs.
# The suite runs with the compiled accelerator where it builds; the core-only
# check (its own venv, nothing compiled) runs the codec and router tests pure,
# so both paths are tested in every run.
test: $(STAMP) $(MANSTAMP)
	@PYTHON=$(PYTHON) bash scripts/core-only-check.sh > .core-check.log 2>&1 & core=$$!; \
	pre=0; \
	if $(MAKE) --no-print-directory lint; then :; else echo "lint FAILED"; pre=1; fi; \
	if $(MAKE) --no-print-directory docs; then :; else echo "docs build FAILED"; pre=1; fi; \
	$(MAKE) --no-print-directory package-check || pre=1; \
	$(MAKE) --no-print-directory accel || echo "accel: not built (above); the suite runs pure"; \
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -n 2 --dist loadgroup; suite=$$?; \
	if [ $$pre -ne 0 ]; then echo "make test: the lint, the docs build or the package check FAILED (above)"; suite=1; fi; \
	if wait $$core; then echo "core-only check passed: $$(grep -E '^[0-9]+ passed' .core-check.log | tail -1) (.core-check.log)"; \
	else echo "core-only check FAILED (.core-check.log):"; tail -n 40 .core-check.log; suite=1; fi; \
	exit $$suite

# the core-only install (no extras) in .venv-core: elvind, ec/ep, the hints of the
# commands that need an extra, the protocol/language/router tests
core-check:
	PYTHON=$(PYTHON) bash scripts/core-only-check.sh

bench: $(STAMP)
	@for b in bench/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# docs/screenshots/*.png: the apps offscreen, with traffic through a real elvind
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python scripts/screenshots.py

# the documentation site (Sphinx) in docs/_build/html, warnings as errors; `make test`
# builds it too, so that it cannot rot
docs: $(STAMP)
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

# man/man1, man/man8 from the commands' parsers (not committed: generated for the
# sdist and wheel by package-check, and into .venv/share/man by setup)
man: $(STAMP)
	$(BIN)/python scripts/manpages.py

# python -m build: an sdist and a wheel that twine accepts, installed in a fresh venv
# where elvind and ec run (scripts/package-check.sh); `make test` runs it too
package-check: $(STAMP)
	PYTHON=$(BIN)/python BASE_PYTHON=$(PYTHON) bash scripts/package-check.sh

# ruff (broad and silent handlers, unused noqa: pyproject.toml), then a suppress(Exception)
# must say why on its line as a broad except does (ruff has no rule for it), then mypy
# (strict on protocol, subscription and router; [tool.mypy] in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check elvin apps tests bench examples scripts docs/conf.py docs/_ext
	@! grep -rnE --include='*.py' 'suppress\([^)]*\b(Base)?Exception\b' elvin apps | grep -v '#' \
	    || { echo "lint: a suppress(Exception) above says nothing of why"; exit 1; }
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .venv-core build *.egg-info
