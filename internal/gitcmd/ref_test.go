package gitcmd

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func refAt(t *testing.T, g *Runner, ref string) Hash {
	t.Helper()
	h, err := g.RevParse(context.Background(), ref)
	if errors.Is(err, ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestUpdateRefCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	a := testCommit(t, g, "a\n")
	b := testCommit(t, g, "b\n", a)
	c := testCommit(t, g, "c\n", a)
	const ref = "refs/heads/x"

	// Create: a zero Old means the ref must not exist.
	if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, New: a, Message: "create"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, New: b, Old: ZeroHash})
	var moved *RefMovedError
	if !errors.As(err, &moved) || moved.Ref != ref || !moved.Expected.IsZero() || moved.Actual != a {
		t.Fatalf("create over an existing ref = %v, want RefMovedError at %s", err, a)
	}
	if !strings.Contains(err.Error(), "already exists") {
		t.Errorf("message = %q", err)
	}

	// Move: only from the expected value.
	if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, New: b, Old: a}); err != nil {
		t.Fatalf("move a → b: %v", err)
	}
	err = g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, New: c, Old: a})
	if !errors.As(err, &moved) || moved.Expected != a || moved.Actual != b {
		t.Fatalf("stale move = %v, want RefMovedError expected %s actual %s", err, a, b)
	}
	if got := refAt(t, g, ref); got != b {
		t.Errorf("a failed swap changed the ref to %s", got)
	}

	// Delete: a zero New, only from the expected value.
	err = g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, Old: c})
	if !errors.As(err, &moved) || moved.Actual != b {
		t.Fatalf("stale delete = %v", err)
	}
	if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, Old: b}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got := refAt(t, g, ref); got != "" {
		t.Fatalf("deleted ref still at %s", got)
	}
	err = g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, New: c, Old: b})
	if !errors.As(err, &moved) || !moved.Actual.IsZero() || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("move of a deleted ref = %v", err)
	}

	// AnyOld: whatever is there.
	for _, h := range []Hash{c, a} {
		if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, New: h, AnyOld: true}); err != nil || refAt(t, g, ref) != h {
			t.Fatalf("unchecked set to %s: %v", h, err)
		}
	}
	if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, AnyOld: true}); err != nil || refAt(t, g, ref) != "" {
		t.Fatalf("unchecked delete: %v", err)
	}
	if err := g.UpdateRef(ctx, UpdateRefRequest{Ref: ref, AnyOld: true}); err != nil {
		t.Errorf("unchecked delete of a missing ref: %v", err)
	}

	// A failure that is not a moved ref stays git's error.
	err = g.UpdateRef(ctx, UpdateRefRequest{Ref: "refs/heads/bad..name", New: a})
	if err == nil || errors.As(err, &moved) {
		t.Errorf("invalid ref name = %v, want git's error", err)
	}
}

func TestUpdateRefsIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	g := testRepo(t)
	a := testCommit(t, g, "a\n")
	b := testCommit(t, g, "b\n", a)
	if err := g.UpdateRefs(ctx, "", RefUpdate{Ref: "refs/x/one", New: a}, RefUpdate{Ref: "refs/x/two", New: a}); err != nil {
		t.Fatal(err)
	}
	// Moving one aside and deleting the other: the stale second update
	// stops the whole transaction.
	err := g.UpdateRefs(ctx, "archive",
		RefUpdate{Ref: "refs/x/ended/one", New: a},
		RefUpdate{Ref: "refs/x/one", Old: a},
		RefUpdate{Ref: "refs/x/two", New: b, Old: b},
	)
	var moved *RefMovedError
	if !errors.As(err, &moved) || moved.Ref != "refs/x/two" {
		t.Fatalf("transaction with a stale update = %v, want RefMovedError on refs/x/two", err)
	}
	if refAt(t, g, "refs/x/ended/one") != "" || refAt(t, g, "refs/x/one") != a {
		t.Error("a failed transaction applied some of its updates")
	}
	err = g.UpdateRefs(ctx, "archive", RefUpdate{Ref: "refs/x/ended/one", New: a}, RefUpdate{Ref: "refs/x/one", Old: a})
	if err != nil || refAt(t, g, "refs/x/ended/one") != a || refAt(t, g, "refs/x/one") != "" {
		t.Errorf("transaction = %v", err)
	}
}

func TestRefTransactionInput(t *testing.T) {
	a := Hash("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	b := Hash("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
	got, err := refTransaction([]RefUpdate{
		{Ref: "refs/a", New: a},
		{Ref: "refs/b", New: b, Old: a},
		{Ref: "refs/c", Old: a},
		{Ref: "refs/d", New: a, AnyOld: true},
		{Ref: "refs/e", AnyOld: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "start\x00" +
		"update refs/a\x00" + string(a) + "\x00" + string(ZeroHash) + "\x00" +
		"update refs/b\x00" + string(b) + "\x00" + string(a) + "\x00" +
		"delete refs/c\x00" + string(a) + "\x00" +
		"update refs/d\x00" + string(a) + "\x00\x00" +
		"delete refs/e\x00\x00" +
		"prepare\x00commit\x00"
	if got != want {
		t.Errorf("transaction input\n got %q\nwant %q", got, want)
	}
	for _, bad := range []RefUpdate{{Ref: ""}, {Ref: "refs/a\nupdate refs/b", New: a}, {Ref: "refs/a"}} {
		if _, err := refTransaction([]RefUpdate{bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
