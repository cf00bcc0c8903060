package transcode

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A route is one binding, ready to serve.
type route struct {
	Binding
	tmpl      *template
	method    protoreflect.MethodDescriptor
	vars      [][]protoreflect.FieldDescriptor // the field of each template variable
	body      string                           // "", "*" or the name of bodyField
	bodyField protoreflect.FieldDescriptor     // nil unless body names a field
	respField protoreflect.FieldDescriptor     // response_body; nil: the whole response
}

// bindMethod returns the routes of md: one per google.api.http rule,
// additional_bindings included, or the default POST /package.Service/Method
// with body "*" when md has no rule.
func bindMethod(md protoreflect.MethodDescriptor) ([]*route, error) {
	grpcMethod := "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	opts := md.Options()
	if opts == nil || !proto.HasExtension(opts, annotations.E_Http) {
		rt, err := newRoute(md, grpcMethod, &annotations.HttpRule{
			Pattern: &annotations.HttpRule_Post{Post: grpcMethod},
			Body:    "*",
		})
		if err != nil {
			return nil, fmt.Errorf("default binding: %w", err)
		}
		return []*route{rt}, nil
	}
	rule := proto.GetExtension(opts, annotations.E_Http).(*annotations.HttpRule)
	rt, err := newRoute(md, grpcMethod, rule)
	if err != nil {
		return nil, fmt.Errorf("google.api.http: %w", err)
	}
	routes := []*route{rt}
	for i, add := range rule.GetAdditionalBindings() {
		if len(add.GetAdditionalBindings()) > 0 {
			return nil, fmt.Errorf("google.api.http: additional_bindings[%d]: has additional_bindings of its own", i)
		}
		rt, err := newRoute(md, grpcMethod, add)
		if err != nil {
			return nil, fmt.Errorf("google.api.http: additional_bindings[%d]: %w", i, err)
		}
		routes = append(routes, rt)
	}
	return routes, nil
}

func newRoute(md protoreflect.MethodDescriptor, grpcMethod string, rule *annotations.HttpRule) (*route, error) {
	var method, path string
	switch p := rule.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		method, path = http.MethodGet, p.Get
	case *annotations.HttpRule_Put:
		method, path = http.MethodPut, p.Put
	case *annotations.HttpRule_Post:
		method, path = http.MethodPost, p.Post
	case *annotations.HttpRule_Delete:
		method, path = http.MethodDelete, p.Delete
	case *annotations.HttpRule_Patch:
		method, path = http.MethodPatch, p.Patch
	case *annotations.HttpRule_Custom:
		method, path = p.Custom.GetKind(), p.Custom.GetPath()
		if !isToken(method) {
			return nil, fmt.Errorf("custom kind %q is not an HTTP method", method)
		}
	default:
		return nil, errors.New("no pattern (get, put, post, delete, patch or custom)")
	}
	tmpl, err := parseTemplate(path)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", path, err)
	}
	rt := &route{Binding: Binding{HTTPMethod: method, Pattern: path, GRPCMethod: grpcMethod}, tmpl: tmpl, method: md}
	for _, v := range tmpl.vars {
		fds, err := fieldPath(md.Input(), v.field, false)
		if err == nil && fds[len(fds)-1].IsList() {
			err = errors.New("a repeated field cannot be bound by the path")
		}
		if err != nil {
			return nil, fmt.Errorf("path %q: variable %s: %w", path, strings.Join(v.field, "."), err)
		}
		rt.vars = append(rt.vars, fds)
	}

	switch rt.body = rule.GetBody(); rt.body {
	case "":
	case "*":
	default:
		rt.bodyField = md.Input().Fields().ByName(protoreflect.Name(rt.body))
		if rt.bodyField == nil {
			return nil, fmt.Errorf("body %q: %s has no such field", rt.body, md.Input().FullName())
		}
	}
	if rt.body != "" && method == http.MethodGet {
		return nil, fmt.Errorf("body %q: a GET has no body", rt.body)
	}
	if rb := rule.GetResponseBody(); rb != "" {
		rt.respField = md.Output().Fields().ByName(protoreflect.Name(rb))
		if rt.respField == nil {
			return nil, fmt.Errorf("response_body %q: %s has no such field", rb, md.Output().FullName())
		}
	}
	return rt, nil
}

// checkConflicts refuses two routes of one HTTP method whose templates
// match the same paths.
func checkConflicts(routes []*route) error {
	seen := make(map[string]*route, len(routes))
	for _, rt := range routes {
		key := rt.HTTPMethod + " " + rt.tmpl.shape()
		if prev, ok := seen[key]; ok {
			return fmt.Errorf("%s %s (%s) and %s %s (%s) match the same requests",
				prev.HTTPMethod, prev.Pattern, prev.GRPCMethod, rt.HTTPMethod, rt.Pattern, rt.GRPCMethod)
		}
		seen[key] = rt
	}
	return nil
}

// isToken reports whether s is an HTTP token (RFC 9110, 5.6.2), the
// syntax of a method.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
