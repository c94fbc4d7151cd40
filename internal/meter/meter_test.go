package meter

import (
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

const anthropicSSE = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":1}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the \"usage\" word, a \"model\" too"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":250}}

event: message_stop
data: {"type":"message_stop"}

`

const responsesSSE = `event: response.created
data: {"type":"response.created","response":{"id":"resp_1","model":"gpt-5-codex","usage":null}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","delta":"hi"}

event: response.completed
data: {"type":"response.completed","response":{"id":"resp_1","model":"gpt-5-codex","usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":600},"output_tokens":120,"output_tokens_details":{"reasoning_tokens":80},"total_tokens":1120}}}

`

const chatSSE = "data: {\"id\":\"c1\",\"model\":\"gpt-4.1\",\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\r\n\r\n" +
	"data: {\"id\":\"c1\",\"model\":\"gpt-4.1\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":10}}}\r\n\r\n" +
	"data: [DONE]\r\n\r\n"

func parse(api API, stream bool, body string, chunk int) *parser {
	p := &parser{api: api, stream: stream}
	for len(body) > 0 {
		n := min(chunk, len(body))
		p.write([]byte(body[:n]))
		body = body[n:]
	}
	p.end()
	return p
}

func TestParsers(t *testing.T) {
	cases := []struct {
		name   string
		api    API
		stream bool
		body   string
		model  string
		want   Usage
		final  bool
	}{
		{"anthropic json", Anthropic, false, `{"id":"msg_1","model":"claude-haiku-4-5","content":[{"type":"text","text":"x"}],"usage":{"input_tokens":10,"output_tokens":20,"cache_creation_input_tokens":3,"cache_read_input_tokens":4}}`,
			"claude-haiku-4-5", Usage{Input: 10, Output: 20, CacheWrite: 3, CacheRead: 4}, true},
		{"anthropic sse", Anthropic, true, anthropicSSE, "claude-sonnet-4-5-20250929", Usage{Input: 1200, Output: 250, CacheWrite: 300, CacheRead: 4000}, true},
		{"anthropic sse cut short", Anthropic, true, anthropicSSE[:strings.Index(anthropicSSE, "event: message_delta")], "claude-sonnet-4-5-20250929", Usage{Input: 1200, Output: 1, CacheWrite: 300, CacheRead: 4000}, false},
		{"anthropic error", Anthropic, false, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "", Usage{}, false},
		{"responses json", OpenAIResponses, false, `{"id":"r","model":"gpt-5","usage":{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":5}}}`,
			"gpt-5", Usage{Input: 60, Output: 9, CacheRead: 40, Reasoning: 5}, true},
		{"responses sse", OpenAIResponses, true, responsesSSE, "gpt-5-codex", Usage{Input: 400, Output: 120, CacheRead: 600, Reasoning: 80}, true},
		{"chat json", OpenAIChat, false, `{"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":7,"completion_tokens_details":{"reasoning_tokens":2}}}`,
			"gpt-4.1", Usage{Input: 50, Output: 7, Reasoning: 2}, true},
		{"chat sse", OpenAIChat, true, chatSSE, "gpt-4.1", Usage{Input: 40, Output: 7, CacheRead: 10}, true},
		{"chat sse without usage", OpenAIChat, true, chatSSE[:strings.Index(chatSSE, "data: {\"id\":\"c1\",\"model\":\"gpt-4.1\",\"choices\":[],")], "gpt-4.1", Usage{}, false},
		{"not json", Anthropic, false, "<html>bad gateway</html>", "", Usage{}, false},
		{"unknown stream", OpenAIChat, true, "data: {\"what\":1}\n\ndata: {\"usage\":\"many\"}\n\n", "", Usage{}, false},
		{"json cut short", Anthropic, false, `{"model":"claude-opus-4-5","usage":{"input_tok`, "", Usage{}, false},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 7, 1 << 20} {
			p := parse(c.api, c.stream, c.body, chunk)
			if p.model != c.model || p.usage != c.want || p.final != c.final {
				t.Errorf("%s (pieces of %d): model %q usage %+v final %v, want %q %+v %v", c.name, chunk, p.model, p.usage, p.final, c.model, c.want, c.final)
			}
		}
	}
}

