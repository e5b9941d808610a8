// Command procpeek is an MCP stdio server for mcpmux's isolation tests: a
// child that tries to read what it should not, and says who it is.
//
//	peek {paths: [string]}  who it runs as, and what it could read of each path
//	spawn_grandchild        start a long-lived 'sleep 1000' holding its stdout; return its pid
//
// peek answers with the JSON text of a Report.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Report is peek's answer.
type Report struct {
	Pid  int `json:"pid"`
	Ppid int `json:"ppid"`
	// Status holds the Uid, Gid, Groups and NoNewPrivs lines of
	// /proc/self/status, without their names.
	Status map[string]string `json:"status"`
	Reads  map[string]Read   `json:"reads"`
}

// Read is what came of reading one path.
type Read struct {
	Data  string `json:"data,omitempty"`  // up to 64 KiB of it
	Error string `json:"error,omitempty"` // of the open, or of the read
}

const maxRead = 64 << 10

func main() {
	s := server.NewMCPServer("procpeek", "0.1.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("peek",
		mcp.WithDescription("Report this process's ids and no_new_privs, and try to read each path."),
		mcp.WithArray("paths", mcp.WithStringItems()),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(peek(req.GetStringSlice("paths", nil)))
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(string(b)), nil
	})
	s.AddTool(mcp.NewTool("spawn_grandchild",
		mcp.WithDescription("Start a long-lived 'sleep 1000' that inherits this server's stdout and stderr; return its pid."),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cmd := exec.Command("sleep", "1000")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		go func() { _ = cmd.Wait() }()
		return mcp.NewToolResultText(strconv.Itoa(cmd.Process.Pid)), nil
	})
	if err := server.ServeStdio(s); err != nil {
		fmt.Fprintf(os.Stderr, "procpeek: %v\n", err)
		os.Exit(1)
	}
}

func peek(paths []string) Report {
	r := Report{Pid: os.Getpid(), Ppid: os.Getppid(), Status: map[string]string{}, Reads: map[string]Read{}}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
			switch k {
			case "Uid", "Gid", "Groups", "NoNewPrivs":
				r.Status[k] = strings.Join(strings.Fields(v), " ")
			}
		}
	}
	for _, p := range paths {
		r.Reads[p] = read(p)
	}
	return r
}

func read(path string) Read {
	f, err := os.Open(path)
	if err != nil {
		return Read{Error: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRead))
	r := Read{Data: string(b)}
	if err != nil {
		r.Error = "read: " + err.Error()
	}
	return r
}
