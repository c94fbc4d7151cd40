package meter

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// API is a model API the meter reads.
type API string

// The APIs metered.
const (
	Anthropic       API = "anthropic"        // POST …/v1/messages
	OpenAIResponses API = "openai-responses" // POST …/responses
	OpenAIChat      API = "openai-chat"      // POST …/chat/completions
)

// APIOf returns the API a request is made to, "" for one that is not a
// model call (listing models, counting tokens, a login).
func APIOf(method, path string) API {
	if method != http.MethodPost {
		return ""
	}
	path = strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(path, "/v1/messages"):
		return Anthropic
	case strings.HasSuffix(path, "/responses"):
		return OpenAIResponses
	case strings.HasSuffix(path, "/chat/completions"):
		return OpenAIChat
	}
	return ""
}

// Limits of what a parser keeps: a JSON body beyond maxJSON, or an event
// line beyond maxLine, is not read (its usage is unknown); the stream
// still passes on whole.
const (
	maxJSON = 16 << 20
	maxLine = 1 << 20
)

// parser reads the usage out of a response as its bytes go by: a JSON body
// is kept (up to maxJSON) and read at its end; a server-sent-event stream
// is read line by line, and only the lines that can hold a usage or the
// model are decoded.
type parser struct {
	api    API
	stream bool
	buf    []byte // the JSON body, or the part of a line not ended yet
	skip   bool   // the body or line is over its limit
	model  string
	usage  Usage
	seen   bool // some usage was read
	final  bool // the final usage was read
}

var (
	usageKey  = []byte(`"usage"`)
	usageNull = []byte(`"usage":null`)
	modelKey  = []byte(`"model"`)
	dataField = []byte("data:")
)

// write takes the next bytes of the body.
func (p *parser) write(b []byte) {
	if !p.stream {
		if !p.skip && len(p.buf)+len(b) > maxJSON {
			p.skip, p.buf = true, nil
		}
		if !p.skip {
			p.buf = append(p.buf, b...)
		}
		return
	}
	for len(b) > 0 {
		if len(p.buf) == 0 && !p.skip && isDelta(b) {
			p.skip = true // the bulk of a stream: never a usage
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.carry(b)
			return
		}
		switch {
		case p.skip:
			p.skip = false
		case len(p.buf) > 0:
			p.buf = append(p.buf, b[:i]...)
			p.line(p.buf)
		default:
			p.line(b[:i])
		}
		p.buf = p.buf[:0]
		b = b[i+1:]
	}
}

var deltaType = []byte(`data: {"type":"`)

// isDelta reports a line that begins as an event of a text or argument
// delta (Anthropic's content_block_delta, OpenAI's response.*.delta):
// those carry the model's output, never a usage, and are most of a
// stream's bytes, so they are passed over unread. message_delta, which
// carries Anthropic's final usage, is read.
func isDelta(l []byte) bool {
	t, ok := bytes.CutPrefix(l, deltaType)
	if !ok {
		return false
	}
	end := bytes.IndexByte(t[:min(len(t), 64)], '"')
	if end < 0 {
		return false
	}
	typ := string(t[:end])
	return strings.HasSuffix(typ, "delta") && typ != "message_delta"
}

// carry keeps the start of a line that goes on in the next bytes.
func (p *parser) carry(b []byte) {
	if p.skip {
		return
	}
	if len(p.buf)+len(b) > maxLine {
		p.skip, p.buf = true, p.buf[:0]
		return
	}
	p.buf = append(p.buf, b...)
}

// end reads a JSON body once it is whole.
func (p *parser) end() {
	if p.stream || p.skip || len(p.buf) == 0 {
		return
	}
	var ev event
	if json.Unmarshal(p.buf, &ev) == nil {
		p.apply(&ev, true)
	}
	p.buf = nil
}