func TestLongLinesAreSkipped(t *testing.T) {
	long := "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"" + strings.Repeat("x", maxLine+10) + "\"},\"usage\":{\"output_tokens\":99}}\n\n"
	p := parse(Anthropic, true, anthropicSSE[:strings.Index(anthropicSSE, "event: message_delta")]+long+anthropicSSE[strings.Index(anthropicSSE, "event: message_delta"):], 4096)
	if p.usage.Output != 250 || !p.final || len(p.buf) > maxLine {
		t.Errorf("usage %+v final %v buffer %d", p.usage, p.final, len(p.buf))
	}
	j := parse(Anthropic, false, `{"model":"m","usage":{"input_tokens":1}}`+strings.Repeat(" ", maxJSON), 1<<20)
	if j.final || j.buf != nil {
		t.Errorf("a JSON body over the limit was read: %+v", j.usage)
	}
}

func TestAPIOf(t *testing.T) {
	for path, want := range map[string]API{
		"/v1/messages": Anthropic, "/v1/messages/count_tokens": "", "/v1/responses": OpenAIResponses,
		"/backend-api/codex/responses": OpenAIResponses, "/v1/chat/completions": OpenAIChat, "/v1/models": "",
	} {
		if got := APIOf("POST", path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if APIOf("GET", "/v1/messages") != "" {
		t.Error("a GET is metered")
	}
}

// serve passes an upstream's response through a Call, as the proxy does.
func serve(t *testing.T, m *Meter, contentType, body string, cut bool) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	req := httptest.NewRequest("POST", "https://api.anthropic.com/v1/messages", strings.NewReader("{}"))
	c := m.Begin("api.anthropic.com", req)
	w := httptest.NewRecorder()
	if c.Refuse(w) {
		return w, true
	}
	var r io.Reader = strings.NewReader(body)
	if cut {
		r = io.MultiReader(strings.NewReader(body[:len(body)/2]), iotest.ErrReader(io.ErrUnexpectedEOF))
	}
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}, "Request-Id": {"req_1"}}, Body: io.NopCloser(r)}
	c.Watch(resp)
	n, _ := io.Copy(w, resp.Body)
	resp.Body.Close()
	c.End()
	if !cut && n != int64(len(body)) {
		t.Fatalf("passed on %d bytes of %d", n, len(body))
	}
	return w, false
}

