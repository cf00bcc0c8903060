package admin

import (
	"slices"
	"strings"

	"github.com/bouncerhq/bouncer/rules"
)

// sortRules sorts rules by path, keeping rules of one path in their order.
func sortRules(rs []*rules.Rule) {
	slices.SortStableFunc(rs, func(a, b *rules.Rule) int { return strings.Compare(a.Path, b.Path) })
}

func sortStrings(s []string) { slices.Sort(s) }
