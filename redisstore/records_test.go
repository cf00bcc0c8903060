package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/rueidis"

	"github.com/bouncerhq/bouncer/redisstore"
)

// Records are shared: what one store puts, another on the same Redis
// reads, and a delete is seen by both; on a Cluster too.
func TestRecords(t *testing.T) {
	forEachTopology(t, func(t *testing.T, c rueidis.Client) {
		prefix := freshPrefix()
		a := newStore(t, c, redisstore.Options{Prefix: prefix})
		b := newStore(t, c, redisstore.Options{Prefix: prefix})
		ctx := context.Background()
		if _, ok, err := b.GetRecord(ctx, "limits\x00k"); ok || err != nil {
			t.Fatalf("a record never put: %v %v", ok, err)
		}
		if err := a.PutRecord(ctx, "limits\x00k", []byte{0, 1, 2, 255}); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := b.GetRecord(ctx, "limits\x00k"); !ok || err != nil || string(v) != "\x00\x01\x02\xff" {
			t.Fatalf("the other store reads %q %v %v", v, ok, err)
		}
		if err := b.DeleteRecord(ctx, "limits\x00k"); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := a.GetRecord(ctx, "limits\x00k"); ok || err != nil {
			t.Fatalf("after a delete: %v %v", ok, err)
		}
		if err := a.PutRecord(ctx, "", nil); err == nil {
			t.Error("an empty key was stored")
		}
	})
}
