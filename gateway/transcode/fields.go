package transcode

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// wellKnownScalars are the message types a path variable or query
// parameter may set from one string, written as their JSON would be.
var wellKnownScalars = map[protoreflect.FullName]bool{
	"google.protobuf.Timestamp":   true,
	"google.protobuf.Duration":    true,
	"google.protobuf.FieldMask":   true,
	"google.protobuf.DoubleValue": true,
	"google.protobuf.FloatValue":  true,
	"google.protobuf.Int64Value":  true,
	"google.protobuf.UInt64Value": true,
	"google.protobuf.Int32Value":  true,
	"google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue":   true,
	"google.protobuf.StringValue": true,
	"google.protobuf.BytesValue":  true,
}

// isScalar reports whether one string can set a value of fd's type.
func isScalar(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		return false
	}
	if md := fd.Message(); md != nil {
		return wellKnownScalars[md.FullName()]
	}
	return true
}

// fieldPath resolves the dotted path of a field from md: every field but
// the last a singular message, the last one that isScalar. jsonNames
// allows each name in its JSON (lowerCamelCase) form as well, as query
// parameters do; path templates use field names only.
func fieldPath(md protoreflect.MessageDescriptor, path []string, jsonNames bool) ([]protoreflect.FieldDescriptor, error) {
	fds := make([]protoreflect.FieldDescriptor, 0, len(path))
	for i, name := range path {
		if md == nil {
			return nil, fmt.Errorf("%s is not a message", strings.Join(path[:i], "."))
		}
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil && jsonNames {
			fd = md.Fields().ByJSONName(name)
		}
		if fd == nil {
			return nil, fmt.Errorf("%s has no field %q", md.FullName(), name)
		}
		fds = append(fds, fd)
		if i < len(path)-1 {
			if fd.IsList() || fd.IsMap() || fd.Message() == nil || wellKnownScalars[fd.Message().FullName()] {
				return nil, fmt.Errorf("%s is not a singular message", strings.Join(path[:i+1], "."))
			}
			md = fd.Message()
		}
	}
	if last := fds[len(fds)-1]; !isScalar(last) {
		return nil, fmt.Errorf("a %s cannot be set from a string", kindName(last))
	}
	return fds, nil
}

// setField sets the field at the end of fds in m from s: appends to a
// repeated field, sets any other. Setting a singular field twice, or a
// second field of one oneof, is an error unless override.
func setField(m protoreflect.Message, fds []protoreflect.FieldDescriptor, s string, override bool) error {
	for _, fd := range fds[:len(fds)-1] {
		if err := checkOneof(m, fd, override); err != nil {
			return err
		}
		m = m.Mutable(fd).Message()
	}
	fd := fds[len(fds)-1]
	if fd.IsList() {
		list := m.Mutable(fd).List()
		v, err := parseScalar(fd, s, list.NewElement)
		if err != nil {
			return err
		}
		list.Append(v)
		return nil
	}
	if !override && m.Has(fd) {
		return fmt.Errorf("%s is set more than once", fd.Name())
	}
	if err := checkOneof(m, fd, override); err != nil {
		return err
	}
	v, err := parseScalar(fd, s, func() protoreflect.Value { return m.NewField(fd) })
	if err != nil {
		return err
	}
	m.Set(fd, v)
	return nil
}

func checkOneof(m protoreflect.Message, fd protoreflect.FieldDescriptor, override bool) error {
	od := fd.ContainingOneof()
	if override || od == nil || od.IsSynthetic() {
		return nil
	}
	if set := m.WhichOneof(od); set != nil && set != fd {
		return fmt.Errorf("%s and %s are of one oneof", set.Name(), fd.Name())
	}
	return nil
}

// parseScalar parses s as a value of fd's type, as the text of its JSON
// would be read: enums by name or number, bytes in base64 (standard or
// URL alphabet, padded or not), well-known messages from their JSON
// string, wrappers from their value's text. newMessage makes the message
// of a message field.
func parseScalar(fd protoreflect.FieldDescriptor, s string, newMessage func() protoreflect.Value) (protoreflect.Value, error) {
	bad := func(err error) (protoreflect.Value, error) {
		if err == nil {
			return protoreflect.Value{}, fmt.Errorf("%s: invalid %s %q", fd.Name(), kindName(fd), s)
		}
		return protoreflect.Value{}, fmt.Errorf("%s: invalid %s %q: %w", fd.Name(), kindName(fd), s, err)
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		if !utf8.ValidString(s) {
			return bad(nil)
		}
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BytesKind:
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil {
				return protoreflect.ValueOfBytes(b), nil
			}
		}
		return bad(nil)
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(nil)
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ev := ed.Values().ByName(protoreflect.Name(s)); ev != nil {
			return protoreflect.ValueOfEnum(ev.Number()), nil
		}
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || ed.IsClosed() && ed.Values().ByNumber(protoreflect.EnumNumber(n)) == nil {
			return bad(nil)
		}
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		v := newMessage()
		if ok, detail := parseMessage(v.Message(), s); !ok {
			return bad(detail)
		}
		return v, nil
	}
	if v, ok := parseNumber(fd.Kind(), s); ok {
		return v, nil
	}
	return bad(nil)
}

// parseNumber parses s as a number of kind k; ok is false if s is not
// one, or k is not a number's kind.
func parseNumber(k protoreflect.Kind, s string) (v protoreflect.Value, ok bool) {
	var err error
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		var n int64
		n, err = strconv.ParseInt(s, 10, 32)
		v = protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		var n int64
		n, err = strconv.ParseInt(s, 10, 64)
		v = protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		var n uint64
		n, err = strconv.ParseUint(s, 10, 32)
		v = protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		var n uint64
		n, err = strconv.ParseUint(s, 10, 64)
		v = protoreflect.ValueOfUint64(n)
	case protoreflect.FloatKind:
		var f float64
		f, err = strconv.ParseFloat(s, 32)
		v = protoreflect.ValueOfFloat32(float32(f))
	case protoreflect.DoubleKind:
		var f float64
		f, err = strconv.ParseFloat(s, 64)
		v = protoreflect.ValueOfFloat64(f)
	default:
		return protoreflect.Value{}, false
	}
	return v, err == nil
}

// parseMessage sets m, a well-known message, from s: a Timestamp,
// Duration or FieldMask from its JSON string, a wrapper from its value's
// text. ok is false if s is not one; detail, if not nil, says why.
func parseMessage(m protoreflect.Message, s string) (ok bool, detail error) {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask":
		if !utf8.ValidString(s) {
			return false, nil
		}
		text, _ := json.Marshal(s) // cannot fail on valid UTF-8
		if err := protojson.Unmarshal(text, m.Interface()); err != nil {
			return false, err
		}
		return true, nil
	}
	value := m.Descriptor().Fields().ByName("value") // a wrapper, whose one field is value
	inner, err := parseScalar(value, s, nil)
	if err != nil {
		return false, nil
	}
	m.Set(value, inner)
	return true, nil
}

// kindName names fd's type for errors: the kind, or the message or enum.
func kindName(fd protoreflect.FieldDescriptor) string {
	switch {
	case fd.IsMap():
		return "map"
	case fd.Message() != nil:
		return string(fd.Message().FullName())
	case fd.Enum() != nil:
		return string(fd.Enum().FullName())
	}
	return fd.Kind().String()
}
