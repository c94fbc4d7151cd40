package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestExampleDocumentsEveryKey keeps .sandbox.toml.example complete and
// valid: it must decode as a user config and mention every key.
func TestExampleDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../.sandbox.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	md, err := toml.Decode(string(b), &c)
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		t.Errorf("the example has unknown keys: %v", und)
	}
	if err := checkValues("example", &c, md, false); err != nil {
		t.Errorf("the example holds a value outside its range: %v", err)
	}
	text := string(b)
	for _, key := range tomlKeys(reflect.TypeOf(Config{}), "") {
		name := key[strings.LastIndex(key, ".")+1:]
		if !regexp.MustCompile(`(?m)^#?\s*` + regexp.QuoteMeta(name) + `\s*=`).MatchString(text) {
			t.Errorf("the example does not document %s", key)
		}
	}
}

func tomlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration{}) {
			keys = append(keys, tomlKeys(ft, prefix+tag+".")...)
			continue
		}
		keys = append(keys, prefix+tag)
	}
	return keys
}
