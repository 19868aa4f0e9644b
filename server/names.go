package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/host"
)

// providerNames lets an MCP tools/call name a tool by the name the OpenAI
// and Anthropic renderings give it ("devtools__word-count"): the SDK routes
// calls by exact name before any handler runs, so the name is resolved
// here, by the agent's registry (the one place that maps provider names),
// and the call then goes through the pipeline like any other.
func providerNames(ag *host.Agent) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
				if real, ok := ag.Registry.Resolve(r.Params.Name); ok && real != r.Params.Name {
					r.Params.Name = real
				}
			}
			return next(ctx, method, req)
		}
	}
}
