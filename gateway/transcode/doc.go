// Package transcode serves gRPC methods as JSON over HTTP: a Handler,
// made by New from a FileDescriptorSet (protoc --descriptor_set_out
// --include_imports), turns each request into a call on an upstream
// grpc.ClientConnInterface and its answer back into JSON, with no
// generated code: messages are dynamicpb messages of the set's
// descriptors.
//
// # Bindings
//
// Each google.api.http rule of a method is a binding (get, put, post,
// delete, patch or custom, additional_bindings included); a method
// without the option is bound to POST /package.Service/Method with the
// request message as the body. Path templates follow the HttpRule rules:
// {field} is one segment, {field=segments/*/**} several; "*" matches one
// non-empty segment, "**" the rest of the path; ":verb" ends a template.
// A variable of one segment is fully percent-decoded; one of several
// keeps %2F encoded. When several templates match a path, one with a verb
// is tried first, then, segment by segment, a literal before "*" before
// "**"; two bindings of one HTTP method whose templates match the same
// paths are an error of New. A path no binding matches is 404; one that
// only bindings of other methods match is 405 with Allow.
//
// # Requests
//
// The request message is built in three steps, each winning over the
// one before: the body, the query, the path variables. The body
// (body: "*", or the field it names) is read with protojson: unknown
// fields are 400, as is malformed JSON. A non-empty body must have a JSON
// Content-Type (application/json or */*+json), or the answer is 415: a
// browser cannot send such a request across sites without a CORS
// preflight. Bodies larger than Options.MaxBodyBytes are 413.
//
// Query parameters name fields by their field name or JSON name, nested
// with dots (filter.city=Paris), repeated fields by repetition
// (tag=a&tag=b), enums by name or number, bytes in base64, Timestamp,
// Duration and FieldMask as in their JSON, wrappers as their value. A
// parameter that names no field is 400 rather than ignored, like an
// unknown field of the body; so is one that names a field of the path or
// of the body (any, with body: "*"), or sets a singular field twice.
//
// Authorization, X-Request-Id and the X-Bouncer-* identity headers go
// upstream as metadata under lower-cased keys; no other header does, nor
// a hop-by-hop one (those the Connection header names included). The
// X-Bouncer-* headers are trusted as they come: whatever serves the
// Handler must remove a client's own before it sets them.
//
// # Answers
//
// A success is 200 with the response message in protojson
// (lowerCamelCase names, unpopulated fields left out), or its
// response_body field. A server-streaming method answers one JSON array
// of its messages once the stream has ended, so that an error met
// midway is still a proper error answer; the array may not exceed 16 MiB.
// Client- and bidi-streaming methods are answered 501. The response
// header metadata of a call comes back as Grpc-Metadata-<key> headers.
//
// An error is the JSON {"error": code, "message": ..., "details": [...]},
// where code is the gRPC code's name in lower case (not_found) and
// details are the status details in protojson, under the HTTP status of
// grpc-gateway's mapping: invalid_argument, failed_precondition and
// out_of_range 400, unauthenticated 401, permission_denied 403, not_found
// 404, already_exists and aborted 409, resource_exhausted 429 (with
// Retry-After from a google.rpc.RetryInfo detail), cancelled 499,
// unimplemented 501, unavailable 503, deadline_exceeded 504, others 500.
package transcode
