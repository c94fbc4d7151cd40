package land

import (
	"context"
	"strings"
	"testing"
)

func TestWithTrailersJoinsTheMessagesTrailerBlock(t *testing.T) {
	r := newRepo(t)
	tr := []Trailer{{"Sandbox", "t1"}, {"Sandbox-Agent", "shell"}}
	tests := []struct {
		name, msg, want string
	}{
		{"subject only", "Add a thing", "Add a thing\n\nSandbox: t1\nSandbox-Agent: shell\n"},
		{"subject that looks like a trailer", "feat: x\n", "feat: x\n\nSandbox: t1\nSandbox-Agent: shell\n"},
		{"body without trailers", "Add a thing\n\nBecause.", "Add a thing\n\nBecause.\n\nSandbox: t1\nSandbox-Agent: shell\n"},
		{"existing trailer block", "feat: x\n\nBody.\n\nSigned-off-by: A <a@x>\n",
			"feat: x\n\nBody.\n\nSigned-off-by: A <a@x>\nSandbox: t1\nSandbox-Agent: shell\n"},
		{"trailers right after the subject", "feat: x\n\nSigned-off-by: A <a@x>",
			"feat: x\n\nSigned-off-by: A <a@x>\nSandbox: t1\nSandbox-Agent: shell\n"},
		{"a divider line is message text", "Add\n\n---\nnot a patch\n\nSigned-off-by: A <a@x>",
			"Add\n\n---\nnot a patch\n\nSigned-off-by: A <a@x>\nSandbox: t1\nSandbox-Agent: shell\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WithTrailers(context.Background(), r.g, tt.msg, tr)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	if _, err := WithTrailers(context.Background(), r.g, "x", []Trailer{{"K", "a\nb"}}); err == nil || !strings.Contains(err.Error(), "one line") {
		t.Errorf("a two-line trailer: %v", err)
	}
}
