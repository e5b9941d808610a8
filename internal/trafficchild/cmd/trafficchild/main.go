// Command trafficchild is the trafficchild test server over stdio.
package main

import (
	"context"
	"os"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/trafficchild"
)

func main() {
	out := trafficchild.NewFlusher(os.Stdout)
	c := trafficchild.New(out)
	c.RecordFile = os.Getenv("TRAFFICCHILD_RECORD")
	c.Exit = func() { os.Exit(3) }
	if err := server.NewStdioServer(c.Server).Listen(context.Background(), c.Tap(os.Stdin), out); err != nil {
		os.Exit(1)
	}
}
