package child

import (
	"testing"

	"github.com/rs/zerolog"
)

// A set lists the children in force in order, and finds a child taken out
// of the list by its alias until another takes the alias.
func TestSet(t *testing.T) {
	base, cfg := unstartedChild(t, "")
	named := func(alias string) *Server {
		e := cfg.Servers[0]
		e.Alias = alias
		return New(newTestHost(t), Env{Config: cfg, Log: zerolog.Nop()}, e)
	}
	a, b, gone := base, named("b"), named("gone")
	s := NewSet([]*Server{b, a}, map[string]*Server{"gone": gone, "b": named("b")})
	if l := s.List(); len(l) != 2 || l[0] != b || l[1] != a {
		t.Errorf("List = %v, want [b fs] in that order", l)
	}
	if s.Get("b") != b {
		t.Error("Get(b) is not the child in force under b")
	}
	if s.Get("gone") != gone {
		t.Error("Get(gone) does not find the child taken out of the list")
	}
	if s.Get("never") != nil {
		t.Error("Get(never) found a child")
	}
	if g := s.Gone(); len(g) != 1 || g["gone"] != gone {
		t.Errorf("Gone = %v, want only gone", g)
	}
	if s.InForce("b") != b || s.InForce("gone") != nil || s.InForce("never") != nil {
		t.Error("InForce is not the child in force under b, and nil for gone and never")
	}
}
