# Every target installs what it needs first, so a fresh clone needs nothing but Python 3.11 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

.PHONY: cc kcat fuse java kafka iceberg-rest maven prometheus chromium bytecode run test test-fast lint bench bench-share soak-connections fuzz check-gen gen docs screenshots install clean conformance ecosystem spark-kafka connect soak kafka-resolve go go-modules peer-suites

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
	@$(INSTALL_SAYS); start=$$(date +%s); $(PY) -m pip install -q -e '.[test,dev,spark,registry,iceberg]' && $(INSTALLED_SAYS)
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
# (a JDK: the ecosystem tests compile their Java programs with javac)
java:
	@{ command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1; } || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q openjdk-17-jdk-headless; }

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

# $(call resolve_into,CACHE,POM,MAVEN-ARGS): the other caches below, resolved as Kafka's above (a stamp that
# is a copy of the pom, new jars swapped in whole), each from its own pom
define resolve_into
	@cmp -s $(2) $(1)/.resolved || { echo "resolving $(2) into $(1) (once)" && \
	  mkdir -p $(1) && rm -rf $(1)/libs.new && cp $(2) $(1)/pom.xml && \
	  (cd $(1) && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=libs.new $(3)) && \
	  (cd $(1) && rm -rf libs.old && { [ ! -d libs ] || mv libs libs.old; } && mv libs.new libs && rm -rf libs.old) && \
	  cp $(2) $(1)/.resolved; }
endef

# what the ecosystem tests (tests/ecosystem/) run beside Kafka's jars: Kafka Streams, resolved from
# tests/ecosystem/pom.xml at the Kafka version pinned above, into a cache outside the source tree
ECOSYSTEM_CACHE ?= $(HOME)/.cache/pybroker/ecosystem-$(KAFKA_VERSION)
ecosystem: maven
	$(call resolve_into,$(ECOSYSTEM_CACHE),tests/ecosystem/pom.xml,-Dkafka.version=$(KAFKA_VERSION))

# Spark's own Kafka connector, for the Spark tests beside ours (tests/ecosystem/spark/pom.xml pins it)
SPARK_KAFKA_CACHE ?= $(HOME)/.cache/pybroker/spark-kafka-$(shell sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' tests/ecosystem/spark/pom.xml)
spark-kafka: maven
	$(call resolve_into,$(SPARK_KAFKA_CACHE),tests/ecosystem/spark/pom.xml,)

# Kafka Connect with its file connectors and MirrorMaker 2 (tests/ecosystem/connect/pom.xml pins them)
CONNECT_CACHE ?= $(HOME)/.cache/pybroker/connect-$(shell sed -n 's:.*<connect.version>\(.*\)</connect.version>.*:\1:p' tests/ecosystem/connect/pom.xml)
connect: maven
	$(call resolve_into,$(CONNECT_CACHE),tests/ecosystem/connect/pom.xml,)

# Apache Iceberg's REST catalog server, one runnable jar (tests/ecosystem/iceberg_rest/pom.xml pins it)
ICEBERG_REST_CACHE ?= $(HOME)/.cache/pybroker/iceberg-rest-$(shell sed -n 's:.*<iceberg.version>\(.*\)</iceberg.version>.*:\1:p' tests/ecosystem/iceberg_rest/pom.xml)
iceberg-rest: maven
	$(call resolve_into,$(ICEBERG_REST_CACHE),tests/ecosystem/iceberg_rest/pom.xml,-DexcludeTransitive=true)

# franz-go (tests/ecosystem/test_franz_go.py): Go, and the modules tests/ecosystem/go/go.mod pins (franz-go
# with kadm) downloaded into Go's own module cache, outside the tree; the tests then build with GOPROXY=off
go:
	@command -v go >/dev/null 2>&1 || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q golang-go; }

