package naming

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/config"
)

// FuzzNames checks that exposed names are valid, within the length budget,
// collision-free, deterministic, and independent of the order in which a
// child lists its tools. tools is one tool name a line; alias picks one of
// a few valid aliases, wide the separator, maxLen the budget (brought into
// the range config allows for that alias) and seed the shuffled order.
// The seeds are in testdata/fuzz/FuzzNames.
func FuzzNames(f *testing.F) {
	f.Fuzz(func(t *testing.T, list string, alias uint8, wide bool, maxLen uint8, seed uint64) {
		aliases := []string{"a", "fs", "docs-2", "abcdefghijklmnopqrstuvwxyz012345"}
		sep := "_"
		if wide {
			sep = "__"
		}
		prefix := aliases[int(alias)%len(aliases)] + sep
		least := max(config.MinMaxNameLength, len(prefix)+config.NameRoom)
		budget := least + int(maxLen)%(config.MaxMaxNameLength-least+1)
		tools := strings.Split(list, "\n")

		got := ExposeNames(prefix, budget, tools)
		checkNames(t, prefix, budget, tools, got)
		for _, orig := range tools {
			if Sanitize(orig) == orig && len(prefix)+len(orig) <= budget && got[orig].Name != prefix+orig {
				t.Errorf("%q is valid and fits, but is exposed as %q", orig, got[orig].Name)
			}
		}
		if again := ExposeNames(prefix, budget, tools); !maps.Equal(again, got) {
			t.Errorf("a second run named differently:\n%v\n%v", got, again)
		}
		shuffled := slices.Clone(tools)
		rand.New(rand.NewPCG(seed, seed>>32)).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		if other := ExposeNames(prefix, budget, shuffled); !maps.Equal(other, got) {
			t.Errorf("order %q named differently from %q:\n%v\n%v", shuffled, tools, other, got)
		}
	})
}
