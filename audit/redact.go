package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redaction markers and limits.
const (
	// Redacted replaces the value of a key that names a secret.
	Redacted = "[REDACTED]"
	// MaxArgString is the longest string value (and object key) Redact
	// writes, in bytes; longer ones are cut (see Cut).
	MaxArgString = 4 << 10
	// MaxSummary is the longest result summary Summary returns, in bytes.
	MaxSummary = 1 << 10
)

// Redact returns a copy of args, a JSON value, safe to record:
//   - the value of every object key that names a secret (password, token,
//     api_key, authorization, cookie, private_key, … at any depth, matched
//     case-insensitively across snake_case, kebab-case and camelCase; see
//     IsSecretKey) is replaced, whatever its type, by the string "[REDACTED]";
//   - every other string value goes through RedactText, so secrets with a
//     known shape are masked wherever they appear;
//   - every string value and key longer than MaxArgString bytes is cut (Cut).
//
// Object member order and numbers are kept as written. The result is always
// valid JSON: input that is empty becomes null, and input that is not valid
// JSON becomes a JSON string holding its redacted, cut text. Redact is safe
// for concurrent use.
func Redact(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage("null")
	}
	if !json.Valid(args) {
		return quote(Cut(RedactText(string(args)), MaxArgString))
	}
	out, err := redactJSON(args)
	if err != nil { // not reached for valid JSON; stay safe anyway
		return quote(Cut(RedactText(string(args)), MaxArgString))
	}
	return out
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s) // marshaling a string cannot fail
	return b
}

// redactJSON re-emits a valid JSON document (json.Valid, so nesting is at
// most encoding/json's 10,000 levels) value by value, in one pass over its
// bytes: order is kept, white space dropped, numbers and literals copied as
// written, every key and string decoded, redacted and cut, then written as
// json.Marshal writes a string. Memory stays proportional to the output and
// the nesting depth. Strings without escapes that need none are copied
// without decoding (the common case); FuzzRedactJSON holds the output to
// the token-by-token re-encoder this replaced, byte for byte.
func redactJSON(in []byte) (json.RawMessage, error) {
	r := redactor{in: in, out: make([]byte, 0, len(in)+16)}
	i, err := r.value(skipSpace(in, 0))
	if err != nil {
		return nil, err
	}
	if skipSpace(in, i) != len(in) {
		return nil, errors.New("audit: redact: data after the JSON value")
	}
	return r.out, nil
}

type redactor struct {
	in, out []byte
}

var errRedactSyntax = errors.New("audit: redact: invalid JSON")

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// value writes the value at in[i] and returns the index after it.
func (r *redactor) value(i int) (int, error) {
	if i >= len(r.in) {
		return 0, errRedactSyntax
	}
	switch c := r.in[i]; {
	case c == '{':
		return r.container(i, '{', '}')
	case c == '[':
		return r.container(i, '[', ']')
	case c == '"':
		s, end, err := r.str(i)
		if err != nil {
			return 0, err
		}
		r.out = appendQuoted(r.out, Cut(RedactText(s), MaxArgString))
		return end, nil
	default:
		end := scalarEnd(r.in, i)
		if end == i {
			return 0, errRedactSyntax
		}
		r.out = append(r.out, r.in[i:end]...)
		return end, nil
	}
}

// container copies an object or an array: the opening bracket, the members
// separated by commas (an object's as "key": value, an array's as values),
// the closing bracket.
func (r *redactor) container(i int, open, close byte) (int, error) {
	r.out = append(r.out, open)
	i = skipSpace(r.in, i+1)
	if i < len(r.in) && r.in[i] == close {
		r.out = append(r.out, close)
		return i + 1, nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			r.out = append(r.out, ',')
		}
		var err error
		if open == '{' {
			i, err = r.member(i)
		} else {
			i, err = r.value(i)
		}
		if err != nil {
			return 0, err
		}
		i = skipSpace(r.in, i)
		if i >= len(r.in) {
			return 0, errRedactSyntax
		}
		switch r.in[i] {
		case ',':
			i = skipSpace(r.in, i+1)
		case close:
			r.out = append(r.out, close)
			return i + 1, nil
		default:
			return 0, errRedactSyntax
		}
	}
}

// member copies one "key": value of an object, the value replaced by
// Redacted where the key names a secret.
func (r *redactor) member(i int) (int, error) {
	if i >= len(r.in) || r.in[i] != '"' {
		return 0, errRedactSyntax
	}
	key, end, err := r.str(i)
	if err != nil {
		return 0, err
	}
	r.out = appendQuoted(r.out, Cut(key, MaxArgString))
	r.out = append(r.out, ':')
	i = skipSpace(r.in, end)
	if i >= len(r.in) || r.in[i] != ':' {
		return 0, errRedactSyntax
	}
	i = skipSpace(r.in, i+1)
	if IsSecretKey(key) {
		if i, err = valueEnd(r.in, i); err != nil {
			return 0, err
		}
		r.out = appendQuoted(r.out, Redacted)
		return i, nil
	}
	return r.value(i)
}