func TestMeterLogsAndRefusesPastBudget(t *testing.T) {
	dir := t.TempDir()
	logPath, settings := filepath.Join(dir, UsageFile), filepath.Join(dir, "meter.json")
	// 1200*3 + 250*15 + 300*3.75 + 4000*0.3 = 9675 µ$ a request.
	if err := WriteSettings(settings, &Settings{Prices: WithBuiltin(nil), Budget: Budget{USD: 0.015}}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(logPath, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if w, refused := serve(t, m, "text/event-stream", anthropicSSE, false); refused || w.Body.String() != anthropicSSE {
		t.Fatalf("first request refused %v or changed", refused)
	}
	serve(t, m, "text/event-stream; charset=utf-8", anthropicSSE, true) // cut short: counted as seen
	w, refused := serve(t, m, "application/json", "{}", false)
	if !refused || w.Code != 429 || !strings.Contains(w.Body.String(), `"type":"rate_limit_error"`) || !strings.Contains(w.Body.String(), "$0.01") {
		t.Fatalf("third request: refused %v, %d %s", refused, w.Code, w.Body)
	}
	var recs []Record
	if err := ReadLog(logPath, time.Time{}, func(r *Record) { recs = append(recs, *r) }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	if r := recs[0]; r.Unknown || r.Model != "claude-sonnet-4-5-20250929" || r.Output != 250 || r.RequestID != "req_1" || !r.Stream || !near(r.CostUSD, 0.009675) {
		t.Errorf("first record %+v", r)
	}
	if r := recs[1]; !r.Unknown || r.Input != 1200 {
		t.Errorf("cut-short record %+v", r)
	}
	if r := recs[2]; r.Refused != "budget" || r.Status != 429 {
		t.Errorf("refusal record %+v", r)
	}
	// A raised budget is read at the next request, and a proxy started
	// again goes on from the log.
	if err := WriteSettings(settings, &Settings{Prices: WithBuiltin(nil), Budget: Budget{USD: 1}}); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(settings, recs[0].Time, recs[0].Time.Add(1e9))
	m2, err := Open(logPath, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if _, refused := serve(t, m2, "text/event-stream", anthropicSSE, false); refused {
		t.Error("refused after the budget was raised")
	}
	if s, _ := SpentIn(logPath); s.Requests != 4 || s.Refused != 1 || s.Unknown != 1 {
		t.Errorf("spent %+v", s)
	}
}

func TestOpenAIRefusalShape(t *testing.T) {
	w := httptest.NewRecorder()
	writeRefusal(w, OpenAIResponses, "spent")
	if w.Code != 429 || !strings.Contains(w.Body.String(), `"code":"insufficient_quota"`) || w.Header().Get("X-Should-Retry") != "false" {
		t.Errorf("%d %s %v", w.Code, w.Body, w.Header())
	}
}

func TestPrices(t *testing.T) {
	ps := WithBuiltin([]Price{{Model: "claude-sonnet-*", Input: 1, Output: 1}})
	if p, _ := ps.Lookup("claude-sonnet-4-5"); p.Input != 1 {
		t.Errorf("the user's price does not come first: %+v", p)
	}
	if p, _ := ps.Lookup("claude-opus-4-5-20251101"); p.Input != 5 {
		t.Errorf("opus 4.5: %+v", p)
	}
	if p, _ := ps.Lookup("gpt-5-mini-2025"); p.Input != 0.25 {
		t.Errorf("gpt-5-mini: %+v", p)
	}
	if _, ok := ps.Lookup("llama"); ok {
		t.Error("an unknown model has a price")
	}
	if (Price{Model: "["}).Check() == nil || (Price{Model: "x", Input: -1}).Check() == nil {
		t.Error("a bad price passes")
	}
}

func TestBudgetChange(t *testing.T) {
	b, err := Budget{USD: 5}.Change("+2.00", "")
	if err != nil || b.USD != 7 || b.Tokens != 0 {
		t.Errorf("+2.00: %v %v", b, err)
	}
	if b, _ = b.Change("$10", ""); b.USD != 10 {
		t.Errorf("10: %v", b)
	}
	if _, err := b.Change("lots", ""); err == nil {
		t.Error("lots is an amount")
	}
	// Tokens: set, raised, taken away; the dollars stay as they were.
	if b, err = b.Change("", "2000000"); err != nil || b.Tokens != 2_000_000 || b.USD != 10 {
		t.Errorf("2000000 tokens: %v %v", b, err)
	}
	if b, err = b.Change("", "+500k"); err != nil || b.Tokens != 2_500_000 {
		t.Errorf("+500k tokens: %v %v", b, err)
	}
	if b, err = b.Change("+1", "1.5M"); err != nil || b.Tokens != 1_500_000 || b.USD != 11 {
		t.Errorf("$+1 and 1.5M tokens: %v %v", b, err)
	}
	if b, err = b.Change("0", "0"); err != nil || !b.IsZero() {
		t.Errorf("0 and 0: %v %v", b, err)
	}
	if b, err = (Budget{}).Change("", "+2k"); err != nil || b.Tokens != 2000 {
		t.Errorf("+2k on no token budget: %v %v", b, err)
	}
	for _, bad := range []string{"lots", "-5", "1.5", "k", "", "2G", "1e30M", "NaNk"} {
		if _, err := ParseTokens(bad); err == nil {
			t.Errorf("ParseTokens(%q): no error", bad)
		}
	}
	if _, err := (Budget{Tokens: math.MaxInt64 - 10}).Change("", "+1M"); err == nil {
		t.Error("a raise past int64: no error")
	}
	if f := (Budget{USD: 10}).Fraction(Spent{USD: 8}); !near(f, 0.8) {
		t.Errorf("fraction %v", f)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
