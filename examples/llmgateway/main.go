// Llmgateway is the upstream of the LLM gateway example (gateway.yaml): a
// fake language model on 127.0.0.1:9096 that answers POST
// /v1/completions with as many tokens as the request's max_tokens asks
// (16 if it asks none), and reports the tokens it used, as LLM APIs do:
// the prompt's words as input tokens in the X-Usage-Input-Tokens header,
// and its output tokens in the X-Usage-Output-Tokens header, or, for a
// stream, in the X-Usage-Output-Tokens trailer once the stream ends. The
// gateway charges what it reports, at the prices of the request's model
// ("small" or "large").
//
//	go run ./examples/llmgateway
//	go run ./cmd/bouncer gateway --config examples/llmgateway/gateway.yaml
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9096", "the fake model's address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("fake model on %s. With the gateway running, try:\n\n", ln.Addr())
	fmt.Printf("  curl -si -H 'X-API-Key: demo-alice-key' -d '{\"model\": \"small\", \"prompt\": \"hello\", \"max_tokens\": 100}' localhost:8096/v1/completions\n")
	fmt.Printf("  curl -si -H 'X-API-Key: demo-alice-key' -H 'X-Estimated-Tokens: 100' -d '{\"model\": \"large\", \"max_tokens\": 1500, \"stream\": true}' localhost:8096/v1/completions\n\n")
	srv := &http.Server{Handler: model(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt)
		<-stop
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// completion is the body of POST /v1/completions.
type completion struct {
	Model     string `json:"model"`
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
}

// maxTokens bounds a completion, so that the fake model stays cheap.
const maxTokens = 100_000

// model is the fake model: a token is the word "tok".
func model() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		c := completion{MaxTokens: 16}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			http.Error(w, `{"error":"invalid_request","message":"the body is not a completion request"}`, http.StatusBadRequest)
			return
		}
		if c.MaxTokens < 0 || c.MaxTokens > maxTokens {
			http.Error(w, fmt.Sprintf(`{"error":"invalid_request","message":"max_tokens must be in [0, %d]"}`, maxTokens), http.StatusBadRequest)
			return
		}
		input := max(len(strings.Fields(c.Prompt)), 1)
		used := strconv.Itoa(c.MaxTokens)
		w.Header().Set("X-Usage-Input-Tokens", strconv.Itoa(input))
		if !c.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Usage-Output-Tokens", used)
			json.NewEncoder(w).Encode(map[string]any{
				"model": c.Model,
				"text":  strings.TrimSpace(strings.Repeat("tok ", c.MaxTokens)),
				"usage": map[string]int{"prompt_tokens": input, "completion_tokens": c.MaxTokens},
			})
			return
		}
		// A stream: server-sent events of up to 100 tokens each, then the
		// output tokens in the trailer, the only place they are known.
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Trailer", "X-Usage-Output-Tokens")
		rc := http.NewResponseController(w)
		for left := c.MaxTokens; left > 0; left -= 100 {
			fmt.Fprintf(w, "data: %s\n\n", strings.TrimSpace(strings.Repeat("tok ", min(left, 100))))
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
		w.Header().Set("X-Usage-Output-Tokens", used)
	})
	return mux
}
