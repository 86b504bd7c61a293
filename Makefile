# Every target installs what it needs first, so a fresh clone needs nothing but Python 3.11 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

.PHONY: cc kcat fuse java kafka kafka-resolve maven prometheus chromium bytecode run test test-fast lint bench fuzz check-gen gen docs install clean

# two stamps: `make run` needs only the broker (.venv/.installed-broker); tests, lint and the Spark
# connector need the extras too (.venv/.installed, which implies the other)
BROKER_STAMP := $(VENV)/.installed-broker
# the compiled modules' sources (setup.py's table) are among them: a changed source rebuilds its extension
SOURCES_OF_INSTALL := pyproject.toml setup.py $(wildcard protocol/*.py protocol/records/*.py protocol/records/*.c protocol/records/*.h protocol/messages/*.py) clients/spark/_arrow_records.c

# pip is quiet (-q) and the compile takes a minute or two: one line says so before, one with the time after
INSTALL_SAYS = echo "installing pybroker into $(VENV): compiling its hot modules with mypyc and a C compiler (1-3 min, quiet)"
INSTALLED_SAYS = echo "installed in $$(( $$(date +%s) - start )) s: $(VENV)/bin/pybroker"

$(BROKER_STAMP): $(SOURCES_OF_INSTALL) | cc
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@$(INSTALL_SAYS); start=$$(date +%s); $(PY) -m pip install -q -e . && $(INSTALLED_SAYS)
	touch $(BROKER_STAMP)

$(STAMP): $(SOURCES_OF_INSTALL) | cc
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@$(INSTALL_SAYS); start=$$(date +%s); $(PY) -m pip install -q -e '.[test,dev,spark]' && $(INSTALLED_SAYS)
	touch $(STAMP) $(BROKER_STAMP)

install: $(STAMP)

# the install compiles the hot modules (setup.py) with mypyc: a C compiler and the Python headers
cc:
	@command -v cc >/dev/null 2>&1 && $(PYTHON) -c "import os, sys, sysconfig; \
	  sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))" || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q gcc libc6-dev python3-dev; }

kcat:
	@command -v kcat >/dev/null 2>&1 || command -v kafkacat >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q kcat; }

# the power-loss tests mount a FUSE file system (tests/powerloss/): libfuse 3 and fusermount3
fuse:
	@{ command -v fusermount3 >/dev/null 2>&1 && ldconfig -p | grep -q libfuse3; } || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q fuse3; }

# Spark (the connector's tests) needs Java 17+
java:
	@command -v java >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q openjdk-17-jre-headless; }

maven: java
	@command -v mvn >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q maven; }

# Apache Kafka, the oracle of the conformance tests (tests/conformance/, tests/kafka_node.py): its jars,
# resolved by Maven from tests/kafka/pom.xml (the one place its version is pinned) into a cache outside
# the source tree. The stamp (.resolved) is a copy of the pom it was resolved from, compared by content,
# not by date: a fresh clone's pom is newer than any stamp, and a second run, from any checkout, does
# nothing; a new pin resolves again. The jars are resolved beside the old ones and swapped in whole, so
# a run that uses the cache meanwhile (another checkout's tests) never finds its folder emptied.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' tests/kafka/pom.xml)
KAFKA_CACHE ?= $(HOME)/.cache/pybroker/kafka-$(KAFKA_VERSION)
kafka:
	@cmp -s tests/kafka/pom.xml $(KAFKA_CACHE)/.resolved || $(MAKE) --no-print-directory kafka-resolve
kafka-resolve: maven
	@echo "resolving Apache Kafka $(KAFKA_VERSION) into $(KAFKA_CACHE) (once)"
	mkdir -p $(KAFKA_CACHE) && rm -rf $(KAFKA_CACHE)/libs.new
	cp tests/kafka/pom.xml $(KAFKA_CACHE)/pom.xml
	cd $(KAFKA_CACHE) && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=libs.new
	cd $(KAFKA_CACHE) && rm -rf libs.old && { [ ! -d libs ] || mv libs libs.old; } && mv libs.new libs && rm -rf libs.old
	cp tests/kafka/pom.xml $(KAFKA_CACHE)/.resolved

# the metrics test scrapes the broker with a real Prometheus server
prometheus:
	@command -v prometheus >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends prometheus; }

# the web console's browser tests drive Debian's chromium through its WebDriver
chromium:
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver; }

# Bytecode for our sources, written even where Python is told not to (PYTHONDONTWRITEBYTECODE): without
# it every broker start and every `pybroker` command compiles them again (start to ready 0.66 s instead of
# 0.35 s here). Up-to-date files are skipped; an edited source makes its file stale, which Python ignores.
BYTECODE_DIRS := broker clients protocol storage config tests bench examples
bytecode: $(BROKER_STAMP)
	$(PY) -m compileall -q -j 0 $(BYTECODE_DIRS) >/dev/null

# the metrics port serves the web console too (/console/, answering this machine only; README.md's URL)
run: $(BROKER_STAMP) bytecode
	$(VENV)/bin/pybroker start --log-dirs ./data --listeners PLAINTEXT://127.0.0.1:9092 --metrics-port 9404

test: $(STAMP) kcat fuse java kafka prometheus chromium bytecode
	PYBROKER_KAFKA_HOME=$(KAFKA_CACHE) $(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) fuse java kafka bytecode
	PYBROKER_KAFKA_HOME=$(KAFKA_CACHE) $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# mypy checks the sources under the names they are imported by (pybroker.broker.x, ...). Given the bare
# folders it would name them broker.x, ... and, with ignore_missing_imports, read every `pybroker.*` import
# as Any, so no call between our own modules would be checked. The installed layout is staged in the
# git-ignored build/mypy: a pybroker package whose subpackages are symlinks to the source folders
# (recreated on each run, so a new or moved folder is picked up). Errors name pybroker/<folder>/... there.
MYPY_PACKAGES := broker clients protocol storage config
MYPY_ROOT := build/mypy
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	mkdir -p $(MYPY_ROOT)/pybroker
	touch $(MYPY_ROOT)/pybroker/__init__.py
	for d in $(MYPY_PACKAGES); do ln -sfn ../../../$$d $(MYPY_ROOT)/pybroker/$$d; done
	cd $(MYPY_ROOT) && ../../$(VENV)/bin/mypy --config-file ../../pyproject.toml -p pybroker

gen: $(STAMP)
	$(PY) -m pybroker.protocol.codegen

# docs/configuration.md is generated from the config table (a test checks it is current)
docs: $(STAMP)
	$(PY) -m pybroker.config.docs

check-gen: $(STAMP)
	$(PY) -m pybroker.protocol.codegen --check

# BENCH_QUICK=1: a quick subset (about 2.5 minutes); BENCH_ARGS: bench/run.py's options (--processes, --repeats, ...)
BENCH_QUICK ?=
BENCH_ARGS ?=
bench: $(STAMP) bytecode
	BENCH_QUICK=$(BENCH_QUICK) $(PY) bench/run.py $(BENCH_ARGS)

# the long fuzzing campaign (docs/fuzzing.md): FUZZ_ARGS="--seed S --start N" resumes one;
# FUZZ_ENGINE=atheris runs coverage-guided libFuzzer instead (installed on first use)
FUZZ_INPUTS ?= 1000000
FUZZ_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
FUZZ_ARGS ?=
FUZZ_ENGINE ?= seeded
fuzz: $(STAMP)
ifeq ($(FUZZ_ENGINE),atheris)
	$(PY) -c "import atheris" 2>/dev/null || $(PY) -m pip install -q -e '.[fuzz]'
	mkdir -p .fuzz-corpus
	$(PY) -m tests.fuzz.atheris_engine -runs=$(FUZZ_INPUTS) $(FUZZ_ARGS) .fuzz-corpus
else
	$(PY) -m tests.fuzz.run --inputs $(FUZZ_INPUTS) --jobs $(FUZZ_JOBS) $(FUZZ_ARGS)
endif

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache protocol/records/*.so
	find $(BYTECODE_DIRS) -name __pycache__ -type d -prune -exec rm -rf {} +
