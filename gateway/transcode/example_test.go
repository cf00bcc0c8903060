package transcode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/bouncerhq/bouncer/gateway/transcode"
)

// The greeter's descriptors, as protoc --descriptor_set_out
// --include_imports would write them for
//
//	syntax = "proto3";
//	package example.v1;
//	import "google/api/annotations.proto";
//	service Greeter {
//	  rpc SayHello(HelloRequest) returns (HelloReply) {
//	    option (google.api.http) = {get: "/v1/hello/{name}"};
//	  }
//	}
//	message HelloRequest { string name = 1; int32 times = 2; }
//	message HelloReply { string message = 1; }
func greeterSet() *descriptorpb.FileDescriptorSet {
	opts := &descriptorpb.MethodOptions{}
	proto.SetExtension(opts, annotations.E_Http, &annotations.HttpRule{
		Pattern: &annotations.HttpRule_Get{Get: "/v1/hello/{name}"},
	})
	str, i32 := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), descriptorpb.FieldDescriptorProto_TYPE_INT32.Enum()
	greeter := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("example/v1/greeter.proto"),
		Package:    proto.String("example.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/api/annotations.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("HelloRequest"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("name"), Number: proto.Int32(1), Type: str},
				{Name: proto.String("times"), Number: proto.Int32(2), Type: i32},
			}},
			{Name: proto.String("HelloReply"), Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("message"), Number: proto.Int32(1), Type: str},
			}},
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Greeter"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name: proto.String("SayHello"), InputType: proto.String(".example.v1.HelloRequest"),
				OutputType: proto.String(".example.v1.HelloReply"), Options: opts,
			}},
		}},
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range []protoreflect.FileDescriptor{
		descriptorpb.File_google_protobuf_descriptor_proto,
		annotations.File_google_api_http_proto,
		annotations.File_google_api_annotations_proto,
	} {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	set.File = append(set.File, greeter)
	return set
}

// greeterDesc is the Greeter service, answering with dynamicpb messages:
// "Hello, <name>!" times times.
func greeterDesc(files *protoregistry.Files) *grpc.ServiceDesc {
	msg := func(name protoreflect.FullName) *dynamicpb.Message {
		d, err := files.FindDescriptorByName(name)
		if err != nil {
			panic(err)
		}
		return dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
	}
	return &grpc.ServiceDesc{
		ServiceName: "example.v1.Greeter",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "SayHello", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := msg("example.v1.HelloRequest")
			if err := dec(in); err != nil {
				return nil, err
			}
			fields := in.Descriptor().Fields()
			times := in.Get(fields.ByName("times")).Int()
			if times < 0 {
				return nil, status.Error(codes.InvalidArgument, "times must not be negative")
			}
			hello := "Hello, " + in.Get(fields.ByName("name")).String() + "!"
			out := msg("example.v1.HelloReply")
			out.Set(out.Descriptor().Fields().ByName("message"), protoreflect.ValueOfString(strings.TrimSpace(strings.Repeat(hello+" ", int(times)))))
			return out, nil
		}}},
	}
}

// A Greeter served over gRPC, and over HTTP through a Handler made from
// its descriptor set.
func Example() {
	set := greeterSet()
	b, err := proto.Marshal(set)
	if err != nil {
		panic(err)
	}
	f, err := os.CreateTemp("", "greeter-*.pb")
	if err != nil {
		panic(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		panic(err)
	}
	f.Close()

	// The upstream gRPC server.
	files, err := protodesc.NewFiles(set)
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(greeterDesc(files), struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer cc.Close()

	// The gateway in front of it.
	h, err := transcode.New(transcode.Options{DescriptorSet: f.Name(), Conn: cc})
	if err != nil {
		panic(err)
	}
	for _, b := range h.Methods() {
		fmt.Println(b.HTTPMethod, b.Pattern, "→", b.GRPCMethod)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	for _, path := range []string{"/v1/hello/Ada?times=2", "/v1/hello/Ada?times=-1", "/v1/hello/Ada?tmes=2"} {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out bytes.Buffer
		json.Compact(&out, body) // protojson varies its spacing on purpose
		fmt.Println(resp.StatusCode, out.String())
	}
	// Output:
	// GET /v1/hello/{name} → /example.v1.Greeter/SayHello
	// 200 {"message":"Hello, Ada! Hello, Ada!"}
	// 400 {"error":"invalid_argument","message":"times must not be negative","details":[]}
	// 400 {"error":"invalid_argument","message":"transcode: query: parameter \"tmes\": example.v1.HelloRequest has no field \"tmes\"","details":[]}
}
