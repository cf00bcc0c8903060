# make test runs everything CI runs: formatting, vet, the race-enabled test
# suite (against real Redis servers it starts and stops, installing
# redis-server if needed), a short fuzz run of every fuzz target, and a
# compile check of the benchmark module.

GO       ?= go
# A count of executions, not a duration: with a duration, a worker busy
# when the time runs out fails the run with "context deadline exceeded"
# on a loaded machine; with a count there is no deadline.
FUZZTIME ?= 30000x

.PHONY: test checks fmt-check vet unit fuzz bench-check deploy-check bench run

test:
	bash scripts/chromium-up.sh
	BOUNCER_REQUIRE_BROWSER=1 bash scripts/with-redis.sh $(MAKE) --no-print-directory checks

checks: fmt-check vet unit fuzz bench-check deploy-check

fmt-check:
	@out="$$(gofmt -l . )"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd deploy/test && $(GO) vet ./...
	cd deploy/image && $(GO) vet ./...

# deploy/image's test builds the image (bouncer itself included) and runs
# it; without -race, which makes its gzip several times slower and has
# little to check in a build tool (docs/deploy.md).
unit:
	$(GO) test -race -count=1 ./...
	cd deploy/image && $(GO) test -count=1 ./...

# Each fuzz target runs FUZZTIME executions on top of its seed corpus.
fuzz:
	@for pkg in ./algo/ ./rules/ ./jsonapi/ ./header/ ./clientip/ ./internal/urlpath/ ./gateway/route/ ./gateway/transcode/; do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# The peers' benchmarks live in their own module; make sure they build and
# their workload checks pass on a tiny run. This also runs the differential
# test against envoyproxy/ratelimit (built from its module on first use).
# -short leaves out gubernator, which only the full benchmark run needs;
# without -tags gubernator its Go client is not even compiled (make
# bench-rls builds with the tag).
bench-check:
	cd bench && $(GO) test -short -count=1 -run . -bench . -benchtime 1x ./...

# The Kubernetes manifests and the Helm chart, decoded into the Kubernetes
# API types and checked (docs/deploy.md), in a module of their own so that
# Helm and client-go stay out of the main go.mod. Offline once its modules
# are downloaded.
deploy-check:
	cd deploy/test && $(GO) test -count=1 ./...

# The full side-by-side run recorded in docs/benchmarks.md, and its tables.
# The Redis half runs against the servers scripts/with-redis.sh provides.
bench:
	cd bench && $(GO) test -run '^$$' -bench '^(BenchmarkCheck|BenchmarkBytesPerKey)$$' -benchtime 1s -count 3 ./... | tee out.txt
	cd bench && $(GO) run ratios.go < out.txt
	bash scripts/with-redis.sh bash scripts/bench-redis.sh

# The container image without a container engine (deploy/image): an OCI
# image layout in dist/image, for linux/amd64 and linux/arm64, named by
# VERSION. A release: binaries for linux and darwin on amd64 and arm64,
# the image as a tar of its layout, and SHA256SUMS, in dist/release. Both
# are reproducible (docs/deploy.md). VERSION empty: the module version Go
# records from git, the tag at HEAD or a pseudo-version.
VERSION ?=

.PHONY: image release

image:
	cd deploy/image && $(GO) run . image -version "$(VERSION)"

release:
	cd deploy/image && $(GO) run . release -version "$(VERSION)"

# Bouncer's main job on the in-memory default; see README.md.
run:
	$(GO) run ./cmd/bouncer serve --config examples/serve/bouncer.yaml

# The README tour's gateway: the example upstream on 127.0.0.1:9001 and
# bouncer gateway in front of it on 127.0.0.1:8088 (admin 8089). Ctrl-C
# stops both; so does either one exiting.
.PHONY: gateway-demo

gateway-demo:
	@trap 'kill 0' EXIT; $(GO) run ./examples/gateway & $(GO) run ./cmd/bouncer gateway --config examples/gateway/gateway.yaml

