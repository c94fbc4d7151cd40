package proc

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestSecretCommand(t *testing.T) {
	var stderr bytes.Buffer
	out, err := SecretCommand(context.Background(), "echo prompt >&2; printf 'sk-value\\n'", nil, &stderr)
	if err != nil || string(out) != "sk-value\n" || strings.TrimSpace(stderr.String()) != "prompt" {
		t.Errorf("out %q err %v stderr %q", out, err, stderr.String())
	}
	if _, err := SecretCommand(context.Background(), "exit 3", nil, &stderr); err == nil {
		t.Errorf("a failing command gave no error")
	}
}
