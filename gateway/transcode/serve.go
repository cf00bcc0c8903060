package transcode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// maxStreamBytes bounds the JSON array a server-streaming call is
// collected into.
const maxStreamBytes = 16 << 20

// httpError is a request this package refuses before any call.
type httpError struct {
	status int
	code   codes.Code
	msg    string
}

func badRequest(format string, args ...any) *httpError {
	return &httpError{http.StatusBadRequest, codes.InvalidArgument, "transcode: " + fmt.Sprintf(format, args...)}
}

// ServeHTTP routes r to the first binding whose template matches its
// path and whose method is r's, builds the request message from the
// path, the query and the body, makes the call and writes its answer:
// the response message in JSON, or the error JSON of its status.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt, values, allow, err := h.lookup(r.Method, splitPath(r.URL.EscapedPath()))
	switch {
	case err != nil:
		h.refuse(w, r, badRequest("%v", err))
	case rt != nil:
		h.serve(w, r, rt, values)
	case len(allow) > 0:
		w.Header().Set("Allow", strings.Join(allow, ", "))
		h.refuse(w, r, &httpError{http.StatusMethodNotAllowed, codes.Unimplemented, "transcode: method " + r.Method + " not allowed"})
	default:
		h.refuse(w, r, &httpError{http.StatusNotFound, codes.NotFound, "transcode: no binding for " + r.URL.Path})
	}
}

// lookup returns the first route of method whose template matches path,
// with the values of its variables; else the sorted methods of the
// routes whose templates match.
func (h *Handler) lookup(method string, path []string) (rt *route, values, allow []string, err error) {
	if path == nil { // not a path: OPTIONS *, or a handler called by hand
		return nil, nil, nil, nil
	}
	for _, rt := range h.routes {
		values, ok, err := rt.tmpl.match(path)
		switch {
		case !ok && err == nil:
		case rt.HTTPMethod != method:
			allow = append(allow, rt.HTTPMethod)
		default:
			return rt, values, nil, err
		}
	}
	slices.Sort(allow)
	return nil, nil, slices.Compact(allow), nil
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, e *httpError) {
	h.writeError(w, r, e.status, status.New(e.code, e.msg))
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, rt *route, values []string) {
	if rt.method.IsStreamingClient() {
		h.refuse(w, r, &httpError{http.StatusNotImplemented, codes.Unimplemented,
			"transcode: " + rt.GRPCMethod + " is client- or bidi-streaming, which is not transcoded"})
		return
	}
	req := dynamicpb.NewMessage(rt.method.Input())
	if e := h.decode(w, r, rt, values, req); e != nil {
		h.refuse(w, r, e)
		return
	}
	md, err := outgoingMetadata(r.Header)
	if err != nil {
		h.refuse(w, r, badRequest("%v", err))
		return
	}
	ctx := r.Context()
	if h.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	ctx = metadata.NewOutgoingContext(ctx, md)

	var body []byte
	var header metadata.MD
	if rt.method.IsStreamingServer() {
		body, header, err = h.collect(ctx, rt, req)
	} else {
		body, header, err = h.invoke(ctx, rt, req)
	}
	setResponseMetadata(w.Header(), header)
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		h.writeStatus(w, r, st)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// decode sets req from the body (parsed first), the query, then the path
// variables, which win over what the body says.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, rt *route, values []string, req *dynamicpb.Message) *httpError {
	if rt.body != "" {
		body, e := h.readBody(w, r)
		if e != nil {
			return e
		}
		if len(body) > 0 {
			if err := h.setBody(rt, req, body); err != nil {
				return badRequest("body: %v", err)
			}
		}
	}
	if err := setQuery(rt, req, r.URL.RawQuery); err != nil {
		return badRequest("query: %v", err)
	}
	for i, fds := range rt.vars {
		if err := setField(req, fds, values[i], true); err != nil {
			return badRequest("path: %v", err)
		}
	}
	return nil
}

