# Two commands matter: `make demo` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
CODE := $(wildcard engine infra functions waypoint tests examples bench)

.PHONY: install test test-serial lint typecheck bytecode format demo bench bench-languages soak clean schema scaffold-check browser-test

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo ">> installing waypoint and its dev dependencies into $(VENV) (first run takes a minute or two)"
	$(BIN)/python -m pip install --quiet --upgrade pip
	@# --no-compile: pip would compile every module of every dependency (half the install's
	@# time); Python compiles and caches what is imported, when it is first imported.
	$(BIN)/python -m pip install --quiet --no-compile -e ".[dev]"
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

format: $(STAMP)
	$(BIN)/ruff format $(CODE)
	$(BIN)/ruff check --fix $(CODE)

# One run (the libraries are analysed once); engine/ is strict: pyproject.toml's [tool.mypy].
typecheck: $(STAMP)
	$(BIN)/mypy engine functions infra waypoint bench

# The whole suite on every core (pytest-xdist: two workers per CPU); `make test-serial` runs it in
# one process, for a failure that only shows in order. The suite starts hundreds of Python
# processes (CLI runs, served stacks, workers): with PYTHONDONTWRITEBYTECODE set (some shells and
# containers set it) each would compile Waypoint and pytest would rewrite every plugin's asserts
# again, a minute of CPU in all, so the tests write bytecode (to __pycache__, git-ignored).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

# Before the suite: bytecode for every module the suite's processes import (`compileall -j0`, both
# cores). A fresh venv holds none (pip installs with --no-compile); without this step each of the
# suite's workers and subprocesses compiled the same modules at once — 86 s of CPU, 46 s of the
# suite's wall time on two cores (docs/development.md "Tests"). Bytecode already there is only
# checked: about 2 s. Left out: packages only ever imported by one process (cfn-lint's sympy and
# networkx, pip and setuptools building a wheel, mypy itself, which is compiled already) and
# what does not compile (a package's Python 2 leftovers, e.g. langid's train/ scripts), which is
# never imported.
PURELIB = $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ONE_PROCESS_PACKAGES := /site-packages/(sympy|networkx|mpmath|mypy|mypyc|pip|setuptools|cfnlint|samtranslator|docker|graphql)/

bytecode: $(STAMP)
	@echo ">> compiling bytecode for the test processes"
	@$(BIN)/python -m compileall -q -j0 -x '$(ONE_PROCESS_PACKAGES)' "$(PURELIB)" $(CODE) \
		> $(VENV)/compileall.log 2>&1 || true

# The suite with the type checks beside it: mypy (one process, one core, 30 s from a cold cache)
# used to run before pytest while the other core idled; pytest's four workers and mypy now share
# both cores. mypy's verdict is printed after pytest's; either failing fails `make test`.
test: lint bytecode
	@echo ">> the tests (pytest), with the type checks (mypy) beside them"
	@$(BIN)/mypy engine functions infra waypoint bench > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	trap 'kill $$mypy 2>/dev/null' INT TERM; \
	$(PYTEST) -n auto --dist worksteal; tests=$$?; \
	wait $$mypy; types=$$?; \
	echo ">> type checks (mypy engine functions infra waypoint bench):"; cat $(VENV)/mypy.log; \
	if [ $$tests -ne 0 ]; then exit $$tests; fi; exit $$types

test-serial: lint bytecode typecheck
	$(PYTEST)

schema: $(STAMP)
	$(BIN)/waypoint schema --output docs/agent.schema.json

demo: $(STAMP)
	$(BIN)/waypoint demo

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	$(BIN)/python -m bench
	$(BIN)/python -m bench long-session
	$(BIN)/python -m bench prompt-cache
	$(BIN)/python -m bench speculation --write-doc
	$(BIN)/python -m bench scale --write-doc

# Language-identification libraries on short customer messages (bench/language_cases): accuracy on
# the dev and test parts, time per message, import and install cost; rewrites docs/languages.md's
# "Detection" tables.
bench-languages: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,languages-bench]"
	$(BIN)/python -m bench languages --write-doc

soak: $(STAMP)
	@echo ">> the long load run: 100 sessions x 10 messages with faults, over the served local stack"
	$(PYTEST) tests/reliability -m soak

# The studio page (waypoint/studio) driven in headless Chromium: Debian's chromium and
# chromium-driver (apt), Selenium from the `browser` extra. Screenshots: build/studio-screenshots/.
browser-test: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,browser]"
	WAYPOINT_REQUIRE_BROWSER=1 $(PYTEST) tests/browser -m browser -rs

# The "make your own agent" path: a wheel, `waypoint init`, validate, test, chat, serve + publish,
# then `sam validate --lint` and `sam build` of the new project with its function sizes checked.
# The SAM CLI gets its own venv (it pins its own boto3); `sam build` needs python3.11 on PATH.
SAM_VENV := .sam-venv
scaffold-check: $(STAMP)
	@test -x $(SAM_VENV)/bin/sam || { $(PYTHON) -m venv $(SAM_VENV) && \
		$(SAM_VENV)/bin/python -m pip install --quiet aws-sam-cli; }
	WAYPOINT_SAM=$(abspath $(SAM_VENV))/bin/sam WAYPOINT_REQUIRE_SAM=1 SAM_CLI_TELEMETRY=0 \
		$(PYTEST) tests/cli/test_scaffold.py tests/cli/test_new_user_path.py -rs -s

clean:
	rm -rf $(VENV) $(SAM_VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache

# `sam build` of this repository's template builds its WaypointLayer here (BuildMethod: makefile;
# samconfig.toml builds it in place): the recipe a `waypoint init` project's runtime/Makefile runs,
# installing this checkout instead of a wheel.
LAYER_INSTALL := .
include waypoint/scaffold_template/runtime/Makefile