// line reads one line of an event stream.
func (p *parser) line(l []byte) {
	l = bytes.TrimRight(l, "\r")
	if !bytes.HasPrefix(l, dataField) {
		return
	}
	l = bytes.TrimSpace(l[len(dataField):])
	wanted := bytes.Contains(l, usageKey) && !bytes.Contains(l, usageNull)
	if !wanted && (p.model != "" || !bytes.Contains(l, modelKey)) {
		return
	}
	var ev event
	if json.Unmarshal(l, &ev) == nil {
		p.apply(&ev, false)
	}
}

// event is every shape of a response or stream event the meter reads.
type event struct {
	Type     string    `json:"type"`
	Model    string    `json:"model"`
	Usage    *rawUsage `json:"usage"`
	Message  *inner    `json:"message"`  // Anthropic's message_start
	Response *inner    `json:"response"` // OpenAI Responses' events
}

type inner struct {
	Model string    `json:"model"`
	Usage *rawUsage `json:"usage"`
}

// rawUsage holds the usage fields of both vendors.
type rawUsage struct {
	InputTokens       *int64   `json:"input_tokens"`
	OutputTokens      *int64   `json:"output_tokens"`
	CacheCreation     *int64   `json:"cache_creation_input_tokens"`
	CacheRead         *int64   `json:"cache_read_input_tokens"`
	InputDetails      *details `json:"input_tokens_details"`
	OutputDetails     *details `json:"output_tokens_details"`
	PromptTokens      *int64   `json:"prompt_tokens"`
	CompletionTokens  *int64   `json:"completion_tokens"`
	PromptDetails     *details `json:"prompt_tokens_details"`
	CompletionDetails *details `json:"completion_tokens_details"`
}

type details struct {
	CachedTokens    int64 `json:"cached_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// apply takes what ev says; whole is a JSON body (not a stream's event).
func (p *parser) apply(ev *event, whole bool) {
	model, u := ev.Model, ev.Usage
	for _, in := range []*inner{ev.Message, ev.Response} {
		if in != nil {
			model = cmp(model, in.Model)
			if u == nil {
				u = in.Usage
			}
		}
	}
	if p.model == "" && model != "" {
		p.model = clipName(model)
	}
	if u == nil {
		return
	}
	p.seen = true
	if p.api == Anthropic {
		p.anthropic(u)
		p.final = p.final || whole || ev.Type == "message_delta"
		return
	}
	p.openAI(u)
	p.final = true // OpenAI sends its usage once, at the end
}

// anthropic takes an Anthropic usage: message_start gives the input and
// cache figures, each message_delta the output so far (and, lately, the
// input figures again).
func (p *parser) anthropic(u *rawUsage) {
	set := func(dst *int64, v *int64) {
		if v != nil && *v > 0 {
			*dst = *v
		}
	}
	set(&p.usage.Input, u.InputTokens)
	set(&p.usage.Output, u.OutputTokens)
	set(&p.usage.CacheWrite, u.CacheCreation)
	set(&p.usage.CacheRead, u.CacheRead)
}

// openAI takes an OpenAI usage (Responses or Chat Completions), whose
// input counts the cached input and whose output counts the reasoning.
func (p *parser) openAI(u *rawUsage) {
	in, out := first(u.InputTokens, u.PromptTokens), first(u.OutputTokens, u.CompletionTokens)
	var cached, reasoning int64
	for _, d := range []*details{u.InputDetails, u.PromptDetails} {
		if d != nil {
			cached = max(cached, d.CachedTokens)
		}
	}
	for _, d := range []*details{u.OutputDetails, u.CompletionDetails} {
		if d != nil {
			reasoning = max(reasoning, d.ReasoningTokens)
		}
	}
	cached = min(max(cached, 0), max(in, 0))
	p.usage = Usage{Input: max(in-cached, 0), Output: max(out, 0), CacheRead: cached, Reasoning: max(reasoning, 0)}
}

func first(vs ...*int64) int64 {
	for _, v := range vs {
		if v != nil {
			return *v
		}
	}
	return 0
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// clipName keeps a model's name short and printable: it is the upstream's
// text.
func clipName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if r > ' ' && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
