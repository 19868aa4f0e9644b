package main

import (
	"encoding/json"
	"testing"
)

func TestStats(t *testing.T) {
	a := stats("The cat and the hat.\nThe END's near\n", 2)
	got, _ := json.Marshal(a)
	want := `{"source":"","lines":2,"words":8,"chars":36,"bytes":36,"top":[{"word":"the","count":3},{"word":"and","count":1}]}`
	if string(got) != want {
		t.Fatalf("stats = %s\nwant    %s", got, want)
	}
	if a := stats("", 10); a.Lines != 0 || a.Words != 0 || len(a.Top) != 0 {
		t.Fatalf("empty: %+v", a)
	}
	if a := stats("one line, no newline", 0); a.Lines != 1 || a.Words != 4 || len(a.Top) != 0 {
		t.Fatalf("one line: %+v", a)
	}
	if a := stats("héllo wörld", 5); a.Chars != 11 || a.Bytes != 13 {
		t.Fatalf("runes: %+v", a)
	}
}
