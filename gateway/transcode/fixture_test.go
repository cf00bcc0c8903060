package transcode_test

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/bouncerhq/bouncer/gateway/transcode"
)

// The test service, test.v1.Users, written as protoc would describe it:
//
//	rpc GetUser(GetUserRequest) returns (User)  // GET /v1/users/{id}, GET /v1/{name=orgs/*/users/**}
//	rpc CreateUser(User) returns (User)         // POST /v1/users body "*"
//	rpc UpdateUser(UpdateUserRequest) returns (UpdateUserRequest) // PATCH /v1/users/{user.id} body "user", PUT /v1/users/{user.id} body "*"
//	rpc ListUsers(ListUsersRequest) returns (ListUsersResponse)   // GET /v1/users, GET /v1/users:list response_body "users"
//	rpc WatchUsers(ListUsersRequest) returns (stream User)        // GET /v1/users:watch
//	rpc DeleteUser(DeleteUserRequest) returns (google.protobuf.Empty) // no option
//	rpc RemoveUser(DeleteUserRequest) returns (google.protobuf.Empty) // DELETE /v1/users/{id}
//	rpc UndeleteUser(UndeleteUserRequest) returns (User)          // POST /v1/users/{id}:undelete body "reason"
//	rpc Purge(PurgeRequest) returns (PurgeRequest)                // PURGE /v1/cache/{key=**}
//	rpc Fail(FailRequest) returns (google.protobuf.Empty)         // GET /v1/fail/{code}
//	rpc Whoami(google.protobuf.Empty) returns (google.protobuf.Struct) // GET /v1/whoami
//	rpc Upload(stream User) returns (User)                        // POST /v1/upload body "*"
//	rpc Chat(stream User) returns (stream User)                   // no option
//	rpc Slow(google.protobuf.Empty) returns (google.protobuf.Empty) // no option
//
// Most methods echo what they were sent, so that a test sees how the
// request was built.
const usersService = "test.v1.Users"

type fieldType = descriptorpb.FieldDescriptorProto_Type

const (
	tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tUint64  = descriptorpb.FieldDescriptorProto_TYPE_UINT64
	tBool    = descriptorpb.FieldDescriptorProto_TYPE_BOOL
	tDouble  = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	tBytes   = descriptorpb.FieldDescriptorProto_TYPE_BYTES
	tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
)

// field is a singular field; typeName is the full name of its message or
// enum, with the leading dot.
func field(name string, number int32, typ fieldType, typeName string) *descriptorpb.FieldDescriptorProto {
	f := &descriptorpb.FieldDescriptorProto{
		Name:   proto.String(name),
		Number: proto.Int32(number),
		Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		Type:   typ.Enum(),
	}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

func repeated(f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
	f.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	return f
}

func inOneof(index int32, f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
	f.OneofIndex = proto.Int32(index)
	return f
}

func message(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
	return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
}

// method is a method of input and output types (full names, with the
// leading dot), bound by rule unless it is nil.
func method(name, input, output string, rule *annotations.HttpRule) *descriptorpb.MethodDescriptorProto {
	m := &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(input), OutputType: proto.String(output)}
	if rule != nil {
		m.Options = &descriptorpb.MethodOptions{}
		proto.SetExtension(m.Options, annotations.E_Http, rule)
	}
	return m
}

func streaming(client, server bool, m *descriptorpb.MethodDescriptorProto) *descriptorpb.MethodDescriptorProto {
	m.ClientStreaming, m.ServerStreaming = proto.Bool(client), proto.Bool(server)
	return m
}

func getRule(path string) *annotations.HttpRule {
	return &annotations.HttpRule{Pattern: &annotations.HttpRule_Get{Get: path}}
}

// wellKnownFiles are the files the test file imports, and theirs.
func wellKnownFiles() []*descriptorpb.FileDescriptorProto {
	var files []*descriptorpb.FileDescriptorProto
	for _, fd := range []protoreflect.FileDescriptor{
		annotations.File_google_api_annotations_proto,
		annotations.File_google_api_http_proto,
		descriptorpb.File_google_protobuf_descriptor_proto,
		emptypb.File_google_protobuf_empty_proto,
		structpb.File_google_protobuf_struct_proto,
		timestamppb.File_google_protobuf_timestamp_proto,
		durationpb.File_google_protobuf_duration_proto,
		wrapperspb.File_google_protobuf_wrappers_proto,
		fieldmaskpb.File_google_protobuf_field_mask_proto,
	} {
		files = append(files, protodesc.ToFileDescriptorProto(fd))
	}
	return files
}

