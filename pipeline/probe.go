package pipeline

import (
	"context"
	"encoding/json"

	"github.com/armory-dev/armory/audit"
)

// Probe is a request a surface refused before it became a tool call, kept
// in the audit trail because it looks like an attack: a client naming
// another client's MCP session, for instance.
type Probe struct {
	Agent   string // the agent the request reached (its URL's agent)
	Session string // the caps session to record, never a secret (hash it)
	What    string // the pseudo-tool recorded as the record's tool ("mcp.session")
	Stage   string // the stage name of the refusal ("session")
	Reasons []string
	Result  string // what the caller was told
}

// RecordProbe appends one finish entry with status blocked for p to the
// audit trail (the store's and, when configured, the file's). The caller
// makes sure nothing in p is a secret. Errors: the store's or the file's.
func (p *Pipeline) RecordProbe(ctx context.Context, pr Probe) error {
	rec := &audit.Record{
		ID: audit.NewID(), Time: p.opts.Now(), Phase: audit.PhaseFinish, Agent: pr.Agent, Session: pr.Session,
		Tool: pr.What, Args: json.RawMessage(`{}`), Status: audit.StatusBlocked, Result: audit.Summary(pr.Result),
		Stages: []audit.Stage{{Name: pr.Stage, Decision: "block", Reasons: pr.Reasons}},
	}
	return p.appendAudit(ctx, rec)
}
