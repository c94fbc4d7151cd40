package agent

import (
	"bytes"
	"io"
)

// Reports says whether the agent called name reports its usage at the
// end of its output.
func Reports(name string) bool {
	a, err := Get(name)
	if err != nil {
		return false
	}
	_, ok := a.(UsageReporter)
	return ok
}

// ReportedTail is how much of the end of a run's output holds the usage
// report: its last lines (as the engine's logs tail takes them), and at
// most so many bytes of them.
const (
	ReportedTailLines = "20"
	reportedTailBytes = 1 << 20
)

// Reported reads the usage the agent called name reported at the end of
// its output; tail writes the output's last ReportedTailLines lines to the
// writer it is given, of which only the first megabyte is kept.
func Reported(name string, tail func(io.Writer) error) (Usage, bool, error) {
	w := &capped{max: reportedTailBytes}
	if err := tail(w); err != nil {
		return Usage{}, false, err
	}
	u, ok := ParseUsage(name, w.buf.Bytes())
	return u, ok, nil
}

// capped keeps the first max bytes written to it and drops the rest
// without failing the writer.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
