package services

import (
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/store"
)

// The knowledge permission decision, with its reasons.
func TestDecideKnowledge(t *testing.T) {
	entry := func(read, write []string) *store.KnowledgeEntry {
		return &store.KnowledgeEntry{Key: "plan", Read: read, Write: write}
	}
	ann := Principal{Agent: "ann", Groups: []string{"manager", "ops"}}
	bob := Principal{Agent: "bob"}
	for _, tc := range []struct {
		name    string
		e       *store.KnowledgeEntry
		who     Principal
		access  Access
		allowed bool
		reasons []string // substrings, in order, of the joined reasons
	}{
		{"everyone reads", entry([]string{"*"}, nil), bob, AccessRead, true, []string{`"*" (everyone) is in the read list`}},
		{"agent listed reads", entry([]string{"agent:bob"}, nil), bob, AccessRead, true, []string{"agent:bob is in the read list"}},
		{"group grants write", entry(nil, []string{"agent:carl", "group:ops"}), ann, AccessWrite, true, []string{"group:ops is in the write list", "ann belongs to it"}},
		{"everyone reads, not writes", entry([]string{"*"}, []string{"agent:ann"}), bob, AccessWrite, false,
			[]string{"write refused: bob (no privilege group) is not in the write list", "who may write it: agent ann", "ask one of them"}},
		{"no group match", entry([]string{"group:manager"}, nil), Principal{Agent: "carl", Groups: []string{"ops"}}, AccessRead, false,
			[]string{"carl (groups ops) is not in the read list", "members of group manager", "add you to its read list"}},
		{"empty list", entry(nil, nil), ann, AccessWrite, false, []string{"write list is empty: no agent may write it", "a person may change it"}},
		{"agent prefix is not a group", entry([]string{"agent:manager"}, nil), ann, AccessRead, false, []string{"not in the read list"}},
		{"another agent named", entry([]string{"agent:ann"}, []string{"agent:ann"}), bob, AccessRead, false, []string{"who may read it: agent ann"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideKnowledge(tc.e, tc.who, tc.access)
			if d.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%v)", d.Allowed, tc.allowed, d.Reasons)
			}
			joined := strings.Join(d.Reasons, "; ")
			at := 0
			for _, r := range tc.reasons {
				i := strings.Index(joined[at:], r)
				if i < 0 {
					t.Fatalf("reasons %q lack %q (in order)", joined, r)
				}
				at += i + len(r)
			}
		})
	}
}

