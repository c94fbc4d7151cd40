package netprobe

import (
	"context"
	"net"
	"testing"
	"time"
)

func TestReachConnectsToTheListenerAndIsBlockedElsewhere(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Listen(ctx, addr) }()
	deadline := time.Now().Add(5 * time.Second)
	for ok, _ := Reach(ctx, addr, 0, time.Second); !ok; ok, _ = Reach(ctx, addr, 0, time.Second) {
		if time.Now().After(deadline) {
			t.Fatal("the listener never answered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, open := Reach(ctx, addr, 600*time.Millisecond, time.Second); !ok || open < 600*time.Millisecond {
		t.Error("Reach over a window: blocked from a listener that accepts")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Listen ended with %v", err)
	}
	if ok, open := Reach(context.Background(), addr, time.Second, time.Second); ok || open > 100*time.Millisecond {
		t.Errorf("Reach to a closed port: connected %v, open for %v", ok, open)
	}
	if d, ok := ParseOpen("x\n" + BlockedLine("10.0.0.1:80", 1234*time.Millisecond) + "\n"); !ok || d != 1234*time.Millisecond {
		t.Errorf("ParseOpen(BlockedLine(1.234s)) = %v, %v", d, ok)
	}
}
