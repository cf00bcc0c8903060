// Package recorder records what a handler answers, for the edges that act
// on it once the handler returns (httplimit and the gateway: refunds on a
// 5xx, usage from the response, access logs).
package recorder

import "net/http"

// Writer is an http.ResponseWriter that records the status and the body's
// size of an answer. Status is the final status: the first of 200 or more,
// or 101 Switching Protocols (an upgrade such as a WebSocket, after which
// the connection is hijacked and nothing more is written); 0 until a
// status or a body is written, and 200 once a body is written without
// one. Flush flushes for a handler that asserts http.Flusher, and Unwrap
// lets http.ResponseController reach the connection (flushes for
// streaming and gRPC, hijacking for upgrades). A Writer is used by one
// handler at a time, as its http.ResponseWriter is.
type Writer struct {
	http.ResponseWriter
	Status int
	Bytes  int64 // the body's bytes written
}

// WriteHeader records code and writes it.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records a 200 if no status was written, and the bytes written.
func (w *Writer) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.Bytes += int64(n)
	return n, err
}

// Flush sends what was written so far, for a handler that streams and
// asserts http.Flusher rather than using http.ResponseController.
func (w *Writer) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
