package route_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/bouncerhq/bouncer/gateway/route"
)

// The admin API's /v1/upstreams writes UpstreamHealth: snake_case names,
// and the ejection's end only while there is one.
func TestUpstreamHealthJSON(t *testing.T) {
	until := time.Date(2026, 12, 2, 17, 0, 30, 0, time.UTC)
	for _, tt := range []struct {
		h    route.UpstreamHealth
		want string
	}{
		{route.UpstreamHealth{Route: "api", Upstream: "http://a:80", Healthy: true},
			`{"route":"api","upstream":"http://a:80","healthy":true}`},
		{route.UpstreamHealth{Route: "api", Upstream: "http://b:80", EjectedUntil: until},
			`{"route":"api","upstream":"http://b:80","healthy":false,"ejected_until":"2026-12-02T17:00:30Z"}`},
	} {
		b, err := json.Marshal(tt.h)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("got %s, want %s", b, tt.want)
		}
	}
}
