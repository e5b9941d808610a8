// Package policy owns mcpmux's policy files: it parses them, answers
// whether an identity may see and use a tool, prompt or resource, and
// watches the policy directory so that an edited policy takes effect
// without a restart.
//
// Each identity has one file, <identity>.toml, in the policy directory:
//
//	allow = ["docs__*"]              # tools and prompts this identity may see and use
//	allow_read_only = ["tickets__*"] # the same, but only read-only tools
//	deny = ["*__delete_*"]           # wins over both allows
//	allow_resources = ["docs"]       # servers whose resources it may list and read
//	catalog = "search"               # its catalog mode: full, search or auto (default: the config's)
//	always = ["docs__search"]        # in search mode, listed besides mcpmux's own two tools
//
// allow, allow_read_only and deny are globs over exposed names;
// allow_resources is globs over server aliases, since exposed resource URIs
// are a rewrite scheme nobody should write globs over.
//
// After these keys come any number of [[rule]] tables (rules.go), each a
// CEL condition on the calls of the tools its tools globs name:
//
//	[[rule]]
//	tools = ["fs__read_*"]
//	allow_if = 'args.path.startsWith("/data/public/")' # or deny_if
//	message = "reader may read only under /data/public"
//
// A rule is compiled when its file is read and sees args, tool, server,
// identity and claims; one that does not read args decides the same for
// every call of a tool by one caller, so it can hide the tool too.
//
// The format is strict: an unknown key, a value of the wrong type or an
// empty pattern is an error, reported as FILE:LINE: message, because a typo
// must never silently change who may do what. An empty file is a valid
// policy that grants nothing, and an identity without a file has no access.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/mcpmux/mcpmux/internal/fileerr"
	"github.com/mcpmux/mcpmux/internal/glob"
)

// ext is the file name extension of policy files.
const ext = ".toml"

// maxFileSize bounds how much of a file is read: a policy is a few lines,
// and a policy directory entry pointing at something huge (or endless) must
// not stall a reload.
const maxFileSize = 1 << 20

// Policy is one identity's policy file: its globs and its [[rule]]s. It is
// never modified after Parse returns it, so it may be shared freely.
type Policy struct {
	Identity string // the file name without ".toml"
	File     string // the file the policy was read from

	allow, allowReadOnly, deny, allowResources glob.Set
	// always is the tools listed in search mode besides mcpmux's own.
	always glob.Set
	// catalog is the identity's catalog mode ("full", "search", "auto"),
	// "" for the config's.
	catalog string

	// patterns holds the patterns as written, each list sorted and
	// de-duplicated, so that two policies with the same meaning compare
	// equal however their files are laid out.
	patterns [numKeys][]string

	// written is every pattern of the keys above in file order, with its
	// line, for warnings (a rule keeps its own tools patterns).
	written []pattern

	// rules is the [[rule]] tables, compiled, in file order.
	rules []*Rule
}

// pattern is one glob as written in a policy file.
type pattern struct {
	key  int // keyAllow and the rest; -1 in a [[rule]]'s tools
	glob string
	line int
}

// Kind is the kind of thing a client may be allowed to see and use.
type Kind uint8

// The kinds of Item.
const (
	Tool Kind = iota + 1
	Prompt
	Resource
)

var kindNames = [...]string{Tool: "tool", Prompt: "prompt", Resource: "resource"}

// String returns "tool", "prompt" or "resource", for logs.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Item is what a policy is asked about: a tool, a prompt, or a resource or
// resource template.
type Item struct {
	Kind Kind
	// Name is the exposed name of a tool or prompt. Resources are granted
	// by server, so a resource's Name is not consulted.
	Name string
	// Server is the alias of the server that owns the item. Only resources
	// are granted by it.
	Server string
	// ReadOnly reports whether a tool is read-only. Only tools have it.
	ReadOnly bool
}

