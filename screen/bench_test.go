package screen

import "testing"

// BenchmarkCheck screens a mix of realistic commands (everyday, safe,
// dynamic and catastrophic) and reports commands per second.
func BenchmarkCheck(b *testing.B) {
	var cmds []string
	for _, name := range []string{"everyday.txt", "allow.txt", "confirm.txt", "catastrophic.txt"} {
		cmds = append(cmds, loadCommands(b, name)...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		Check(cmds[i%len(cmds)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}
