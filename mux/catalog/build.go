package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/glob"
	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/pins"
)

// Building one child's catalog from what it listed: each definition checked
// and named, its arguments' checker compiled, once per read of its lists.

// wireEntry is what mcpmux reads of any listed item; the rest is kept as
// the child sent it.
type wireEntry struct {
	Name         string             `json:"name"`
	URI          string             `json:"uri"`
	URITemplate  string             `json:"uriTemplate"`
	InputSchema  json.RawMessage    `json:"inputSchema"`
	OutputSchema json.RawMessage    `json:"outputSchema"`
	Execution    *mcp.ToolExecution `json:"execution"`
	// readOnlyHint is a tool's annotation, read only when its definition
	// decodes as an mcp.Tool (toolShape.wire): one that does not is left
	// out.
	readOnlyHint bool
}

func (w *wireEntry) id(k Kind) string {
	switch k {
	case KindResource:
		return w.URI
	case KindTemplate:
		return w.URITemplate
	}
	return w.Name
}

// Builder builds one child's catalog from the lists it read. It remembers
// what it found in the last build, so that a re-read or a respawn listing
// the same definitions checks nothing again and logs nothing twice. Only
// its child's goroutines use it, one at a time.
type Builder struct {
	alias         string
	cfg           config.Server
	separator     string
	maxNameLength int
	limits        config.Limits
	Pinned        bool // pinning is on: tools and prompts get their digests
	// searched: the config shows tools through find_tools to some callers
	// by default, so each build also builds its search index, off the
	// call path of the first find_tools after a change.
	searched bool
	log      zerolog.Logger

	// leftOut remembers which items were reported as left out, and why.
	leftOut map[string]string
	// vetted is what vetting found of the inputSchemas (args.Memo).
	vetted args.Memo
	// checked is what checking found of each tool definition that passed,
	// by the definition's SHA-256 (checkedTool).
	checked map[[sha256.Size]byte]checkedTool
}

func NewBuilder(cfg *config.Config, srv config.Server, pinned bool, log zerolog.Logger) *Builder {
	return &Builder{
		alias:         srv.Alias,
		cfg:           srv,
		separator:     cfg.Mux.Separator,
		maxNameLength: cfg.Mux.MaxNameLength,
		limits:        cfg.Limits,
		Pinned:        pinned,
		searched:      cfg.Mux.Catalog != config.CatalogFull,
		log:           log,
		leftOut:       map[string]string{},
	}
}

