package rls

import (
	"io"
	"net/http"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxJSONRequest bounds the body of a request to JSON's handler, as a
// gRPC listener bounds a message.
const MaxJSONRequest = 1 << 20

// JSON returns a handler that answers envoyproxy/ratelimit's POST /json
// as that project answers it: a RateLimitRequest in protobuf's JSON form
// in, decided by ShouldRateLimit, the RateLimitResponse in the same form
// out, 200 when OK and 429 when over the limit. A body that does not
// parse, or a request ShouldRateLimit refuses, is a 400 with the status
// text alone.
func (s *Server) JSON() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONRequest))
		var req pb.RateLimitRequest
		if err == nil {
			err = protojson.Unmarshal(body, &req)
		}
		var resp *pb.RateLimitResponse
		if err == nil {
			resp, err = s.ShouldRateLimit(r.Context(), &req)
		}
		if err != nil {
			http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch resp.GetOverallCode() {
		case pb.RateLimitResponse_OVER_LIMIT:
			w.WriteHeader(http.StatusTooManyRequests)
		case pb.RateLimitResponse_UNKNOWN:
			w.WriteHeader(http.StatusInternalServerError)
		}
		w.Write(out)
	})
}
