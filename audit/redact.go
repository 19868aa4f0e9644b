package audit

import (
	"bytes"
	"encoding/json"
	"io"
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

type frame struct {
	obj     bool // object (else array)
	n       int  // members/elements written
	wantKey bool // object: next token is a key
}

// redactJSON re-emits a valid JSON document token by token, so that order is
// kept and memory stays proportional to the nesting depth, not to a parse
// tree.
func redactJSON(in []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	out := make([]byte, 0, len(in)+16)
	var stack []frame
	afterValue := func() {
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.obj && top.wantKey {
				if tok == json.Delim('}') {
					out = append(out, '}')
					stack = stack[:len(stack)-1]
					afterValue()
					continue
				}
				key, _ := tok.(string)
				if top.n > 0 {
					out = append(out, ',')
				}
				top.n++
				out = append(out, quote(Cut(key, MaxArgString))...)
				out = append(out, ':')
				top.wantKey = false
				if IsSecretKey(key) {
					if err := skipValue(dec); err != nil {
						return nil, err
					}
					out = append(out, quote(Redacted)...)
					top.wantKey = true
				}
				continue
			}
			if !top.obj {
				if tok == json.Delim(']') {
					out = append(out, ']')
					stack = stack[:len(stack)-1]
					afterValue()
					continue
				}
				if top.n > 0 {
					out = append(out, ',')
				}
				top.n++
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			out = append(out, byte(v))
			stack = append(stack, frame{obj: v == '{', wantKey: v == '{'})
			continue
		case string:
			out = append(out, quote(Cut(RedactText(v), MaxArgString))...)
		case json.Number:
			out = append(out, v...)
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
		afterValue()
	}
	return out, nil
}

// skipValue consumes one complete value from dec.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
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
