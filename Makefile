# deliveryd — build, run and test entry points. Every target installs what it needs and is safe to repeat.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The Swift toolchain of this machine image lives in /opt/swift; use it when it is not on PATH yet.
export PATH := $(if $(wildcard /opt/swift/usr/bin),/opt/swift/usr/bin:,)$(PATH)

APT_PACKAGES := libsqlite3-dev libcurl4-openssl-dev libssl-dev libpq-dev pkg-config ca-certificates openssl
SWIFT_FORMAT_PATHS := Sources Tests bench Package.swift

.PHONY: help deps test-deps venv build release-product run deb test test-package lint format clean bench bench-http bench-projection bench-storage bench-push-latency bench-pusher bench-e2e bench-rides bench-stats bench-webhooks soak

help:
	@echo "make run    build (release) and run deliveryd on 127.0.0.1:8080 with data in ./var"
	@echo "make test   install what is missing, lint, build and run every test"
	@echo "make deb    build the Debian package (release) into .build/deb"
	@echo "make bench  run the benchmarks in bench/ (release builds)"
	@echo "make soak   the fault tests at full length (200 kills, a 60 s APNs outage)"
	@echo "make lint   check formatting with swift-format"
	@echo "make format rewrite sources with swift-format"

APT_TEST_PACKAGES := prometheus chromium chromium-driver faketime postgresql lintian systemd curl
# What `make deb` packages with: Debian's own tools, and the package's install-time dependencies.
APT_DEB_PACKAGES := dpkg-dev binutils adduser debconf init-system-helpers

# Installs the Debian packages named in $(1) that are missing.
define apt_install
	@missing=""; \
	for pkg in $(1); do \
		dpkg-query -W -f='$${Status}' "$$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		timeout 900 apt-get update -qq && timeout 1200 apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

## Installs the Debian packages the build needs, only those that are missing.
deps:
	$(call apt_install,$(APT_PACKAGES))
	@command -v swift >/dev/null || { echo "swift is not installed (expected in /opt/swift/usr/bin)"; exit 1; }

## What the tests use besides the build: promtool (metrics format), headless Chromium (dashboard),
## libfaketime (late orders without waiting) and a PostgreSQL server (each test starts its own).
test-deps: deps
	$(call apt_install,$(APT_TEST_PACKAGES))

## The Python virtualenv of the test peers (the APNs simulator, the dashboard's browser driver),
## rebuilt when its requirements change.
VENV_STAMP := .venv/.installed-$(shell sha256sum Tests/requirements.txt | cut -c1-12)
venv: $(VENV_STAMP)
$(VENV_STAMP): Tests/requirements.txt
	rm -rf .venv
	python3 -m venv .venv
	timeout 900 .venv/bin/pip install --quiet --disable-pip-version-check -r Tests/requirements.txt
	touch $@

# The commit and day a release build is stamped with (see Sources/CBuildStamp): a small object the
# linker adds, so that a new commit costs a relink and not a rebuild. SOURCE_DATE_EPOCH, when set,
# is the build's day (reproducible builds).
BUILD_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
BUILD_DATE := $(shell date -u $(if $(SOURCE_DATE_EPOCH),-d @$(SOURCE_DATE_EPOCH)) +%Y-%m-%d)
BUILD_STAMP := $(CURDIR)/.build/stamp/$(BUILD_COMMIT)-$(BUILD_DATE).o
# Every release build (the service, the package, the benchmarks) uses the same flags, so that one
# build directory serves them all (the static runtime changes how every module compiles). The Swift
# runtime linked in, and no run path to the build directory: the binary runs on a Debian machine
# without a Swift toolchain. Relocations resolved at start, then read-only, as Debian's hardening asks.
SWIFT_RELEASE := -c release --static-swift-stdlib --disable-local-rpath \
	-Xlinker -z -Xlinker relro -Xlinker -z -Xlinker now
RELEASE_FLAGS := $(SWIFT_RELEASE) -Xlinker $(BUILD_STAMP)

$(BUILD_STAMP):
	mkdir -p $(@D)
	printf 'const char *const deliveryd_build_commit = "%s";\nconst char *const deliveryd_build_date = "%s";\n' \
		'$(BUILD_COMMIT)' '$(BUILD_DATE)' | cc -x c -c -fPIC -o $@ -

