// Package storetest is the conformance suite that every store.Store backend
// runs: one set of behaviours, checked against a real database.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Opener opens a Store for a test. The first call for a given t must return
// a Store on a fresh, empty database; later calls with the same t must
// return further Stores on that same database (as another process would
// open it). The opener registers Close with t.Cleanup; the suite may also
// close Stores itself (Close is idempotent).
type Opener func(t *testing.T) store.Store

// Run runs the whole conformance suite against the backend that open opens,
// one group of subtests per role of store.Store.
func Run(t *testing.T, open Opener) {
	type check struct {
		name string
		fn   func(t *testing.T, open Opener)
	}
	roles := []struct {
		role   string
		checks []check
	}{
		{"AuditLog", []check{
			{"AppendAndList", testAuditAppendAndList},
			{"RoundTrip", testAuditRoundTrip},
			{"GroupCommit64", testAuditGroupCommit},
			{"TwoStores", testAuditTwoStores},
			{"ClosedAndCanceled", testAuditClosedAndCanceled},
			{"DurablePointStrict", testDurablePointStrict},
		}},
		{"Approvals", []check{
			{"Lifecycle", testApprovalLifecycle},
			{"Escalation", testApprovalEscalation},
			{"DoubleDecisionRace", testApprovalDoubleDecisionRace},
			{"WaitOtherStore", testWaitApprovalOtherStore},
			{"WaitBlocks", testWaitApprovalBlocks},
		}},
		{"Sessions", []check{
			{"CountersExact", testCountersExact},
			{"CountersExactTwoStores", testCountersExactTwoStores},
			{"CounterLimits", testCounterLimits},
			{"Overrides", testOverrides},
			{"ResetSession", testResetSession},
			{"SessionStart", testSessionStart},
			{"SessionGenerations", testSessionGenerations},
			{"ReleaseTwoStores", testRelease},
		}},
		{"Admission", []check{
			{"ExactTwoStoresMixed", testAdmitExact},
			{"RefusalAppliesNothing", testAdmitRefusal},
			{"Override", testAdmitOverride},
			{"Runtime", testAdmitRuntime},
			{"InvalidAndClosed", testAdmitInvalid},
			{"MixedWithAppend", testAdmitMixedWithAppend},
			{"NoSync", testAdmitNoSync},
			{"FinishExactTwoStores", testAdmitFinishExact},
			{"FinishDurability", testAdmitFinishDurability},
			{"RepeatTwoStores", testAdmitRepeatTwoStores},
			{"CacheTwoStoresAlternate", testCacheTwoStoresAlternate},
			{"CacheWritesBetweenBatches", testCacheWritesBetweenBatches},
			{"CacheManySessions", testCacheManySessions},
		}},
		{"RunClaims", []check{
			{"Lifecycle", testRunClaims},
			{"Expiry", testRunClaimsExpiry},
			{"Race", testRunClaimsRace},
		}},
		{"Tokens", []check{
			{"Lifecycle", testTokens},
			{"TwoStoresAndRevokeRace", testTokensRace},
			{"Epoch", testTokenEpoch},
		}},
		{"Pins", []check{
			{"Lifecycle", testPins},
			{"FirstObserverWinsTwoStores", testPinsRace},
		}},
		{"Events", []check{
			{"SentReachesOtherStore", testEvents},
			{"SentBeforeCloseArrives", testEventsSentBeforeClose},
		}},
		{"Agents", []check{{"Lifecycle", testAgents}}},
		{"Inboxes", []check{
			{"Broadcast1000OneCall", testBroadcast},
			{"PagesAckOwnerIsolationReply", testInbox},
		}},
		{"Chats", []check{{"MembersHistory", testChats}}},
		{"Channels", []check{{"ClaimSendHandoff", testChannels}, {"HandoffRaceTwoStores", testChannelHandoffRace}}},
		{"Tasks", []check{{"LifecycleStaleVersion", testTasks}}},
		{"Knowledge", []check{{"VersionsACLPrefix", testKnowledge}}},
		{"Memory", []check{
			{"WriteAppendTwoStores", testMemory},
			{"KeyBound", testMemoryKeyBound},
		}},
		{"State", []check{
			{"Versions", testState},
			{"CAS100WritersTwoStores", testStateCASTwoStores},
		}},
		{"Timers", []check{
			{"Lifecycle", testTimers},
			{"FireOnceRaceAndRestart", testTimerFireRace},
		}},
		{"Leases", []check{
			{"Lifecycle", testLeases},
			{"TakeoverAfterExpiry", testLeaseTakeover},
		}},
		{"Skills", []check{
			{"AcquireActivateDrop", testSkills},
			{"ListPages", testSkillsList},
			{"HoldBound", testSkillsBound},
			{"Forget", testForgetSkill},
			{"ConcurrentTwoStores", testSkillsConcurrent},
		}},
	}
	for _, r := range roles {
		t.Run(r.role, func(t *testing.T) {
			for _, c := range r.checks {
				t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
			}
		})
	}
}

// sameRecords checks that the trail, oldest first, starts with exactly
// written, and returns it.
func sameRecords(t *testing.T, s store.Store, written []*audit.Record) []*audit.Record {
	t.Helper()
	got, err := s.ListAudit(ctxT(t), store.AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < len(written) {
		t.Fatalf("%d records stored, %d written", len(got), len(written))
	}
	for i := range written {
		if !reflect.DeepEqual(got[i], written[i]) {
			t.Fatalf("record %d differs after storage:\n got %+v\nwant %+v", i+1, got[i], written[i])
		}
	}
	return got
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Record returns a realistic audit record for call i (about 400 bytes).
func Record(i int) *audit.Record {
	return &audit.Record{
		ID:      audit.NewID(),
		Phase:   audit.PhaseFinish,
		Agent:   fmt.Sprintf("agent-%d", i%4),
		Session: fmt.Sprintf("session-%d", i%3),
		Task:    "task-1",
		Tool:    []string{"file.read", "file.write", "terminal.run"}[i%3],
		Args:    json.RawMessage(fmt.Sprintf(`{"path":"src/file-%d.go","limit":4096}`, i)),
		Stages: []audit.Stage{
			{Name: "lookup", Decision: "allow"},
			{Name: "access", Decision: "allow", Reasons: []string{"group developers grants file.*"}},
			{Name: "caps", Decision: "allow", Reasons: []string{"calls 12/400"}},
			{Name: "permission", Decision: "auto"},
		},
		Permission: "auto",
		Status:     []audit.Status{audit.StatusSuccess, audit.StatusError, audit.StatusBlocked}[i%3],
		Result:     "read 1234 bytes",
		DurationMS: int64(i % 50),
	}
}

func mustAppend(t testing.TB, ctx context.Context, s store.Store, r *audit.Record) {
	t.Helper()
	if err := s.AppendAudit(ctx, r); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
}

func countAudit(t *testing.T, ctx context.Context, s store.Store) (n int64, seqs []int64) {
	t.Helper()
	err := s.IterAudit(ctx, func(r *audit.Record) error {
		n++
		seqs = append(seqs, r.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, seqs
}