// str decodes the JSON string at in[i] and returns it and the index after
// it. A string without escapes in valid UTF-8 is its bytes; any other is
// decoded by encoding/json, as the token re-encoder decoded every string.
func (r *redactor) str(i int) (string, int, error) {
	end, escaped := stringEnd(r.in, i)
	if end < 0 {
		return "", 0, errRedactSyntax
	}
	raw := r.in[i:end]
	if !escaped && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), end, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", 0, err
	}
	return s, end, nil
}

// stringEnd returns the index after the JSON string starting at b[i] (a
// quote), -1 when it does not end, and whether it holds an escape.
func stringEnd(b []byte, i int) (int, bool) {
	escaped := false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j + 1, escaped
		}
	}
	return -1, escaped
}

// scalarEnd returns the index after the number or literal at b[i].
func scalarEnd(b []byte, i int) int {
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
			return j
		}
		j++
	}
	return j
}

// valueEnd returns the index after the value at b[i], without writing it.
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errRedactSyntax
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		if end < 0 {
			return 0, errRedactSyntax
		}
		return end, nil
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j)
				if end < 0 {
					return 0, errRedactSyntax
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errRedactSyntax
	default:
		end := scalarEnd(b, i)
		if end == i {
			return 0, errRedactSyntax
		}
		return end, nil
	}
}

// appendQuoted appends s as json.Marshal writes a string: as it is between
// quotes when nothing in it needs escaping, else through json.Marshal.
func appendQuoted(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			if c >= utf8.RuneSelf && plainUTF8(s[i:]) {
				break
			}
			return append(out, quote(s)...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// plainUTF8 reports whether s, from its first non-ASCII byte on, is valid
// UTF-8 without U+2028 or U+2029 and without anything else json.Marshal
// escapes.
func plainUTF8(s string) bool {
	if !utf8.ValidString(s) || strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// Cut returns s unchanged when it is at most max bytes long; otherwise a
// prefix of s (ending on a UTF-8 boundary) followed by the marker
// "…(N bytes cut)", N being the number of bytes dropped, the whole being at
// most max bytes. Cut is idempotent. max should leave room for the marker
// (at least 32 bytes).
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	markerLen := len("…( bytes cut)") + len(strconv.Itoa(len(s)))
	k := max - markerLen
	if k < 0 {
		k = 0
	}
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + "…(" + strconv.Itoa(len(s)-k) + " bytes cut)"
}

// Summary returns s redacted (RedactText) and cut at MaxSummary bytes: the
// form in which a call's result is recorded.
func Summary(s string) string {
	return Cut(RedactText(s), MaxSummary)
}

// secretSubstrings are matched against a key with separators removed and
// lowercased ("AWS_SECRET_ACCESS_KEY" → "awssecretaccesskey").
var secretSubstrings = []string{
	"password", "passwd", "passphrase", "secret", "apikey", "privatekey",
	"accesskey", "credential", "authorization", "cookie", "accesstoken",
	"refreshtoken", "sessiontoken", "authtoken", "bearertoken", "idtoken",
	"signingkey", "encryptionkey", "masterkey", "xapikey",
}

// secretWords are matched against whole words of a key (split at
// separators and camelCase boundaries), so that "auth" matches "basic_auth"
// but not "author", and "token" matches "token" but not "max_tokens".
var secretWords = map[string]bool{
	"token": true, "auth": true, "pass": true, "otp": true,
	"totp": true, "jwt": true, "bearer": true, "apikey": true, "pat": true,
}

// IsSecretKey reports whether an object key names a secret: it contains
// (ignoring case and the separators _ - . and space) one of password,
// passwd, passphrase, secret, api_key, private_key, access_key, credential,
// authorization, cookie, access/refresh/session/auth/bearer/id token,
// signing/encryption/master key; or one of its words is token, auth, pass,
// otp, totp, jwt, bearer, apikey or pat. "session", "author", "max_tokens"
// and "key" alone are not secret names.
func IsSecretKey(key string) bool {
	var joined strings.Builder
	joined.Grow(len(key))
	words := splitWords(key)
	for _, w := range words {
		if secretWords[w] {
			return true
		}
		joined.WriteString(w)
	}
	j := joined.String()
	for _, s := range secretSubstrings {
		if strings.Contains(j, s) {
			return true
		}
	}
	return false
}

// splitWords splits a key into lowercase words at non-alphanumeric runes and
// camelCase boundaries ("xAPIKey" → x, api, key).
func splitWords(key string) []string {
	var words []string
	rs := []rune(key)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush(i)
			start = i
		case unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}

// secretShape is a secret recognisable by its form alone.
type secretShape struct {
	name     string
	triggers []string // cheap pre-check: one must occur (in lowercased text if fold)
	fold     bool
	re       *regexp.Regexp
	// replace builds the replacement from the submatches of one match.
	replace func(m []string) string
}

func marker(name string) func([]string) string {
	s := "[REDACTED:" + name + "]"
	return func([]string) string { return s }
}

var secretShapes = []secretShape{
	{
		name:     "private-key",
		triggers: []string{"PRIVATE KEY"},
		re:       regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`),
		replace:  marker("private-key"),
	},
	{
		name:     "url-password",
		triggers: []string{"://"},
		re:       regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s"'<>]*):([^\s/?#"'<>]*)@`),
		replace:  func(m []string) string { return m[1] + ":" + Redacted + "@" },
	},
	{
		name:     "aws-access-key",
		triggers: []string{"AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"},
		re:       regexp.MustCompile(`\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`),
		replace:  marker("aws-access-key"),
	},
	{
		name:     "github-token",
		triggers: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		re:       regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})`),
		replace:  marker("github-token"),
	},
	{
		name:     "slack-token",
		triggers: []string{"xox"},
		re:       regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9\-]{10,}`),
		replace:  marker("slack-token"),
	},
	{
		name:     "api-key",
		triggers: []string{"sk-"},
		re:       regexp.MustCompile(`\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}`),
		replace:  marker("api-key"),
	},
	{
		name:     "stripe-key",
		triggers: []string{"k_live_", "k_test_"},
		re:       regexp.MustCompile(`\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}`),
		replace:  marker("stripe-key"),
	},
	{
		name:     "google-api-key",
		triggers: []string{"AIza"},
		re:       regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`),
		replace:  marker("google-api-key"),
	},
	{
		name:     "jwt",
		triggers: []string{"eyJ"},
		re:       regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*`),
		replace:  marker("jwt"),
	},
	{
		name:     "bearer",
		triggers: []string{"bearer"},
		fold:     true,
		re:       regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*`),
		replace:  func(m []string) string { return m[1] + " " + Redacted },
	},
	{
		name:     "authorization-header",
		triggers: []string{"authorization"},
		fold:     true,
		re:       regexp.MustCompile(`(?i)\b(authorization\s*[:=]\s*)(?:(?:basic|digest|token|bearer)\s+)?[^\s"',;]+`),
		replace:  func(m []string) string { return m[1] + Redacted },
	},
	{
		name:     "assignment",
		triggers: []string{"pass", "secret", "key", "token"},
		fold:     true,
		re: regexp.MustCompile(`(?i)((?:password|passwd|passphrase|secret(?:[_\-]?(?:access[_\-]?)?key)?|api[_\-]?key|access[_\-]?key|private[_\-]?key|token)["']?\s*[:=]\s*)` +
			`("[^"]*"|'[^']*'|[^\s"'&;,]+)`),
		replace: func(m []string) string {
			switch m[2][0] {
			case '"':
				return m[1] + `"` + Redacted + `"`
			case '\'':
				return m[1] + "'" + Redacted + "'"
			}
			return m[1] + Redacted
		},
	},
}

