package main

// The commands' flags and usage. Each command's flags are defined in one
// place, used both to parse them and to print its usage, so that what
// help says is what the command takes.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// A command is one of mcpmux's commands as its usage shows it.
type command struct {
	name     string // "tools", "pins diff"
	synopsis string // what follows the name: flags and arguments
	what     string // what it does, one line
	// define defines the command's flags on fs; nil for none.
	define func(fs *flag.FlagSet)
}

// commands is every command, in the order usage lists them.
var commands = []*command{
	{"serve", "--config FILE [--identity NAME] [--listen ADDR] [--stdio]",
		"serve MCP over stdio to one client (the default command), and/or over streamable HTTP",
		func(fs *flag.FlagSet) { defineServe(fs) }},
	{"validate", "--config FILE",
		"check the config, every policy file and the pin file, reporting every problem; starts no child",
		func(fs *flag.FlagSet) { defineConfig(fs) }},
	{"tools", "--config FILE --as NAME [--claims JSON] [--json]",
		"start the children, print the catalog NAME would see, and stop",
		func(fs *flag.FlagSet) { defineTools(fs) }},
	{"call", "--config FILE --as NAME [--claims JSON] TOOL ['JSON']",
		"send one call of TOOL, with the arguments JSON (default {}), through the whole pipeline",
		func(fs *flag.FlagSet) { defineCall(fs) }},
	{"pins diff", "--config FILE [--live] [NAME...]",
		"show every tool and prompt (or the named ones) that running serve processes hold, or with --live whose live definition differs from its pin",
		func(fs *flag.FlagSet) { definePins(fs) }},
	{"pins approve", "--config FILE [--live] [NAME...]",
		"pin the definitions pins diff shows, of every tool and prompt or of the named ones",
		func(fs *flag.FlagSet) { definePins(fs) }},
	{"version", "", "print mcpmux's version", nil},
}

// lookup returns the command named name, or nil.
func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// newFlagSet returns an empty flag set for c, for parse; the command
// defines its flags on it with its define function.
func (c *command) newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("mcpmux "+c.name, flag.ContinueOnError)
	fs.Usage = func() {} // parse prints the usage, where it belongs
	return fs
}

// flagSet returns c's flags, defined.
func (c *command) flagSet() *flag.FlagSet {
	fs := c.newFlagSet()
	if c.define != nil {
		c.define(fs)
	}
	return fs
}

// line is "mcpmux NAME SYNOPSIS".
func (c *command) line() string {
	return strings.TrimSpace("mcpmux " + c.name + " " + c.synopsis)
}

// writeUsage writes c's usage: its synopsis, what it does and its flags.
func (c *command) writeUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s.\n", c.line(), capitalize(c.what))
	c.writeFlags(w)
}

// writeFlags writes c's flags as flag.PrintDefaults does.
func (c *command) writeFlags(w io.Writer) {
	fs := c.flagSet()
	var n int
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeAllUsage writes the usage of the commands named by prefix ("" for
// every one): each command's synopsis, what it does and its flags.
func writeAllUsage(w io.Writer, prefix string) {
	if prefix == "" {
		fmt.Fprint(w, "usage: mcpmux COMMAND [flags] [arguments]   (serve is the command when none is named)\n")
	}
	for _, c := range commands {
		if prefix != "" && !strings.HasPrefix(c.name, prefix) {
			continue
		}
		fmt.Fprintf(w, "\n%s\n    %s\n", c.line(), c.what)
		c.writeFlags(w)
	}
	if prefix == "" {
		fmt.Fprint(w, "\nmcpmux help COMMAND, or mcpmux COMMAND --help, shows one command's usage.\n")
	}
}

// parse parses args with fs, c's flags. A --help (or -h) prints c's usage
// on stdout and ends the command with exitOK; a bad flag prints flag's
// error and c's usage on stderr and ends it with exitRefused. done says
// whether the command is ended.
func (c *command) parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(stderr) // flag writes a bad flag's error there
	err := fs.Parse(args)
	switch {
	case err == nil:
		return exitOK, false
	case errors.Is(err, flag.ErrHelp):
		c.writeUsage(stdout)
		return exitOK, true
	}
	fmt.Fprintln(stderr)
	c.writeUsage(stderr)
	return exitRefused, true
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// help is mcpmux help [COMMAND]: every command's usage, or one's.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeAllUsage(stdout, "")
		return exitOK
	}
	name := strings.Join(args, " ")
	if c := lookup(name); c != nil {
		c.writeUsage(stdout)
		return exitOK
	}
	if name == "pins" {
		writeAllUsage(stdout, "pins ")
		return exitOK
	}
	fmt.Fprintf(stderr, "mcpmux help: unknown command %q\n", name)
	writeAllUsage(stderr, "")
	return exitRefused
}

// configFlag is --config.
func defineConfig(fs *flag.FlagSet) *string {
	return fs.String("config", "", "the config `FILE` (TOML)")
}

// pinsFlags are the flags of pins diff and pins approve.
type pinsFlags struct {
	config *string
	live   *bool
}

func definePins(fs *flag.FlagSet) *pinsFlags {
	return &pinsFlags{
		config: defineConfig(fs),
		live: fs.Bool("live", false, "start the servers and compare their live definitions, even when running serve processes hold some"+
			" (when none holds anything, the servers are started anyway)"),
	}
}

// serveFlags are serve's flags.
type serveFlags struct {
	config, identity, listen *string
	stdio                    *bool
}

func defineServe(fs *flag.FlagSet) *serveFlags {
	return &serveFlags{
		config:   defineConfig(fs),
		identity: fs.String("identity", "", "the identity `NAME` of the stdio client (overrides [upstream] identity)"),
		listen:   fs.String("listen", "", "serve streamable HTTP on the address `ADDR`, host:port (overrides [upstream] listen)"),
		stdio:    fs.Bool("stdio", false, "serve stdio as well when serving HTTP (stdio is served by default only without HTTP)"),
	}
}

// toolsFlags are tools' flags.
type toolsFlags struct {
	config, as *string
	claims     *claims
	json       *bool
}

func defineTools(fs *flag.FlagSet) *toolsFlags {
	return &toolsFlags{
		config: defineConfig(fs),
		as:     fs.String("as", "", "the identity `NAME` whose catalog to print"),
		claims: claimsFlag(fs),
		json:   fs.Bool("json", false, "print the tools as JSON: exposed name, server, the server's own name, read-only, definition"),
	}
}

// callFlags are call's flags.
type callFlags struct {
	config, as *string
	claims     *claims
}

func defineCall(fs *flag.FlagSet) *callFlags {
	return &callFlags{
		config: defineConfig(fs),
		as:     fs.String("as", "", "the identity `NAME` to call as"),
		claims: claimsFlag(fs),
	}
}