# The README tour's transcoding gateway: the example gRPC Greeter on
# 127.0.0.1:9094 and bouncer gateway serving it as JSON on 127.0.0.1:8094
# (admin 8095). Ctrl-C stops both.
.PHONY: transcode-demo

transcode-demo:
	@trap 'kill 0' EXIT; $(GO) run ./examples/transcode & $(GO) run ./cmd/bouncer gateway --config examples/transcode/gateway.yaml

# make llm-demo: the LLM gateway example's fake model on 127.0.0.1:9096
# and bouncer gateway in front of it on 127.0.0.1:8096 (admin 8097):
# 20 000 tokens a minute and $50 a calendar month per API key, charged
# what the model reports at its model's prices, on the memory store,
# whose counts (a month's spend) are saved in .llm-demo/state and
# restored at its next start. Ctrl-C stops both.
.PHONY: llm-demo

llm-demo:
	@mkdir -p .llm-demo; trap 'kill 0' EXIT; $(GO) run ./examples/llmgateway & $(GO) run ./cmd/bouncer gateway --config examples/llmgateway/gateway.yaml --state-file .llm-demo/state --admin-token-file examples/llmgateway/admin-token

# Redis servers for the Redis store tests: a standalone on 16379, a
# 3-master/3-replica cluster on 17000-17005 and a Sentinel set on
# 17100-17104 (installs redis-server and redis-sentinel with apt-get if
# missing). See scripts/redis-up.sh; `. .redis/env` afterwards.
.PHONY: redis-up redis-down

redis-up:
	bash scripts/redis-up.sh

redis-down:
	bash scripts/redis-down.sh

# The Redis store beside redis_rate, ulule/limiter and throttled on the same
# Redis servers, in rounds (scripts/bench-redis.sh).
.PHONY: bench-redis

bench-redis:
	bash scripts/with-redis.sh bash scripts/bench-redis.sh

# Async mode's admissions per window of one hot key shared by three
# instances, beside strict mode on the same seeded stream, on the
# standalone Redis of BOUNCER_REDIS_ADDR (`. .redis/env` first; nothing
# else may use that server during the run): bench/async_shares_test.go,
# docs/benchmarks.md#async-shares. With gubernator GLOBAL beside async on
# the same streams (-tags gubernator; the first run builds gubernator,
# which takes minutes). About four and a half minutes.
.PHONY: bench-shares

bench-shares:
	cd bench && BOUNCER_REQUIRE_REDIS=1 $(GO) test -tags gubernator -run '^$$' -bench '^BenchmarkAsyncShares$$' -benchtime 1x .

# Three regions, a redis-server each (started by the benchmark) and two
# async instances a region, 100 ms links between them: the global limit
# per window at steady state, while demand moves, during a partition and
# after it, and a check's latency against the same servers, links and
# instances without regions, in interleaved rounds (bench/regions_test.go,
# docs/benchmarks.md#regions). About two minutes.
.PHONY: bench-regions

bench-regions:
	cd bench && BOUNCER_REQUIRE_REDIS=1 $(GO) test -run '^$$' -bench '^BenchmarkRegions$$' -benchtime 1x .

# The rate limit services side by side over gRPC: bouncer serve,
# envoyproxy/ratelimit on Redis and gubernator in memory (bench/rls_test.go;
# the first run builds the references, which takes a few minutes).
.PHONY: bench-rls

bench-rls:
	bash scripts/with-redis.sh bash scripts/bench-rls.sh

# The HTTP middleware (httplimit over memstore) beside go-chi/httprate,
# tollbooth, ulule/limiter's and sethvargo/go-limiter's, in process and over
# loopback, in rounds (scripts/bench-middleware.sh).
.PHONY: bench-middleware

bench-middleware:
	bash scripts/bench-middleware.sh

# The gateway (on the memory store and on Redis) beside a bare
# httputil.ReverseProxy and Caddy's reverse_proxy, over loopback at 1 and
# 64 callers, in rounds (scripts/bench-gateway.sh).
.PHONY: bench-gateway

bench-gateway:
	bash scripts/with-redis.sh bash scripts/bench-gateway.sh
