package audit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedactTextShapes(t *testing.T) {
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\nabc\n-----END RSA PRIVATE KEY-----"
	tests := []struct {
		name   string
		in     string
		secret string // must be gone
		want   string // must be present
	}{
		{"aws access key", "key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key]"},
		{"aws session key", "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "[REDACTED:aws-access-key]"},
		{"github ghp", "token ghp_16C7e42F292c6912E7710c838347Ae178B4a ok", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "[REDACTED:github-token]"},
		{"github gho", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F", "[REDACTED:github-token]"},
		{"github pat", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGH", "github_pat_11ABC", "[REDACTED:github-token]"},
		{"slack bot", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-1234", "[REDACTED:slack-token]"},
		{"slack user", "use xoxp-123456789012-abcdef", "xoxp-1234", "[REDACTED:slack-token]"},
		{"openai", "OPENAI sk-proj-abcdefghijklmnopqrstuvwxyz012345", "sk-proj-abcdef", "[REDACTED:api-key]"},
		{"openai legacy", "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "sk-abcdefghij", "[REDACTED:api-key]"},
		{"anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz_0123456789-AAAA", "sk-ant-api03", "[REDACTED:api-key]"},
		{"stripe", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED:stripe-key]"},
		{"google", "AIzaSyD-abcdefghijklmnopqrstuvwxyz0123456", "AIzaSyD-abc", "[REDACTED:google-api-key]"},
		{"jwt", "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U;", "dozjgNryP4J3jVmNHl0w5N", "[REDACTED:jwt]"},
		{"bearer", "Authorization header: Bearer abc.def-ghi_jkl~mno", "abc.def-ghi", "Bearer [REDACTED]"},
		{"bearer lower", "bearer 0123456789abcdef", "0123456789abcdef", "bearer [REDACTED]"},
		{"authorization basic", "Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz", "Authorization: [REDACTED]"},
		{"pem", "key:\n" + pem + "\ndone", "MIIEowIBAAKCAQEAx", "[REDACTED:private-key]\ndone"},
		{"pem openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjE", "[REDACTED:private-key]"},
		{"pem unterminated", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "MIIEvQIBADAN", "[REDACTED:private-key]"},
		{"pem pgp", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----", "lQOYBF", "[REDACTED:private-key]"},
		{"postgres url", "postgres://armory:s3cr3t@db:5432/x", "s3cr3t", "postgres://armory:[REDACTED]@db:5432/x"},
		{"url password with @", "mysql://root:p@ss@host/db", "p@ss", "mysql://root:[REDACTED]@host/db"},
		{"https userinfo", "git clone https://user:hunter2@github.com/x.git", "hunter2", "https://user:[REDACTED]@github.com"},
		{"assignment", "--password=hunter2 --user=bob", "hunter2", "--password=[REDACTED] --user=bob"},
		{"env assignment", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI", "[REDACTED]"},
		{"json text", `{"api_key": "abc123", "n": 1}`, "abc123", `"api_key": "[REDACTED]"`},
		{"query string", "https://x/cb?access_token=abc123&x=1", "abc123", "access_token=[REDACTED]&x=1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RedactText(tc.in)
			if strings.Contains(got, tc.secret) {
				t.Fatalf("secret %q survived: %q", tc.secret, got)
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestRedactTextKeepsHarmlessText(t *testing.T) {
	for _, s := range []string{
		"",
		"plain text with no secrets",
		"max_tokens=100 and tokens: 5",
		"see https://example.com/path?q=1",
		"the author wrote a basic information page",
		"PWD=/home/agent",
		"sk-short",
		"session s1 for agent alice",
	} {
		if got := RedactText(s); got != s {
			t.Errorf("RedactText(%q) = %q, want unchanged", s, got)
		}
	}
}

func TestIsSecretKey(t *testing.T) {
	secret := []string{"password", "PASSWORD", "db_password", "passwd", "secret", "client_secret",
		"token", "access_token", "accessToken", "refresh-token", "api_key", "apiKey", "APIKEY", "x-api-key",
		"authorization", "Authorization", "auth", "basic_auth", "private_key", "privateKey", "access_key",
		"AWS_SECRET_ACCESS_KEY", "credential", "credentials", "cookie", "Set-Cookie", "session_token",
		"sessionToken", "passphrase", "jwt", "otp"}
	plain := []string{"path", "session", "author", "authority_name", "max_tokens", "tokens", "key", "name",
		"command", "url", "pwd", "cwd", "keyboard", "monkey", "passage", "compass"}
	for _, k := range secret {
		if !IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false, want true", k)
		}
	}
	for _, k := range plain {
		if IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true, want false", k)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, `null`},
		{"scalar", `42`, `42`},
		{"plain kept in order", `{"z":1,"a":"x","m":[true,null,1.50]}`, `{"z":1,"a":"x","m":[true,null,1.50]}`},
		{"secret key", `{"user":"bob","password":"hunter2"}`, `{"user":"bob","password":"[REDACTED]"}`},
		{"secret key any type", `{"token":{"a":[1,2,{"b":3}]},"n":1}`, `{"token":"[REDACTED]","n":1}`},
		{"secret key number", `{"pin":1,"otp":123456}`, `{"pin":1,"otp":"[REDACTED]"}`},
		{"nested", `{"a":{"b":[{"Authorization":"Basic x"},{"c":"d"}]}}`, `{"a":{"b":[{"Authorization":"[REDACTED]"},{"c":"d"}]}}`},
		{"camel case", `{"headers":{"X-Api-Key":"k","Cookie":"c"}}`, `{"headers":{"X-Api-Key":"[REDACTED]","Cookie":"[REDACTED]"}}`},
		{"shape in value", `{"cmd":"curl -H 'Authorization: Bearer abcdefghijkl' https://x"}`, `{"cmd":"curl -H 'Authorization: [REDACTED]' https://x"}`},
		{"shape in array", `["AKIAIOSFODNN7EXAMPLE"]`, `["[REDACTED:aws-access-key]"]`},
		{"dsn in value", `{"dsn":"postgres://u:pw@h/db"}`, `{"dsn":"postgres://u:[REDACTED]@h/db"}`},
		{"empty containers", `{"a":{},"b":[],"c":[[]]}`, `{"a":{},"b":[],"c":[[]]}`},
		{"invalid json", `{"password": "x"`, `"{\"password\": \"[REDACTED]\""`},
		{"invalid json secret shape", `not json ghp_16C7e42F292c6912E7710c838347Ae178B4a`, `"not json [REDACTED:github-token]"`},
		{"whitespace", " {\n \"a\" : 1 \n} ", `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Redact(json.RawMessage(tc.in))
			if string(got) != tc.want {
				t.Fatalf("Redact(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON out: %s", got)
			}
		})
	}
}

func TestRedactCutsLongStrings(t *testing.T) {
	for _, n := range []int{MaxArgString - 1, MaxArgString, MaxArgString + 1, 3 * MaxArgString} {
		long := strings.Repeat("a", n)
		in, _ := json.Marshal(map[string]string{"data": long, long: "v"})
		out := Redact(in)
		var m map[string]string
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			for _, s := range []string{k, v} {
				if s == "v" || s == "data" {
					continue
				}
				if n <= MaxArgString {
					if s != long {
						t.Fatalf("n=%d: string changed", n)
					}
					continue
				}
				if len(s) > MaxArgString || !strings.HasSuffix(s, " bytes cut)") {
					t.Fatalf("n=%d: bad cut, len %d", n, len(s))
				}
				var cut int
				kept := s[:strings.LastIndex(s, "…(")]
				if _, err := fmt.Sscanf(s[len(kept):], "…(%d bytes cut)", &cut); err != nil || len(kept)+cut != n || kept != long[:len(kept)] || len(kept) < MaxArgString-32 {
					t.Fatalf("n=%d: kept %d, cut %d (%v)", n, len(kept), cut, err)
				}
			}
		}
	}
}

func TestCutKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	got := Cut(s, 5)
	if got != "é…(18 bytes cut)" && got != "…(20 bytes cut)" {
		t.Fatalf("got %q", got)
	}
	got = Cut(s, 40)
	if !utf8.ValidString(got) || len(got) > 40 || !strings.HasPrefix(got, "é") || Cut(got, 40) != got {
		t.Fatalf("got %q", got)
	}
	if Cut("abc", 3) != "abc" {
		t.Fatal("cut at exact length")
	}
}

func TestSummary(t *testing.T) {
	s := "ok " + strings.Repeat("x", 2000) + " ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	got := Summary(s)
	if strings.Contains(got, "ghp_") {
		t.Fatal("secret survived")
	}
	if !strings.HasPrefix(got, "ok xxx") || !strings.Contains(got, "bytes cut)") || len(got) > MaxSummary+32 {
		t.Fatalf("bad summary len %d", len(got))
	}
	// Redaction happens before the cut: a secret straddling the limit is not
	// half-kept.
	s2 := strings.Repeat("y", MaxSummary-10) + " AKIAIOSFODNN7EXAMPLE"
	if got := Summary(s2); strings.Contains(got, "AKIAIOSF") {
		t.Fatalf("half secret kept: %q", got[len(got)-40:])
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		`{"password":"x","a":[1,2,{"token":null}]}`, `[]`, `"AKIAIOSFODNN7EXAMPLE"`, `{"a":"postgres://u:p@h"}`,
		`{"`, `1e999`, `{"a":"\u0000\ud800"}`, "{\"a\":\"\xff\"}", `[[[[[[]]]]]]`, `{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := Redact(in)
		if !json.Valid(out) {
			t.Fatalf("Redact(%q) = %q: invalid JSON", in, out)
		}
		if !utf8.Valid(out) {
			t.Fatalf("Redact(%q) = %q: invalid UTF-8", in, out)
		}
		if json.Valid(in) {
			// Redacting is idempotent on its own output.
			if again := Redact(out); string(again) != string(out) {
				t.Fatalf("not idempotent:\n%q\n%q", out, again)
			}
		}
	})
}