// Allows reports whether the policy lets its identity see and use it:
//
//   - a tool when its name matches allow, or allow_read_only and the tool
//     is read-only, and does not match deny;
//   - a prompt when its name matches allow and not deny (a prompt is
//     never read-only, so allow_read_only does not grant it);
//   - a resource when its server's alias matches allow_resources (deny is
//     over exposed names and does not apply).
//
// A nil policy permits nothing, and no policy permits an item of an
// unknown kind (the zero Kind among them), so an Item built without its
// Kind grants nothing.
//
// Allows is called on every call, read and list entry, so it takes no
// locks and allocates nothing (see TestAllowsDoesNotAllocate).
func (p *Policy) Allows(it Item) bool {
	if p == nil {
		return false
	}
	switch it.Kind {
	case Tool:
		return !p.deny.Match(it.Name) && (p.allow.Match(it.Name) || it.ReadOnly && p.allowReadOnly.Match(it.Name))
	case Prompt:
		return !p.deny.Match(it.Name) && p.allow.Match(it.Name)
	case Resource:
		return it.Server != "" && p.allowResources.Match(it.Server)
	}
	return false
}

// Catalog is the identity's catalog mode, one of CatalogModes, or "" when
// its file leaves it to the config.
func (p *Policy) Catalog() string {
	if p == nil {
		return ""
	}
	return p.catalog
}

// Always reports whether search mode lists the tool of the exposed name
// besides mcpmux's own (the policy's always patterns).
func (p *Policy) Always(name string) bool { return p != nil && p.always.Match(name) }

// HasAlways reports whether the policy names any tool to list always.
func (p *Policy) HasAlways() bool { return p != nil && len(p.patterns[keyAlways]) > 0 }

// sameAccess reports whether p and q grant exactly the same access, however
// their files are laid out. Two nil policies have the same access; a nil
// and a non-nil policy do not, since
// having no policy file differs from having an empty one only in being
// absent from a Set.
func (p *Policy) sameAccess(q *Policy) bool {
	if p == nil || q == nil {
		return p == q
	}
	for k := range p.patterns {
		if !slices.Equal(p.patterns[k], q.patterns[k]) {
			return false
		}
	}
	return p.catalog == q.catalog && slices.EqualFunc(p.rules, q.rules, (*Rule).sameMeaning)
}

// sameAsWritten reports whether p and q grant the same access and every rule
// is where it was (file and line), so that one may stand for the other in
// what is reported too: the audit line names a refusing rule's line.
func (p *Policy) sameAsWritten(q *Policy) bool {
	return p.sameAccess(q) && (p == nil || slices.EqualFunc(p.rules, q.rules, func(r, s *Rule) bool {
		return r.File == s.File && r.Line == s.Line
	}))
}

// String returns the policy's rules in policy file syntax, for logs.
func (p *Policy) String() string {
	if p == nil {
		return "<no policy>"
	}
	var b strings.Builder
	for k, pats := range p.patterns {
		if len(pats) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(keyNames[k])
		b.WriteString(" = [")
		for i, s := range pats {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(s))
		}
		b.WriteString("]")
	}
	if p.catalog != "" {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "catalog = %q", p.catalog)
	}
	if len(p.rules) > 0 {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d rules", len(p.rules))
	}
	return b.String()
}

// identityOf returns the identity whose policy is in the named file: the
// base name without ".toml". It returns "" for a name that is not a policy
// file: one not ending in ".toml", or a dotfile (editors' temporary files
// and Kubernetes' ..data links are dotfiles).
func identityOf(file string) string {
	base := filepath.Base(file)
	if strings.HasPrefix(base, ".") || !strings.HasSuffix(base, ext) {
		return ""
	}
	return strings.TrimSuffix(base, ext)
}

