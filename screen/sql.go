package screen

import (
	"regexp"
	"strings"
)

var (
	sqlCommentRE = regexp.MustCompile(`(?s)/\*.*?\*/|--[^\n]*|#[^\n]*`)
	sqlDropRE    = regexp.MustCompile(`(?i)\bdrop\s+(database|schema)\b([^;]*)`)
	cascadeRE    = regexp.MustCompile(`(?i)\bcascade\b`)
	flushRE      = regexp.MustCompile(`(?i)\bflush(all|db)\b`)
	mongoDropRE  = regexp.MustCompile(`(?i)\bdropDatabase\s*\(`)
)

// sqlCatastrophe returns a reason if the SQL text drops a database, or a
// schema with CASCADE (any DROP SCHEMA for MySQL, where a schema is a
// database). Both the text as given and the text with comments removed are
// matched, so neither comments nor option syntax hide a statement.
func sqlCatastrophe(text string, mysqlFamily bool) string {
	if !containsFold(text, "drop") {
		return ""
	}
	for _, t := range []string{text, sqlCommentRE.ReplaceAllString(text, " ")} {
		for _, m := range sqlDropRE.FindAllStringSubmatch(t, -1) {
			switch {
			case strings.EqualFold(m[1], "database"):
				return "DROP DATABASE"
			case mysqlFamily:
				return "DROP SCHEMA (a database in MySQL)"
			case cascadeRE.MatchString(m[2]):
				return "DROP SCHEMA … CASCADE"
			}
		}
	}
	return ""
}

func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if strings.EqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}
