// Command rlsload puts a closed-loop load on a rate limit service over
// gRPC and prints calls per second, latency percentiles and how many calls
// were allowed, denied and failed (see package rlsload).
//
// Against a server that is already running:
//
//	go run ./cmd/rlsload -addr 127.0.0.1:8081 -streams 64 -duration 10s
//	go run -tags gubernator ./cmd/rlsload -addr 127.0.0.1:1051 -protocol gubernator -limit 1000000
//
// Or it starts a reference server itself, configured with the limit the
// calls expect (-limit per -unit on descriptor key user_id of -domain),
// and stops it at the end:
//
//	go run ./cmd/rlsload -server envoy-ratelimit -redis 127.0.0.1:16379 -streams 64
//	go run -tags gubernator ./cmd/rlsload -server gubernator -streams 64 -descriptors 3
//	go run ./cmd/rlsload -server bouncer -server-args='--store memory'
//
// The calls are made with rlsload's own lean HTTP/2 client, which costs
// a fraction of grpc-go's CPU per call; -client grpc makes them with
// grpc-go instead.
//
// Gubernator's protocol and server need a build with -tags gubernator,
// which brings in gubernator's Go module; without it, asking for either
// fails.
//
// Run it from the bench module (cd bench). -redis defaults to
// $BOUNCER_REDIS_ADDR. It exits 1 when the run failed as a workload (no
// call made, every call failed, too few keys), or when -strict is set and
// any call failed or was denied.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/bouncerhq/bouncer/bench/refsvc"
	"github.com/bouncerhq/bouncer/bench/rlsload"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rlsload:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr        = flag.String("addr", "", "gRPC address of a running server (or use -server)")
		protocol    = flag.String("protocol", "", "rls or gubernator (default: gubernator for -server gubernator, else rls)")
		server      = flag.String("server", "", "start this reference server: envoy-ratelimit, gubernator or bouncer")
		serverArgs  = flag.String("server-args", "", "with -server bouncer: arguments added after serve --config ... --grpc-addr ...")
		redisAddr   = flag.String("redis", os.Getenv("BOUNCER_REDIS_ADDR"), "with -server envoy-ratelimit: Redis address(es), comma-separated")
		cluster     = flag.Bool("cluster", false, "with -server envoy-ratelimit: -redis is a Redis Cluster")
		streams     = flag.Int("streams", 64, "concurrent callers")
		conns       = flag.Int("conns", 4, "gRPC connections the callers share")
		client      = flag.String("client", "lean", "gRPC client: lean (rlsload's own HTTP/2 client) or grpc (grpc-go)")
		keys        = flag.Int("keys", 10_000, "distinct descriptor values")
		descriptors = flag.Int("descriptors", 1, "descriptors (keys) per call")
		duration    = flag.Duration("duration", 10*time.Second, "how long to run (unless -calls)")
		calls       = flag.Int64("calls", 0, "stop after this many calls in all (overrides -duration)")
		domain      = flag.String("domain", "bench", "RLS domain")
		limit       = flag.Int64("limit", 1_000_000, "requests per unit per key: told to gubernator, configured in a started server, expected in RLS answers (0: not checked)")
		unit        = flag.String("unit", "second", "the limit's unit: second, minute, hour or day")
		strict      = flag.Bool("strict", false, "exit 1 if any call failed or was denied")
		cpuProfile  = flag.String("cpuprofile", "", "write the load generator's CPU profile of the run to this file")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	period, ok := refsvc.UnitPeriod(*unit)
	if !ok {
		return fmt.Errorf("unknown -unit %q", *unit)
	}
	if *protocol == "" {
		*protocol = "rls"
		if *server == "gubernator" {
			*protocol = "gubernator"
		}
	}
	proto, err := rlsload.ParseProtocol(*protocol)
	if err != nil {
		return err
	}
	cli, err := rlsload.ParseClient(*client)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *server != "" {
		if *addr != "" {
			return errors.New("give -addr or -server, not both")
		}
		config := refsvc.LimitConfig(*domain, "user_id", *limit, *unit)
		var s *refsvc.Server
		switch *server {
		case "envoy-ratelimit":
			if *redisAddr == "" {
				return errors.New("-server envoy-ratelimit needs -redis (or BOUNCER_REDIS_ADDR)")
			}
			s, err = refsvc.EnvoyRatelimit{RedisAddrs: strings.Split(*redisAddr, ","), Cluster: *cluster, Config: config}.Start(ctx)
		case "gubernator":
			s, err = refsvc.Gubernator{CacheSize: max(*keys, 50_000)}.Start(ctx)
		case "bouncer":
			s, err = refsvc.Bouncer{Config: config, Args: strings.Fields(*serverArgs)}.Start(ctx)
		default:
			return fmt.Errorf("unknown -server %q", *server)
		}
		if err != nil {
			return err
		}
		defer s.Stop()
		*addr = s.Addr
		fmt.Fprintf(os.Stderr, "rlsload: started %s on %s\n", s.Name, s.Addr)
	}
	if *addr == "" {
		return errors.New("give -addr or -server")
	}

	l, err := rlsload.New(rlsload.Config{
		Addr: *addr, Protocol: proto, Client: cli, Conns: *conns,
		Domain: *domain, Keys: *keys, Descriptors: *descriptors,
		Limit: *limit, Period: period,
	})
	if err != nil {
		return err
	}
	defer l.Close()
	spec := rlsload.Spec{Streams: *streams, Calls: *calls, Duration: *duration}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	r, err := l.Run(ctx, spec)
	fmt.Println(r)
	if err != nil {
		return err
	}
	if *strict && (r.Failed > 0 || r.Denied > 0) {
		return fmt.Errorf("%d calls failed and %d were denied", r.Failed, r.Denied)
	}
	return nil
}
