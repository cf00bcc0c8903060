package transcode

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
)

// TestOutgoingMetadata checks the headers an HTTP client may not be
// able to send through net/http's client as written (TE, Connection).
func TestOutgoingMetadata(t *testing.T) {
	got, err := outgoingMetadata(http.Header{
		"Authorization":       {"Bearer x"},
		"X-Bouncer-User":      {"ann"},
		"X-Bouncer-Roles":     {"admin", "dev"},
		"X-Request-Id":        {"r-1"},
		"X-Bouncer-Hop":       {"named by Connection"},
		"Connection":          {"keep-alive, x-bouncer-hop"},
		"Keep-Alive":          {"timeout=5"},
		"Te":                  {"trailers"},
		"Proxy-Authorization": {"Basic cA=="},
		"Cookie":              {"session=1"},
		"X-Forwarded-For":     {"192.0.2.1"},
		"X-Bouncer-Key-Bin":   {"\xff\x00"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := metadata.MD{
		"authorization":     {"Bearer x"},
		"x-bouncer-user":    {"ann"},
		"x-bouncer-roles":   {"admin", "dev"},
		"x-request-id":      {"r-1"},
		"x-bouncer-key-bin": {"\xff\x00"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, h := range []http.Header{
		{"X-Bouncer-User": {"caf\xc3\xa9"}},
		{"Authorization": {"a\x7f"}},
		{"X-Bouncer-Us!er": {"ann"}},
	} {
		if md, err := outgoingMetadata(h); err == nil {
			t.Errorf("outgoingMetadata(%q) = %v, want an error", h, md)
		}
	}
}

func TestSetResponseMetadata(t *testing.T) {
	h := http.Header{}
	setResponseMetadata(h, metadata.MD{
		"content-type": {"application/grpc"},
		"grpc-status":  {"0"},
		"x-a":          {"1", "2"},
		"x-b-bin":      {"\x00\x01\x02"},
		"bad key":      {"x"},
	})
	want := http.Header{"Grpc-Metadata-X-A": {"1", "2"}, "Grpc-Metadata-X-B-Bin": {"AAEC"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %v, want %v", h, want)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0"},
		{0, "0"},
		{time.Nanosecond, "1"},
		{time.Second, "1"},
		{1200 * time.Millisecond, "2"},
		{time.Hour, "3600"},
	} {
		if got := retryAfter(tt.d); got != tt.want {
			t.Errorf("retryAfter(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
