package mux

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/mcpmux/mcpmux/config"
)

// hashLen is how many hex digits of a name's hash go into a shortened or
// de-duplicated name: enough that two tools of one child practically never
// meet again, short enough to leave most of the name readable. The config
// guarantees room for it, one character and a '_' after every prefix.
const hashLen = config.NameRoom - 2

// sanitize replaces every character that OpenAI- and Anthropic-style
// clients refuse in a tool name with '_'.
func sanitize(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r < 0x80 && (r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])
	return h[:n]
}

// namer turns one child's tool names into exposed names. Names from different
// aliases can never meet, because the prefix (alias and separator, the alias
// free of '_') is never shortened; so collisions are settled per child.
type namer struct {
	prefix string
	max    int
	taken  map[string]string // exposed name -> original name
}

func newNamer(alias, separator string, max int) *namer {
	return &namer{prefix: alias + separator, max: max, taken: make(map[string]string)}
}

// name returns the exposed name for the child's tool orig. It is
// deterministic for the same sequence of calls: the first tool to claim a
// name keeps it, a later one that would collide gets a hash of its original
// name appended. collided reports that case, for the log.
func (n *namer) name(orig string) (exposed string, collided bool) {
	base := sanitize(orig)
	exposed = n.fit(base, "")
	if _, dup := n.taken[exposed]; dup {
		collided = true
		for size := hashLen; ; size += 4 {
			exposed = n.fit(base, "_"+shortHash(orig, min(size, 64)))
			if _, dup := n.taken[exposed]; !dup || size >= 64 {
				break
			}
		}
	}
	n.taken[exposed] = orig
	return exposed, collided
}

// fit joins prefix, base and suffix within max characters. A name that is too
// long keeps its start and gets a hash of the whole base, so two long names
// that share a start still differ.
func (n *namer) fit(base, suffix string) string {
	if len(n.prefix)+len(base)+len(suffix) <= n.max {
		return n.prefix + base + suffix
	}
	if suffix == "" {
		suffix = "_" + shortHash(base, hashLen)
	}
	room := max(n.max-len(n.prefix)-len(suffix), 0)
	return n.prefix + base[:min(room, len(base))] + suffix
}
