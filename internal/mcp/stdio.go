package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// drain keeps a stdio session open past the end of its input until every
// request read from it has been answered: a client that writes its
// requests and closes its end (printf … | git sandbox mcp) still gets the
// answers, which the protocol would otherwise drop as the connection
// closes. It counts requests (an id and a method) as they are read and
// answers (an id, no method) as they are written, one JSON message a line.
type drain struct {
	mu        sync.Mutex
	cond      *sync.Cond
	asked     int
	answered  int
	ctx       context.Context
	in        io.Reader
	out       io.Writer
	inPartial []byte
}

func newDrain(ctx context.Context, in io.Reader, out io.Writer) *drain {
	d := &drain{ctx: ctx, in: in, out: out}
	d.cond = sync.NewCond(&d.mu)
	context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	})
	return d
}

// message is what drain reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// count returns how many requests (or answers) the complete lines of b
// hold, keeping an incomplete last line in *partial.
func count(partial *[]byte, b []byte, requests bool) int {
	*partial = append(*partial, b...)
	n := 0
	for {
		i := bytes.IndexByte(*partial, '\n')
		if i < 0 {
			return n
		}
		var m message
		if json.Unmarshal((*partial)[:i], &m) == nil && len(m.ID) > 0 && string(m.ID) != "null" && (m.Method != "") == requests {
			n++
		}
		*partial = (*partial)[i+1:]
	}
}

// Read reads the client's messages; at the end of input it waits until
// the requests read have been answered (or the server stops).
func (d *drain) Read(p []byte) (int, error) {
	n, err := d.in.Read(p)
	d.mu.Lock()
	d.asked += count(&d.inPartial, p[:n], true)
	if err == io.EOF {
		for d.answered < d.asked && d.ctx.Err() == nil {
			d.cond.Wait()
		}
	}
	d.mu.Unlock()
	return n, err
}

// Write writes the server's messages whole (one a call) and counts the
// answers among them.
func (d *drain) Write(p []byte) (int, error) {
	n, err := d.out.Write(p)
	var none []byte
	answers := count(&none, p[:n], false)
	if answers > 0 {
		d.mu.Lock()
		d.answered += answers
		d.cond.Broadcast()
		d.mu.Unlock()
	}
	return n, err
}

func (d *drain) Close() error { return nil }
