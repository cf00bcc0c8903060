package main

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bouncer serve --store redis://host:port/2 counts in database 2 of a
// private server, and writes nothing in database 0, as redis-cli reads
// them (-n, SELECT on its connection; DBSIZE).
func TestServeRedisDatabase(t *testing.T) {
	r := startRedisProc(t, freePort(t))
	domain := "db"
	ts := startTest(t, map[string]string{
		"db.yaml": "domain: " + domain + "\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 2}\n",
	}, func(c *serveConfig) { c.store = "redis://" + r.addr() + "/2" })
	redisConnected(t, ts)
	for i, want := range []string{"OK: OK/1", "OK: OK/0", "OVER_LIMIT: OVER_LIMIT/0"} {
		if got := summary(ts.check(t, request(domain, desc("a=x")))); got != want {
			t.Fatalf("call %d: got %q, want %q", i, got, want)
		}
	}
	for db, positive := range map[int]bool{2: true, 0: false} {
		n := dbSize(t, r, db)
		if (n > 0) != positive {
			t.Errorf("database %d holds %d keys after the checks; want them in database 2 only", db, n)
		}
	}
}

// dbSize is DBSIZE of database db of r, read with redis-cli.
func dbSize(t *testing.T, r *redisProc, db int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(r.port), "-n", strconv.Itoa(db), "dbsize").CombinedOutput()
	n, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || perr != nil {
		t.Fatalf("redis-cli -n %d dbsize: %q, %v", db, out, err)
	}
	return n
}
