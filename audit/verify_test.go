package audit

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name    string
		tamper  func(recs []*Record) []*Record
		head    bool // verify against the head of the untampered chain
		wantSeq int64
		wantMsg string
	}{
		{"intact", func(r []*Record) []*Record { return r }, true, 0, ""},
		{"edit field", func(r []*Record) []*Record { r[16].Agent = "mallory"; return r }, false, 17, "hash mismatch"},
		{"edit args", func(r []*Record) []*Record { r[4].Args = []byte(`{"path":"/etc/shadow"}`); return r }, false, 5, "hash mismatch"},
		{"edit hash only", func(r []*Record) []*Record { r[9].Hash = strings.Repeat("0", 64); return r }, false, 10, "hash mismatch"},
		{"edit and rehash", func(r []*Record) []*Record {
			r[16].Status = StatusSuccess
			r[16].Result = "nothing to see"
			r[16].Hash = r[16].ComputeHash()
			return r
		}, false, 18, "prev_hash"},
		{"delete one", func(r []*Record) []*Record { return slices.Delete(r, 16, 17) }, false, 17, "missing"},
		{"delete first", func(r []*Record) []*Record { return r[1:] }, false, 1, "missing"},
		{"delete range", func(r []*Record) []*Record { return slices.Delete(r, 10, 20) }, false, 11, "records 11..20 missing"},
		{"swap two", func(r []*Record) []*Record { r[16], r[17] = r[17], r[16]; return r }, false, 17, "found seq 18"},
		{"duplicate", func(r []*Record) []*Record { return slices.Insert(r, 17, r[16]) }, false, 18, "found seq 17"},
		{"renumber after delete", func(r []*Record) []*Record {
			r = slices.Delete(r, 16, 17)
			r[16].Seq = 17
			return r
		}, false, 17, "hash mismatch"},
		{"truncate tail with head", func(r []*Record) []*Record { return r[:25] }, true, 26, "truncated"},
		{"truncate all with head", func(r []*Record) []*Record { return nil }, true, 1, "truncated"},
		{"replace last with head", func(r []*Record) []*Record {
			r[29].Result = "x"
			r[29].Hash = r[29].ComputeHash()
			return r
		}, true, 30, "recorded head"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs := sealChain(30)
			head := Head{Seq: recs[29].Seq, Hash: recs[29].Hash}
			recs = tc.tamper(recs)
			if !tc.head {
				head = Head{}
			}
			wantChainError(t, verifySlice(recs, head), tc.wantSeq, tc.wantMsg)
		})
	}
}

func TestVerifyWithoutHeadMissesTruncation(t *testing.T) {
	// Documented limit: without a recorded head a cut tail is still a valid
	// chain.
	recs := sealChain(10)
	if err := verifySlice(recs[:5], Head{}); err != nil {
		t.Fatal(err)
	}
}

func TestVerifierSticky(t *testing.T) {
	recs := sealChain(3)
	var v Verifier
	if err := v.Add(recs[1]); err == nil {
		t.Fatal("want error")
	}
	if err := v.Add(recs[0]); err == nil {
		t.Fatal("error must stick")
	}
	if v.Head().Seq != 0 {
		t.Fatal("head moved after error")
	}
}

// verifySlice runs recs, in order, through a Verifier that checks them
// against head (the zero Head checks no recorded head).
func verifySlice(recs []*Record, head Head) error {
	v := NewVerifier(head)
	for _, r := range recs {
		if err := v.Add(r); err != nil {
			return err
		}
	}
	return v.End()
}

// verifyDir verifies the trail in dir with the default line limit.
func verifyDir(dir string) error {
	_, err := VerifyDir(dir, 0, nil)
	return err
}

// wantChainError checks that err is a *ChainError at seq whose reason holds
// msg, or nil when seq is 0.
func wantChainError(t *testing.T, err error, seq int64, msg string) {
	t.Helper()
	if seq == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var ce *ChainError
	if !errors.As(err, &ce) {
		t.Fatalf("want ChainError, got %v", err)
	}
	if ce.Seq != seq || !strings.Contains(ce.Reason, msg) {
		t.Fatalf("got %q, want seq %d with %q", err, seq, msg)
	}
}
