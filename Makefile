# git sandbox — build, install, test.
#
#   make build     bin/git-sandbox (static: the same binary runs in the proxy container)
#   make install   the binary and its man page (git help sandbox) under PREFIX
#   make test      unit and end-to-end tests (builds the offline test image once)
#   make check     vet, staticcheck, gofmt and race-enabled unit tests
#   make cover     unit-test coverage per package; fails below the floor
#   make bench     speed ratios against the raw git and Docker commands, and
#                  the egress proxy against direct connections
#   make engine2   start a second Docker engine (gVisor registered) for tests
#                  of remote engines; make engine2-stop, make engine2-status;
#                  make test-engine2 runs its own tests (root needed)
#   make k8s-cluster  build (once, cached) and start the single-node Kubernetes
#                  test cluster (root); make k8s-stop removes it

GO         ?= go
PREFIX     ?= $(if $(filter 0,$(shell id -u)),/usr/local,$(HOME)/.local)
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X github.com/git-sandbox/git-sandbox/internal/version.Version=$(VERSION)
STATICCHECK_VERSION ?= v0.8.2
# The offline base image the tests build their sandbox image from.
TEST_BASE_IMAGE ?= git-sandbox-test-base:bookworm
export GIT_SANDBOX_TEST_BASE_IMAGE := $(TEST_BASE_IMAGE)
# Where make engine2 keeps the second engine (socket, data, log).
ENGINE2_DIR ?= /tmp/git-sandbox-engine2

# Every package but the end-to-end tests themselves (./e2e): the test
# cluster's provisioner (e2e/k8s/provisioner) has unit tests of its own.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/e2e$$')
# Packages whose unit tests (no daemon: the engine is faked) must cover at
# least COVER_MIN percent of their statements.
COVER_PKGS ?= ./internal/sandbox ./rescue
COVER_MIN  ?= 60

.PHONY: build install uninstall test test-unit test-e2e test-image check cover bench clean engine2 engine2-stop engine2-status test-engine2 \
	k8s-build k8s-cluster k8s-stop

# CGO_ENABLED=0: a static binary with Go's own resolver, so that it runs
# unchanged inside a sandbox's minimal egress proxy container.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/git-sandbox ./cmd/git-sandbox

install: build
	install -d $(BINDIR) $(MANDIR)/man1
	install -m 0755 bin/git-sandbox $(BINDIR)/git-sandbox
	bin/git-sandbox __man > $(MANDIR)/man1/git-sandbox.1
	-mandb -q >/dev/null 2>&1
	@echo "installed $(BINDIR)/git-sandbox and $(MANDIR)/man1/git-sandbox.1"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "note: add $(BINDIR) to PATH so git finds git-sandbox";; esac

uninstall:
	rm -f $(BINDIR)/git-sandbox $(MANDIR)/man1/git-sandbox.1

test-image:
	./e2e/testimage/build.sh $(TEST_BASE_IMAGE)

test: test-image
	$(GO) test -count=1 -timeout 60m ./...

test-unit:
	$(GO) test -count=1 $(UNIT_PKGS)

test-e2e: test-image
	$(GO) test -count=1 -timeout 60m -v ./e2e

check:
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) test -race -count=1 $(UNIT_PKGS)

cover:
	@out=$$($(GO) test -count=1 -cover $(COVER_PKGS)); status=$$?; echo "$$out"; \
	  [ $$status -eq 0 ] || exit $$status; \
	  echo "$$out" | awk -v min=$(COVER_MIN) ' \
	    /coverage:/ { for (i = 1; i <= NF; i++) if ($$i == "coverage:") pct = $$(i+1); sub("%", "", pct); \
	      if (pct + 0 < min) { printf "%s: coverage %s%% is below %s%%\n", $$2, pct, min; bad = 1 } n++ } \
	    END { if (n == 0) { print "no coverage reported"; exit 1 } exit bad }'

bench: test-image
	$(GO) test -count=1 -timeout 60m -run '^$$' -bench . -benchtime 1x ./e2e
	$(GO) test -count=1 -timeout 10m -run '^$$' -bench . -benchtime 1x ./internal/egress

engine2: test-image
	@ENGINE2_IMAGES="$(TEST_BASE_IMAGE)" ./e2e/engine2/engine.sh start $(ENGINE2_DIR)
	@echo "use it with: export DOCKER_HOST=unix://$(ENGINE2_DIR)/docker.sock; stop it with: make engine2-stop"

engine2-stop:
	./e2e/engine2/engine.sh stop $(ENGINE2_DIR)

engine2-status:
	@./e2e/engine2/engine.sh status $(ENGINE2_DIR)

test-engine2: test-image
	$(GO) test -count=1 -timeout 20m -v -run Engine2 ./e2e

# The Kubernetes end-to-end tests start their cluster themselves (and stop
# it); k8s-cluster starts one that they use and leave running. A cold
# build of its binaries runs in the background of the e2e run, niced
# (e2e/k8s_test.go, startClusterBuild).
K8S_CLUSTER = ./e2e/k8s/cluster.sh

k8s-build:
	$(K8S_CLUSTER) build

k8s-cluster: test-image
	$(K8S_CLUSTER) start

k8s-stop:
	$(K8S_CLUSTER) stop

clean:
	rm -rf bin
