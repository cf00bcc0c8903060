package transcode_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/bouncerhq/bouncer/gateway/transcode"
)

// withRule is usersFile with the google.api.http rule of the method
// replaced.
func withRule(name string, rule *annotations.HttpRule) *descriptorpb.FileDescriptorProto {
	f := usersFile()
	for _, m := range f.Service[0].Method {
		if m.GetName() == name {
			m.Options = &descriptorpb.MethodOptions{}
			proto.SetExtension(m.Options, annotations.E_Http, rule)
			return f
		}
	}
	panic("no method " + name)
}

func TestNewErrors(t *testing.T) {
	cc, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	garbage := filepath.Join(t.TempDir(), "garbage.pb")
	if err := os.WriteFile(garbage, []byte("not a descriptor set"), 0o644); err != nil {
		t.Fatal(err)
	}
	alone, err := proto.Marshal(&descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{usersFile()}})
	if err != nil {
		t.Fatal(err)
	}
	noImports := filepath.Join(t.TempDir(), "alone.pb")
	if err := os.WriteFile(noImports, alone, 0o644); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) *annotations.HttpRule {
		return &annotations.HttpRule{Pattern: &annotations.HttpRule_Post{Post: path}, Body: body}
	}
	// Every error of a rule names the descriptor set, the file and the method.
	const file, getUser = "test/v1/users.proto", "method test.v1.Users.GetUser"
	for _, tt := range []struct {
		name string
		o    transcode.Options
		want []string // in the error
	}{
		{"no DescriptorSet", transcode.Options{Conn: cc}, []string{"DescriptorSet is required"}},
		{"no Conn", transcode.Options{DescriptorSet: writeSet(t, usersFile())}, []string{"Conn"}},
		{"negative Timeout", transcode.Options{DescriptorSet: writeSet(t, usersFile()), Conn: cc, Timeout: -1}, []string{"Timeout"}},
		{"negative MaxBodyBytes", transcode.Options{DescriptorSet: writeSet(t, usersFile()), Conn: cc, MaxBodyBytes: -1}, []string{"MaxBodyBytes"}},
		{"missing file", transcode.Options{DescriptorSet: filepath.Join(t.TempDir(), "missing.pb"), Conn: cc}, []string{"missing.pb"}},
		{"not a set", transcode.Options{DescriptorSet: garbage, Conn: cc}, []string{"garbage.pb", "FileDescriptorSet"}},
		{"imports missing", transcode.Options{DescriptorSet: noImports, Conn: cc}, []string{"alone.pb", "google/api/annotations.proto"}},
		{"unknown service", transcode.Options{DescriptorSet: writeSet(t, usersFile()), Conn: cc, Services: []string{"test.v1.Nope"}}, []string{"test.v1.Nope"}},
		{"bad template", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", getRule("/v1/users/{id"))), Conn: cc},
			[]string{"set.pb", file, getUser, "/v1/users/{id", "missing }"}},
		{"relative template", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", getRule("v1/users"))), Conn: cc},
			[]string{file, getUser, "must start with /"}},
		{"** not last", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", getRule("/v1/{name=**}/x"))), Conn: cc},
			[]string{file, getUser, `"**" must be the last`}},
		{"unknown path field", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", getRule("/v1/users/{nope}"))), Conn: cc},
			[]string{file, getUser, `no field "nope"`}},
		{"repeated path field", transcode.Options{DescriptorSet: writeSet(t, withRule("ListUsers", getRule("/v1/users/{tags}"))), Conn: cc},
			[]string{"method test.v1.Users.ListUsers", "repeated"}},
		{"message path field", transcode.Options{DescriptorSet: writeSet(t, withRule("ListUsers", getRule("/v1/users/{filter}"))), Conn: cc},
			[]string{"method test.v1.Users.ListUsers", "test.v1.Filter cannot be set from a string"}},
		{"unknown body field", transcode.Options{DescriptorSet: writeSet(t, withRule("CreateUser", post("/v1/users", "nope"))), Conn: cc},
			[]string{"method test.v1.Users.CreateUser", `body "nope"`}},
		{"GET with a body", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", &annotations.HttpRule{
			Pattern: &annotations.HttpRule_Get{Get: "/v1/users/{id}"}, Body: "*"})), Conn: cc},
			[]string{getUser, "a GET has no body"}},
		{"unknown response_body", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", &annotations.HttpRule{
			Pattern: &annotations.HttpRule_Get{Get: "/v1/users/{id}"}, ResponseBody: "nope"})), Conn: cc},
			[]string{getUser, `response_body "nope"`}},
		{"nested additional_bindings", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", &annotations.HttpRule{
			Pattern: &annotations.HttpRule_Get{Get: "/v1/users/{id}"},
			AdditionalBindings: []*annotations.HttpRule{{
				Pattern:            &annotations.HttpRule_Get{Get: "/v2/users/{id}"},
				AdditionalBindings: []*annotations.HttpRule{getRule("/v3/users/{id}")},
			}}})), Conn: cc},
			[]string{getUser, "additional_bindings[0]"}},
		{"no pattern", transcode.Options{DescriptorSet: writeSet(t, withRule("GetUser", &annotations.HttpRule{})), Conn: cc},
			[]string{getUser, "no pattern"}},
		{"bad custom kind", transcode.Options{DescriptorSet: writeSet(t, withRule("Purge", &annotations.HttpRule{
			Pattern: &annotations.HttpRule_Custom{Custom: &annotations.CustomHttpPattern{Kind: "NOT A METHOD", Path: "/v1/cache"}}})), Conn: cc},
			[]string{"method test.v1.Users.Purge", "NOT A METHOD"}},
		{"conflict", transcode.Options{DescriptorSet: writeSet(t, withRule("DeleteUser", &annotations.HttpRule{
			Pattern: &annotations.HttpRule_Delete{Delete: "/v1/users/{id=*}"}})), Conn: cc},
			[]string{"/test.v1.Users/DeleteUser", "/test.v1.Users/RemoveUser", "match the same requests"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := transcode.New(tt.o)
			if err == nil {
				t.Fatalf("got no error, want one with %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), "transcode: ") {
				t.Errorf("got error %q, want the prefix transcode:", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