build: deps $(BUILD_STAMP)
	swift build $(RELEASE_FLAGS) --product deliveryd

## Another product in release, as the benchmarks build theirs: make release-product PRODUCT=storage-bench
release-product:
	swift build $(SWIFT_RELEASE) --product $(PRODUCT)

## The Debian package: packaging/build-deb.sh around the release binary (see docs/operations.md).
DEB_MAINTAINER ?= deliveryd maintainers <deliveryd@example.com>
deb: build
	$(call apt_install,$(APT_DEB_PACKAGES))
	rm -rf .build/deb
	bash packaging/build-deb.sh .build/release/deliveryd .build/deb '$(DEB_MAINTAINER)'

run: build
	.build/release/deliveryd

lint:
	swift format lint --strict --recursive $(SWIFT_FORMAT_PATHS)

format:
	swift format format --in-place --recursive $(SWIFT_FORMAT_PATHS)

# MALLOC_ARENA_MAX=1: Foundation's Process.run() on Linux (Swift 6.3.1) reads up to 256 bytes past a
# /proc/self/fd directory entry (swift-corelibs-foundation pull request 5472, fixed after 6.3.1); with
# the buffer in a thread arena whose next page is unmapped, the test process crashed (1 of 5 fresh-
# clone runs). One arena keeps those buffers in the main heap, where the next bytes are mapped.
#
# The API tests then run again on PostgreSQL (a server the test process starts), but for the
# authorization matrix, which does not depend on the store and opens hundreds of fresh databases.
test: test-deps venv lint
	timeout 1800 swift build --build-tests
	MALLOC_ARENA_MAX=1 timeout 1500 swift test --skip-build
	DELIVERYD_TEST_DATABASE=postgresql MALLOC_ARENA_MAX=1 timeout 600 \
		swift test --skip-build --filter DeliveryAPITests --skip AuthorizationMatrixTests
	$(MAKE) --no-print-directory test-package

## Builds the Debian package, installs it on this machine, checks it and purges it (needs root).
test-package: deb
	timeout 600 bash Tests/package/deb_test.sh .build/deb/deliveryd_*.deb

bench: bench-http bench-projection bench-storage bench-push-latency bench-pusher bench-e2e bench-rides bench-stats bench-webhooks

## deliveryd against nginx with wrk, and 10,000 idle keep-alive connections.
bench-http: deps
	bash bench/http.sh

## Payloads built per second on one core (pinned with taskset when available).
bench-projection: deps
	swift build $(SWIFT_RELEASE) --product projection-bench
	$$(command -v taskset >/dev/null && echo "taskset -c 0") .build/release/projection-bench

## Commits per second at 1k and 1M orders, FULL against NORMAL, file size per million orders.
bench-storage: deps
	bash bench/storage.sh

## Commit-to-APNs latency at light load: deliveryd (release) with the APNs simulator.
bench-push-latency: deps venv
	bash bench/push_latency.sh

## Pushes per second through one pusher to nghttpd, a C HTTP/2 sink.
bench-pusher: deps
	bash bench/pusher.sh

## Status changes end to end against the Python peer; at 1M orders; 10,000 connections; slow APNs.
bench-e2e: deps venv
	bash bench/e2e.sh

## Rider positions beside status changes: one fix a post, then five; what a position costs.
bench-rides: deps venv
	BATCH=1 bash bench/rides.sh
	BATCH=5 bash bench/rides.sh

## The dashboard's stats answer with a full history, while the end-to-end workload runs.
bench-stats: deps venv
	bash bench/stats.sh

## Status changes with and without a webhook endpoint per merchant, alternated.
bench-webhooks: deps venv
	bash bench/webhooks.sh

## The fault tests at full length: 200 random kill -9 under load, a 60 s APNs outage.
soak: test-deps venv
	swift build --build-tests
	DELIVERYD_SOAK_KILLS=200 DELIVERYD_SOAK_OUTAGE=60 swift test --skip-build --filter "RandomKillTests|APNsOutageTests"

clean:
	rm -rf .build
