package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TBXark/mcp-proxy (github.com/TBXark/mcp-proxy) is measured beside mcpmux
// over HTTP: given -tbxark PATH, it runs the measured echochild over stdio
// as its server "main" and serves it over streamable HTTP on loopback. It
// serves each server at BASE/NAME/ (here /main/) with the server's own tool
// names (no prefix), stateless (no session id), and speaks protocol
// versions up to 2025-11-25 (its mcp-go v0.44.0): a 2026-07-28 client's
// server/discover is answered "method not found" and mcp-go's client falls
// back to initialize at 2025-11-25, which the benchmark shows as n/a.
const tbxarkName = "TBXark/mcp-proxy HTTP"

// tbxarkServer is the name of the measured child in TBXark's config, and
// so the path it is served at.
const tbxarkServer = "main"

// tbxarkConfig writes TBXark's JSON config (v2, see its docs/
// CONFIGURATION.md) into dir and returns its path: one stdio server, the
// measured child with childArgs, served over streamable HTTP on a port of
// 127.0.0.1 the kernel picks; no authentication, no request log.
func tbxarkConfig(dir, echochild string, childArgs []string) (string, error) {
	type opts struct {
		PanicIfInvalid bool `json:"panicIfInvalid"`
		LogEnabled     bool `json:"logEnabled"`
	}
	cfg := map[string]any{
		"mcpProxy": map[string]any{
			// The base URL is only used by TBXark's SSE server (for the
			// endpoint it announces); its path prefixes every route.
			"baseURL": "http://127.0.0.1",
			"addr":    "127.0.0.1:0",
			"name":    "mcp-proxy",
			"version": "bench",
			"type":    "streamable-http",
			"options": opts{PanicIfInvalid: true},
		},
		"mcpServers": map[string]any{
			tbxarkServer: map[string]any{"command": echochild, "args": childArgs},
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "tbxark.json")
	return p, os.WriteFile(p, b, 0o644)
}

// tbxarkReady waits until TBXark has connected to its child and routed
// it ("<main> Handling requests at /main/", logged once the child's tools
// are added) and then until its HTTP server listens: it logs the address
// of its config, not the port it got, and starts listening in a goroutine
// of its own, so the port is read from /proc.
func tbxarkReady(w *watchLog) func(context.Context, int, <-chan struct{}) (string, error) {
	routed := w.await(func(l string) bool { return strings.Contains(l, "<"+tbxarkServer+"> Handling requests at ") })
	return func(ctx context.Context, pid int, exited <-chan struct{}) (string, error) {
		select {
		case <-routed:
		case <-exited:
			return "", errExited
		case <-ctx.Done():
			return "", ctx.Err()
		}
		deadline := time.After(10 * time.Second)
		for {
			if port, ok := listeningPort(pid); ok {
				return fmt.Sprintf("http://127.0.0.1:%d/%s/", port, tbxarkServer), nil
			}
			select {
			case <-exited:
				return "", errExited
			case <-ctx.Done():
				return "", ctx.Err()
			case <-deadline:
				return "", fmt.Errorf("routed its server but listened on no port of 127.0.0.1 within 10s")
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
}
