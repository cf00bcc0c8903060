package redisstore_test

import (
	"fmt"

	"github.com/bouncerhq/bouncer/redisstore"
)

// ParseURL reads the URLs `bouncer serve --store` takes, and says what is
// wrong with one it refuses.
func ExampleParseURL() {
	for _, u := range []string{
		"redis://redis-1:6379,redis-2:6379",
		"rediss://bouncer:secret@redis:6380/2",
		"redis://sentinel-1:26379?master_set=limits&addr=sentinel-2:26379",
		"redis://localhost",
	} {
		co, err := redisstore.ParseURL(u)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%v db=%d tls=%v master_set=%q\n", co.InitAddress, co.SelectDB, co.TLSConfig != nil, co.Sentinel.MasterSet)
	}
	// Output:
	// [redis-1:6379 redis-2:6379] db=0 tls=false master_set=""
	// [redis:6380] db=2 tls=true master_set=""
	// [sentinel-1:26379 sentinel-2:26379] db=0 tls=false master_set="limits"
	// redisstore: address "localhost" has no port: write localhost:6379 (6379 is Redis's default)
}
