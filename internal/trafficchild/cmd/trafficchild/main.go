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
	if err := server.NewStdioServer(c.Server).Listen(context.Background(), os.Stdin, out); err != nil {
		os.Exit(1)
	}
}
