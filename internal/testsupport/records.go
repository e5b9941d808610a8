package testsupport

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LabRecord is a line of a labserver records file (LAB_RECORDS_DIR), and
// the answer of the probe or record call that wrote it.
type LabRecord struct {
	Op     string `json:"op"`
	Key    string `json:"key"`
	Source string `json:"source"`
	Pid    int    `json:"pid"`
}

// ReadLabRecords reads every labserver's records in dir: which pids
// recorded each key, and how many files end in a torn line (only a process
// killed in the middle of its last write leaves one, and only at the end;
// a torn line anywhere else is an error).
func ReadLabRecords(dir string) (map[string][]LabRecord, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, 0, err
	}
	byKey := map[string][]LabRecord{}
	torn := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		lines := strings.Split(string(b), "\n")
		for i, line := range lines {
			if line == "" {
				continue
			}
			var r LabRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				if i == len(lines)-1 {
					torn++
					continue
				}
				return nil, 0, fmt.Errorf("%s:%d: %v", f, i+1, err)
			}
			byKey[r.Key] = append(byKey[r.Key], r)
		}
	}
	return byKey, torn, nil
}
