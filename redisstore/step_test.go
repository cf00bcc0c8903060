package redisstore_test

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer/redisstore"
)

// The scripts' S.step (store.lua) finds a TTL step from math.frexp's exponent and
// corrects it against the comparison that defines it; it must give
// exactly the step of that definition (the least 1000 × 2^k with
// step × 16 > ems, found by doubling from 1000), which the TTLs written
// by earlier versions of the script followed: a step one power off would
// let a check skip a TTL extension its state needs. Redis's own Lua runs
// both over the powers' boundaries, just below and above each, and over a
// spread of other values, integer and not.
func TestScriptStepMatchesDefinition(t *testing.T) {
	c := newClient(t, addrs(t, "BOUNCER_REDIS_ADDR"))
	script := redisstore.ComposeLua(`
local function want(ems)
	local step = 1000
	while step * 16 <= ems do
		step = step * 2
	end
	return step
end
local bad, n = {}, 0
local function try(ems)
	n = n + 1
	if ems >= 0 and S.step(ems) ~= want(ems) and #bad < 10 then
		bad[#bad + 1] = string.format('%.17g: %.17g, want %.17g', ems, S.step(ems), want(ems))
	end
end
for k = 0, 45 do
	local b = 16000 * 2 ^ k
	for _, d in ipairs({ -1, -0.5, -1e-6, 0, 1e-6, 0.5, 1 }) do
		try(b + d)
		try(b * (1 + d * 1e-12))
	end
end
local x = 0.25
while x < 2 ^ 52 do
	try(x)
	try(math.floor(x))
	x = x * 1.0137
end
bad[#bad + 1] = tostring(n)
return bad
`)
	res, err := c.Do(context.Background(), c.B().Eval().Script(script).Numkeys(0).Arg("").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 || res[len(res)-1] == "0" {
		t.Fatalf("no value tried: %q", res)
	}
	for _, m := range res[:len(res)-1] {
		t.Errorf("S.step(%s", m)
	}
	t.Logf("%s values tried", res[len(res)-1])
}
