package usererr

import "testing"

func TestClosest(t *testing.T) {
	names := []string{"fix-login", "add-tests", "feature/search", "a"}
	for in, want := range map[string]string{
		"fix-logn":       "fix-login",
		"fixlogin":       "fix-login",
		"add-test":       "add-tests",
		"feature/serch":  "feature/search",
		"feature-search": "feature/search",
		"b":              "a",
		"something":      "",
		"fix-login":      "", // itself is not a suggestion
		"":               "",
	} {
		if got := Closest(in, names); got != want {
			t.Errorf("Closest(%q) = %q; want %q", in, got, want)
		}
	}
}
