package agent

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReported(t *testing.T) {
	if !Reports("claude") || Reports("shell") || Reports("nope") {
		t.Fatal("Reports: only claude reports usage here")
	}
	result := `{"type":"result","total_cost_usd":0.5,"usage":{"input_tokens":1,"output_tokens":2}}` + "\n"
	u, ok, err := Reported("claude", func(w io.Writer) error {
		_, err := io.WriteString(w, result)
		return err
	})
	if err != nil || !ok || u != (Usage{InputTokens: 1, OutputTokens: 2, CostUSD: 0.5}) {
		t.Fatalf("got %+v %v %v", u, ok, err)
	}

	// A flood is cut at a megabyte without failing the engine's writer,
	// and a report past the cut is not read.
	var wrote int
	_, ok, err = Reported("claude", func(w io.Writer) error {
		chunk := strings.Repeat("x", 64<<10)
		for range 20 {
			n, err := io.WriteString(w, chunk)
			if err != nil {
				return err
			}
			wrote += n
		}
		_, err := io.WriteString(w, result)
		return err
	})
	if err != nil || ok || wrote != 20*64<<10 {
		t.Fatalf("flood: ok=%v err=%v wrote=%d", ok, err, wrote)
	}

	boom := errors.New("engine gone")
	if _, _, err := Reported("claude", func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}