// ParseFile reads and parses the policy file at path.
func ParseFile(path string) (*Policy, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses the contents of a policy file. file names the file in errors
// and gives the policy's identity: its base name without ".toml".
//
// Problems in the contents are reported as Errors, all of them when the
// file is valid TOML, else the syntax error alone.
func Parse(file string, data []byte) (*Policy, error) {
	id := identityOf(file)
	if id == "" {
		return nil, fmt.Errorf("policy: %s: not a policy file name (want IDENTITY%s)", file, ext)
	}
	pats, decls, catalog, errs := parseContents(file, data)
	if pats == nil {
		return nil, errs // a syntax error: nothing else can be read
	}
	// Every expression is compiled, that of a rule in error too, so that a
	// file's problems are all reported at once.
	p := &Policy{Identity: id, File: file, written: pats}
	for i := range decls {
		d := &decls[i]
		if d.conflict != nil {
			_, es := compileRule(file, i+1, d.conflict)
			errs = append(errs, es...)
		}
		if d.expr == "" {
			continue // none, or one in error: reported
		}
		r, es := compileRule(file, i+1, d)
		errs = append(errs, es...)
		p.rules = append(p.rules, r)
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, errs
	}
	var byKey [numKeys][]string
	for _, pat := range pats {
		byKey[pat.key] = append(byKey[pat.key], pat.glob)
	}
	p.catalog = catalog
	sets := [numKeys]*glob.Set{&p.allow, &p.allowReadOnly, &p.deny, &p.allowResources, &p.always}
	for k, pats := range byKey {
		// Compile reports nothing for patterns parseContents accepted; the
		// check stays so that a stricter glob cannot be ignored here.
		set, err := glob.CompileSet(pats)
		if err != nil {
			return nil, fmt.Errorf("policy: %s: %s: %w", file, keyNames[k], err)
		}
		*sets[k] = set
		p.patterns[k] = slices.Compact(slices.Sorted(slices.Values(pats)))
	}
	return p, nil
}

// readFile reads a policy file, refusing ones too large to be a policy.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("policy: %s: file is larger than %d bytes", path, maxFileSize)
	}
	return data, nil
}

// The keys of a policy file, in the order they are documented.
const (
	keyAllow = iota
	keyAllowReadOnly
	keyDeny
	keyAllowResources
	keyAlways
	numKeys
)

var keyNames = [numKeys]string{"allow", "allow_read_only", "deny", "allow_resources", "always"}

// keyCatalog is the one key whose value is a string, not patterns.
const keyCatalog = "catalog"

// CatalogModes are the values of catalog: every tool listed, two tools of
// mcpmux's own to find and call them, or search above a number of tools.
var CatalogModes = []string{"full", "search", "auto"}

// keyList is the keys for messages: "allow, allow_read_only, deny,
// allow_resources".
var keyList = strings.Join(append(keyNames[:], keyCatalog), ", ")

var utf8BOM = []byte("\ufeff")

