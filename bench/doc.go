// Package bench measures Bouncer's in-memory store side by side with the
// peer libraries, in one run, so that the ratios in docs/benchmarks.md
// compare numbers taken on the same machine at the same moment.
//
// It is a module of its own so that the peers never enter Bouncer's
// go.mod. It holds only benchmarks, a quick test that each peer is
// configured as intended, the packages that run rate limit services for
// BenchmarkRLS (below), and ratios.go, which turns the output of
// go test -bench into the tables of docs/benchmarks.md:
//
//	go test -run '^$' -bench . -benchtime 1s -count 3 ./... | tee out.txt
//	go run ratios.go < out.txt
//
// # Redis
//
// BenchmarkRedisCheck and BenchmarkRedisBytesPerKey measure Bouncer's
// Redis store (redisstore, GCRA) beside go-redis/redis_rate,
// ulule/limiter's Redis store and throttled's go-redis v9 store, on a
// standalone server and on a Cluster of three masters: decisions per
// second and p50/p99/p99.9 latency at 1, 64 and 256 concurrent callers,
// and Redis memory per key after 200 000 keys. TestRedisImplementations
// checks that each is configured as intended. They need the test servers
// of scripts/redis-up.sh, and skip without them (fail instead when
// BOUNCER_REQUIRE_REDIS is set); the memory benchmark starts servers of its
// own with the redis-server on PATH. From the repository root:
//
//	bash scripts/redis-up.sh && . .redis/env
//	cd bench && go test -run '^$' -bench Redis -benchtime 2s ./... | tee redis-out.txt
//	go run ratios.go < redis-out.txt
//
// Under -benchtime 1x (a smoke run, as in CI) the memory benchmark writes
// 10 000 keys instead of 200 000. Under -short (make test's bench-check)
// Bouncer's Redis stores wait 10 s for a reply instead of their default
// 50 ms: a smoke run beside the rest of the suite on a busy machine may
// hold a call past the default, whose decision by policy would fail the
// run; measured runs are never -short, and run at the defaults.
//
// # HTTP middleware
//
// BenchmarkMiddleware measures httplimit over memstore beside
// go-chi/httprate, tollbooth, ulule/limiter's stdlib middleware and
// sethvargo/go-limiter's httplimit, each limiting per client address, in
// process (1 and 10 000 addresses, serial and parallel) against the bare
// handler; BenchmarkMiddlewareLoopback the latency they add behind a real
// loopback listener at 1 and 64 callers. TestMiddlewareImplementations
// checks that each limits per address as intended. From the repository
// root: make bench-middleware (scripts/bench-middleware.sh, three rounds).
//
// # Rate limit services
//
// BenchmarkRLS measures `bouncer serve` beside envoyproxy/ratelimit (on
// the standalone Redis) and gubernator (one node, in memory) over gRPC:
// calls per second and p50/p99/p99.9 latency of calls checking 1 or 3
// descriptors, from 1 or 64 streams. Package refsvc builds and starts the
// services, each a process of its own on free loopback ports, at the
// versions go.mod pins; package rlsload is the load generator, and
// cmd/rlsload its command line. TestRLSReferences checks that the
// references count as the benchmark assumes; it needs BOUNCER_REDIS_ADDR,
// as the Redis tests do. The first run builds the references, which takes
// minutes; later runs reuse the binaries (under the user's cache
// directory). From the repository root:
//
//	make bench-rls
//	cd bench && go run ./cmd/rlsload -server envoy-ratelimit -streams 64 -duration 10s
//
// BenchmarkHybridPeers sets the hybrid limiter's async mode beside
// gubernator's GLOBAL behaviour, its peer: three `bouncer serve --mode
// async` on the standalone Redis and a gubernator cluster of three nodes,
// each trio loaded round-robin (rlsload.Config.Addrs) with BenchmarkRLS's
// workload from 64 streams. A gubernator cluster on one machine needs
// Linux with user namespaces (see refsvc.Gubernator.StartCluster).
//
// Gubernator's rows, and everything that speaks its API, need a build
// with -tags gubernator (scripts/bench-rls.sh passes it): its Go client
// brings some 300 packages, Kubernetes' and etcd's clients among them,
// that a default build neither downloads nor compiles
// (TestGubernatorTagged checks). Without the tag they skip, and
// rlsload.New and refsvc.Gubernator.Start refuse gubernator, saying so:
//
//	cd bench && go test -tags gubernator -run '^$' -bench 'RLS/server=gubernator' -benchtime 1s
//	cd bench && go run -tags gubernator ./cmd/rlsload -server gubernator -streams 64
package bench
