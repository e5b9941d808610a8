// Command mcpmux puts many MCP servers behind one.
//
//	mcpmux serve    --config FILE [--identity NAME] [--listen ADDR] [--stdio]   serve MCP (the default)
//	mcpmux validate --config FILE                     check the config, every policy file and the pin file
//	mcpmux tools    --config FILE --as NAME [--claims JSON] [--json]  print the catalog NAME would see
//	mcpmux call     --config FILE --as NAME [--claims JSON] TOOL JSON send one call through the pipeline
//	mcpmux pins diff|approve --config FILE [--live] [NAME...]  compare held or live tools and prompts with their pins, or pin them
//	mcpmux version
//	mcpmux help [COMMAND]                             the usage of every command (usage.go), or of one
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"unicode"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/pipeline"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/pins"
	"github.com/mcpmux/mcpmux/policy"
)

// Exit codes of the one-shot commands.
const (
	exitOK        = 0
	exitToolError = 1 // a result with isError, an unavailable child, a timeout
	exitRefused   = 2 // unknown name, invalid arguments, policy, usage
	exitBadConfig = 3
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childproc.SupervisorArg {
		os.Exit(childproc.RunSupervisor())
	}
	// Before anything secret is read: a child running as mcpmux's user must
	// not read mcpmux's environment or memory through /proc.
	if err := childproc.ProtectSelf(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpmux: %v\n", err)
		os.Exit(1)
	}
	// A client that closes mcpmux's stdout or stderr must not kill it with
	// SIGPIPE: children would skip their graceful stop. Caught rather than
	// ignored, since an ignored signal stays ignored in children.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stopProfiles := startProfiles()
	code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfiles()
	os.Exit(code)
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) > 0 && isHelp(args[0]) {
		// mcpmux --help is help for mcpmux, not for serve.
		cmd, args = "help", args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stdin, stdout, stderr)
	case "validate":
		return validate(args, stdout, stderr)
	case "tools":
		return tools(args, stdout, stderr)
	case "call":
		return call(args, stdout, stderr)
	case "pins":
		return pinsCmd(args, stdout, stderr)
	case "version":
		c := lookup("version")
		if code, done := c.parse(c.flagSet(), args, stdout, stderr); done {
			return code
		}
		fmt.Fprintf(stdout, "mcpmux %s (%s)\n", mux.Version, runtime.Version())
		return exitOK
	case "help":
		return help(args, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "mcpmux: unknown command %q\n", cmd)
		writeAllUsage(stderr, "")
		return exitRefused
	}
}

// loaded is everything a command that runs the mux needs.
type loaded struct {
	cfg      *config.Config
	log      zerolog.Logger
	logOut   *logOutput // log's level and format, which a reload changes
	policies *policy.Store
}

// load loads the config and the policies. A command that serves nothing
// upstream loads it offline: the upstream's secrets it lacks are warnings,
// logged with their file and line.
func load(path string, stderr io.Writer, offline bool) (*loaded, int) {
	if path == "" {
		fmt.Fprintln(stderr, "mcpmux: --config is required")
		return nil, exitRefused
	}
	var (
		cfg      *config.Config
		warnings config.Errors
		err      error
	)
	if offline {
		cfg, warnings, err = config.LoadOffline(path)
	} else {
		cfg, err = config.Load(path)
	}
	if err != nil {
		report(stderr, err)
		return nil, exitBadConfig
	}
	logOut := newLogOutput(cfg.Mux, stderr)
	log := zerolog.New(logOut).Level(zerolog.TraceLevel).With().Timestamp().Logger()
	liblog.RouteDefaults(log)
	for _, w := range warnings {
		log.Warn().Str("file", cfg.File).Int("line", w.Line).Msg(w.Msg)
	}
	policies, err := policy.NewStore(cfg.Mux.PolicyDir, log)
	if err != nil {
		fmt.Fprintf(stderr, "%s: policy_dir: %v\n", shown(cfg.File), err)
		return nil, exitBadConfig
	}
	policies.WarnUnmatchable(servers(cfg))
	return &loaded{cfg: cfg, log: log, logOut: logOut, policies: policies}, exitOK
}

func muxOptions(log zerolog.Logger) mux.Options {
	opts := mux.Options{Log: log}
	if self, err := os.Executable(); err == nil {
		opts.Supervisor = self
	} else {
		log.Warn().Err(err).Msg("cannot find mcpmux's own binary: children run without a supervisor, and their descendants may outlive a killed mcpmux")
	}
	return opts
}

