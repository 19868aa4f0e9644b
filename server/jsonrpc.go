package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes Armory's MCP endpoint answers with besides the
// standard ones (-32700, -32600, -32601, -32602, -32603). They follow the
// codes the TypeScript SDK's streamable HTTP server uses, which MCP
// clients already know.
const (
	// CodeTransport is an error of the HTTP request rather than of one
	// message: a missing Mcp-Session-Id header, a refused media type or
	// method, a body over the limit.
	CodeTransport = -32000
	// CodeSessionNotFound answers a request naming an Mcp-Session-Id the
	// server does not know (never issued, expired or deleted), with HTTP 404.
	CodeSessionNotFound = -32001
)

// rpcIDPrefix starts the string id Armory gives a request whose id the MCP
// library cannot carry exactly (see needsToken); the rest is the original
// id's JSON text in unpadded base64url, so the token maps back to it with
// no state and two different ids never share a token.
const rpcIDPrefix = "armory-id:"

// maxErrorText bounds the library's plain-text error read to build a
// JSON-RPC error from it.
const maxErrorText = 1024

// writeRPCError writes a JSON-RPC error response with the given HTTP
// status. rawID is the request id exactly as the client sent it (its JSON
// text); nil writes "id": null, for errors that are not about one request
// (an unparsable body, an unknown session).
func writeRPCError(w http.ResponseWriter, status int, rawID []byte, code int64, msg string) {
	if rawID == nil {
		rawID = []byte("null")
	}
	m, _ := json.Marshal(msg)
	h := w.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b := make([]byte, 0, 64+len(rawID)+len(m))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, rawID...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, code, 10)
	b = append(b, `,"message":`...)
	b = append(b, m...)
	b = append(b, "}}"...)
	w.Write(b)
}

// rpcGate enforces JSON-RPC 2.0 on the MCP endpoint in front of the MCP
// library (docs/design.md says why): one JSON value per POST body and
// nothing after it; every message well formed; request ids answered
// byte for byte as sent; every error a JSON-RPC error response.
type rpcGate struct {
	next    http.Handler
	maxBody int64
}

// strictJSONRPC puts the JSON-RPC gate in front of the MCP handler and
// adds the parameter checks the library leaves out to every agent's MCP
// server.
func (s *Server) strictJSONRPC(next http.Handler) http.Handler {
	for _, srv := range s.mcpServers {
		srv.AddReceivingMiddleware(checkLogLevel)
	}
	return &rpcGate{next: next, maxBody: s.opts.MaxBodyBytes}
}

// loggingLevels are the levels logging/setLevel accepts (RFC 5424).
var loggingLevels = map[mcp.LoggingLevel]bool{
	"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true,
}

// checkLogLevel answers logging/setLevel with an unknown level, and a
// request of the sessionless revision naming one in
// _meta["io.modelcontextprotocol/logLevel"], with -32602 (the library
// takes any string).
func checkLogLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "logging/setLevel" {
			if p, ok := req.GetParams().(*mcp.SetLoggingLevelParams); ok && !loggingLevels[p.Level] {
				return nil, badLevel(p.Level)
			}
		}
		if p := req.GetParams(); p != nil && !isNilPointer(p) {
			if v, ok := p.GetMeta()[mcp.MetaKeyLogLevel]; ok {
				if s, _ := v.(string); !loggingLevels[mcp.LoggingLevel(s)] {
					return nil, badLevel(v)
				}
			}
		}
		return next(ctx, method, req)
	}
}

func isNilPointer(p any) bool {
	v := reflect.ValueOf(p)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func badLevel(level any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("invalid params: unknown logging level %q (want debug, info, notice, warning, error, critical, alert or emergency)", fmt.Sprint(level))}
}

