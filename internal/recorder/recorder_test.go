package recorder_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/bouncerhq/bouncer/internal/recorder"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		name  string
		serve func(w http.ResponseWriter)
		want  int
		bytes int64
	}{
		{"nothing written", func(w http.ResponseWriter) {}, 0, 0},
		{"body only", func(w http.ResponseWriter) { w.Write([]byte("hello")) }, http.StatusOK, 5},
		{"status then body", func(w http.ResponseWriter) { w.WriteHeader(http.StatusBadGateway); w.Write([]byte("no")) }, http.StatusBadGateway, 2},
		{"informational then final", func(w http.ResponseWriter) { w.WriteHeader(http.StatusEarlyHints); w.WriteHeader(http.StatusCreated) }, http.StatusCreated, 0},
		{"the first final status", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK)
			w.WriteHeader(http.StatusInternalServerError)
		}, http.StatusOK, 0},
		// An upgrade's answer is its 101: the connection is hijacked after.
		{"switching protocols", func(w http.ResponseWriter) { w.WriteHeader(http.StatusSwitchingProtocols) }, http.StatusSwitchingProtocols, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &recorder.Writer{ResponseWriter: httptest.NewRecorder()}
			tt.serve(w)
			if w.Status != tt.want || w.Bytes != tt.bytes {
				t.Errorf("got status %d, %d bytes; want %d, %d", w.Status, w.Bytes, tt.want, tt.bytes)
			}
		})
	}
}

// A handler that streams asserts http.Flusher, or uses
// http.ResponseController, and either reaches the connection.
func TestFlush(t *testing.T) {
	for _, how := range []string{"http.Flusher", "http.ResponseController"} {
		t.Run(how, func(t *testing.T) {
			rec := httptest.NewRecorder()
			var w http.ResponseWriter = &recorder.Writer{ResponseWriter: rec}
			w.Write([]byte("part"))
			if how == "http.Flusher" {
				f, ok := w.(http.Flusher)
				if !ok {
					t.Fatal("the writer is no http.Flusher")
				}
				f.Flush()
			} else if err := http.NewResponseController(w).Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if !rec.Flushed {
				t.Error("got no flush of the underlying writer, want one")
			}
		})
	}
}