// Build turns a child's raw lists into exposed entries. An item that
// cannot be offered safely is left out and the log says why; it never
// fails the whole catalog.
func (b *Builder) Build(raw [NumKinds][]json.RawMessage, caps mcp.ServerCapabilities) *ChildCatalog {
	hide, _ := glob.CompileSet(b.cfg.Hide)         // validated with the config
	readOnly, _ := glob.CompileSet(b.cfg.ReadOnly) // likewise
	cat := &ChildCatalog{Caps: caps}
	leftOut := map[string]string{}
	vetted := args.Memo{}
	checked := make(map[[sha256.Size]byte]checkedTool, len(raw[KindTool]))
	// Reused for each definition: an mcp.Tool is large, and escapes.
	var (
		w     wireEntry
		shape toolShape // a tool's definition as an mcp-go client reads it
	)
	// skip logs an item that is left out, once for as long as the reason holds.
	skip := func(k Kind, name, why string, err error) {
		key := KindWire[k].Label + " " + name
		leftOut[key] = why
		if b.leftOut[key] != why {
			b.log.Warn().Str(KindWire[k].LogKey, name).AnErr("error", err).
				Msg(KindWire[k].Label + " left out: " + why)
		}
	}
	defer func() { b.leftOut, b.vetted, b.checked = leftOut, vetted, checked }()
	for k := range NumKinds {
		seen := make(map[string]bool, len(raw[k]))
		for i, r := range raw[k] {
			w = wireEntry{}
			var sum [sha256.Size]byte
			t, known := checkedTool{}, false
			if k == KindTool {
				sum = sha256.Sum256(r)
				t, known = b.checked[sum]
			}
			id := t.id
			var shapeErr error
			if !known {
				if why := ambiguousKeys(r, k); why != "" {
					skip(k, fmt.Sprintf("#%d", i), why+", which clients would read differently", nil)
					continue
				}
				if k == KindTool {
					shape = toolShape{}
					// One decode gives both what mcpmux reads and whether an
					// mcp.Tool would take it; the second is needed only to
					// tell apart why one does not.
					if shapeErr = json.Unmarshal(r, &shape); shapeErr == nil {
						w = shape.wire()
					}
				}
				if k != KindTool || shapeErr != nil {
					if err := json.Unmarshal(r, &w); err != nil {
						skip(k, fmt.Sprintf("#%d", i), "not a valid "+KindWire[k].Label+" definition", err)
						continue
					}
				}
				if id = w.id(k); id == "" {
					skip(k, fmt.Sprintf("#%d", i), "not a valid "+KindWire[k].Label+" definition", nil)
					continue
				}
			}
			if seen[id] {
				skip(k, id+"#"+fmt.Sprint(i), "the server lists this "+KindWire[k].Noun+" twice; the first definition is kept", nil)
				continue
			}
			seen[id] = true
			if (k == KindTool || k == KindPrompt) && hide.Match(id) {
				cat.Hidden = append(cat.Hidden, b.alias+b.separator+naming.Sanitize(id))
				continue
			}
			e := &Entry{Kind: k, Orig: id, Server: b.alias, Def: r}
			if k == KindPrompt {
				e.Pin = b.pinSum(k, id, r)
			}
			if k == KindTool {
				if !known {
					var why string
					var err error
					if t, why, err = b.checkTool(&w, r, shapeErr, caps, vetted); why != "" {
						skip(k, id, why, err)
						continue
					}
					// Of the definition as the checks fixed it (what the
					// first pins were made of), before it is renamed; once
					// per distinct definition, as the checks are.
					fixed := t.def
					if fixed == nil {
						fixed = r
					}
					t.pin = b.pinSum(k, id, fixed)
				}
				if why := t.apply(e, readOnly.Match(id) || b.cfg.TrustAnnotations && t.readOnlyHint, caps); why != "" {
					skip(k, id, why, nil)
					continue
				}
				if t.id != "" {
					checked[sum] = t
				}
			}
			cat.Entries[k] = append(cat.Entries[k], e)
		}
	}
	if b.Pinned {
		cat.Digests = map[OwnName]pins.Sum{}
		for _, k := range []Kind{KindTool, KindPrompt} {
			for _, e := range cat.Entries[k] {
				cat.Digests[OwnName{k, e.Orig}] = e.Pin
			}
		}
	}
	// Named once the whole list is known, so that no name depends on where
	// the child listed it.
	for _, k := range []Kind{KindTool, KindPrompt} {
		b.nameEntries(cat.Entries[k])
	}
	for _, k := range []Kind{KindResource, KindTemplate} {
		for _, e := range cat.Entries[k] {
			e.Name = b.exposeURI(k, e.Orig)
			if b.cfg.Prefix {
				continue
			}
			e.Prefixed = &Entry{Kind: k, Name: naming.ExposeURI(b.alias, e.Orig), Orig: e.Orig, Server: b.alias, Def: e.Def}
			if k == KindTemplate {
				e.Prefixed.Name = naming.ExposeTemplate(b.alias, e.Orig)
				t, err := naming.CompileTemplate(e.Orig)
				if err != nil {
					b.log.Warn().Err(err).Str(KindWire[KindTemplate].LogKey, e.Orig).Msg("resource template cannot route reads: not an RFC 6570 template")
				}
				e.Tmpl = t
			}
		}
	}
	for k := range NumKinds {
		for _, e := range cat.Entries[k] {
			if err := e.rename(); err != nil {
				b.log.Warn().Err(err).Str(KindWire[k].LogKey, e.Orig).Msg("definition could not be renamed")
			}
			if e.Prefixed != nil {
				_ = e.Prefixed.rename()
			}
		}
	}
	if b.searched {
		cat.SearchIndex()
	}
	return cat
}

