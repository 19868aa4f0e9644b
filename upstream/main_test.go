package upstream_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary doubles as a small stdio MCP server (and as a sleeping
// grandchild of it) when these variables are set; tests run it as an
// upstream whose behaviour they control through its environment.
const (
	envServer = "ARMORY_UPSTREAM_TEST_SERVER" // "1": serve MCP on stdio
	envSleep  = "ARMORY_UPSTREAM_TEST_SLEEP"  // "1": sleep forever
	envDesc   = "ARMORY_UPSTREAM_TEST_DESC"   // description of the echo tool
	envMode   = "ARMORY_UPSTREAM_TEST_MODE"   // "hang": never answer; "exit": exit at once; "badnames": odd tool names
	envStarts = "ARMORY_UPSTREAM_TEST_STARTS" // a file counting starts
	envFailAt = "ARMORY_UPSTREAM_TEST_FAILAT" // comma-separated start numbers that exit at once
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envSleep) == "1":
		time.Sleep(time.Hour)
		os.Exit(0)
	case os.Getenv(envServer) == "1":
		os.Exit(serveTest())
	}
	os.Exit(m.Run())
}

func serveTest() int {
	n := 0
	if f := os.Getenv(envStarts); f != "" {
		b, _ := os.ReadFile(f)
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		n++
		os.WriteFile(f, []byte(strconv.Itoa(n)), 0o644)
	}
	for _, s := range strings.Split(os.Getenv(envFailAt), ",") {
		if s != "" && s == strconv.Itoa(n) {
			fmt.Fprintf(os.Stderr, "start %d: failing on purpose\n", n)
			return 5
		}
	}
	switch os.Getenv(envMode) {
	case "hang":
		time.Sleep(time.Hour)
		return 0
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot open the database: permission denied")
		return 7
	}
	fmt.Fprintf(os.Stderr, "test server start %d, HOME=%s SECRET=%q\n", n, os.Getenv("HOME"), os.Getenv("ARMORY_TEST_SECRET"))
	s := mcp.NewServer(&mcp.Implementation{Name: "armory-test-upstream", Version: "1"}, nil)
	obj := func(props string) map[string]any {
		m := map[string]any{"type": "object"}
		if props != "" {
			m["properties"] = map[string]any{props: map[string]any{"type": "string"}}
		}
		return m
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	arg := func(req *mcp.CallToolRequest, k string) string {
		var m map[string]any
		_ = jsonUnmarshal(req.Params.Arguments, &m)
		v, _ := m[k].(string)
		return v
	}
	desc := os.Getenv(envDesc)
	if desc == "" {
		desc = "Echo the text back."
	}
	if n >= 1000 {
		desc = "Echo, changed."
	}
	s.AddTool(&mcp.Tool{Name: "echo", Description: desc, InputSchema: obj("text")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("echo: " + arg(req, "text")), nil
	})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Exit the server.", InputSchema: obj("")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	s.AddTool(&mcp.Tool{Name: "spawn", Description: "Start a sleeping grandchild; return its pid.", InputSchema: obj("")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		self, _ := os.Executable()
		c := exec.Command(self)
		c.Env = append(os.Environ(), envSleep+"=1", envServer+"=")
		if err := c.Start(); err != nil {
			return nil, err
		}
		return text(strconv.Itoa(c.Process.Pid)), nil
	})
	s.AddTool(&mcp.Tool{Name: "big", Description: "Return n bytes.", InputSchema: obj("n")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n, _ := strconv.Atoi(arg(req, "n"))
		return text(strings.Repeat("x", n)), nil
	})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Never answer.", InputSchema: obj("")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Report a tool error.", InputSchema: obj("")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		r := text("the frobnicator is jammed")
		r.IsError = true
		return r, nil
	})
	s.AddTool(&mcp.Tool{Name: "env", Description: "Return the environment.", InputSchema: obj("")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text(strings.Join(os.Environ(), "\n")), nil
	})
	if os.Getenv(envMode) == "probe" {
		// What a confined server may do: write a file, reach a TCP address.
		s.AddTool(&mcp.Tool{Name: "write", Description: "Write a file.", InputSchema: obj("path")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := os.WriteFile(arg(req, "path"), []byte("x"), 0o644); err != nil {
				return text("error: " + err.Error()), nil
			}
			return text("written"), nil
		})
		s.AddTool(&mcp.Tool{Name: "dial", Description: "Connect to addr.", InputSchema: obj("addr")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c, err := net.DialTimeout("tcp", arg(req, "addr"), 2*time.Second)
			if err != nil {
				return text("error: " + err.Error()), nil
			}
			c.Close()
			return text("connected"), nil
		})
	}
	if os.Getenv(envMode) == "badnames" {
		for _, n := range []string{"getWeather", "get_weather", "ReadFile", "x..y", "dotted.name", "_leading"} {
			s.AddTool(&mcp.Tool{Name: n, Description: n, InputSchema: obj("")}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return text(req.Params.Name), nil
			})
		}
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

func (a *mcpAnn) sdk() *mcp.ToolAnnotations {
	if a == nil {
		return nil
	}
	return &mcp.ToolAnnotations{ReadOnlyHint: a.readOnly, DestructiveHint: a.destructive, OpenWorldHint: a.openWorld}
}

// tools returns the tools the set adds to a roster (those whose definitions
// match their pins).
func tools(set *upstream.Set) []armory.Tool { return set.HostOptions(roster.Options{}).Extra }

// unavailable returns why declared tools are not usable, as the set tells
// a roster.
func unavailable(set *upstream.Set) map[string]string {
	return set.HostOptions(roster.Options{}).Unavailable
}
