package bouncer_test

import (
	"context"
	"testing"

	"github.com/bouncerhq/bouncer"
)

func TestWithUser(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		ctx    context.Context
		want   string
		wantOK bool
	}{
		{"none", ctx, "", false},
		{"set", bouncer.WithUser(ctx, "u42"), "u42", true},
		{"empty", bouncer.WithUser(ctx, ""), "", false},
		{"set again", bouncer.WithUser(bouncer.WithUser(ctx, "a"), "b"), "b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := bouncer.UserFrom(tt.ctx); got != tt.want || ok != tt.wantOK {
				t.Errorf("got %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
