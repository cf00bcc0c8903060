package fairshare_test

import (
	"fmt"
	"math"

	"github.com/bouncerhq/bouncer/internal/fairshare"
)

// Three clients share 1000 a second: the one asking 200 gets all of it,
// and the other two split the 800 left, however much more one asks.
func ExampleShares() {
	fmt.Println(fairshare.Shares(1000, []float64{1400, 400, 200}))
	// A client whose demand is not measured takes an equal share of
	// what the others leave.
	fmt.Println(fairshare.Shares(1000, []float64{math.Inf(1), 100}))
	// Output:
	// [400 400 200]
	// [900 100]
}

func ExampleLevel() {
	demands := []float64{1400, 400, 200}
	level, used := fairshare.Level(1000, demands)
	fmt.Println(level, used, demands)
	// Output:
	// 400 1000 [200 400 1400]
}
