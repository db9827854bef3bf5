# Two commands a newcomer needs: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test check demo demo-pit rabbitmq-mqtt prometheus lint typecheck bench clean venv chromium wheel package deb-tools

venv: $(STAMP)

# As an ordinary user: no apt here (packaging tools are deb-tools', for make package and test).
$(STAMP): pyproject.toml
	@$(PY) -c 'import ensurepip, venv' 2>/dev/null || { echo "$(PY) cannot make a venv: install Debian's python3-venv package (as root)" >&2; exit 1; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# pytest keeps the test modules it rewrote for its asserts (in __pycache__, gitignored) even
# where the environment says not to write bytecode: collecting anew costs ~20 s a worker.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/pytest

# Everything, what CI runs: four pytest-xdist workers on the two cores (tests/conftest.py groups
# the tests). Most of the suite waits (brokers, daemons, browsers, fsync): measured on this
# 2-core machine, -n 2 used 40 % of the CPU in 11 min, -n 4 the same CPU in 6 min 38 s.
WORKERS ?= 4
test: $(STAMP) chromium deb-tools rabbitmq-mqtt prometheus
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(PYTEST) -n $(WORKERS) --dist loadgroup

# For every change, in a few minutes: everything but the tests that need a daemon, a browser, a
# broker, PostgreSQL, a package build or every hand (markers set by tests/conftest.py).
SLOW_MARKS := daemon or browser or broker or database or package or exhaustive or slow
check: $(STAMP)
	$(BIN)/ruff check .
	HYPOTHESIS_PROFILE=quick $(PYTEST) -n 2 --dist loadgroup -m "not ($(SLOW_MARKS))"

demo: $(STAMP)
	$(BIN)/paigow-table demo

# Six real table daemons (simulated devices) and the pit's page over them (docs/pit.md).
demo-pit: $(STAMP)
	$(BIN)/paigow-table demo --tables 6 --http-port 8090

# The pit's test against RabbitMQ's MQTT plugin (tests/pit/test_rabbitmq.py): the plugin on, its
# listener on 127.0.0.1:1884 (1883 is Mosquitto's). Set in the running node before the plugin
# starts, and in the node's config file too: `rabbitmq-plugins enable` is kept across restarts,
# and a node that restarts (a reboot, an OOM kill) with the plugin on and no listener set binds
# 1883, finds it taken and does not boot at all. The node is waited for until it answers.
RABBITMQ_CONF ?= /etc/rabbitmq/rabbitmq.conf
rabbitmq-mqtt:
	grep -qs '^mqtt.listeners.tcp' $(RABBITMQ_CONF) || echo 'mqtt.listeners.tcp.default = 127.0.0.1:1884' >> $(RABBITMQ_CONF)
	rabbitmqctl -q status >/dev/null 2>&1 || rabbitmq-server -detached
	for i in $$(seq 90); do rabbitmqctl -q status >/dev/null 2>&1 && break; sleep 1; done
	rabbitmqctl -q await_startup
	rabbitmqctl eval 'application:load(rabbitmq_mqtt), application:set_env(rabbitmq_mqtt, tcp_listeners, [{"127.0.0.1", 1884}]).' >/dev/null
	rabbitmq-plugins enable --quiet rabbitmq_mqtt

# Debian's Prometheus: promtool checks and unit-tests the shipped alert rules, and a real
# Prometheus scrapes a table and the pit (tests/packaging/test_prometheus_rules.py,
# tests/pit/test_prometheus.py). Its service is not started here (the tests start their own).
prometheus:
	command -v promtool >/dev/null && command -v prometheus >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus)

# The browser tests drive Debian's chromium (tests/display); CI runs as root.
chromium:
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

# dist/paigow_table-<version>-py3-none-any.whl and dist/paigow-table_<version>_<arch>.deb
# (packaging/build-package; docs/operations.md installs them). No dev venv needed.
package: deb-tools
	packaging/build-package dist

wheel: deb-tools
	packaging/build-package --wheel-only dist

# python3-venv: for .venv, and for the .deb's venv made by Debian's python3 (tests/packaging too);
# binutils: strip; lintian: the package's own check (tests/packaging/test_deb.py); libsodium23:
# the table signs its feed with it and the pit checks with it (controller/sodium.py); the package
# recommends it (without it both use cryptography).
deb-tools:
	for p in python3-venv binutils lintian libsodium23; do \
	  dpkg-query -W -f '$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	[ -z "$$missing" ] || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 $$missing)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/house_way.py
	$(BIN)/python bench/protection.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
