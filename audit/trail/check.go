package trail

import (
	"context"
	"fmt"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Report is what Check found.
type Report struct {
	// Files is the last Seq in the folder's files (0 when empty).
	Files int64 `json:"files"`
	// Store is the store's head Seq, read after the files.
	Store int64 `json:"store"`
	// Behind is how many of the store's records the files do not hold yet
	// (Store - Files): a copy that lags is not broken, it catches up.
	Behind int64 `json:"behind"`
}

// Check verifies the folder dir as a copy of st's trail: the files form
// one chain from seq 1 that agrees with their recorded head (audit.VerifyDir), and every record in them is the store's record with the same
// Seq (same Hash, so the same content). It returns a *audit.ChainError
// naming the first record that is missing, edited, not in the store or
// different from it, or another error when a trail cannot be read; a file
// trail that is only behind the store is not an error (Report.Behind).
// It reads one line at a time and the store a page at a time, and may run
// while a Follower writes the folder.
func Check(ctx context.Context, st Store, dir string) (Report, error) {
	var rep Report
	page := make([]*audit.Record, 0, 1000)
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		recs, err := st.ListAudit(ctx, store.AuditFilter{AfterSeq: page[0].Seq - 1, Oldest: true, Limit: len(page)})
		if err != nil {
			return fmt.Errorf("trail: read the store: %w", err)
		}
		for i, fr := range page {
			// The files' own chain verified, so a first record unlike the
			// store's means a folder that copies another store.
			foreign := ""
			if fr.Seq == 1 {
				foreign = ": it is not a copy of this store (the store was changed, with --db or ARMORY_DB? move the folder aside to start a new copy)"
			}
			if i >= len(recs) || recs[i].Seq != fr.Seq {
				return &audit.ChainError{Seq: fr.Seq, Reason: "the JSONL trail holds a record the store does not have" + foreign}
			}
			if recs[i].Hash != fr.Hash {
				return &audit.ChainError{Seq: fr.Seq, Reason: "the JSONL trail's record differs from the store's" + foreign}
			}
		}
		page = page[:0]
		return nil
	}
	head, err := audit.VerifyDir(dir, MaxLine, func(rec *audit.Record) error {
		page = append(page, rec)
		if len(page) == cap(page) {
			return flush()
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if err := flush(); err != nil {
		return rep, err
	}
	rep.Files = head.Seq
	sh, err := st.AuditHead(ctx)
	if err != nil {
		return rep, fmt.Errorf("trail: read the store: %w", err)
	}
	rep.Store = sh.Seq
	rep.Behind = max(0, rep.Store-rep.Files)
	return rep, nil
}
