package meter

import (
	"strings"
	"testing"
)

// BenchmarkParseStream is the meter's own cost on a 20 MB event stream
// read in 32 KiB pieces (what the proxy's copy hands it): MB/s.
func BenchmarkParseStream(b *testing.B) {
	ev := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("y", 8000) + "\"}}\n\n"
	body := []byte(anthropicSSE[:strings.Index(anthropicSSE, "event: message_delta")] + strings.Repeat(ev, (20<<20)/len(ev)) + anthropicSSE[strings.Index(anthropicSSE, "event: message_delta"):])
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		p := &parser{api: Anthropic, stream: true}
		for rest := body; len(rest) > 0; {
			n := min(32<<10, len(rest))
			p.write(rest[:n])
			rest = rest[n:]
		}
		if !p.final {
			b.Fatal("no final usage")
		}
	}
}
