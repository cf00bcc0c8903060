package main

import (
	"fmt"
	"os"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// descriptorFile is the descriptor set gateway.yaml reads, beside this
// file; -write-descriptor writes it anew.
const descriptorFile = "greeter.pb"

// greeterProto is the greeter's file, as protoc would describe
//
//	syntax = "proto3";
//	package greeter.v1;
//	import "google/api/annotations.proto";
//
//	service Greeter {
//	  rpc SayHello(HelloRequest) returns (HelloReply) {
//	    option (google.api.http) = {get: "/v1/hello/{name}"};
//	  }
//	  rpc AddNote(AddNoteRequest) returns (Note) {
//	    option (google.api.http) = {post: "/v1/notes", body: "*"};
//	  }
//	}
//	message HelloRequest { string name = 1; }
//	message HelloReply { string message = 1; }
//	message AddNoteRequest { string text = 1; }
//	message Note { int32 id = 1; string text = 2; string author = 3; }
//
// It is built in Go so that the example needs no protoc.
func greeterProto() *descriptorpb.FileDescriptorProto {
	field := func(name string, number int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(number), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String(name)}
	}
	message := func(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
	}
	method := func(name, in, out string, rule *annotations.HttpRule) *descriptorpb.MethodDescriptorProto {
		opts := &descriptorpb.MethodOptions{}
		proto.SetExtension(opts, annotations.E_Http, rule)
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name),
			InputType: proto.String(".greeter.v1." + in), OutputType: proto.String(".greeter.v1." + out), Options: opts}
	}
	const str, i32 = descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_INT32
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String("greeter/v1/greeter.proto"),
		Package:    proto.String("greeter.v1"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/api/annotations.proto"},
		MessageType: []*descriptorpb.DescriptorProto{
			message("HelloRequest", field("name", 1, str)),
			message("HelloReply", field("message", 1, str)),
			message("AddNoteRequest", field("text", 1, str)),
			message("Note", field("id", 1, i32), field("text", 2, str), field("author", 3, str)),
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Greeter"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("SayHello", "HelloRequest", "HelloReply",
					&annotations.HttpRule{Pattern: &annotations.HttpRule_Get{Get: "/v1/hello/{name}"}}),
				method("AddNote", "AddNoteRequest", "Note",
					&annotations.HttpRule{Pattern: &annotations.HttpRule_Post{Post: "/v1/notes"}, Body: "*"}),
			},
		}},
	}
}

// descriptorSet is what protoc --include_imports --descriptor_set_out
// writes for the greeter and the gRPC health service: their files and
// every file they import, each after its imports.
func descriptorSet() *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range []protoreflect.FileDescriptor{
		descriptorpb.File_google_protobuf_descriptor_proto,
		annotations.File_google_api_http_proto,
		annotations.File_google_api_annotations_proto,
		grpc_health_v1.File_grpc_health_v1_health_proto,
	} {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	set.File = append(set.File, greeterProto())
	return set
}

// writeDescriptorSet writes descriptorSet to file.
func writeDescriptorSet(file string) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(descriptorSet())
	if err != nil {
		return fmt.Errorf("transcode example: %w", err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return fmt.Errorf("transcode example: %w", err)
	}
	return nil
}
