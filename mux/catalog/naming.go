package catalog

import "github.com/mcpmux/mcpmux/mux/naming"

// nameEntries gives each of one child's tools or prompts (one kind) its
// exposed name, as naming.ExposeNames decides, and logs the names that had to take
// a hash. An entry of a child with prefix = false is named as the child
// names it where that is a valid name, and gets its prefixed form as the
// fallback for a name a server listed earlier also exposes.
func (b *Builder) nameEntries(entries []*Entry) {
	origs := make([]string, len(entries))
	for i, e := range entries {
		origs[i] = e.Orig
	}
	prefix := b.alias + b.separator
	names := naming.ExposeNames(prefix, b.maxNameLength, origs)
	var bare map[string]naming.Exposed
	if !b.cfg.Prefix {
		bare = naming.ExposeNames("", b.maxNameLength, origs)
	}
	for _, e := range entries {
		n := names[e.Orig]
		if bare != nil {
			fallback := *e
			fallback.Name = n.Name
			e.Prefixed = &fallback
			n = bare[e.Orig]
		}
		if n.Collided {
			b.log.Warn().Str(KindWire[e.Kind].LogKey, e.Orig).Str(KindWire[e.Kind].Label, n.Name).
				Msg("exposed name collided with another " + KindWire[e.Kind].Label + " of this server; a hash was appended")
		}
		e.Name = n.Name
	}
}