go-modules: go
	cd tests/ecosystem/go && GOFLAGS=-mod=mod go mod download

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
# Then the code of the dataclasses' methods a start defines (broker/dataclass_code.py), rebuilt each time.
BYTECODE_DIRS := broker clients protocol storage config tests bench examples
bytecode: $(BROKER_STAMP)
	$(PY) -m compileall -q -j 0 $(BYTECODE_DIRS) >/dev/null
	$(PY) -m pybroker.broker.dataclass_code >/dev/null

# the metrics port serves the web console too (/console/, answering this machine only; README.md's URL)
run: $(BROKER_STAMP) bytecode
	$(VENV)/bin/pybroker start --log-dirs ./data --listeners PLAINTEXT://127.0.0.1:9092 --metrics-port 9404

test: $(STAMP) kcat fuse java kafka ecosystem spark-kafka connect iceberg-rest go-modules prometheus chromium bytecode
	PYBROKER_KAFKA_HOME=$(KAFKA_CACHE) PYBROKER_ECOSYSTEM_HOME=$(ECOSYSTEM_CACHE) \
	  PYBROKER_SPARK_KAFKA_HOME=$(SPARK_KAFKA_CACHE) PYBROKER_CONNECT_HOME=$(CONNECT_CACHE) PYBROKER_GO_MODULES=1 \
	  PYBROKER_ICEBERG_REST_HOME=$(ICEBERG_REST_CACHE) \
	  PYBROKER_LIBRDKAFKA_TESTS=$(LIBRDKAFKA_TESTS) \
	  $(PY) -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) fuse java kafka bytecode
	PYBROKER_KAFKA_HOME=$(KAFKA_CACHE) $(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# the conformance scenarios (tests/conformance/) against a live Apache Kafka node instead of its recorded
# answers (make test compares with the recordings and starts no Kafka); RECORD=1 also writes Kafka's answers
# into tests/conformance/recorded/ and regenerates docs/conformance.md from them
RECORD ?=
conformance: $(STAMP) java kafka bytecode
	PYBROKER_CONFORMANCE=$(if $(RECORD),record,live) PYBROKER_KAFKA_HOME=$(KAFKA_CACHE) \
	  $(PY) -m pytest tests/conformance $(PYTEST_ARGS)
	$(if $(RECORD),$(PY) -m tests.conformance.report)

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

# docs/configuration.md is generated from the config table, docs/conformance.md from the conformance
# scenarios (a test checks each is current)
docs: $(STAMP)
	$(PY) -m pybroker.config.docs
	$(PY) -m tests.conformance.report

check-gen: $(STAMP)
	$(PY) -m pybroker.protocol.codegen --check

# docs/images/console/ (the screenshots docs/console.md shows), taken by the console's browser tests at a
# fixed window size; a normal test run leaves them alone (its screenshots go to test-artifacts/)
screenshots: $(STAMP) chromium bytecode
	PYBROKER_CONSOLE_SCREENSHOTS=1 $(PY) -m pytest tests/integration/test_console_admin_browser.py -q $(PYTEST_ARGS)

# BENCH_QUICK=1: a quick subset; BENCH_ARGS: bench/run.py's options (--processes, --repeats, --skip-kafka, ...).
# Apache Kafka is a peer (docs/benchmarks.md): its jars are resolved first unless --skip-kafka is given
BENCH_QUICK ?=
BENCH_ARGS ?=
bench: $(STAMP) bytecode $(if $(findstring --skip-kafka,$(BENCH_ARGS)),,java kafka)
	BENCH_QUICK=$(BENCH_QUICK) PYBROKER_KAFKA_HOME=$(KAFKA_CACHE) $(PY) bench/run.py $(BENCH_ARGS)

# share groups (KIP-932, bench/share.py): N share consumers on one partition with 1 ms of work per record,
# redelivery after a lock timeout, and __share_group_state's cost per acknowledgement. BENCH_SHARE_ARGS:
# its options (--records N, --consumers 1,2,4,8)
BENCH_SHARE_ARGS ?=
bench-share: $(STAMP) bytecode
	$(PY) -m bench.share $(BENCH_SHARE_ARGS)

# issue 28: 10,000 idle connections held at the broker's real open-file limit, a stock client served beside
# them, then 1,000 past the budget; prints accept time, RSS, CPU and latency (a minute or two)
SOAK_CONNECTIONS_ARGS ?=
soak-connections: $(STAMP) bytecode
	$(PY) -m bench.idle_connections $(SOAK_CONNECTIONS_ARGS)

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

# the long power-loss campaign (tests/powerloss/campaign.py, docs/testing.md): SOAK_CUTS power cuts of a
# busy broker on the lazy file system, checked after each; a table of figures at the end. SOAK_ARGS:
# the campaign's options (--seed S, --check-log-every N, --stop-on-violation, --verbose). Then
# SOAK_ICEBERG_CUTS power cuts under an Iceberg topic (tests/integration/test_power_loss_iceberg.py; 2 in `make test`),
# and SOAK_SHARE_CUTS under a share group (tests/powerloss/share_cuts.py; 2 in `make test`)
SOAK_CUTS ?= 100
SOAK_ICEBERG_CUTS ?= 20
SOAK_ARGS ?=
SOAK_SHARE_CUTS ?= 20
soak: $(STAMP) fuse bytecode
	@workdir=$$(mktemp -d) && trap 'rm -rf "$$workdir"' EXIT && \
	  $(PY) -m tests.powerloss.campaign --cuts $(SOAK_CUTS) --workdir "$$workdir" $(SOAK_ARGS)
	PYBROKER_ICEBERG_CUTS=$(SOAK_ICEBERG_CUTS) $(PY) -m pytest tests/integration/test_power_loss_iceberg.py -q
	$(PY) -m tests.powerloss.share_cuts --cuts $(SOAK_SHARE_CUTS)

# issue 32: the peer clients' own share-group suites (tests/ecosystem/test_peer_share_suites.py,
# docs/testing.md), librdkafka's C share tests and confluent-kafka-python's share_consumer tests, whole (about
# 25 minutes). Their sources live only in their repositories, which no registry here carries: LIBRDKAFKA_TESTS
# names librdkafka's tests/ dir at v2.15.0 with its test-runner built, CK_PYTHON_SRC confluent-kafka-python
# at v2.15.0; a suite whose dir holds neither skips with the reason. What that suite's conftest imports and
# the venv lacks is installed from PyPI into PEER_PYDEPS (outside the venv, on the suite's PYTHONPATH only).
PEER_CACHE ?= $(HOME)/.cache/pybroker
LIBRDKAFKA_TESTS ?= $(PEER_CACHE)/librdkafka-src-v2.15.0/tests
CK_PYTHON_SRC ?= $(PEER_CACHE)/confluent-kafka-python-src-v2.15.0
PEER_PYDEPS ?= $(PEER_CACHE)/peer-suites-pydeps
peer-suites: $(STAMP) bytecode
	@[ -f $(PEER_PYDEPS)/.installed ] || { $(PY) -m pip install -q --no-deps --target $(PEER_PYDEPS) \
	  trivup==0.12.2 jwcrypto==1.6.1 python_jwt==4.1.0 && touch $(PEER_PYDEPS)/.installed; }
	PYBROKER_PEER_SUITES=1 PYBROKER_LIBRDKAFKA_TESTS=$(LIBRDKAFKA_TESTS) PYBROKER_CK_PYTHON_SRC=$(CK_PYTHON_SRC) \
	  PYBROKER_PEER_SUITES_PYDEPS=$(PEER_PYDEPS) $(PY) -m pytest tests/ecosystem/test_peer_share_suites.py -s -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache protocol/records/*.so
	find $(BYTECODE_DIRS) -name __pycache__ -type d -prune -exec rm -rf {} +
