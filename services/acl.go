package services

import (
	"fmt"
	"slices"
	"strings"

	"github.com/armory-dev/armory/store"
)

// A knowledge entry's read and write lists (store.KnowledgeEntry.Read and
// Write) hold principals:
//
//	agent:<id>     that agent
//	group:<name>   every agent whose config.md lists the privilege group
//	*              everyone
//
// The decision is a pure function of the entry's list, the caller and its
// groups: the store keeps the lists, this file decides.

// Access is what a caller wants to do with a knowledge entry.
type Access string

// Accesses of a knowledge entry. Delete is a write.
const (
	AccessRead  Access = "read"
	AccessWrite Access = "write"
)

// Principal is who asks: an agent and its privilege groups.
type Principal struct {
	Agent  string
	Groups []string
}

// ACLDecision is a knowledge permission decision with its reasons: for an
// allowed access the list entry that grants it; for a refusal what is
// missing and who has it.
type ACLDecision struct {
	Allowed bool     `json:"allowed"`
	Reasons []string `json:"reasons"`
}

// Everyone is the principal of an access list that grants every agent.
const Everyone = "*"

// checkPrincipal returns an error unless p is "*", "agent:<id>" or
// "group:<name>" with a non-empty name without spaces.
func checkPrincipal(p string) error {
	if p == Everyone {
		return nil
	}
	kind, name, ok := strings.Cut(p, ":")
	if !ok || (kind != "agent" && kind != "group") || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("access list entry %q: want \"*\" (everyone), \"agent:<id>\" or \"group:<privilege group>\"", p)
	}
	return store.CheckText("access list entry", p, store.MaxName, true)
}

// DecideKnowledge decides whether who may access (read, or write and
// delete) e, from e's read or write list alone.
func DecideKnowledge(e *store.KnowledgeEntry, who Principal, access Access) ACLDecision {
	list := e.Read
	if access == AccessWrite {
		list = e.Write
	}
	for _, p := range list {
		switch {
		case p == Everyone:
			return ACLDecision{true, []string{fmt.Sprintf("%s: %q (everyone) is in the %s list of %q", access, Everyone, access, e.Key)}}
		case p == "agent:"+who.Agent:
			return ACLDecision{true, []string{fmt.Sprintf("%s: %s is in the %s list of %q", access, p, access, e.Key)}}
		case strings.HasPrefix(p, "group:") && slices.Contains(who.Groups, strings.TrimPrefix(p, "group:")):
			return ACLDecision{true, []string{fmt.Sprintf("%s: %s is in the %s list of %q and %s belongs to it", access, p, access, e.Key, who.Agent)}}
		}
	}
	groups := "no privilege group"
	if len(who.Groups) > 0 {
		groups = "groups " + strings.Join(who.Groups, ", ")
	}
	why := []string{fmt.Sprintf("%s refused: %s (%s) is not in the %s list of %q", access, who.Agent, groups, access, e.Key)}
	if len(list) == 0 {
		why = append(why, fmt.Sprintf("its %s list is empty: no agent may %s it; a person may change it (armory knowledge)", access, access))
	} else {
		why = append(why, fmt.Sprintf("who may %s it: %s", access, describePrincipals(list)))
	}
	if access == AccessWrite {
		why = append(why, "ask one of them to make the change, or to add you to its write list")
	} else {
		why = append(why, "ask one of its writers to add you to its read list")
	}
	return ACLDecision{false, why}
}

// describePrincipals names the principals of a list for a refusal, at
// most 20 of them.
func describePrincipals(list []string) string {
	var out []string
	for i, p := range list {
		if i == 20 {
			out = append(out, fmt.Sprintf("and %d more", len(list)-20))
			break
		}
		switch {
		case p == Everyone:
			out = append(out, "everyone")
		case strings.HasPrefix(p, "agent:"):
			out = append(out, "agent "+strings.TrimPrefix(p, "agent:"))
		case strings.HasPrefix(p, "group:"):
			out = append(out, "members of group "+strings.TrimPrefix(p, "group:"))
		default:
			out = append(out, p)
		}
	}
	return strings.Join(out, ", ")
}
