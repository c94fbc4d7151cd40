package meter

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// UsageFile is the usage log's name, beside the decision log.
const UsageFile = "usage.jsonl"

// ReadLog calls fn with each record of the usage log at path, from
// since on (zero: all); a missing log has none. A line that does not
// parse (a write cut short) is skipped.
func ReadLog(path string, since time.Time, fn func(*Record)) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read usage log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r Record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Time.Before(since) {
			continue
		}
		fn(&r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read usage log %s: %w", path, err)
	}
	return nil
}

// SpentIn adds up the usage log at path.
func SpentIn(path string) (Spent, error) {
	var s Spent
	err := ReadLog(path, time.Time{}, s.add)
	return s, err
}
