package child

// Set is the children of one version of the server list: those in force,
// in config order, and every child ever run under each alias, by alias.
// It is immutable; a change of the server list publishes a new one.
//
// A child taken out of the list stays findable by its alias until another
// takes the alias: a request that read the catalog before the child left
// it then reaches a child that says it is stopped, never a missing one.
type Set struct {
	list    []*Server
	byAlias map[string]*Server
}

// NewSet returns the set of list, in that order, with gone (children taken
// out of the list) still findable by alias where no child of list has it.
func NewSet(list []*Server, gone map[string]*Server) *Set {
	s := &Set{list: list, byAlias: make(map[string]*Server, len(list)+len(gone))}
	for alias, c := range gone {
		s.byAlias[alias] = c
	}
	for _, c := range list {
		s.byAlias[c.Alias()] = c
	}
	return s
}

// List is the children in force, in config order. It must not be changed.
func (s *Set) List() []*Server { return s.list }

// Get returns the child last run under alias, or nil if there never was
// one.
func (s *Set) Get(alias string) *Server { return s.byAlias[alias] }

// InForce returns the child in force under alias, or nil if the alias
// was taken out of the list.
func (s *Set) InForce(alias string) *Server {
	if c := s.byAlias[alias]; c != nil && s.listed(c) {
		return c
	}
	return nil
}

// Gone returns the children findable by alias that are not in force.
func (s *Set) Gone() map[string]*Server {
	gone := map[string]*Server{}
	for alias, c := range s.byAlias {
		if !s.listed(c) {
			gone[alias] = c
		}
	}
	return gone
}

func (s *Set) listed(c *Server) bool {
	for _, l := range s.list {
		if l == c {
			return true
		}
	}
	return false
}
