# git sandbox — build, install, test.
#
#   make build     bin/git-sandbox (static: the same binary runs in the proxy container)
#   make install   the binary and its man page (git help sandbox) under PREFIX
#   make test      unit and end-to-end tests (builds the offline test image once)
#   make check     vet, staticcheck, gofmt and race-enabled unit tests
#   make cover     unit-test coverage of every package against its floor,
#                  one line each; fails below a floor
#   make cover-docker  container/docker's coverage by its unit tests and the
#                  engine conformance suite against the daemon (Docker needed)
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
# Coverage floors (make cover). Every package's statements must be run by
# the unit tests (no daemon: the engine is faked; real git is allowed) to
# at least COVER_MIN percent, counted over one profile of all of them: a
# seam's code (internal/workspace, internal/network, land) is run by the
# orchestration's tests in internal/sandbox as much as by its own. A
# package may have a floor of its own (COVER_FLOORS) or say why make cover
# does not hold it to one (COVER_EXEMPT). A package with no statements
# must be exempted by name, and an exemption or floor that names no
# package fails: neither list rots unseen.
# make cover COVER_PKGS=./internal/fleet measures some packages only, by
# their own tests.
COVER_MIN  ?= 60
COVER_PKGS ?= $(UNIT_PKGS)
# Package, floor, why.
define COVER_FLOORS
cmd/git-sandbox  50  commands parse and print; their flows are measured in the packages that do the work
cmd/git-sandbox/internal/fleetcmd  50  commands parse and print (fleet's); internal/fleet does the work
cmd/git-sandbox/internal/netcmd  50  commands parse and print (net's); internal/network and internal/egress do the work
endef
# Package, why it has no floor here.
define COVER_EXEMPT
container/docker      measured by make cover-docker: its unit tests and the e2e conformance suite against the daemon
container/enginetest  the conformance suite itself: test code, run by each backend's tests
e2e/dnswatch          a program the e2e tests run inside containers; they test it there
internal/dieat        a test hook: its kill runs in the child process its test starts, which a coverage profile does not count
e2e/k8s/pause         the test cluster's pause container: waits for a signal, no logic
e2e/testupstream      a program the e2e tests run inside containers; they test it there
internal/lint         tests only: no statements
endef
# The report: one line per package, its coverage and its floor.
define COVER_REPORT
BEGIN {
	n = split(ENVIRON["COVER_FLOORS"], l, "\n")
	for (i = 1; i <= n; i++) if (split(l[i], f, " ") >= 2) { floor[f[1]] = f[2]; named[f[1]] = 1 }
	n = split(ENVIRON["COVER_EXEMPT"], l, "\n")
	for (i = 1; i <= n; i++) if (split(l[i], f, " ") >= 2) { r = l[i]; sub(/^[^ ]+ +/, "", r); why[f[1]] = r; named[f[1]] = 1 }
	printf "%-24s %8s %6s\n", "package", "coverage", "floor"
}
# The profile: a block is covered when any test binary ran it.
FILENAME == profile {
	if (FNR == 1) next
	split($$1, loc, ":"); file = loc[1]; pkg = file; sub(/\/[^\/]*$$/, "", pkg)
	if (index(pkg, mod) != 1) next
	pkg = substr(pkg, length(mod) + 1)
	if (!($$1 in stmts)) { stmts[$$1] = $$2; of[$$1] = pkg }
	if ($$3 > 0) hit[$$1] = 1
	next
}
# go test's output: the packages tested.
{
	for (i = 1; i <= 2 && i <= NF; i++) if (index($$i, mod) == 1 && $$i !~ /,$$/) tested[substr($$i, length(mod) + 1)] = 1
}
END {
	for (b in stmts) { total[of[b]] += stmts[b]; if (b in hit) covered[of[b]] += stmts[b] }
	for (pkg in tested) order[++count] = pkg
	for (i = 2; i <= count; i++) for (j = i; j > 1 && order[j-1] > order[j]; j--) { t = order[j]; order[j] = order[j-1]; order[j-1] = t }
	for (i = 1; i <= count; i++) {
		pkg = order[i]; seen[pkg] = 1
		if (pkg in why) { printf "%-24s %8s %6s  %s\n", pkg, (pkg in total) ? sprintf("%.1f%%", 100 * covered[pkg] / total[pkg]) : "-", "exempt", why[pkg]; continue }
		if (!(pkg in total) || total[pkg] == 0) { printf "%-24s %8s %6s  below: no statements; exempt it in COVER_EXEMPT\n", pkg, "-", "-"; bad++; continue }
		pct = 100 * covered[pkg] / total[pkg]
		fl = (pkg in floor) ? floor[pkg] : min
		low = pct < fl + 0
		printf "%-24s %7.1f%% %5d%%%s\n", pkg, pct, fl, low ? "  below" : ""
		bad += low
	}
	if (all) for (p in named) if (!(p in seen)) { printf "%-24s %8s %6s  below: named in COVER_FLOORS or COVER_EXEMPT, but there is no such package\n", p, "-", "-"; bad++ }
	if (count == 0) { print "no coverage reported"; exit 1 }
	if (bad) printf "%d package(s) below their floor\n", bad
	exit bad > 0
}
endef
export COVER_FLOORS COVER_EXEMPT COVER_REPORT
# The end-to-end tests that drive container/docker against the daemon.
COVER_DOCKER_E2E = TestEngineConformanceDocker|TestEngineNetworksVolumesEvents

.PHONY: build install uninstall test test-unit test-e2e test-image check cover cover-docker bench clean engine2 engine2-stop engine2-status test-engine2 \
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
	@prof=$$(mktemp); trap 'rm -f "$$prof"' EXIT; \
	  pkgs=$$($(GO) list $(COVER_PKGS) | paste -sd, -); \
	  cpkg=$(if $(filter file,$(origin COVER_PKGS)),-coverpkg=$$pkgs); \
	  out=$$($(GO) test -count=1 $$cpkg -coverprofile="$$prof" $(COVER_PKGS) 2>&1); status=$$?; \
	  if [ $$status -ne 0 ]; then echo "$$out"; exit $$status; fi; \
	  echo "$$out" | awk -v min=$(COVER_MIN) -v mod=$$($(GO) list -m)/ -v profile="$$prof" \
	    -v all=$(if $(filter file,$(origin COVER_PKGS)),1,0) "$$COVER_REPORT" "$$prof" -

# container/docker: its unit tests' profile and that of the e2e tests that
# drive it against the daemon, merged block by block.
cover-docker: test-image
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  $(GO) test -count=1 -coverprofile=$$dir/unit.out ./container/docker >$$dir/log 2>&1 && \
	  $(GO) test -count=1 -timeout 20m -coverpkg=./container/docker -coverprofile=$$dir/e2e.out \
	    -run '^($(COVER_DOCKER_E2E))$$' ./e2e >>$$dir/log 2>&1 || { cat $$dir/log; exit 1; }; \
	  awk -v min=$(COVER_MIN) ' \
	    FNR == 1 { next } \
	    { n = $$NF; $$NF = ""; if (!($$0 in hit) || n > hit[$$0]) hit[$$0] = n; split($$0, f, " "); stmts[$$0] = f[2] } \
	    END { for (b in hit) { total += stmts[b]; if (hit[b] > 0) covered += stmts[b] } \
	      pct = 100 * covered / total; bad = pct < min; \
	      printf "%-22s %7.1f%% %5d%%%s  (unit and e2e conformance tests)\n", "container/docker", pct, min, bad ? "  BELOW" : ""; \
	      exit bad }' $$dir/unit.out $$dir/e2e.out

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
