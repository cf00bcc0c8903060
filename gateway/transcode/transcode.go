package transcode

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// DefaultMaxBodyBytes is the largest request body a Handler reads when
// Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 4 << 20

// Options configure a Handler.
type Options struct {
	// DescriptorSet is the path of a file holding a
	// google.protobuf.FileDescriptorSet in the binary encoding, as written
	// by protoc --descriptor_set_out with --include_imports (or buf build
	// -o): every file the exposed services need, their imports included.
	DescriptorSet string

	// Services are the fully qualified names of the services to expose
	// (package.Service). Empty means every service in the set, those of
	// imported files included.
	Services []string

	// Conn is the upstream connection, made and closed by the caller. It
	// must send proto.Message values with the proto codec, as a
	// *grpc.ClientConn does by default.
	Conn grpc.ClientConnInterface

	// Timeout bounds each call. Zero means the request context's deadline
	// only.
	Timeout time.Duration

	// MaxBodyBytes is the largest request body read; a larger one is
	// answered 413. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Logger receives the answers of status 500 and above, at level Warn.
	// Nil means slog.Default().
	Logger *slog.Logger
}

// Binding is one HTTP route of a Handler: requests of HTTPMethod whose
// path matches Pattern (a google.api.http path template, as written) call
// GRPCMethod, e.g. GET /v1/users/{id} → /pkg.Users/GetUser.
type Binding struct {
	HTTPMethod string
	Pattern    string
	GRPCMethod string // "/package.Service/Method"
}

// Handler transcodes HTTP/JSON requests into gRPC calls on Options.Conn
// and their answers back into JSON. It is safe for concurrent use; New
// makes it, and it does not change afterwards.
type Handler struct {
	conn     grpc.ClientConnInterface
	timeout  time.Duration
	maxBody  int64
	log      *slog.Logger
	types    resolver
	routes   []*route  // in the order they are tried
	bindings []Binding // in the order of the descriptor set
}

// New reads the descriptor set and binds the methods of its services:
// each google.api.http rule of a method (additional_bindings included)
// is a route, and a method without the option is bound to
// POST /package.Service/Method with the request message as the body.
// Errors name the descriptor set, the .proto file and the method or rule
// at fault.
func New(o Options) (*Handler, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	set, files, err := readSet(o.DescriptorSet)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		conn:    o.Conn,
		timeout: o.Timeout,
		maxBody: o.MaxBodyBytes,
		log:     o.Logger,
		types:   resolver{dynamicpb.NewTypes(files)},
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if err := h.bind(set, files, o.Services); err != nil {
		return nil, fmt.Errorf("transcode: %s: %w", o.DescriptorSet, err)
	}
	if err := checkConflicts(h.routes); err != nil {
		return nil, fmt.Errorf("transcode: %s: %w", o.DescriptorSet, err)
	}
	slices.SortStableFunc(h.routes, func(a, b *route) int {
		switch {
		case a.tmpl.before(b.tmpl):
			return -1
		case b.tmpl.before(a.tmpl):
			return 1
		}
		return 0
	})
	return h, nil
}

// check checks o's fields, but for the descriptor set's contents.
func (o *Options) check() error {
	switch {
	case o.DescriptorSet == "":
		return errors.New("transcode: Options.DescriptorSet is required (protoc --include_imports --descriptor_set_out)")
	case o.Conn == nil:
		return errors.New("transcode: Options.Conn is nil")
	case o.Timeout < 0:
		return fmt.Errorf("transcode: negative Options.Timeout %v", o.Timeout)
	case o.MaxBodyBytes < 0:
		return fmt.Errorf("transcode: negative Options.MaxBodyBytes %d", o.MaxBodyBytes)
	}
	return nil
}

// readSet reads the descriptor set in file.
func readSet(file string) (*descriptorpb.FileDescriptorSet, *protoregistry.Files, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("transcode: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return nil, nil, fmt.Errorf("transcode: %s: not a FileDescriptorSet: %w", file, err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, nil, fmt.Errorf("transcode: %s: %w", file, err)
	}
	return &set, files, nil
}

// bind makes the routes of the methods of services (every service of
// the set if there are none), in the order of the set.
func (h *Handler) bind(set *descriptorpb.FileDescriptorSet, files *protoregistry.Files, services []string) error {
	all := len(services) == 0
	want := make(map[protoreflect.FullName]bool, len(services)) // found?
	for _, s := range services {
		want[protoreflect.FullName(s)] = false
	}
	for _, fdp := range set.GetFile() {
		fd, err := files.FindFileByPath(fdp.GetName())
		if err != nil {
			return err
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			if _, ok := want[sd.FullName()]; !all && !ok {
				continue
			}
			want[sd.FullName()] = true
			if err := h.bindService(sd); err != nil {
				return fmt.Errorf("%s: %w", fd.Path(), err)
			}
		}
	}
	for _, s := range services {
		if !want[protoreflect.FullName(s)] {
			return fmt.Errorf("no service %s", s)
		}
	}
	return nil
}

// bindService makes the routes of sd's methods.
func (h *Handler) bindService(sd protoreflect.ServiceDescriptor) error {
	for j := range sd.Methods().Len() {
		md := sd.Methods().Get(j)
		routes, err := bindMethod(md)
		if err != nil {
			return fmt.Errorf("method %s: %w", md.FullName(), err)
		}
		for _, rt := range routes {
			if !md.IsStreamingClient() {
				h.bindings = append(h.bindings, rt.Binding)
			}
			h.routes = append(h.routes, rt)
		}
	}
	return nil
}

// Methods returns the bindings the Handler serves, in the order of the
// descriptor set, for logs and documentation. Client- and bidi-streaming
// methods, which are answered 501, are not among them.
func (h *Handler) Methods() []Binding {
	return slices.Clone(h.bindings)
}

// resolver finds the types of Any values (in messages and in status
// details) in the descriptor set first, then among those linked into the
// program, such as the google.rpc error details.
type resolver struct {
	local *dynamicpb.Types
}

func (r resolver) FindMessageByName(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if mt, err := r.local.FindMessageByName(name); err == nil {
		return mt, nil
	}
	return protoregistry.GlobalTypes.FindMessageByName(name)
}

func (r resolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if mt, err := r.local.FindMessageByURL(url); err == nil {
		return mt, nil
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

func (r resolver) FindExtensionByName(name protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if xt, err := r.local.FindExtensionByName(name); err == nil {
		return xt, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByName(name)
}

func (r resolver) FindExtensionByNumber(message protoreflect.FullName, field protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if xt, err := r.local.FindExtensionByNumber(message, field); err == nil {
		return xt, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByNumber(message, field)
}
