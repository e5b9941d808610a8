package catalog

import (
	"sync"

	"github.com/mcpmux/mcpmux/mux/toolsearch"
)

// searchIndex is a child catalog's tools as toolsearch reads them. It is
// built with the catalog where the config's default mode may search, and
// otherwise on the first search (a policy's own catalog = "search"), so
// that a multiplexer nobody searches never builds one.
type searchIndex struct {
	once sync.Once
	ix   *toolsearch.Index
}

// SearchIndex is the index of cc's tools: doc i is cc.Tools()[i].
func (cc *ChildCatalog) SearchIndex() *toolsearch.Index {
	cc.search.once.Do(func() {
		tools := cc.Tools()
		docs := make([]toolsearch.Doc, len(tools))
		for i, e := range tools {
			docs[i] = toolsearch.DocOf(e.Name, e.Orig, e.Server, e.Def)
		}
		cc.search.ix = toolsearch.New(docs)
	})
	return cc.search.ix
}

// Search returns the best limit tools of c for query that v sees (of
// server alone, unless it is ""), best first.
func (c *Catalog) Search(query string, limit int, server string, v Viewer) []*Entry {
	indexes := make([]*toolsearch.Index, len(c.children))
	for i, cc := range c.children {
		indexes[i] = cc.SearchIndex()
	}
	// keep is asked best first and its yes are the hits: what it keeps is
	// the answer.
	var found []*Entry
	toolsearch.Search(query, limit, indexes, func(i, d int) bool {
		e := c.exposed(c.children[i].Tools()[d])
		ok := e != nil && (server == "" || e.Server == server) && v.Sees(e)
		if ok {
			found = append(found, e)
		}
		return ok
	})
	return found
}

// exposed is the entry c exposes for a child's tool e: e, its prefixed
// form where another server took the bare name, or nil when c leaves it
// out (taken by a server listed earlier, or held by pinning).
func (c *Catalog) exposed(e *Entry) *Entry {
	byName := c.Kinds[KindTool].ByName
	if byName[e.Name] == e {
		return e
	}
	if e.Prefixed != nil && byName[e.Prefixed.Name] == e.Prefixed {
		return e.Prefixed
	}
	return nil
}