// ambiguousKeys says why the definition raw of an item of kind k could be
// read differently by different clients, or "": encoding/json (and so
// mcp-go, mcpmux's own decoding and Go clients) matches members ignoring
// case and keeps the last, JavaScript clients and the pin digest read the
// exact spelling only. So a member repeated under case folding, or spelled
// like a known field in another case ("Description", a tool's annotation
// "ReadOnlyHint"), could make what is checked and pinned differ from what
// a client acts on.
func ambiguousKeys(raw []byte, k Kind) string {
	o, ok := jsonwire.Members(raw)
	if !ok {
		return "" // not an object: refused when decoded
	}
	if why := foldedKey(o, wireFields); why != "" {
		return "its definition has " + why
	}
	if k != KindTool {
		return ""
	}
	if a := o.Last("annotations"); a != nil {
		if ann, ok := jsonwire.Members(raw[a.Start:a.End]); ok {
			if why := foldedKey(ann, annotationFields); why != "" {
				return "its annotations have " + why
			}
		}
	}
	return ""
}

// foldedKey says which member of the JSON object o is repeated ignoring
// case, or spelled like one of known in another case; "" when none is.
func foldedKey(o jsonwire.Object, known []string) string {
	// Definitions have few members.
	for i, f := range o.Members {
		for _, g := range o.Members[:i] {
			if strings.EqualFold(f.Key, g.Key) {
				return "the member " + strconv.Quote(f.Key) + " twice (ignoring case)"
			}
		}
		for _, name := range known {
			if f.Key != name && strings.EqualFold(f.Key, name) {
				return "the member " + strconv.Quote(f.Key) + " (" + strconv.Quote(name) + " in another case)"
			}
		}
	}
	return ""
}

// exposeURI is the form a resource URI or template of b's child takes
// upstream.
func (b *Builder) exposeURI(k Kind, uri string) string {
	switch {
	case !b.cfg.Prefix:
		return uri
	case k == KindTemplate:
		return naming.ExposeTemplate(b.alias, uri)
	}
	return naming.ExposeURI(b.alias, uri)
}

// rename puts the exposed name into the definition.
func (e *Entry) rename() error {
	v, _ := json.Marshal(e.Name)
	def, err := jsonwire.WithField(e.Def, KindWire[e.Kind].Key, v)
	if err != nil {
		return err
	}
	e.Def = def
	return nil
}

// checkedTool is what checking a tool's definition found, which depends on
// its bytes alone. A child's catalog remembers it for each tool whose
// definition passed, by the definition's SHA-256, so that a re-read or a
// respawn listing the same bytes checks nothing again.
type checkedTool struct {
	id           string // the tool's name; "" when it is not to be remembered
	def          []byte // the definition as fixed by the checks; nil: as listed
	schema       args.Vetted
	task         mcp.TaskSupport // as listed in execution.taskSupport
	readOnlyHint bool
	pin          pins.Sum // the pin digest of def
	headerTool   *mcp.Tool
}

// apply gives e what t found, and the task support and read-only marking
// that the child's declared capabilities and the config add; it returns why
// the tool must be left out, or "".
func (t *checkedTool) apply(e *Entry, readOnly bool, caps mcp.ServerCapabilities) string {
	if (t.task == mcp.TaskSupportOptional || t.task == mcp.TaskSupportRequired) && ToolTasks(caps) != nil {
		e.Task = t.task
	}
	if t.task == mcp.TaskSupportRequired && e.Task == "" {
		return TaskOnly
	}
	if t.def != nil {
		e.Def = t.def
	}
	e.Pin, e.HeaderTool = t.pin, t.headerTool
	// A new checker: compiled copies for calls are never carried over.
	e.Args = t.schema.Checker()
	e.ReadOnly = readOnly
	return ""
}

