// Command mcp-echo serves package mcpecho's echo tool over stdio (the MCP
// stdio transport). It exits when its stdin closes.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/internal/mcpecho"
)

func main() {
	if err := mcpecho.New().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-echo:", err)
		os.Exit(1)
	}
}
