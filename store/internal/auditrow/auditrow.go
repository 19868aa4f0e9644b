// Package auditrow converts the parts of an audit record that SQL backends
// store as text.
package auditrow

import (
	"encoding/json"
	"fmt"

	"github.com/armory-dev/armory/audit"
)

// Columns lists the audit_records columns in the order backends bind and
// scan them.
const Columns = "seq, id, time_us, phase, agent, session, task, tool, args, stages, permission, approval_id, decided_by, status, result, duration_ms, justification, prev_hash, hash"

// NumColumns is the number of names in Columns.
const NumColumns = 19

// EncodeStages returns the stored form of stages: "" for none, else JSON.
func EncodeStages(stages []audit.Stage) (string, error) {
	if len(stages) == 0 {
		return "", nil
	}
	b, err := json.Marshal(stages)
	if err != nil {
		return "", fmt.Errorf("store: encode stages: %w", err)
	}
	return string(b), nil
}

// DecodeStages reverses EncodeStages.
func DecodeStages(s string) ([]audit.Stage, error) {
	if s == "" {
		return nil, nil
	}
	var st []audit.Stage
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("store: decode stages: %w", err)
	}
	return st, nil
}