// validate reports every problem of the config and of every policy file,
// then warnings about policy patterns that can never match, all on stderr.
// Warnings alone do not fail it.
func validate(args []string, stdout, stderr io.Writer) int {
	c := lookup("validate")
	fs := c.newFlagSet()
	cfgPath := defineConfig(fs)
	if code, done := c.parse(fs, args, stdout, stderr); done {
		return code
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "mcpmux: --config is required")
		return exitRefused
	}
	// A config with problems still names its policy directory and servers
	// (a key in error holds its default), so the policies are checked too.
	cfg, warnings, err := config.Inspect(*cfgPath)
	if err != nil {
		report(stderr, err)
	}
	if cfg == nil {
		return exitBadConfig
	}
	// Every error first, then every warning.
	printWarnings := func() {
		for _, w := range warnings {
			warn(stderr, w.File, w.Line, w.Msg)
		}
	}
	bad := err != nil
	set, problems := policy.LoadDir(cfg.Mux.PolicyDir)
	if set == nil {
		// The directory itself could not be read.
		for _, p := range problems {
			fmt.Fprintf(stderr, "%s: policy_dir: %v\n", shown(cfg.File), p)
		}
		printWarnings()
		return exitBadConfig
	}
	for _, p := range problems {
		report(stderr, p)
	}
	bad = bad || len(problems) > 0
	// serve refuses to start on a pin file that does not parse.
	if cfg.Mux.Pinning != config.PinningOff {
		if _, err := pins.Open(cfg.Mux.PinFile, zerolog.Nop(), pins.Options{NoWrite: true}); err != nil {
			report(stderr, err)
			bad = true
		}
	}
	printWarnings()
	for _, w := range set.Unmatchable(servers(cfg)) {
		warn(stderr, w.File, w.Line, w.Msg)
	}
	if bad {
		return exitBadConfig
	}
	fmt.Fprintf(stdout, "%s: ok (%d servers, %d policies in %s)\n", shown(cfg.File), len(cfg.Servers), len(set.Identities()), shown(cfg.Mux.PolicyDir))
	return exitOK
}

// servers returns what policy warnings check patterns against.
func servers(cfg *config.Config) policy.Servers {
	out := policy.Servers{Separator: cfg.Mux.Separator, Aliases: make([]string, len(cfg.Servers))}
	for i, s := range cfg.Servers {
		out.Aliases[i] = s.Alias
		out.Unprefixed = out.Unprefixed || !s.Prefix
	}
	return out
}

