package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/internal/auditrow"
)

const selectAudit = `SELECT ` + auditrow.Columns + ` FROM audit_records`

func scanAudit(row Row) (*audit.Record, error) {
	var (
		r             audit.Record
		timeUS        int64
		phase, status string
		args, stages  string
	)
	if err := row.Scan(&r.Seq, &r.ID, &timeUS, &phase, &r.Agent, &r.Session, &r.Task, &r.Tool, &args, &stages,
		&r.Permission, &r.ApprovalID, &r.DecidedBy, &status, &r.Result, &r.DurationMS, &r.Justification,
		&r.PrevHash, &r.Hash); err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	r.Time = time.UnixMicro(timeUS).UTC()
	r.Phase, r.Status, r.Args = audit.Phase(phase), audit.Status(status), json.RawMessage(args)
	st, err := auditrow.DecodeStages(stages)
	if err != nil {
		return nil, err
	}
	r.Stages = st
	return &r, nil
}

// ListAudit implements store.AuditLog.
func (c *Core) ListAudit(ctx context.Context, f store.AuditFilter) ([]*audit.Record, error) {
	var w filter
	w.eq("agent", f.Agent)
	w.eq("tool", f.Tool)
	w.eq("session", f.Session)
	w.eq("status", string(f.Status))
	w.eq("id", f.CallID)
	if !f.Since.IsZero() {
		w.add("time_us >= ?", f.Since.UnixMicro())
	}
	if f.AfterSeq > 0 {
		w.add("seq > ?", f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		w.add("seq < ?", f.BeforeSeq)
	}
	order := " ORDER BY seq DESC"
	if f.Oldest {
		order = " ORDER BY seq ASC"
	}
	w.args = append(w.args, store.EffectiveLimit(f.Limit))
	return list(ctx, c, "list audit", scanAudit, selectAudit+w.where()+order+" LIMIT ?", w.args...)
}

func (c *Core) iterAudit(ctx context.Context, q Querier, fn func(*audit.Record) error) error {
	rows, err := q.Query(ctx, selectAudit+" ORDER BY seq ASC")
	if err != nil {
		return c.errf("iterate audit", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return c.errf("iterate audit", err)
	}
	return nil
}

func (c *Core) auditHead(ctx context.Context, q Querier) (audit.Head, error) {
	var h audit.Head
	if err := q.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&h.Seq, &h.Hash); err != nil {
		return h, c.errf("read audit head", err)
	}
	return h, nil
}

// snapshot runs fn in the backend's Snapshot under Use, prefixing the
// errors that are not fn's own.
func (c *Core) snapshot(ctx context.Context, fn func(Querier) error) error {
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	return c.c.Snapshot(ctx, fn)
}

// IterAudit implements store.AuditLog.
func (c *Core) IterAudit(ctx context.Context, fn func(*audit.Record) error) error {
	return c.snapshot(ctx, func(q Querier) error { return c.iterAudit(ctx, q, fn) })
}

// AuditHead implements store.AuditLog.
func (c *Core) AuditHead(ctx context.Context) (audit.Head, error) {
	var h audit.Head
	err := c.snapshot(ctx, func(q Querier) (err error) {
		h, err = c.auditHead(ctx, q)
		return err
	})
	return h, err
}

// VerifyAudit implements store.AuditLog.
func (c *Core) VerifyAudit(ctx context.Context) error {
	return c.snapshot(ctx, func(q Querier) error {
		head, err := c.auditHead(ctx, q)
		if err != nil {
			return err
		}
		v := audit.NewVerifier(head)
		if err := c.iterAudit(ctx, q, v.Add); err != nil {
			return err
		}
		return v.End()
	})
}
