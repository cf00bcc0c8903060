package transcode

import (
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// codeTable maps each gRPC code to the "error" of the JSON answer (the
// code's canonical name in lower case) and its HTTP status, as
// grpc-gateway does. Codes outside the table are unknown.
var codeTable = [...]struct {
	name   string
	status int
}{
	codes.OK:                 {"ok", http.StatusOK},
	codes.Canceled:           {"cancelled", 499}, // the client closed the request
	codes.Unknown:            {"unknown", http.StatusInternalServerError},
	codes.InvalidArgument:    {"invalid_argument", http.StatusBadRequest},
	codes.DeadlineExceeded:   {"deadline_exceeded", http.StatusGatewayTimeout},
	codes.NotFound:           {"not_found", http.StatusNotFound},
	codes.AlreadyExists:      {"already_exists", http.StatusConflict},
	codes.PermissionDenied:   {"permission_denied", http.StatusForbidden},
	codes.ResourceExhausted:  {"resource_exhausted", http.StatusTooManyRequests},
	codes.FailedPrecondition: {"failed_precondition", http.StatusBadRequest},
	codes.Aborted:            {"aborted", http.StatusConflict},
	codes.OutOfRange:         {"out_of_range", http.StatusBadRequest},
	codes.Unimplemented:      {"unimplemented", http.StatusNotImplemented},
	codes.Internal:           {"internal", http.StatusInternalServerError},
	codes.Unavailable:        {"unavailable", http.StatusServiceUnavailable},
	codes.DataLoss:           {"data_loss", http.StatusInternalServerError},
	codes.Unauthenticated:    {"unauthenticated", http.StatusUnauthorized},
}

// codeInfo returns the name and HTTP status of c.
func codeInfo(c codes.Code) (name string, httpStatus int) {
	if int(c) >= len(codeTable) {
		c = codes.Unknown
	}
	return codeTable[c].name, codeTable[c].status
}

// errorBody is the JSON of every answer that is not a success.
type errorBody struct {
	Error   string            `json:"error"`
	Message string            `json:"message"`
	Details []json.RawMessage `json:"details"`
}

// writeStatus answers st with the HTTP status of its code.
func (h *Handler) writeStatus(w http.ResponseWriter, r *http.Request, st *status.Status) {
	_, httpStatus := codeInfo(st.Code())
	h.writeError(w, r, httpStatus, st)
}

// writeError answers st with httpStatus: the JSON errorBody, with
// st's details, and Retry-After from a RetryInfo among them.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, httpStatus int, st *status.Status) {
	name, _ := codeInfo(st.Code())
	body := errorBody{Error: name, Message: st.Message(), Details: []json.RawMessage{}}
	for _, d := range st.Proto().GetDetails() {
		body.Details = append(body.Details, h.detailJSON(d))
		if st.Code() == codes.ResourceExhausted && d.MessageIs((*errdetails.RetryInfo)(nil)) {
			var ri errdetails.RetryInfo
			if d.UnmarshalTo(&ri) == nil && ri.GetRetryDelay() != nil {
				w.Header().Set("Retry-After", retryAfter(ri.GetRetryDelay().AsDuration()))
			}
		}
	}
	b, _ := json.Marshal(body) // cannot fail: the details are JSON from detailJSON
	if httpStatus >= 500 {
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "transcode: call failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", name), slog.String("message", st.Message()))
	}
	writeJSON(w, httpStatus, b)
}

// detailJSON is a status detail as protojson writes an Any, or, when its
// type is in neither the descriptor set nor the program, its type URL
// and bytes in base64.
func (h *Handler) detailJSON(d *anypb.Any) json.RawMessage {
	if b, err := (protojson.MarshalOptions{Resolver: h.types}).Marshal(d); err == nil {
		return b
	}
	b, _ := json.Marshal(struct {
		Type  string `json:"@type"`
		Value string `json:"value"`
	}{d.GetTypeUrl(), base64.StdEncoding.EncodeToString(d.GetValue())})
	return b
}

// retryAfter is d in whole seconds, rounded up, for Retry-After.
func retryAfter(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}

func writeJSON(w http.ResponseWriter, httpStatus int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(httpStatus)
	w.Write(body)
}
