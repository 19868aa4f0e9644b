// Package archtest holds the architecture test: the import rules of the
// module's layers, checked over `go list -json ./...` (see rules in
// archtest_test.go and docs/design.md, "Shape").
package archtest
