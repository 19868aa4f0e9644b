// Package mcpecho is the MCP server of the benchmarks against other MCP
// gateways (server/peerbench_test.go): one tool, echo, that returns its
// arguments as text and does nothing else. The same server runs over stdio
// (the mcp-echo command, behind Armory, mcp-proxy and supergateway) and,
// in the benchmark's own process, over streamable HTTP as the baseline, so
// every gateway is measured against the very tool it fronts.
package mcpecho

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is the name of the one tool.
const Tool = "echo"

// New returns a server with the echo tool. Its input schema is a plain
// object, so any arguments are accepted and returned unchanged.
func New() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcp-echo", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: Tool, Description: "Returns its arguments.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := string(req.Params.Arguments)
			if text == "" {
				text = "{}"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
	return s
}
