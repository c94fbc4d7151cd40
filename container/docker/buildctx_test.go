package docker

import (
	"io"
	"strings"
	"testing"
)

func TestEscapedMessagesDisarmTerminalSequences(t *testing.T) {
	in := `{"stream":"Step 1/2 : RUN echo \u001b]52;c;aGk=\u0007\n"}
{"stream":"line\u001b[2J two\n"}
{"aux":{"ID":"sha256:abc"}}
{"errorDetail":{"message":"failed \u001b[31mred"},"error":"failed \u001b[31mred"}
`
	r := escapedMessages(strings.NewReader(in))
	defer r.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), `\u001b`) || strings.Contains(string(out), `\u0007`) {
		t.Errorf("control characters passed through:\n%s", out)
	}
	for _, want := range []string{`\\x1b[2J`, `sha256:abc`, `\\x1b[31mred`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

func TestQuietWriterShowsStepsAndTheTailOnFailure(t *testing.T) {
	var out strings.Builder
	q := &quietWriter{out: &out}
	long := "Step 2/3 : RUN " + strings.Repeat("x", 300)
	io.WriteString(q, "Step 1/3 : FROM base\n ---> abc\nnoise 1\n")
	io.WriteString(q, long+"\ngit-sandbox: a message\nnpm progress without a newline git-sandbox: late message\nhalf a ")
	io.WriteString(q, "line\n")
	for i := 0; i < 30; i++ {
		io.WriteString(q, "output line\n")
	}
	io.WriteString(q, "the failing step said why")
	q.flush()
	shown := out.String()
	if !strings.Contains(shown, "Step 1/3 : FROM base\n") || !strings.Contains(shown, "git-sandbox: a message\n") ||
		!strings.Contains(shown, "\ngit-sandbox: late message\n") || strings.Contains(shown, "npm progress") || strings.Contains(shown, "noise") || strings.Contains(shown, "output line") || strings.Contains(shown, "half a line") {
		t.Errorf("quiet output:\n%s", shown)
	}
	if strings.Contains(shown, long) || !strings.Contains(shown, "xxx…\n") {
		t.Errorf("a long step line is not cut:\n%s", shown)
	}
	out.Reset()
	q.showTail()
	tail := out.String()
	if !strings.HasSuffix(tail, "the failing step said why\n") || strings.Count(tail, "\n") != tailLines || strings.Contains(tail, "Step ") {
		t.Errorf("tail (%d lines):\n%s", strings.Count(tail, "\n"), tail)
	}
}