// usersFile describes test/v1/users.proto.
func usersFile() *descriptorpb.FileDescriptorProto {
	const (
		user  = ".test.v1.User"
		empty = ".google.protobuf.Empty"
		list  = ".test.v1.ListUsersRequest"
	)
	return &descriptorpb.FileDescriptorProto{
		Name:    proto.String("test/v1/users.proto"),
		Package: proto.String("test.v1"),
		Syntax:  proto.String("proto3"),
		Dependency: []string{
			"google/api/annotations.proto", "google/protobuf/empty.proto", "google/protobuf/struct.proto",
			"google/protobuf/timestamp.proto", "google/protobuf/duration.proto", "google/protobuf/wrappers.proto",
			"google/protobuf/field_mask.proto",
		},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Role"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("ROLE_UNSPECIFIED"), Number: proto.Int32(0)},
				{Name: proto.String("ROLE_ADMIN"), Number: proto.Int32(1)},
				{Name: proto.String("ROLE_MEMBER"), Number: proto.Int32(2)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{
			message("Address", field("city", 1, tString, ""), field("zip", 2, tInt32, "")),
			message("User",
				field("id", 1, tString, ""), field("name", 2, tString, ""), field("email", 3, tString, ""),
				field("role", 4, tEnum, ".test.v1.Role"), repeated(field("tags", 5, tString, "")),
				field("address", 6, tMessage, ".test.v1.Address")),
			message("GetUserRequest", field("id", 1, tString, ""), field("name", 2, tString, "")),
			message("UpdateUserRequest", field("user", 1, tMessage, user), field("update_mask", 2, tMessage, ".google.protobuf.FieldMask")),
			message("Filter", field("city", 1, tString, ""), field("min_zip", 2, tInt32, "")),
			func() *descriptorpb.DescriptorProto {
				m := message("ListUsersRequest",
					field("page_size", 1, tInt32, ""), field("page_token", 2, tString, ""),
					repeated(field("tags", 3, tString, "")), field("role", 4, tEnum, ".test.v1.Role"),
					field("filter", 5, tMessage, ".test.v1.Filter"), field("min_age", 6, tMessage, ".google.protobuf.Int32Value"),
					field("since", 7, tMessage, ".google.protobuf.Timestamp"), field("ttl", 8, tMessage, ".google.protobuf.Duration"),
					field("active", 9, tBool, ""), field("score", 10, tDouble, ""), field("cursor", 11, tBytes, ""),
					repeated(field("ids", 12, tInt64, "")), field("big", 13, tUint64, ""),
					inOneof(0, field("order_by", 14, tString, "")), inOneof(0, field("order_desc", 15, tString, "")),
					field("labels", 16, tMessage, ".google.protobuf.Struct"))
				m.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("order")}}
				return m
			}(),
			message("ListUsersResponse", repeated(field("users", 1, tMessage, user)), field("next_page_token", 2, tString, ""),
				field("request", 3, tMessage, list)),
			message("DeleteUserRequest", field("id", 1, tString, "")),
			message("UndeleteUserRequest", field("id", 1, tString, ""), field("reason", 2, tString, "")),
			message("PurgeRequest", field("key", 1, tString, "")),
			message("FailRequest", field("code", 1, tInt32, ""), field("message", 2, tString, ""), field("retry_seconds", 3, tInt64, "")),
		},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Users"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("GetUser", ".test.v1.GetUserRequest", user, &annotations.HttpRule{
					Pattern:            &annotations.HttpRule_Get{Get: "/v1/users/{id}"},
					AdditionalBindings: []*annotations.HttpRule{getRule("/v1/{name=orgs/*/users/**}")},
				}),
				method("CreateUser", user, user, &annotations.HttpRule{Pattern: &annotations.HttpRule_Post{Post: "/v1/users"}, Body: "*"}),
				method("UpdateUser", ".test.v1.UpdateUserRequest", ".test.v1.UpdateUserRequest", &annotations.HttpRule{
					Pattern: &annotations.HttpRule_Patch{Patch: "/v1/users/{user.id}"}, Body: "user",
					AdditionalBindings: []*annotations.HttpRule{
						{Pattern: &annotations.HttpRule_Put{Put: "/v1/users/{user.id}"}, Body: "*"},
					},
				}),
				method("ListUsers", list, ".test.v1.ListUsersResponse", &annotations.HttpRule{
					Pattern: &annotations.HttpRule_Get{Get: "/v1/users"},
					AdditionalBindings: []*annotations.HttpRule{
						{Pattern: &annotations.HttpRule_Get{Get: "/v1/users:list"}, ResponseBody: "users"},
					},
				}),
				streaming(false, true, method("WatchUsers", list, user, getRule("/v1/users:watch"))),
				method("DeleteUser", ".test.v1.DeleteUserRequest", empty, nil),
				method("RemoveUser", ".test.v1.DeleteUserRequest", empty, &annotations.HttpRule{
					Pattern: &annotations.HttpRule_Delete{Delete: "/v1/users/{id}"},
				}),
				method("UndeleteUser", ".test.v1.UndeleteUserRequest", user, &annotations.HttpRule{
					Pattern: &annotations.HttpRule_Post{Post: "/v1/users/{id}:undelete"}, Body: "reason",
				}),
				method("Purge", ".test.v1.PurgeRequest", ".test.v1.PurgeRequest", &annotations.HttpRule{
					Pattern: &annotations.HttpRule_Custom{Custom: &annotations.CustomHttpPattern{Kind: "PURGE", Path: "/v1/cache/{key=**}"}},
				}),
				method("Fail", ".test.v1.FailRequest", empty, getRule("/v1/fail/{code}")),
				method("Whoami", empty, ".google.protobuf.Struct", getRule("/v1/whoami")),
				streaming(true, false, method("Upload", user, user, &annotations.HttpRule{
					Pattern: &annotations.HttpRule_Post{Post: "/v1/upload"}, Body: "*",
				})),
				streaming(true, true, method("Chat", user, user, nil)),
				method("Slow", empty, empty, nil),
			},
		}},
	}
}

