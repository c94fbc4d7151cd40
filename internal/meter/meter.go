package meter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/atomicfile"
)

// Record is one model request through the broker: a line of the usage log.
type Record struct {
	Time      time.Time `json:"time"`
	Host      string    `json:"host"`
	API       API       `json:"api"`
	Model     string    `json:"model,omitempty"`
	Status    int       `json:"status,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
	Usage
	// Unknown: the response ended without its final usage (cut short,
	// an error, a shape the meter does not know); the figures are what
	// was read before.
	Unknown bool `json:"unknown,omitempty"`
	// CostUSD is the figures at the model's price; Unpriced says the
	// model has none.
	CostUSD  float64 `json:"cost_usd,omitempty"`
	Unpriced bool    `json:"unpriced,omitempty"`
	// Refused is "budget" when the proxy answered the request itself
	// because the budget was spent.
	Refused string `json:"refused,omitempty"`
}

// Settings are what the host gives a proxy's meter, in a file of the
// proxy's configuration (never the agent's, never a repository's): the
// prices and the budget. The proxy reads the file again when it changes.
type Settings struct {
	Prices Prices `json:"prices,omitempty"`
	Budget Budget `json:"budget,omitzero"`
}

// WriteSettings writes s to path, atomically.
func WriteSettings(path string, s *Settings) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write meter settings: %w", err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write meter settings: %w", err)
	}
	return nil
}

// readSettings reads the settings at path; a missing file is none.
func readSettings(path string) (*Settings, error) {
	var s Settings
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &s, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return nil, fmt.Errorf("meter settings: %w", err)
	}
	return &s, nil
}

// Meter measures the model requests of one sandbox's proxy and keeps its
// budget. Its methods are safe for concurrent use; a nil Meter meters
// nothing.
type Meter struct {
	settingsPath string
	errs         *log.Logger

	mu       sync.Mutex
	log      *os.File
	settings *Settings
	stamp    [2]int64 // the settings file's size and time
	spent    Spent
}

// Open opens the usage log at logPath for appending, reads what it holds
// (a proxy started again goes on from what was spent), and the settings at
// settingsPath.
func Open(logPath, settingsPath string, errs *log.Logger) (*Meter, error) {
	if errs == nil {
		errs = log.New(io.Discard, "", 0)
	}
	spent, err := SpentIn(logPath)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("usage log: %w", err)
	}
	m := &Meter{settingsPath: settingsPath, errs: errs, log: f, spent: spent, settings: &Settings{}}
	m.mu.Lock()
	m.reload()
	m.mu.Unlock()
	return m, nil
}

// Files are where a proxy's meter keeps its log and reads its settings.
type Files struct {
	Usage    string `json:"usage"`
	Settings string `json:"settings"`
}

// OpenFiles opens the meter of f, errors of the settings going to errs;
// nil for none.
func OpenFiles(f *Files, errs io.Writer) (*Meter, error) {
	if f == nil {
		return nil, nil
	}
	var l *log.Logger
	if errs != nil {
		l = log.New(errs, "git sandbox proxy: ", log.LstdFlags)
	}
	return Open(f.Usage, f.Settings, l)
}

// Close closes the log.
func (m *Meter) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log.Close()
}

// reload reads the settings again when their file changed (under mu).
func (m *Meter) reload() {
	if m.settingsPath == "" {
		return
	}
	var stamp [2]int64
	if fi, err := os.Stat(m.settingsPath); err == nil {
		stamp = [2]int64{fi.Size(), fi.ModTime().UnixNano()}
	}
	if stamp == m.stamp {
		return
	}
	s, err := readSettings(m.settingsPath)
	if err != nil {
		m.errs.Printf("%v (the previous settings stay)", err)
		return
	}
	m.settings, m.stamp = s, stamp
}

// write appends r to the log and adds it to what was spent.
func (m *Meter) write(r *Record) {
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.spent.add(r)
	if _, err := m.log.Write(append(b, '\n')); err != nil {
		m.errs.Printf("usage log: %v", err)
	}
}

// Call is one model request being metered.
type Call struct {
	m      *Meter
	rec    Record
	p      *parser
	prices Prices
	once   sync.Once
}

// Begin starts metering a request to host; it returns nil for a request
// that is not a model call.
func (m *Meter) Begin(host string, r *http.Request) *Call {
	if m == nil {
		return nil
	}
	api := APIOf(r.Method, r.URL.Path)
	if api == "" {
		return nil
	}
	m.mu.Lock()
	m.reload()
	s := m.settings
	m.mu.Unlock()
	return &Call{m: m, prices: s.Prices, rec: Record{Time: time.Now().UTC(), Host: host, API: api}}
}

// Refuse answers the request itself, with the API's own error shape and
// status 429, when the budget is spent; it logs the refusal and reports
// whether it answered.
func (c *Call) Refuse(w http.ResponseWriter) bool {
	if c == nil {
		return false
	}
	c.m.mu.Lock()
	over := c.m.settings.Budget.SpentBy(c.m.spent)
	c.m.mu.Unlock()
	if over == "" {
		return false
	}
	c.once.Do(func() {
		c.rec.Status, c.rec.Refused = http.StatusTooManyRequests, "budget"
		c.m.write(&c.rec)
	})
	writeRefusal(w, c.rec.API, over)
	return true
}

// Watch reads resp's usage as its body is read by whoever passes it on.
func (c *Call) Watch(resp *http.Response) {
	if c == nil || resp.Body == nil {
		return
	}
	c.rec.Status = resp.StatusCode
	c.rec.RequestID = clipName(firstHeader(resp.Header, "Request-Id", "X-Request-Id"))
	c.p = &parser{api: c.rec.API, stream: isStream(resp.Header.Get("Content-Type"))}
	c.rec.Stream = c.p.stream
	resp.Body = &body{ReadCloser: resp.Body, p: c.p, c: c}
}

// End logs the request once its response was passed on, or failed; the
// body Watch wraps calls it when it is closed (also when a response cut
// short aborts the proxy's copy).
func (c *Call) End() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		if p := c.p; p != nil {
			p.end()
			c.rec.Model, c.rec.Usage = p.model, p.usage
			c.rec.Unknown = !p.final
		} else {
			c.rec.Unknown = true
		}
		if pr, ok := c.prices.Lookup(c.rec.Model); ok {
			c.rec.CostUSD = pr.Cost(c.rec.Usage)
		} else {
			c.rec.Unpriced = !c.rec.Usage.IsZero()
		}
		c.m.write(&c.rec)
	})
}

func firstHeader(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func isStream(contentType string) bool {
	return len(contentType) >= 17 && contentType[:17] == "text/event-stream"
}

// body passes a response's body on and shows each piece to the parser.
type body struct {
	io.ReadCloser
	p *parser
	c *Call
}

func (b *body) Close() error {
	err := b.ReadCloser.Close()
	b.c.End()
	return err
}

func (b *body) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	if n > 0 {
		b.p.write(buf[:n])
	}
	return n, err
}
