package ui

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Step is a long step that prints no progress of its own (an image
// commit): on a terminal one line, redrawn every second with the time
// taken so far; otherwise one line when it begins and one when it ends.
type Step struct {
	p     *Printer
	msg   string
	start time.Time
	live  bool
	stop  chan struct{}
	done  sync.WaitGroup
	once  sync.Once
	bytes atomic.Int64 // what Add counted: shown beside the time
}

// Add counts n more bytes moved by the step (an image copy); a step that
// counts shows the total beside the time.
func (s *Step) Add(n int64) { s.bytes.Add(n) }

// Bytes is what Add counted.
func (s *Step) Bytes() int64 { return s.bytes.Load() }

// stepTick is how often a step's line is redrawn on a terminal.
const stepTick = time.Second

// Step begins a step and says so. End it with Done or Fail.
func (p *Printer) Step(format string, args ...any) *Step {
	s := &Step{p: p, msg: strings.TrimRight(termsafe.String(fmt.Sprintf(format, args...)), "\n"), start: time.Now(), stop: make(chan struct{})}
	f := p.File()
	s.live = f != nil && IsTerminal(f)
	if !s.live {
		p.Infof("%s", s.msg)
		return s
	}
	s.draw()
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(stepTick)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.draw()
			}
		}
	}()
	return s
}

// draw rewrites the step's line in place (terminal only).
func (s *Step) draw() {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	progress := elapsed(time.Since(s.start))
	if n := s.bytes.Load(); n > 0 {
		progress = units.HumanSize(float64(n)) + ", " + progress
	}
	fmt.Fprintf(s.p.w, "\r\x1b[K%s%s … %s", Prefix, s.msg, progress)
}

// end stops redrawing and clears the line.
func (s *Step) end() {
	s.once.Do(func() {
		if !s.live {
			return
		}
		close(s.stop)
		s.done.Wait()
		s.p.mu.Lock()
		fmt.Fprint(s.p.w, "\r\x1b[K")
		s.p.mu.Unlock()
	})
}

// Done ends the step with a line saying what it made and how long it
// took.
func (s *Step) Done(format string, args ...any) {
	s.end()
	s.p.Infof("%s (%s)", fmt.Sprintf(format, args...), elapsed(time.Since(s.start)))
}

// Fail ends the step without a line of its own (the error says why).
func (s *Step) Fail() { s.end() }

// elapsed writes a duration as people read it: 0.4s, 12s, 2m05s.
func elapsed(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