// writeSet writes a FileDescriptorSet of files and the well-known files
// into a temporary directory and returns its path.
func writeSet(t testing.TB, files ...*descriptorpb.FileDescriptorProto) string {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{File: append(wellKnownFiles(), files...)}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "set.pb")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// usersServer answers the test service with dynamicpb messages of its
// descriptors.
type usersServer struct {
	files *protoregistry.Files
}

func newUsersServer(t testing.TB) *usersServer {
	t.Helper()
	files, err := protodesc.NewFiles(&descriptorpb.FileDescriptorSet{File: append(wellKnownFiles(), usersFile())})
	if err != nil {
		t.Fatal(err)
	}
	return &usersServer{files: files}
}

func (s *usersServer) newMessage(name string) *dynamicpb.Message {
	d, err := s.files.FindDescriptorByName(protoreflect.FullName("test.v1." + name))
	if err != nil {
		panic(err)
	}
	return dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
}

// get returns the field of m by name.
func get(m protoreflect.Message, name string) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
}

func set(m protoreflect.Message, name string, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), v)
}

func (s *usersServer) user(id string) *dynamicpb.Message {
	u := s.newMessage("User")
	set(u, "id", protoreflect.ValueOfString(id))
	return u
}

// unary is a method of the test service whose request is a message of
// the test package (or, for "", google.protobuf.Empty).
func (s *usersServer) unary(name, input string, f func(context.Context, *dynamicpb.Message) (proto.Message, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in *dynamicpb.Message
		if input == "" {
			in = dynamicpb.NewMessage((&emptypb.Empty{}).ProtoReflect().Descriptor())
		} else {
			in = s.newMessage(input)
		}
		if err := dec(in); err != nil {
			return nil, err
		}
		return f(ctx, in)
	}}
}

func echo(_ context.Context, in *dynamicpb.Message) (proto.Message, error) { return in, nil }

