package bouncer

import "context"

type userKey struct{}

// WithUser returns a copy of ctx carrying the id of the request's
// verified user, for the edges' User keys to count by (httplimit.User,
// grpclimit.User). Authentication middleware or an interceptor in front of
// the limiting ones calls it once it has checked the caller's credentials,
// and passes the context on: as the request's context over HTTP; to the
// handler for a unary gRPC call, and as the Context of a wrapping
// ServerStream for a stream.
func WithUser(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, userKey{}, id)
}

// UserFrom returns the user id that WithUser put in ctx, and false if
// there is none or it is empty.
func UserFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(userKey{}).(string)
	return id, ok && id != ""
}
