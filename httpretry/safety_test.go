package httpretry_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

func TestSafety(t *testing.T) {
	body := make([]byte, 3000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name      string
		method    string
		key       bool // an Idempotency-Key header
		body      bool
		noGetBody bool
		want      int // attempts
	}{
		{"GET", http.MethodGet, false, false, false, 2},
		{"HEAD", http.MethodHead, false, false, false, 2},
		{"OPTIONS", http.MethodOptions, false, false, false, 2},
		{"TRACE", http.MethodTrace, false, false, false, 2},
		{"DELETE", http.MethodDelete, false, false, false, 2},
		{"PUT with a body", http.MethodPut, false, true, false, 2},
		{"POST", http.MethodPost, false, true, false, 1},
		{"PATCH", http.MethodPatch, false, true, false, 1},
		{"POST with Idempotency-Key", http.MethodPost, true, true, false, 2},
		{"PATCH with Idempotency-Key", http.MethodPatch, true, false, false, 2},
		{"PUT with a body and no GetBody", http.MethodPut, false, true, true, 1},
		{"POST with Idempotency-Key and no GetBody", http.MethodPost, true, true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			srv, s := serve(t, reply{status: 503}, ok)
			var sent []byte
			if tc.body {
				sent = body
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL, bytes.NewReader(sent))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.body {
				req.Body, req.GetBody, req.ContentLength = nil, nil, 0
			}
			if tc.noGetBody {
				req.Body, req.GetBody = io.NopCloser(bytes.NewReader(sent)), nil
			}
			if tc.key {
				req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
			}
			status, err := send(newTransport(srv, c), req)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[int]int{1: 503, 2: 200}[tc.want]; status != want {
				t.Errorf("got %d, want %d", status, want)
			}
			got := s.received()
			if len(got) != tc.want {
				t.Fatalf("got %d attempts, want %d", len(got), tc.want)
			}
			for i, b := range got {
				if !bytes.Equal(b, sent) {
					t.Errorf("attempt %d: the server received %d bytes, not the %d sent", i+1, len(b), len(sent))
				}
			}
		})
	}
}