// readBody reads at most maxBody bytes of JSON. An empty body (or only
// white space) is no body, whatever its Content-Type; any other must say
// JSON, so that a browser cannot send one cross-site without a CORS
// preflight (text/plain and form types are "simple" requests).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *httpError) {
	tooLarge := func() *httpError {
		return &httpError{http.StatusRequestEntityTooLarge, codes.ResourceExhausted,
			fmt.Sprintf("transcode: the body is larger than %d bytes", h.maxBody)}
	}
	if r.ContentLength > h.maxBody {
		return nil, tooLarge()
	}
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, tooLarge()
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		// The client's slowness, not a malformed request.
		return nil, &httpError{http.StatusRequestTimeout, codes.DeadlineExceeded, "transcode: the request's body came too slowly"}
	}
	if err != nil {
		return nil, badRequest("reading the body: %v", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && !isJSON(r.Header.Get("Content-Type")) {
		return nil, &httpError{http.StatusUnsupportedMediaType, codes.InvalidArgument,
			fmt.Sprintf("transcode: Content-Type %q is not JSON (application/json)", r.Header.Get("Content-Type"))}
	}
	return b, nil
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// setBody parses the body into req (body "*") or into its body field.
// Unknown fields are errors.
func (h *Handler) setBody(rt *route, req *dynamicpb.Message, body []byte) error {
	if !json.Valid(body) {
		return errors.New("malformed JSON")
	}
	opts := protojson.UnmarshalOptions{Resolver: h.types}
	if rt.bodyField == nil {
		return opts.Unmarshal(body, req)
	}
	// The body is the value of one field, whatever its type: parse it as
	// the only member of a request message. json.Valid made sure it is one
	// value, which cannot reach other fields.
	name, _ := json.Marshal(rt.bodyField.JSONName())
	wrapped := make([]byte, 0, len(name)+len(body)+3)
	wrapped = append(append(append(append(wrapped, '{'), name...), ':'), body...)
	wrapped = append(wrapped, '}')
	tmp := dynamicpb.NewMessage(req.Descriptor())
	if err := opts.Unmarshal(wrapped, tmp); err != nil {
		return err
	}
	if tmp.Has(rt.bodyField) {
		req.Set(rt.bodyField, tmp.Get(rt.bodyField))
	}
	return nil
}

// setQuery sets the fields the query names, by field name or JSON name,
// nested with dots, repeated fields by repetition. A parameter that
// names no field, a field of the path or of the body, is an error.
func setQuery(rt *route, req *dynamicpb.Message, rawQuery string) error {
	if rawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(q)) {
		if rt.body == "*" {
			return fmt.Errorf("parameter %q: the body carries every field", key)
		}
		fds, err := fieldPath(req.Descriptor(), strings.Split(key, "."), true)
		if err != nil {
			return fmt.Errorf("parameter %q: %w", key, err)
		}
		if fds[0] == rt.bodyField {
			return fmt.Errorf("parameter %q: %s is carried by the body", key, rt.body)
		}
		for _, v := range rt.vars {
			if slices.Equal(v, fds) {
				return fmt.Errorf("parameter %q: the field is bound by the path", key)
			}
		}
		for _, v := range q[key] {
			if err := setField(req, fds, v, false); err != nil {
				return fmt.Errorf("parameter %q: %w", key, err)
			}
		}
	}
	return nil
}

// invoke makes a unary call and returns its answer's JSON and header.
func (h *Handler) invoke(ctx context.Context, rt *route, req *dynamicpb.Message) ([]byte, metadata.MD, error) {
	resp := dynamicpb.NewMessage(rt.method.Output())
	var header metadata.MD
	if err := h.conn.Invoke(ctx, rt.GRPCMethod, req, resp, grpc.Header(&header)); err != nil {
		return nil, header, err
	}
	b, err := h.marshal(rt, resp)
	return b, header, err
}

// collect makes a server-streaming call and returns its messages as one
// JSON array, once the stream has ended well; an error ends it.
func (h *Handler) collect(ctx context.Context, rt *route, req *dynamicpb.Message) ([]byte, metadata.MD, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := h.conn.NewStream(ctx, &grpc.StreamDesc{StreamName: string(rt.method.Name()), ServerStreams: true}, rt.GRPCMethod)
	if err != nil {
		return nil, nil, err
	}
	// io.EOF from SendMsg means the stream has ended; RecvMsg says how.
	if err := s.SendMsg(req); err != nil && err != io.EOF {
		return nil, nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, nil, err
	}
	header := func() metadata.MD {
		md, _ := s.Header() // the stream has ended or sent a message: no wait
		return md
	}
	out := []byte{'['}
	for n := 0; ; n++ {
		m := dynamicpb.NewMessage(rt.method.Output())
		if err := s.RecvMsg(m); err == io.EOF {
			return append(out, ']'), header(), nil
		} else if err != nil {
			return nil, header(), err
		}
		b, err := h.marshal(rt, m)
		if err != nil {
			return nil, header(), err
		}
		if n > 0 {
			out = append(out, ',')
		}
		if out = append(out, b...); len(out) > maxStreamBytes {
			return nil, header(), status.Errorf(codes.Internal, "transcode: the answers of %s exceed %d bytes", rt.GRPCMethod, maxStreamBytes)
		}
	}
}

// marshal writes a response message, or its response_body field, in
// JSON.
func (h *Handler) marshal(rt *route, m *dynamicpb.Message) ([]byte, error) {
	opts := protojson.MarshalOptions{Resolver: h.types}
	b, err := h.marshalField(opts, rt.respField, m)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "transcode: encoding the answer of %s: %v", rt.GRPCMethod, err)
	}
	return b, nil
}

func (h *Handler) marshalField(opts protojson.MarshalOptions, fd protoreflect.FieldDescriptor, m *dynamicpb.Message) ([]byte, error) {
	switch {
	case fd == nil:
		return opts.Marshal(m)
	case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
		return opts.Marshal(m.Get(fd).Message().Interface())
	}
	// A scalar, list or map: the JSON of a message holding only it, or,
	// unset, the default JSON of every field, of which it is one.
	tmp := dynamicpb.NewMessage(m.Descriptor())
	if m.Has(fd) {
		tmp.Set(fd, m.Get(fd))
	} else {
		opts.EmitUnpopulated = true
	}
	b, err := opts.Marshal(tmp)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	return fields[fd.JSONName()], nil
}