func (s *usersServer) desc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: usersService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			s.unary("GetUser", "GetUserRequest", func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
				u := s.user(get(in, "id").String())
				set(u, "name", get(in, "name"))
				return u, nil
			}),
			s.unary("CreateUser", "User", echo),
			s.unary("UpdateUser", "UpdateUserRequest", echo),
			s.unary("ListUsers", "ListUsersRequest", func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
				out := s.newMessage("ListUsersResponse")
				users := out.Mutable(out.Descriptor().Fields().ByName("users")).List()
				for i := range get(in, "page_size").Int() {
					users.Append(protoreflect.ValueOfMessage(s.user("u" + strconv.FormatInt(i+1, 10))))
				}
				set(out, "next_page_token", protoreflect.ValueOfString("next"))
				set(out, "request", protoreflect.ValueOfMessage(in))
				return out, nil
			}),
			s.unary("DeleteUser", "DeleteUserRequest", func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
				if get(in, "id").String() == "" {
					return nil, status.Error(codes.InvalidArgument, "id is required")
				}
				return &emptypb.Empty{}, nil
			}),
			s.unary("RemoveUser", "DeleteUserRequest", func(context.Context, *dynamicpb.Message) (proto.Message, error) {
				return &emptypb.Empty{}, nil
			}),
			s.unary("UndeleteUser", "UndeleteUserRequest", func(_ context.Context, in *dynamicpb.Message) (proto.Message, error) {
				u := s.user(get(in, "id").String())
				set(u, "name", get(in, "reason"))
				return u, nil
			}),
			s.unary("Purge", "PurgeRequest", echo),
			s.unary("Fail", "FailRequest", fail),
			s.unary("Whoami", "", whoami),
			s.unary("Slow", "", func(ctx context.Context, _ *dynamicpb.Message) (proto.Message, error) {
				<-ctx.Done()
				return nil, status.FromContextError(ctx.Err()).Err()
			}),
		},
		Streams: []grpc.StreamDesc{
			{StreamName: "WatchUsers", ServerStreams: true, Handler: s.watch},
			{StreamName: "Upload", ClientStreams: true, Handler: unreached},
			{StreamName: "Chat", ClientStreams: true, ServerStreams: true, Handler: unreached},
		},
	}
}

// fail fails with the code asked, an ErrorInfo and, if asked, a
// RetryInfo; its header metadata says x-failed: yes.
func fail(ctx context.Context, in *dynamicpb.Message) (proto.Message, error) {
	grpc.SetHeader(ctx, metadata.Pairs("x-failed", "yes"))
	st := status.New(codes.Code(get(in, "code").Int()), get(in, "message").String())
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: "ASKED", Domain: "test.v1"}}
	if secs := get(in, "retry_seconds").Int(); secs > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(secs) * time.Second)})
	}
	if st.Code() != codes.OK {
		if d, err := st.WithDetails(details...); err == nil {
			st = d
		}
	}
	if err := st.Err(); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// whoami answers the request's metadata, each key's values joined with
// commas, and sends x-served-by and a binary x-trace-bin in its header.
func whoami(ctx context.Context, _ *dynamicpb.Message) (proto.Message, error) {
	grpc.SetHeader(ctx, metadata.Pairs("x-served-by", "users-test", "x-trace-bin", "\x00\x01\x02"))
	grpc.SetTrailer(ctx, metadata.Pairs("x-trailer", "not forwarded"))
	md, _ := metadata.FromIncomingContext(ctx)
	fields := map[string]any{}
	for k, vs := range md {
		fields[k] = strings.Join(vs, ",")
	}
	return structpb.NewStruct(fields)
}

// watch sends page_size users; with page_token "fail" it then fails
// UNAVAILABLE.
func (s *usersServer) watch(_ any, ss grpc.ServerStream) error {
	in := s.newMessage("ListUsersRequest")
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	ss.SetHeader(metadata.Pairs("x-stream", "watch"))
	for i := range get(in, "page_size").Int() {
		if err := ss.SendMsg(s.user("w" + strconv.FormatInt(i+1, 10))); err != nil {
			return err
		}
	}
	if get(in, "page_token").String() == "fail" {
		return status.Error(codes.Unavailable, "watch broke")
	}
	return nil
}

func unreached(any, grpc.ServerStream) error {
	return status.Error(codes.Internal, "the gateway should not have called")
}

// serve starts the test service on a loopback listener, a client
// connection to it, and a real HTTP server in front of a transcode
// Handler made with o (its DescriptorSet and Conn filled in when
// empty). It returns the HTTP server's URL.
func serve(t *testing.T, o transcode.Options) string {
	t.Helper()
	srv := grpc.NewServer()
	srv.RegisterService(newUsersServer(t).desc(), struct{}{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	if o.DescriptorSet == "" {
		o.DescriptorSet = writeSet(t, usersFile())
	}
	if o.Conn == nil {
		o.Conn = cc
	}
	if o.Logger == nil {
		o.Logger = discard()
	}
	h, err := transcode.New(o)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}
