package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/armory-dev/armory/store"
)

// CreateApproval implements store.Approvals.
func (c *Core) CreateApproval(ctx context.Context, a *store.Approval) error {
	ap, err := store.NewApproval(a, c.c.Now())
	if err != nil {
		return c.errf("create approval", err)
	}
	var result *string
	if ap.Result != nil {
		r := string(ap.Result)
		result = &r
	}
	err = c.insert(ctx, "create approval "+ap.ID, "id exists", `INSERT INTO approvals
		(id, agent, session, task, tool, args, args_hash, reason, level, created_us, status, decided_by, decision_reason, decided_us, route, result)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		ap.ID, ap.Agent, ap.Session, ap.Task, ap.Tool, string(ap.Args), ap.ArgsHash, ap.Reason, ap.Level, ap.CreatedAt.UnixMicro(),
		string(ap.Status), ap.DecidedBy, ap.DecisionReason, MicrosOrZero(ap.DecidedAt), ap.Route, result)
	if err != nil {
		return err
	}
	*a = ap
	return nil
}

// insert runs q, an INSERT … ON CONFLICT DO NOTHING, under the gate: a row
// that exists already is ErrConflict (exists says why).
func (c *Core) insert(ctx context.Context, op, exists, q string, args ...any) error {
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	n, err := c.c.Write.Exec(ctx, q, args...)
	if err != nil {
		return c.errf(op, err)
	}
	if n == 0 {
		return c.errf(op, fmt.Errorf("%w: %s", store.ErrConflict, exists))
	}
	return nil
}

const selectApproval = `SELECT id, agent, session, task, tool, args, args_hash, reason, level, created_us, status, decided_by,
	decision_reason, decided_us, route, result FROM approvals`

func scanApproval(row Row) (*store.Approval, error) {
	var (
		a                    store.Approval
		args, status         string
		createdUS, decidedUS int64
		result               *string
	)
	if err := row.Scan(&a.ID, &a.Agent, &a.Session, &a.Task, &a.Tool, &args, &a.ArgsHash, &a.Reason, &a.Level, &createdUS,
		&status, &a.DecidedBy, &a.DecisionReason, &decidedUS, &a.Route, &result); err != nil {
		return nil, err
	}
	a.Args, a.Status = json.RawMessage(args), store.ApprovalStatus(status)
	a.CreatedAt, a.DecidedAt = time.UnixMicro(createdUS).UTC(), TimeOrZero(decidedUS)
	if result != nil {
		a.Result = json.RawMessage(*result)
	}
	return &a, nil
}

// GetApproval implements store.Approvals.
func (c *Core) GetApproval(ctx context.Context, id string) (*store.Approval, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return nil, err
	}
	defer release()
	a, err := scanApproval(c.c.Read.QueryRow(ctx, selectApproval+` WHERE id = ?`, id))
	if noRows(err) {
		return nil, c.errf("approval "+id, store.ErrNotFound)
	}
	if err != nil {
		return nil, c.errf("get approval", err)
	}
	return a, nil
}

// ListApprovals implements store.Approvals.
func (c *Core) ListApprovals(ctx context.Context, f store.ApprovalFilter) ([]*store.Approval, error) {
	var w filter
	w.eq("status", string(f.Status))
	w.eq("agent", f.Agent)
	w.eq("session", f.Session)
	w.eq("route", f.Route)
	w.args = append(w.args, store.EffectiveLimit(f.Limit))
	return list(ctx, c, "list approvals", scanApproval, selectApproval+w.where()+" ORDER BY created_us ASC, id ASC LIMIT ?", w.args...)
}

// tx runs fn in a write transaction under Use; errors not wrapped by fn
// are prefixed with op.
func (c *Core) tx(ctx context.Context, op string, fn func(q Querier) error) error {
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	if err := c.c.Tx(ctx, fn); err != nil {
		var own *opError
		if errors.As(err, &own) {
			return own.err
		}
		return c.errf(op, err)
	}
	return nil
}

// opError is an error that fn of tx has already given its final form.
type opError struct{ err error }

func (e *opError) Error() string { return e.err.Error() }

// final marks err as final (tx returns it as it is).
func final(err error) error { return &opError{err} }

// DecideApproval implements store.Approvals. The approval's row is read
// (locked where the backend locks rows) and changed in one transaction, so
// a second decision loses, whichever process makes it.
func (c *Core) DecideApproval(ctx context.Context, id string, decision store.ApprovalStatus, by, reason string) error {
	if err := store.CheckDecision(store.StatusPending, decision); err != nil {
		return c.errf("decide approval "+id, err)
	}
	err := c.tx(ctx, "decide approval", func(q Querier) error {
		var current string
		if err := c.lockRow(ctx, q, "approval "+id, `SELECT status FROM approvals WHERE id = ?`, id, &current); err != nil {
			return err
		}
		if err := store.CheckDecision(store.ApprovalStatus(current), decision); err != nil {
			return final(c.errf("decide approval "+id, err))
		}
		if _, err := q.Exec(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decision_reason = ?, decided_us = ?,
			route = CASE WHEN CAST(? AS TEXT) = 'escalated' THEN 'human' ELSE route END WHERE id = ?`,
			string(decision), by, reason, c.c.Now().UnixMicro(), string(decision), id); err != nil {
			return err
		}
		if c.c.Decided != nil {
			return c.c.Decided(ctx, q, id)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.c.Hub.Notify(id)
	return nil
}

// lockRow reads into dest the one row that query (a SELECT … WHERE … = ?)
// selects for arg, in q's transaction, locking it where the backend locks
// rows; no row is a final ErrNotFound naming what.
func (c *Core) lockRow(ctx context.Context, q Querier, what, query string, arg any, dest ...any) error {
	err := q.QueryRow(ctx, query+c.c.ForUpdate, arg).Scan(dest...)
	if noRows(err) {
		return final(c.errf(what, store.ErrNotFound))
	}
	return err
}

// runnable reads approval id's status and whether a result is stored, in
// q's transaction (locking the row where the backend locks rows), and
// returns a final error unless it is approved without a result.
func (c *Core) runnable(ctx context.Context, q Querier, id, op string) error {
	var (
		status string
		have   *string
	)
	if err := c.lockRow(ctx, q, "approval "+id, `SELECT status, result FROM approvals WHERE id = ?`, id, &status, &have); err != nil {
		return err
	}
	if status != string(store.StatusApproved) || have != nil {
		return final(c.errf(op+" "+id, fmt.Errorf("%w: status %s, result stored: %v", store.ErrConflict, status, have != nil)))
	}
	return nil
}

// SetApprovalResult implements store.Approvals.
func (c *Core) SetApprovalResult(ctx context.Context, id string, result json.RawMessage) error {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	return c.tx(ctx, "set approval result", func(q Querier) error {
		if err := c.runnable(ctx, q, id, "set approval result"); err != nil {
			return err
		}
		_, err := q.Exec(ctx, `UPDATE approvals SET result = ? WHERE id = ?`, string(result), id)
		return err
	})
}

// WaitApproval implements store.Approvals. Decisions that reach the Hub
// wake it at once; it also polls, with a backoff from MinPoll up to
// PollMax, for decisions by other processes (or lost notifications).
func (c *Core) WaitApproval(ctx context.Context, id string) (*store.Approval, error) {
	wake, cancel := c.c.Hub.Subscribe(id)
	defer cancel()
	poll := c.c.MinPoll
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		a, err := c.GetApproval(ctx, id)
		if err != nil {
			return nil, err
		}
		if a.Status.Final() {
			return a, nil
		}
		timer.Reset(poll)
		select {
		case <-wake:
			poll = c.c.MinPoll
		case <-timer.C:
			poll = min(poll*2, c.c.PollMax)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.c.Gate.Closing():
			return nil, store.ErrClosed
		}
	}
}