// parseContents returns the patterns of a policy file, in file order, its
// [[rule]] tables, and every problem found in them. After a syntax error it
// returns that error alone, and no patterns or tables.
//
// It walks go-toml's syntax tree rather than decoding into a struct, for two
// reasons found in go-toml v2's decoder. It matches keys to fields without
// regard to case, so a file with both deny and Deny would silently lose
// one deny list. And it reports some errors inside arrays at line 1,
// because array nodes carry no position. Here every problem is located by a
// key or a scalar value, whose positions are exact.
func parseContents(file string, data []byte) ([]pattern, []ruleDecl, string, Errors) {
	var (
		pats        []pattern
		decls       []ruleDecl
		errs        Errors
		catalog     string
		catalogLine int
		seen        [numKeys]int // line each key was set on; 0 if not yet
		// section is where key-values go: -1 the top level (also after a
		// table in error), else the index of a [[rule]] in decls.
		section  = -1
		ruleSeen map[string]int // the current rule's keys, by line
	)
	// go-toml rejects a byte order mark, which some editors write.
	data = bytes.TrimPrefix(data, utf8BOM)
	var p unstable.Parser
	p.Reset(data)
	report := func(line int, format string, args ...any) {
		errs = append(errs, &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	for p.NextExpression() {
		expr := p.Expression()
		key, keyLine := keyOf(&p, expr)
		switch {
		case expr.Kind == unstable.ArrayTable && key == "rule":
			decls = append(decls, ruleDecl{line: keyLine})
			section, ruleSeen = len(decls)-1, map[string]int{}
			continue
		case expr.Kind == unstable.ArrayTable:
			report(keyLine, "unexpected table [[%s]]: the only tables of a policy are [[rule]]", key)
			section = -1
			continue
		case expr.Kind == unstable.Table && key == "rule":
			report(keyLine, "[rule] must be written [[rule]]: a policy has a list of rules")
			section = -1
			continue
		case expr.Kind != unstable.KeyValue:
			report(keyLine, "unexpected table [%s]: a policy has only the keys %s and [[rule]] tables", key, keyList)
			section = -1
			continue
		case section >= 0:
			ruleKey(&p, expr, key, keyLine, &decls[section], ruleSeen, report)
			continue
		}
		if key == keyCatalog {
			switch v := expr.Value(); {
			case catalogLine != 0:
				report(keyLine, "duplicate key %q (first set on line %d)", key, catalogLine)
			case v.Kind != unstable.String || !slices.Contains(CatalogModes, string(v.Data)):
				report(lineOf(&p, v, keyLine), "catalog must be one of %q", CatalogModes)
			default:
				catalog, catalogLine = string(v.Data), keyLine
			}
			continue
		}
		k := slices.Index(keyNames[:], key)
		if k < 0 {
			report(keyLine, "unknown key %q", key)
			continue
		}
		if seen[k] != 0 {
			report(keyLine, "duplicate key %q (first set on line %d)", key, seen[k])
			continue
		}
		seen[k] = keyLine
		for pat, line := range arrayStrings(&p, expr.Value(), key, keyLine, report) {
			pats = append(pats, pattern{key: k, glob: pat, line: line})
		}
	}
	if err := p.Error(); err != nil {
		// After a syntax error, nothing found before it is worth reporting:
		// the file is being edited or is not a policy file at all.
		return nil, nil, "", Errors{syntaxError(file, data, err)}
	}
	for i := range decls {
		d := &decls[i]
		switch {
		case !d.toolsSet:
			report(d.line, "rule %d has no tools: say which tools it governs (tools = [\"*\"] for all)", i+1)
		case d.kind == "":
			report(d.line, "rule %d has neither allow_if nor deny_if", i+1)
		}
	}
	if pats == nil {
		pats = []pattern{} // not nil: told apart from a syntax error
	}
	return pats, decls, catalog, errs
}

// arrayStrings returns the strings of the array value of key, each with its
// line, reporting what is not a non-empty string.
func arrayStrings(p *unstable.Parser, value *unstable.Node, key string, keyLine int, report func(int, string, ...any)) iter.Seq2[string, int] {
	return func(yield func(string, int) bool) {
		if value.Kind != unstable.Array {
			report(lineOf(p, value, keyLine), "%s must be an array of strings, not %s", key, kindName(value.Kind))
			return
		}
		for it := value.Children(); it.Next(); {
			el := it.Node()
			switch line := lineOf(p, el, keyLine); {
			case el.Kind != unstable.String:
				report(line, "%s must contain only strings, not %s", key, kindName(el.Kind))
			case len(el.Data) == 0:
				report(line, "empty pattern in %s", key)
			default:
				if !yield(string(el.Data), line) {
					return
				}
			}
		}
	}
}

// ruleKey reads one key-value of a [[rule]] table into d; seen holds the
// lines of the keys the table has set so far.
func ruleKey(p *unstable.Parser, expr *unstable.Node, key string, keyLine int, d *ruleDecl, seen map[string]int, report func(int, string, ...any)) {
	switch {
	case !slices.Contains(ruleKeys, key) && slices.Contains(keyNames[:], key):
		report(keyLine, "%s inside the [[rule]] of line %d: the policy's own keys go before the first [[rule]]", key, d.line)
		return
	case !slices.Contains(ruleKeys, key):
		report(keyLine, "unknown key %q in a [[rule]] (it has %s)", key, strings.Join(ruleKeys, ", "))
		return
	case seen[key] != 0:
		report(keyLine, "duplicate key %q in a [[rule]] (first set on line %d)", key, seen[key])
		return
	}
	seen[key] = keyLine
	value := expr.Value()
	if key == keyTools {
		d.toolsSet = true
		for pat, line := range arrayStrings(p, value, key, keyLine, report) {
			d.tools = append(d.tools, pattern{key: -1, glob: pat, line: line})
		}
		if it := value.Children(); value.Kind == unstable.Array && !it.Next() {
			report(keyLine, "tools is empty: the rule would govern no tool")
		}
		return
	}
	if key != keyMessage && d.kind != "" {
		report(keyLine, "a [[rule]] has one of allow_if and deny_if, not both (%s is on line %d)", d.kind, seen[d.kind])
		// Read still, so that its own problems are reported too.
		d.conflict = &ruleDecl{line: d.line, toolsSet: true}
		d = d.conflict
	}
	if key != keyMessage {
		d.kind = key // even when in error, so that it is not reported missing
	}
	line := lineOf(p, value, keyLine)
	if value.Kind != unstable.String {
		report(line, "%s must be a string, not %s", key, kindName(value.Kind))
		return
	}
	if strings.TrimSpace(string(value.Data)) == "" {
		report(line, "%s is empty", key)
		return
	}
	if key == keyMessage {
		d.message = string(value.Data)
		return
	}
	d.expr, d.exprLine = string(value.Data), line
	if body, ok := multiLineBody(p.Raw(value.Raw)); ok {
		// TOML drops a newline right after the opening quotes.
		lead := 0
		for _, nl := range []string{"\n", "\r\n"} {
			if b, ok := bytes.CutPrefix(body, []byte(nl)); ok {
				body, lead = b, 1
				break
			}
		}
		d.exprLine += lead
		d.exprLines = bytes.Count(body, []byte("\n")) == strings.Count(d.expr, "\n")
	}
}

// multiLineBody returns what is between the quotes of a multi-line string
// as written, and whether raw is one.
func multiLineBody(raw []byte) ([]byte, bool) {
	for _, q := range []string{"'''", `"""`} {
		if len(raw) >= 6 && bytes.HasPrefix(raw, []byte(q)) && bytes.HasSuffix(raw, []byte(q)) {
			return raw[3 : len(raw)-3], true
		}
	}
	return nil, false
}

// keyOf returns the dotted key of a key-value or table expression and the
// line it starts on.
func keyOf(p *unstable.Parser, expr *unstable.Node) (string, int) {
	var (
		b    strings.Builder
		line int
	)
	for it := expr.Key(); it.Next(); {
		if line == 0 {
			line = p.Shape(it.Node().Raw).Start.Line
		} else {
			b.WriteByte('.')
		}
		b.Write(it.Node().Data)
	}
	return b.String(), line
}

// lineOf returns the line a value starts on. go-toml records no position
// for an array, so an array is located by its first element that has one,
// or else at the fallback line.
func lineOf(p *unstable.Parser, n *unstable.Node, fallback int) int {
	if n.Kind != unstable.Array {
		return p.Shape(n.Raw).Start.Line
	}
	for it := n.Children(); it.Next(); {
		if line := lineOf(p, it.Node(), 0); line != 0 {
			return line
		}
	}
	return fallback
}

// syntaxError locates a go-toml parser error. The parser's error points into
// data (its "highlight"); anything else is reported without a line rather
// than at a wrong one.
func syntaxError(file string, data []byte, err error) *Error {
	e := &Error{File: file, Msg: err.Error()}
	var perr *unstable.ParserError
	if errors.As(err, &perr) && perr.Highlight != nil {
		// A subslice of data shares its backing array, so the capacity
		// left after it gives its offset (this is how go-toml does it).
		off := cap(data) - cap(perr.Highlight)
		if off >= 0 && off+len(perr.Highlight) <= len(data) {
			e.Line = 1 + bytes.Count(data[:off], []byte("\n"))
		}
	}
	return e
}

func kindName(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Bool:
		return "a boolean"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable:
		return "a table"
	case unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return "a date or time"
	}
	return strings.ToLower(k.String())
}

// Error is one problem in a policy file, located by line.
type Error = fileerr.Error

// Errors is every problem found in one policy file, in the order found
// (which is line order). Parse never returns an empty Errors.
type Errors = fileerr.Errors
