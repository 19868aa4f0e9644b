package world

import (
	"fmt"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
)

// Severity says whether a Diagnostic stops a world from loading.
type Severity uint8

const (
	// SevError makes the world invalid.
	SevError Severity = iota
	// SevWarning is reported but the world still loads.
	SevWarning
)

// Diagnostic is one problem found in a world, located at file:line.
type Diagnostic struct {
	File     string   `json:"file"` // relative to the world folder when inside it
	Line     int      `json:"line"` // 1-based; 0 when the problem is the file as a whole
	Severity Severity `json:"-"`
	Msg      string   `json:"message"`
}

func (d Diagnostic) String() string {
	loc := d.File
	if d.Line > 0 {
		loc = fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	if d.Severity == SevWarning {
		return loc + ": warning: " + d.Msg
	}
	return loc + ": " + d.Msg
}

// Diagnostics collects problems; it does not stop at the first.
type Diagnostics []Diagnostic

// Errorf records an error at file:line.
func (ds *Diagnostics) Errorf(file string, line int, format string, args ...any) {
	*ds = append(*ds, Diagnostic{File: file, Line: line, Severity: SevError, Msg: fmt.Sprintf(format, args...)})
}

// Warnf records a warning at file:line.
func (ds *Diagnostics) Warnf(file string, line int, format string, args ...any) {
	*ds = append(*ds, Diagnostic{File: file, Line: line, Severity: SevWarning, Msg: fmt.Sprintf(format, args...)})
}

// Errors returns the errors, sorted by file and line.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(SevError) }

// Warnings returns the warnings, sorted by file and line.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(SevWarning) }

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].File != out[j].File {
			return out[i].File < out[j].File
		}
		return out[i].Line < out[j].Line
	})
	return out
}

// Err returns nil when ds holds no error, else an *armory.Error of kind
// KindInvalid whose message lists every error, one per line.
func (ds Diagnostics) Err() error {
	errs := ds.Errors()
	if len(errs) == 0 {
		return nil
	}
	lines := make([]string, len(errs))
	for i, d := range errs {
		lines[i] = d.String()
	}
	return &InvalidError{Diagnostics: errs, msg: strings.Join(lines, "\n")}
}

// InvalidError is returned by Load when a world has errors. It carries every
// error found; Unwrap gives an *armory.Error of kind KindInvalid.
type InvalidError struct {
	Diagnostics Diagnostics
	msg         string
}

func (e *InvalidError) Error() string { return e.msg }

func (e *InvalidError) Unwrap() error {
	return armory.E("world.Load", armory.KindInvalid, fmt.Sprintf("%d error(s) in world", len(e.Diagnostics)))
}
