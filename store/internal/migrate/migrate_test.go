package migrate

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    []string
		wantErr bool
	}{
		{"gap after numeric sort", map[string]string{"m/0002_b.sql": "B", "m/0010_c.sql": "C", "m/0001_a.sql": "A"}, nil, true},
		{"sorted", map[string]string{"m/2_b.sql": "B", "m/3_c.sql": "C", "m/1_a.sql": "A"}, []string{"A", "B", "C"}, false},
		{"gap", map[string]string{"m/0001_a.sql": "A", "m/0003_c.sql": "C"}, nil, true},
		{"duplicate", map[string]string{"m/0001_a.sql": "A", "m/0001_b.sql": "B"}, nil, true},
		{"stray file", map[string]string{"m/0001_a.sql": "A", "m/notes.txt": "x"}, nil, true},
		{"empty", map[string]string{"m/.keep": ""}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for name, body := range tc.files {
				fsys[name] = &fstest.MapFile{Data: []byte(body)}
			}
			ms, err := Load(fsys, "m")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			for i, m := range ms {
				if m.Version != i+1 || m.SQL != tc.want[i] {
					t.Fatalf("migration %d: %+v", i, m)
				}
			}
		})
	}
}
