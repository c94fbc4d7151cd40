package usererr

import (
	"errors"
	"fmt"
	"testing"
)

func TestCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("x"), ExitError},
		{New("conflict").WithCode(ExitConflict), ExitConflict},
		{fmt.Errorf("wrapped: %w", New("refused").WithCode(ExitRefused)), ExitRefused},
		{ExitStatus(42), 42},
	}
	for _, tt := range tests {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	e := New("msg %d", 1).Hint("do %s", "this")
	if e.Error() != "msg 1" || e.Hints[0] != "do this" {
		t.Errorf("%+v", e)
	}
}