func (g *rpcGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &rpcWriter{ResponseWriter: w}
	defer rw.finish()
	if r.Method != http.MethodPost || !isJSONMediaType(r.Header.Get("Content-Type")) {
		// GET, DELETE and refused requests: the library answers, its
		// plain-text errors become JSON-RPC ones.
		g.next.ServeHTTP(rw, r)
		return
	}
	body, err := readBody(http.MaxBytesReader(w, r.Body, g.maxBody), r.ContentLength, g.maxBody)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeRPCError(w, http.StatusRequestEntityTooLarge, nil, CodeTransport, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
			return
		}
		writeRPCError(w, http.StatusBadRequest, nil, CodeTransport, "failed to read the request body")
		return
	}
	version := r.Header.Get("Mcp-Protocol-Version")
	b, ferr := parseRPCBody(body, version)
	if ferr != nil {
		writeRPCError(w, http.StatusBadRequest, ferr.id, ferr.code, ferr.msg)
		return
	}
	if b.empty {
		// Only messages that need no answer and that the library cannot
		// take (error responses without an id).
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if !b.sessionFree && !sessionlessRequest(r) && r.Header.Get("Mcp-Session-Id") == "" && !hasMetaVersion(body) {
		writeRPCError(w, http.StatusBadRequest, nil, CodeTransport, "Bad Request: Mcp-Session-Id header is required (send initialize first)")
		return
	}
	if b.body != nil {
		body = b.body
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if !b.batch && b.method == "subscriptions/listen" {
		r = r.WithContext(context.WithValue(r.Context(), listenKey{}, true))
	}
	rw.restore = b.tokens
	rw.sessionless = sessionlessRequest(r)
	if !b.batch && b.call {
		rw.errID = b.firstID
		rw.call = true
	}
	g.next.ServeHTTP(rw, r)
}

// readBody reads a body (bounded by its reader) into one buffer sized by
// Content-Length when the client sent one.
func readBody(rd io.Reader, length, limit int64) ([]byte, error) {
	if length < 0 || length > limit {
		length = 512
	}
	b := make([]byte, 0, length+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func isJSONMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// sessionFree reports whether a method is answered without a session on
// the stateful revisions: initialize, which creates one, and
// server/discover, with which a client learns which revisions are served.
func sessionFree(method string) bool {
	return method == "initialize" || method == "server/discover"
}

// hasMetaVersion reports whether a single message names its protocol
// revision in params._meta (a request of a sessionless revision sent
// without the Mcp-Protocol-Version header): the library answers it with
// the revisions it serves, so it needs no session either.
func hasMetaVersion(body []byte) bool {
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	_, ok := m.Params.Meta[mcp.MetaKeyProtocolVersion]
	return ok
}

// listenKey marks a request whose body is one subscriptions/listen: its
// response is an event stream that lasts as long as its client keeps it.
type listenKey struct{}

func listenRequest(ctx context.Context) bool {
	v, _ := ctx.Value(listenKey{}).(bool)
	return v
}

// rpcFailure is a body refused before the library sees it.
type rpcFailure struct {
	code int64
	msg  string
	id   []byte // the request's id when it was readable, else nil
}

func invalid(id []byte, format string, args ...any) *rpcFailure {
	return &rpcFailure{code: jsonrpc.CodeInvalidRequest, msg: "Invalid Request: " + fmt.Sprintf(format, args...), id: id}
}

// rpcBody is what the gate learned of a valid POST body.
type rpcBody struct {
	batch       bool
	sessionFree bool   // a request that needs no session is among the messages (initialize, server/discover)
	call        bool   // the (single) message is a request with an id
	firstID     []byte // the id of the single message
	method      string // the method of the single message
	tokens      bool   // some id was replaced by a token
	empty       bool   // nothing left for the library
	body        []byte // the body to pass on when it changed, else nil
}

// protocolNoBatch is the first MCP revision without JSON-RPC batches.
const protocolNoBatch = "2025-06-18"

// MaxBatch bounds the messages of one JSON-RPC batch. The MCP library
// answers a batch's requests at once, each in its own goroutine, so a
// batch is a multiplier: 20,000 tools/list in a 1 MiB body made 300 MB of
// answers and 940 MB of heap before the bound.
const MaxBatch = 64

// parseRPCBody checks a POST body: one JSON value and nothing after it
// but white space; an object (a message) or, on revisions before
// 2025-06-18, a non-empty array of them (a batch).
func parseRPCBody(body []byte, version string) (rpcBody, *rpcFailure) {
	if !json.Valid(body) {
		msg := "Parse error: the body is not one JSON value"
		if len(bytes.TrimSpace(body)) == 0 {
			msg = "Parse error: empty body"
		}
		return rpcBody{}, &rpcFailure{code: jsonrpc.CodeParseError, msg: msg}
	}
	i := skipWS(body, 0)
	var out rpcBody
	switch body[i] {
	case '{':
		m, f := parseMessage(body[i:])
		if f != nil {
			return rpcBody{}, f
		}
		out.sessionFree = sessionFree(m.method)
		out.call = m.isCall
		out.firstID = m.id
		out.method = m.method
		if m.drop {
			out.empty = true
			return out, nil
		}
		if m.edits != nil {
			out.tokens = m.tokenID
			out.body = m.rewrite(body[i:])
		}
		return out, nil
	case '[':
		if version >= protocolNoBatch {
			return rpcBody{}, invalid(nil, "JSON-RPC batches are not part of MCP %s", version)
		}
		out.batch = true
		var msgs []rpcMessage
		var elems [][]byte
		ids := map[string]bool{} // the request ids of the batch, as sent
		changed := false
		for j := skipWS(body, i+1); body[j] != ']'; {
			end := valueEnd(body, j)
			el := body[j:end]
			if el[0] != '{' {
				return rpcBody{}, invalid(nil, "a batch element is not an object")
			}
			if len(msgs) == MaxBatch {
				return rpcBody{}, invalid(nil, "a batch holds at most %d messages", MaxBatch)
			}
			m, f := parseMessage(el)
			if f != nil {
				return rpcBody{}, f
			}
			if m.isCall {
				// The library answers one request per id and runs the
				// other anyway, its answer lost. Ids that differ as sent
				// are different for it too (tokens are injective).
				if ids[string(m.id)] {
					return rpcBody{}, invalid(m.id, "the batch names request id %s twice", m.id)
				}
				ids[string(m.id)] = true
			}
			out.sessionFree = out.sessionFree || sessionFree(m.method)
			out.tokens = out.tokens || m.tokenID
			changed = changed || m.edits != nil || m.drop
			msgs = append(msgs, m)
			elems = append(elems, el)
			j = skipWS(body, end)
			if body[j] == ',' {
				j = skipWS(body, j+1)
			}
		}
		if len(msgs) == 0 {
			return rpcBody{}, invalid(nil, "empty batch")
		}
		if !changed {
			return out, nil
		}
		nb := []byte{'['}
		for k, m := range msgs {
			if m.drop {
				continue
			}
			if len(nb) > 1 {
				nb = append(nb, ',')
			}
			nb = append(nb, m.rewrite(elems[k])...)
		}
		if len(nb) == 1 {
			out.empty = true
			return out, nil
		}
		out.body = append(nb, ']')
		return out, nil
	default:
		return rpcBody{}, invalid(nil, "the body must be a JSON-RPC message (an object)")
	}
}

// rpcMessage is one message of a body, as the gate sees it.
type rpcMessage struct {
	id      []byte // raw id, nil when absent
	method  string
	isCall  bool
	drop    bool   // an error response without an id: accepted, not passed on
	tokenID bool   // the id or the progress token is replaced by a token
	edits   []edit // byte ranges of the message to replace
}

type edit struct {
	start, end int
	with       []byte
}

func (m *rpcMessage) rewrite(raw []byte) []byte { return splice(raw, m.edits) }

// splice returns raw with the ranges of edits (which do not overlap)
// replaced.
func splice(raw []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return raw
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	out := make([]byte, 0, len(raw)+64)
	at := 0
	for _, e := range edits {
		out = append(out, raw[at:e.start]...)
		out = append(out, e.with...)
		at = e.end
	}
	return append(out, raw[at:]...)
}

// rpcMembers are the member names JSON-RPC defines.
var rpcMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// member is one member of a JSON object: its value's range in the object.
type member struct{ start, end int }

// parseMessage checks one message (a valid JSON object).
func parseMessage(obj []byte) (rpcMessage, *rpcFailure) {
	var mem [len(rpcMembers)]member
	var seen [len(rpcMembers)]bool
	var bad *rpcFailure
	err := eachMember(obj, func(key []byte, vs, ve int) bool {
		for k, name := range rpcMembers {
			if string(key) == name {
				if seen[k] {
					bad = invalid(nil, "member %q appears twice", name)
					return false
				}
				seen[k], mem[k] = true, member{vs, ve}
				return true
			}
			if len(key) == len(name) && strings.EqualFold(string(key), name) {
				bad = invalid(nil, "member %q: member names are case-sensitive (%q)", key, name)
				return false
			}
		}
		return true
	})
	if err != nil {
		return rpcMessage{}, invalid(nil, "%v", err)
	}
	val := func(k int) []byte {
		if !seen[k] {
			return nil
		}
		return obj[mem[k].start:mem[k].end]
	}
	var m rpcMessage
	rawID := val(1)
	// The id to echo in an error: only one that is a valid id.
	var echo []byte
	if len(rawID) > 0 && (rawID[0] == '"' || rawID[0] == '-' || (rawID[0] >= '0' && rawID[0] <= '9')) {
		echo = rawID
	}
	if bad != nil {
		bad.id = echo
		return rpcMessage{}, bad
	}
	if v := val(0); v == nil || !jsonStringIs(v, "2.0") {
		return rpcMessage{}, invalid(echo, `"jsonrpc" must be "2.0"`)
	}
	if rawID != nil && echo == nil && !bytes.Equal(rawID, []byte("null")) {
		return rpcMessage{}, invalid(nil, "id must be a string or a number")
	}
	m.id = echo
	method, params, result, rerror := val(2), val(3), val(4), val(5)
	if method != nil {
		if method[0] != '"' {
			return rpcMessage{}, invalid(echo, "method must be a string")
		}
		m.method = jsonString(method)
		if result != nil || rerror != nil {
			return rpcMessage{}, invalid(echo, "a message cannot be both a request and a response")
		}
		if params != nil && params[0] != '{' && params[0] != '[' {
			return rpcMessage{}, invalid(echo, "params must be an object or an array")
		}
		if rawID != nil && echo == nil {
			return rpcMessage{}, invalid(nil, "a request id cannot be null (leave it out for a notification)")
		}
		m.isCall = echo != nil
		if m.isCall && needsToken(rawID) {
			m.tokenID = true
			m.edits = append(m.edits, edit{mem[1].start, mem[1].end, token(rawID)})
		}
		if params != nil && params[0] == '{' && bytes.Contains(params, []byte(`"progressToken"`)) {
			// The library echoes params._meta.progressToken in
			// notifications/progress as it decoded it.
			eachMember(params, func(key []byte, vs, ve int) bool {
				if string(key) == "_meta" && params[vs] == '{' {
					meta := params[vs:ve]
					eachMember(meta, func(key []byte, ts, te int) bool {
						if string(key) == "progressToken" && meta[ts] != 'n' && needsToken(meta[ts:te]) {
							at := mem[3].start + vs
							m.edits = append(m.edits, edit{at + ts, at + te, token(meta[ts:te])})
							m.tokenID = true
						}
						return true
					})
				}
				return true
			})
		}
		if m.method == "notifications/cancelled" && params != nil && params[0] == '{' {
			// The cancelled request is named by its id: the token it was given.
			eachMember(params, func(key []byte, vs, ve int) bool {
				if string(key) == "requestId" && needsToken(params[vs:ve]) && params[vs] != 'n' {
					m.edits = append(m.edits, edit{mem[3].start + vs, mem[3].start + ve, token(params[vs:ve])})
				}
				return true
			})
		}
		return m, nil
	}
	if params != nil {
		return rpcMessage{}, invalid(echo, "params without a method")
	}
	switch {
	case result == nil && rerror == nil:
		return rpcMessage{}, invalid(echo, "a message needs a method (request, notification) or a result or error (response)")
	case result != nil && rerror != nil:
		return rpcMessage{}, invalid(echo, "a response cannot have both result and error")
	case rerror != nil && rerror[0] != '{':
		return rpcMessage{}, invalid(echo, "error must be an object")
	case rawID == nil || echo == nil:
		if rerror != nil {
			// An error response that could not name its request: valid
			// JSON-RPC, nothing to deliver it to.
			m.drop = true
			return m, nil
		}
		return rpcMessage{}, invalid(nil, "a response needs the id of its request")
	}
	return m, nil
}

// needsToken reports whether the MCP library would answer a request id
// other than exactly as sent. It keeps an id as a Go string or, for any
// number, as float64 then int64, and re-encodes it: integers beyond ±2^53
// lose digits, fractions and exponents are cut, "-0" becomes 0; strings
// come back re-escaped. Plain ASCII strings and integers of at most 2^53
// come back byte for byte; ids in the token space are tokenised too, so a
// client's string id can never pass for a token.
func needsToken(raw []byte) bool {
	switch c := raw[0]; {
	case c == '"':
		s := raw[1 : len(raw)-1]
		if bytes.HasPrefix(s, []byte(rpcIDPrefix)) {
			return true
		}
		for _, b := range s {
			if b == '\\' || b >= utf8.RuneSelf {
				return true
			}
		}
		return false
	case c == '-' || (c >= '0' && c <= '9'):
		if bytes.Equal(raw, []byte("-0")) || bytes.ContainsAny(raw, ".eE") {
			return true
		}
		n, err := strconv.ParseInt(string(raw), 10, 64)
		return err != nil || n > 1<<53 || n < -(1<<53)
	}
	return false
}

// token is the string id standing in for raw.
func token(raw []byte) []byte {
	t := make([]byte, 0, 2+len(rpcIDPrefix)+base64.RawURLEncoding.EncodedLen(len(raw)))
	t = append(t, '"')
	t = append(t, rpcIDPrefix...)
	t = base64.RawURLEncoding.AppendEncode(t, raw)
	return append(t, '"')
}

// untoken returns the original id of a token's JSON text, or nil when it
// is not one.
func untoken(tok []byte) []byte {
	if len(tok) < 2 || tok[0] != '"' || !bytes.HasPrefix(tok[1:], []byte(rpcIDPrefix)) {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(tok[1+len(rpcIDPrefix) : len(tok)-1]))
	if err != nil || !json.Valid(raw) {
		return nil
	}
	return raw
}

func jsonStringIs(raw []byte, s string) bool {
	if len(raw) == len(s)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == s {
		return true
	}
	return raw[0] == '"' && bytes.IndexByte(raw, '\\') >= 0 && jsonString(raw) == s
}

// jsonStringBytes decodes a JSON string (valid JSON), without copying
// when it has no escapes.
func jsonStringBytes(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	return []byte(jsonString(raw))
}

// jsonString decodes a JSON string (valid JSON).
func jsonString(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// eachMember calls f with each member of a JSON object (valid JSON, obj[0]
// is '{'): its name (decoded; a slice of obj unless it has escapes) and the
// range of its value in obj. f returns false to stop.
func eachMember(obj []byte, f func(key []byte, vs, ve int) bool) error {
	i := skipWS(obj, 1)
	if obj[i] == '}' {
		return nil
	}
	for {
		ke := valueEnd(obj, i)
		key := jsonStringBytes(obj[i:ke])
		i = skipWS(obj, ke)
		if obj[i] != ':' {
			return errors.New("malformed object")
		}
		vs := skipWS(obj, i+1)
		ve := valueEnd(obj, vs)
		if !f(key, vs, ve) {
			return nil
		}
		i = skipWS(obj, ve)
		if obj[i] == '}' {
			return nil
		}
		i = skipWS(obj, i+1) // ','
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just after the JSON value starting at b[i];
// b is valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return len(b)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = valueEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // number, true, false, null
		j := i
		for j < len(b) && !strings.ContainsRune(" \t\r\n,}]", rune(b[j])) {
			j++
		}
		return j
	}
}

// rpcWriter sits between the MCP library and the client: it turns the
// library's plain-text errors into JSON-RPC errors and, when request ids
// were replaced by tokens, puts the original ids back into the responses
// (an application/json body or each event of a text/event-stream).
type rpcWriter struct {
	http.ResponseWriter
	restore     bool   // tokens were issued for this request
	call        bool   // the body is one request with an id
	sessionless bool   // the request speaks the sessionless revision
	errID       []byte // its id, for errors about it
	mode        int
	status      int
	buf         []byte
}

const (
	modeUndecided = iota
	modePass
	modePlainError
	modeSSE
	modeJSON
)

func (w *rpcWriter) WriteHeader(code int) {
	if w.mode != modeUndecided {
		return
	}
	ct := w.Header().Get("Content-Type")
	switch {
	case code >= 400 && strings.HasPrefix(ct, "text/plain"):
		w.mode, w.status = modePlainError, code
		return
	case w.restore && strings.HasPrefix(ct, "text/event-stream"):
		w.mode = modeSSE
	case w.restore && strings.HasPrefix(ct, "application/json"):
		w.mode, w.status = modeJSON, code
		return
	default:
		w.mode = modePass
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcWriter) Write(p []byte) (int, error) {
	if w.mode == modeUndecided {
		w.WriteHeader(http.StatusOK)
	}
	switch w.mode {
	case modePlainError:
		if room := maxErrorText - len(w.buf); room > 0 {
			w.buf = append(w.buf, p[:min(room, len(p))]...)
		}
		return len(p), nil
	case modeJSON:
		w.buf = append(w.buf, p...)
		return len(p), nil
	case modeSSE:
		w.buf = append(w.buf, p...)
		if err := w.writeEvents(); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// writeEvents writes the complete events buffered, with ids restored.
func (w *rpcWriter) writeEvents() error {
	for {
		end := bytes.Index(w.buf, []byte("\n\n"))
		if end < 0 {
			return nil
		}
		ev := w.buf[:end+2]
		if _, err := w.ResponseWriter.Write(restoreEvent(ev)); err != nil {
			return err
		}
		w.buf = w.buf[end+2:]
	}
}

func (w *rpcWriter) Flush() {
	if w.mode == modePlainError || w.mode == modeJSON {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *rpcWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes what was held back, once the library is done.
func (w *rpcWriter) finish() {
	switch w.mode {
	case modePlainError:
		w.writeLibraryError()
	case modeJSON:
		body := bytes.TrimSpace(w.buf)
		if len(body) > 0 && body[0] == '[' {
			var msgs []json.RawMessage
			if json.Unmarshal(body, &msgs) == nil {
				out := []byte{'['}
				for k, m := range msgs {
					if k > 0 {
						out = append(out, ',')
					}
					out = append(out, restoreID(m)...)
				}
				body = append(out, ']')
			}
		} else {
			body = restoreID(body)
		}
		w.Header().Del("Content-Length")
		w.ResponseWriter.WriteHeader(w.status)
		w.ResponseWriter.Write(body)
	case modeSSE:
		if len(w.buf) > 0 {
			w.ResponseWriter.Write(w.buf)
		}
	}
}

// writeLibraryError answers a plain-text error of the MCP library as a
// JSON-RPC error. Errors about the session or the HTTP request carry
// "id": null (as in other MCP servers; clients tie a 404 without an id
// to the session, not to a call); errors about the one request in the
// body carry its id.
func (w *rpcWriter) writeLibraryError() {
	text := strings.TrimSpace(string(w.buf))
	status := w.status
	var code int64 = CodeTransport
	var id []byte
	switch {
	case status == http.StatusNotFound:
		code, text = CodeSessionNotFound, "Session not found"
	case status == http.StatusBadRequest && strings.HasPrefix(text, "JSON RPC not handled"):
		code = jsonrpc.CodeMethodNotFound
		text = "Method not found: " + strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(text, "JSON RPC not handled"), ":"))
		if w.call {
			// A JSON-RPC error answering the request, as any other
			// answer to it: HTTP 200, so that clients hand it to the
			// caller.
			status, id = http.StatusOK, w.errID
		}
	case status == http.StatusBadRequest && strings.Contains(text, `missing required "params"`):
		code, id = jsonrpc.CodeInvalidParams, w.errID
		if w.call && !w.sessionless {
			status = http.StatusOK // as for an unknown method; 2026-07-28 wants 400
		}
	case status == http.StatusBadRequest && strings.Contains(text, "invalid request"):
		code, id = jsonrpc.CodeInvalidRequest, w.errID
	case status >= 500:
		code = jsonrpc.CodeInternalError
	}
	writeRPCError(w.ResponseWriter, status, id, code, text)
}

// restoreEvent puts the original id into an SSE event's data line.
func restoreEvent(ev []byte) []byte {
	if !bytes.Contains(ev, []byte(rpcIDPrefix)) {
		return ev
	}
	i := bytes.Index(ev, []byte("data: "))
	if i < 0 || (i > 0 && ev[i-1] != '\n') {
		return ev
	}
	j := i + len("data: ")
	e := j + bytes.IndexByte(ev[j:], '\n')
	data := restoreID(ev[j:e])
	out := make([]byte, 0, len(ev)+32)
	out = append(out, ev[:j]...)
	out = append(out, data...)
	return append(out, ev[e:]...)
}

// restoreID puts the original ids back into a message: a response's
// token id, and the token progressToken of a notifications/progress; any
// other message is returned as it is.
func restoreID(msg []byte) []byte {
	if !json.Valid(msg) {
		return msg
	}
	i := skipWS(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return msg
	}
	obj := msg[i:]
	var id, method, params member
	eachMember(obj, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case "id":
			id = member{vs, ve}
		case "method":
			method = member{vs, ve}
		case "params":
			params = member{vs, ve}
		}
		return true
	})
	var edits []edit
	if raw := untoken(obj[id.start:id.end]); raw != nil {
		edits = append(edits, edit{id.start, id.end, raw})
	}
	if method.end > 0 && jsonStringIs(obj[method.start:method.end], "notifications/progress") && params.end > 0 && obj[params.start] == '{' {
		p := obj[params.start:params.end]
		eachMember(p, func(key []byte, vs, ve int) bool {
			if string(key) == "progressToken" {
				if raw := untoken(p[vs:ve]); raw != nil {
					edits = append(edits, edit{params.start + vs, params.start + ve, raw})
				}
			}
			return true
		})
	}
	if edits == nil {
		return msg
	}
	return splice(obj, edits)
}