// startMux loads the config and runs the children for a one-shot command,
// waiting until each has started or failed. On failure it returns the exit
// code, having said why.
//
// as, the identity the command acts as, must have a policy: without one it
// may use nothing, which is said rather than shown as an empty catalog.
func startMux(cmd, cfgPath, as string, stderr io.Writer) (*mux.Mux, context.CancelFunc, int) {
	l, code := load(cfgPath, stderr, true)
	if l == nil {
		return nil, nil, code
	}
	if code := checkIdentity(cmd, l, as, stderr); code != exitOK {
		return nil, nil, code
	}
	opts := muxOptions(l.log)
	if l.cfg.Mux.Pinning != config.PinningOff {
		// The pins serve holds, so that what is listed and callable is
		// what serve offers; read only: a first sight is not recorded.
		store, err := pins.Open(l.cfg.Mux.PinFile, l.log.With().Str("component", "pins").Logger(), pins.Options{NoWrite: true})
		if err != nil {
			report(stderr, err)
			return nil, nil, exitBadConfig
		}
		opts.Pins = store
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	m := mux.New(l.cfg, l.policies, opts)
	m.Start(ctx)
	_ = m.WaitReady(ctx)
	return m, func() { m.Close(); stop() }, exitOK
}

// notReady writes a line for each child of m that did not come up, with
// what that means for the command's output and why, and reports whether
// there was one.
func notReady(cmd string, m *mux.Mux, stderr io.Writer, consequence string) bool {
	some := false
	for _, c := range m.Status() {
		if c.Phase == child.PhaseReady {
			continue
		}
		some = true
		why := "not ready"
		if c.LastErr != nil {
			// Its errors start "server ALIAS: ", said already.
			why = strings.TrimPrefix(c.LastErr.Error(), "server "+c.Alias+": ")
		}
		fmt.Fprintf(stderr, "mcpmux %s: server %s did not come up (%s; %s): %s\n", cmd, c.Alias, c.Phase, consequence, why)
	}
	return some
}

func tools(args []string, stdout, stderr io.Writer) int {
	c := lookup("tools")
	fs := c.newFlagSet()
	f := defineTools(fs)
	if code, done := c.parse(fs, args, stdout, stderr); done {
		return code
	}
	cfgPath, as, claims, asJSON := f.config, f.as, f.claims, f.json
	if !config.ValidIdentity(*as) {
		fmt.Fprintln(stderr, "mcpmux tools: --as needs a valid identity name")
		return exitRefused
	}
	m, stop, code := startMux("tools", *cfgPath, *as, stderr)
	if m == nil {
		return code
	}
	defer stop()
	list := m.Tools(mux.WithCaller(context.Background(), *as, claims.m))
	if *asJSON {
		type entry struct {
			Name      string `json:"name"`
			Server    string `json:"server"`
			ChildName string `json:"child_name"`
			ReadOnly  bool   `json:"read_only"`
			Tool      any    `json:"tool"`
		}
		entries := make([]entry, 0, len(list))
		for _, t := range list {
			entries = append(entries, entry{t.Name, t.Server, t.ChildName, t.ReadOnly, t.Def})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(entries); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tCHILD TOOL\tSERVER\tMODE")
		for _, t := range list {
			mode := "read-write"
			if t.ReadOnly {
				mode = "read-only"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, tableField(t.ChildName), t.Server, mode)
		}
		_ = tw.Flush()
		sizes := m.ToolListSizes(mux.WithCaller(context.Background(), *as, claims.m))
		inForce := "full"
		if sizes.Searching {
			inForce = "search"
		}
		// About 4 bytes of JSON a token: what a model's tokenizer makes of
		// tool definitions, within a fifth or so. After a blank line: the
		// table is what comes before it.
		fmt.Fprintf(stdout, "\ntools/list of %s's client, about: full %d tokens (%d bytes), search %d tokens (%d bytes); in force: %s\n",
			*as, sizes.Full/4, sizes.Full, sizes.Search/4, sizes.Search, inForce)
	}
	// What the others offer is printed, but a catalog without a server is
	// not the one serve would offer.
	if notReady("tools", m, stderr, "its tools are not listed") {
		return exitToolError
	}
	return exitOK
}

// claims is the value of --claims: the JWT claims a caller would have, so
// that tools and call show what policy rules over claims decide for it.
type claims struct{ m map[string]any }

// claimsFlag defines --claims on fs.
func claimsFlag(fs *flag.FlagSet) *claims {
	c := &claims{}
	fs.Var(c, "claims", "the caller's JWT claims, a `JSON` object, for policy rules that read claims (default: none)")
	return c
}

func (c *claims) String() string {
	if c == nil || c.m == nil {
		return ""
	}
	b, _ := json.Marshal(c.m)
	return string(b)
}

// Set parses a JSON object; anything else is a usage error.
func (c *claims) Set(s string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return fmt.Errorf("want a JSON object, such as '{\"team\":\"ops\"}'")
	}
	c.m = m
	return nil
}

// tableField quotes a name a child chose if it could break the table's
// columns or lines, or hide in it.
func tableField(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r == '"' || unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func call(args []string, stdout, stderr io.Writer) int {
	c := lookup("call")
	fs := c.newFlagSet()
	f := defineCall(fs)
	if code, done := c.parse(fs, args, stdout, stderr); done {
		return code
	}
	cfgPath, as, claims := f.config, f.as, f.claims
	if !config.ValidIdentity(*as) || fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintln(stderr, "mcpmux call: --as needs a valid identity name, then come TOOL and, optionally, its arguments as a JSON object")
		fmt.Fprintln(stderr)
		c.writeUsage(stderr)
		return exitRefused
	}
	name, raw := fs.Arg(0), "{}"
	if fs.NArg() == 2 {
		raw = fs.Arg(1)
	}
	var arguments any
	if err := json.Unmarshal([]byte(raw), &arguments); err != nil {
		fmt.Fprintf(stderr, "mcpmux call: arguments are not JSON: %v\n", err)
		return exitRefused
	}
	if _, ok := arguments.(map[string]any); !ok {
		fmt.Fprintln(stderr, "mcpmux call: arguments must be a JSON object")
		return exitRefused
	}
	m, stop, code := startMux("call", *cfgPath, *as, stderr)
	if m == nil {
		return code
	}
	defer stop()

	r := m.CallTool(mux.WithCaller(context.Background(), *as, claims.m), *as, name, json.RawMessage(raw))
	if r.Rule != nil {
		// What the caller would be told, and which rule of which file said it.
		rule := r.Rule.Rule
		fmt.Fprintf(stderr, "mcpmux call: %s refused by rule %d (%s:%d): %v\n", name, rule.Index, shown(rule.File), rule.Line, r.Rule)
		return exitRefused
	}
	res := r.ToolResult()
	if res == nil {
		if err := m.Unavailable(name); err != nil && r.Decision == pipeline.DecisionUnknown {
			fmt.Fprintln(stderr, err)
			return exitToolError
		}
		if r.Decision == pipeline.DecisionHeld {
			fmt.Fprintf(stderr, "mcpmux call: %s is held by pinning (callers are told it is unknown); see mcpmux pins diff\n", name)
			return exitRefused
		}
		fmt.Fprintf(stderr, "%v: %s\n", pipeline.ErrUnknownTool, name)
		return exitRefused
	}
	// The child's result is printed as it sent it.
	var out bytes.Buffer
	var err error
	if r.Raw != nil {
		err = json.Indent(&out, r.Raw, "", "  ")
		out.WriteByte('\n')
	} else {
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	}
	if err == nil {
		_, err = stdout.Write(out.Bytes())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	switch {
	case r.Decision == pipeline.DecisionInvalid:
		return exitRefused
	case res.IsError:
		return exitToolError
	}
	return exitOK
}