func TestCheckPrincipal(t *testing.T) {
	for _, ok := range []string{"*", "agent:a", "group:manager"} {
		if err := checkPrincipal(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a", "agent:", "team:x", "group:a b", "**"} {
		if err := checkPrincipal(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Who may change a task, and what each change does.
func TestApplyTaskUpdate(t *testing.T) {
	base := store.Task{ID: "t1", Title: "ship", Creator: "ann", Assignee: "bob", Status: store.TaskOpen, Version: 3}
	for _, tc := range []struct {
		name     string
		from     store.TaskStatus
		actor    string
		human    bool
		u        TaskUpdate
		kind     armory.Kind // 0: allowed
		msg      string
		status   store.TaskStatus
		assignee string
	}{
		{"assignee starts", "", "bob", false, TaskUpdate{Status: store.TaskInProgress}, 0, "", store.TaskInProgress, "bob"},
		{"assignee finishes", store.TaskInProgress, "bob", false, TaskUpdate{Status: store.TaskDone}, 0, "", store.TaskDone, "bob"},
		{"stranger refused", "", "carl", false, TaskUpdate{Status: store.TaskDone}, armory.KindPermission, "only its creator or its assignee", "", ""},
		{"stranger cannot reject", "", "carl", false, TaskUpdate{Status: store.TaskRejected, Reason: "no"}, armory.KindPermission, "only its creator or its assignee", "", ""},
		{"reject needs reason", "", "bob", false, TaskUpdate{Status: store.TaskRejected}, armory.KindInvalid, "needs a reason", "", ""},
		{"reject blank reason", "", "bob", false, TaskUpdate{Status: store.TaskRejected, Reason: "  "}, armory.KindInvalid, "needs a reason", "", ""},
		{"reject returns to creator", store.TaskInProgress, "bob", false, TaskUpdate{Status: store.TaskRejected, Reason: "not my skill"}, 0, "", store.TaskRejected, "ann"},
		{"creator cannot reject", "", "ann", false, TaskUpdate{Status: store.TaskRejected, Reason: "x"}, armory.KindPermission, "only task t1's assignee (bob) may reject", "", ""},
		{"reject to someone else", "", "bob", false, TaskUpdate{Status: store.TaskRejected, Reason: "x", Assignee: "carl"}, armory.KindInvalid, "goes back to its creator", "", ""},
		{"assignee delegates", store.TaskInProgress, "bob", false, TaskUpdate{Assignee: "carl", Reason: "carl knows it"}, 0, "", store.TaskOpen, "carl"},
		{"creator reassigns", "", "ann", false, TaskUpdate{Assignee: "carl"}, 0, "", store.TaskOpen, "carl"},
		{"assignee cannot cancel", "", "bob", false, TaskUpdate{Status: store.TaskCancelled}, armory.KindPermission, "only task t1's creator (ann) may cancel", "", ""},
		{"creator cancels", "", "ann", false, TaskUpdate{Status: store.TaskCancelled, Reason: "obsolete"}, 0, "", store.TaskCancelled, "bob"},
		{"done cannot progress", store.TaskDone, "bob", false, TaskUpdate{Status: store.TaskInProgress}, armory.KindInvalid, "may reopen it", "", ""},
		{"assignee cannot reopen", store.TaskDone, "bob", false, TaskUpdate{Status: store.TaskOpen}, armory.KindPermission, "only its creator (ann) may reopen", "", ""},
		{"creator reopens", store.TaskDone, "ann", false, TaskUpdate{Status: store.TaskOpen}, 0, "", store.TaskOpen, "bob"},
		{"reassign cancelled needs reopen", store.TaskCancelled, "ann", false, TaskUpdate{Assignee: "carl"}, armory.KindInvalid, "reopen it", "", ""},
		{"nothing to change", "", "bob", false, TaskUpdate{}, armory.KindInvalid, "nothing to change", "", ""},
		{"unknown status", "", "bob", false, TaskUpdate{Status: "paused"}, armory.KindInvalid, "unknown status", "", ""},
		{"a person changes any task", "", "human", true, TaskUpdate{Status: store.TaskDone}, 0, "", store.TaskDone, "bob"},
		{"a person rejects with a reason", "", "human", true, TaskUpdate{Status: store.TaskRejected, Reason: "wrong team"}, 0, "", store.TaskRejected, "ann"},
		{"a person needs a reason too", "", "human", true, TaskUpdate{Status: store.TaskRejected}, armory.KindInvalid, "needs a reason", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := base
			if tc.from != "" {
				task.Status = tc.from
			}
			before := task
			tc.u.ID = task.ID
			err := applyTaskUpdate(&task, tc.actor, tc.human, tc.u)
			if tc.kind != 0 {
				if armory.KindOf(err) != tc.kind || !strings.Contains(armory.Message(err), tc.msg) {
					t.Fatalf("err = %v (%v), want %v containing %q", err, armory.KindOf(err), tc.kind, tc.msg)
				}
				if task != before {
					t.Fatalf("a refused update changed the task: %+v", task)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != tc.status || task.Assignee != tc.assignee || task.Creator != "ann" {
				t.Fatalf("task = %s/%s (creator %s), want %s/%s", task.Status, task.Assignee, task.Creator, tc.status, tc.assignee)
			}
			if tc.u.Reason != "" && task.Reason != tc.u.Reason {
				t.Fatalf("reason = %q", task.Reason)
			}
		})
	}
}

func TestTokenize(t *testing.T) {
	got := strings.Join(tokenize("Deploy the API-v2 to prod, a 3x speed-up; Ünïcode!"), " ")
	want := "deploy the api v2 to prod 3x speed up ünïcode"
	if got != want {
		t.Fatalf("tokenize = %q, want %q", got, want)
	}
}

// BM25 ranks a rarer term's holder first, favours a key match and a
// shorter entry, and leaves out entries without a query term.
func TestRankBM25(t *testing.T) {
	docs := []recallDoc{
		{"shopping", "milk eggs bread"},
		{"deploy", "run make release then push the tag"},
		{"notes", "the deploy of friday failed because the tag was missing; deploy again after fixing the tag"},
		{"long", strings.Repeat("filler words here ", 50) + "deploy"},
	}
	hits := rankBM25(docs, "deploy tag")
	var order []string
	for _, h := range hits {
		order = append(order, docs[h.Index].Key)
	}
	if strings.Join(order, ",") != "notes,deploy,long" {
		t.Fatalf("order = %v (%+v)", order, hits)
	}
	if rankBM25(docs, "!!") != nil || rankBM25(nil, "deploy") != nil {
		t.Fatal("a query without terms or no docs must rank nothing")
	}
	// Deterministic: equal scores keep the documents' order.
	same := rankBM25([]recallDoc{{"a1", "x yz"}, {"a2", "x yz"}}, "yz")
	if len(same) != 2 || same[0].Index != 0 {
		t.Fatalf("ties: %+v", same)
	}
}

func TestExcerpt(t *testing.T) {
	text := strings.Repeat("é", 500) + " the needle is here " + strings.Repeat("z", 500)
	got := excerpt(text, []string{"needle"}, 200)
	if len(got) > 200 || !strings.Contains(got, "needle") || !strings.HasPrefix(got, "…") {
		t.Fatalf("excerpt (%d bytes) = %q", len(got), got)
	}
	if excerpt("short", nil, 100) != "short" {
		t.Fatal("a short text is returned whole")
	}
	if got := excerpt(strings.Repeat("abc ", 100), []string{"missing"}, 50); len(got) > 50 || !strings.HasPrefix(got, "abc") {
		t.Fatalf("no match: %q", got)
	}
}
