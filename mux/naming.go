package mux

import "github.com/mcpmux/mcpmux/mux/naming"

// nameEntries gives each of one child's tools or prompts (one kind) its
// exposed name, as naming.ExposeNames decides, and logs the names that had to take
// a hash. An entry of a child with prefix = false is named as the child
// names it where that is a valid name, and gets its prefixed form as the
// fallback for a name a server listed earlier also exposes.
func (c *builder) nameEntries(entries []*entry) {
	origs := make([]string, len(entries))
	for i, e := range entries {
		origs[i] = e.orig
	}
	prefix := c.alias + c.separator
	names := naming.ExposeNames(prefix, c.maxNameLength, origs)
	var bare map[string]naming.Exposed
	if !c.cfg.Prefix {
		bare = naming.ExposeNames("", c.maxNameLength, origs)
	}
	for _, e := range entries {
		n := names[e.orig]
		if bare != nil {
			fallback := *e
			fallback.name = n.Name
			e.prefixed = &fallback
			n = bare[e.orig]
		}
		if n.Collided {
			c.log.Warn().Str(kindWire[e.kind].logKey, e.orig).Str(kindWire[e.kind].label, n.Name).
				Msg("exposed name collided with another " + kindWire[e.kind].label + " of this server; a hash was appended")
		}
		e.name = n.Name
	}
}