// RedactText masks, anywhere in s, secrets with a known shape: PEM private
// key blocks (even unterminated), passwords in URLs (scheme://user:pass@),
// AWS access key IDs, GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_,
// github_pat_), Slack tokens (xox?-), OpenAI/Anthropic keys (sk-, sk-ant-,
// sk-proj-), Stripe keys, Google API keys, JWTs, "Bearer <token>",
// "Authorization: <credentials>" and assignments such as password=…,
// token: "…", api_key=…. Each is replaced by a marker such as
// "[REDACTED:github-token]" or "[REDACTED]". It does not cut s. It is safe
// for concurrent use.
func RedactText(s string) string {
	var lower string
	for i := range secretShapes {
		p := &secretShapes[i]
		hay := s
		if p.fold {
			if lower == "" {
				lower = strings.ToLower(s)
			}
			hay = lower
		}
		hit := false
		for _, t := range p.triggers {
			if strings.Contains(hay, t) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		if r, changed := replaceAll(p.re, s, p.replace); changed {
			s = r
			lower = ""
		}
	}
	return s
}

func replaceAll(re *regexp.Regexp, s string, f func([]string) string) (string, bool) {
	locs := re.FindAllStringSubmatchIndex(s, -1)
	if len(locs) == 0 {
		return s, false
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	m := make([]string, re.NumSubexp()+1)
	for _, loc := range locs {
		for i := range m {
			if loc[2*i] >= 0 {
				m[i] = s[loc[2*i]:loc[2*i+1]]
			} else {
				m[i] = ""
			}
		}
		b.WriteString(s[last:loc[0]])
		b.WriteString(f(m))
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String(), true
}