// checkTool checks the definition def of a tool, decoded as w (shapeErr
// is what decoding it as an mcp.Tool, schemas aside, gave), and vets its
// inputSchema; it returns what it found, or why the tool must be left out.
func (b *Builder) checkTool(w *wireEntry, def []byte, shapeErr error, caps mcp.ServerCapabilities, vetted args.Memo) (checkedTool, string, error) {
	t := checkedTool{id: w.Name}
	if w.Execution != nil {
		t.task = w.Execution.TaskSupport
	}
	if t.task == mcp.TaskSupportRequired && ToolTasks(caps) == nil {
		return t, TaskOnly, nil
	}
	fixed, changed := def, false
	in := w.InputSchema
	if trimmed := bytes.TrimSpace(in); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		in = json.RawMessage(`{"type":"object"}`)
	}
	norm, err := args.ObjectSchema(in)
	if err != nil {
		return t, "its inputSchema is not an object schema", err
	}
	if !bytes.Equal(norm, w.InputSchema) {
		changed = true
		if fixed, err = jsonwire.WithField(fixed, "inputSchema", norm); err != nil {
			return t, "not a valid definition", err
		}
	}
	a, err := vetted.Checker(norm, b.limits, b.vetted)
	if err != nil {
		return t, args.SchemaRefusal(err), err
	}
	t.schema = a.Vetted()
	outFixed := w.OutputSchema // the outputSchema of fixed
	if out := bytes.TrimSpace(w.OutputSchema); len(out) > 0 {
		repaired, err := args.ObjectSchema(out)
		switch {
		case bytes.Equal(out, []byte("null")) || err != nil:
			// The tool still works; clients just cannot check its structured
			// content. Not remembered, so that every read says so.
			b.log.Warn().Err(err).Str("child_tool", w.Name).Msg("outputSchema left out: not an object schema")
			t.id, changed, outFixed = "", true, nil
			fixed, err = jsonwire.WithoutField(fixed, "outputSchema")
		case !bytes.Equal(repaired, w.OutputSchema):
			changed, outFixed = true, repaired
			fixed, err = jsonwire.WithField(fixed, "outputSchema", repaired)
		}
		if err != nil {
			return t, "not a valid definition", err
		}
	}
	if MayAnnotateHeaders(fixed) {
		var typed mcp.Tool
		if err := json.Unmarshal(fixed, &typed); err != nil {
			return t, "not a valid definition", err
		}
		if err := mcp.ValidateParamHeaderAnnotations(&typed); err != nil {
			return t, "invalid x-mcp-header annotations", err
		}
		t.headerTool = &typed
	} else if err := schemasDecode(shapeErr, norm, outFixed); err != nil {
		// What an mcp.Tool would refuse, found without building one: fixed
		// differs from def only in its schemas.
		return t, "not a valid definition", err
	}
	t.readOnlyHint = w.readOnlyHint
	if changed {
		t.def = fixed
	}
	return t, "", nil
}

// headerKey is the member mcp-go's header annotations check looks for.
const headerKey = "x-mcp-header"

// MayAnnotateHeaders reports whether a tool's definition could hold an
// x-mcp-header member as encoding/json, which mcp-go's check decodes with,
// would read it: in any case (none of its letters folds to a non-ASCII
// one), or spelled with escapes (any backslash). A definition without one
// passes that check, which re-encodes and decodes the whole inputSchema to
// find out.
func MayAnnotateHeaders(def []byte) bool {
	if bytes.IndexByte(def, '\\') >= 0 {
		return true
	}
	for i := 0; i+len(headerKey) <= len(def); i++ {
		if def[i+1] == '-' && bytes.EqualFold(def[i:i+len(headerKey)], []byte(headerKey)) {
			return true
		}
	}
	return false
}

// pinSum is the digest of the definition def of a tool or prompt of kind k
// that c offers under its own name orig; the zero Sum, which no pin has,
// when pinning is off or def has no canonical form (a definition the
// catalog accepted always has one).
func (b *Builder) pinSum(k Kind, orig string, def []byte) pins.Sum {
	pk, ok := PinKindOf(k)
	if !b.Pinned || !ok {
		return pins.Sum{}
	}
	sum, err := pins.Digest(pk, b.alias, orig, def)
	if err != nil {
		b.log.Error().Err(err).Msg("definition has no canonical form: it matches no pin")
	}
	return sum
}

var PinKinds = [...]struct {
	K   Kind
	Pin pins.Kind
}{{KindTool, pins.Tool}, {KindPrompt, pins.Prompt}}

// PinKindOf is the pin kind of entries of kind k, and whether they are
// pinned at all.
func PinKindOf(k Kind) (pins.Kind, bool) {
	for _, pk := range PinKinds {
		if pk.K == k {
			return pk.Pin, true
		}
	}
	return "", false
}

// KindOfPin is the entry kind of pins of kind pk, PinKindOf's inverse.
func KindOfPin(pk pins.Kind) Kind {
	for _, k := range PinKinds {
		if k.Pin == pk {
			return k.K
		}
	}
	return KindTool // pins.Parse reads no other kind
}

// Forget drops what b remembers of its earlier builds: the next build
// checks every definition afresh.
func (b *Builder) Forget() { b.vetted, b.checked = nil, nil }

// Remembered is how many tool definitions b remembers as checked.
func (b *Builder) Remembered() int { return len(b.checked) }
